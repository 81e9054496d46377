// Durable execution for the worker (docs/durable.md), the Go worker's
// semantics over the REST routes: a handler's steps run once per job, not
// once per attempt. Each durable call (ctx.step, ctx.sleep, ctx.waitSignal)
// takes the next place in the handler's order; what it did is recorded with
// the job under the attempt's fencing token (POST /v1/jobs/{id}/steps), and
// a later attempt (after a crash, a deploy, a sleep, a wait) gets it back
// instead of doing it again. The handler must make the same calls in the
// same order on every attempt.
import { Cancel, ConflictError, LeaseLostError, NondeterminismError, NoRetry, Parked, RetryAfter, SignalTimeoutError, Snooze, StepError } from './errors.js';
import type { Transport } from './transport.js';
import type { DurableSignal, DurableStep, Job, StepAnswer, StepRequest } from './types.js';

/** The most a step's result (JSON), its error or a signal's value may take, in bytes. */
export const MAX_STEP_BYTES = 256 << 10;

/** The longest park, in seconds: a wait for a signal without a timeout parks this long. */
const MAX_PARK_SECONDS = 365 * 24 * 3600;

/** How a step runs its function. */
export interface StepOptions {
  /** Runs the function up to this many more times after it throws, before
   * the step fails for good (default 0): the step's own retries, within one
   * attempt of the job. NoRetry ends them at once. */
  retries?: number;
  /** The first wait between those tries, in ms, then twice as long each
   * time, at most a minute (default 0). */
  backoffMs?: number;
}

/** How ctx.waitSignal waits. */
export interface WaitSignalOptions {
  /** How long to wait, in ms; then waitSignal throws SignalTimeoutError.
   * Default: no timeout. */
  timeoutMs?: number;
  /** Lets callers send the signal to this key in the job's queue
   * (Client.signalKey) instead of to the job's id: an order number, say. A
   * signal sent to the key before the wait is the job's. */
  key?: string;
}

/** What a durable call needs of its attempt. */
export interface DurableAttempt {
  readonly path: string;
  readonly token: string;
  readonly workerId: string;
  readonly transport: Transport;
  /** Throws LeaseLostError when the job must stop. */
  check(): void;
  /** The attempt's signal: aborted when the job must stop. */
  readonly signal: AbortSignal;
  /** Marks the attempt lost (a 409) and returns the error to throw. */
  lose(reason: string): LeaseLostError;
}

/** What a step's function may throw that ends the attempt, not the step:
 * it is not recorded. */
function isOutcome(err: unknown): boolean {
  return err instanceof Snooze || err instanceof Cancel || err instanceof RetryAfter || err instanceof LeaseLostError || err instanceof Parked;
}

/** Refuses a name a record cannot hold (NoRetry: the code must change). */
function checkName(what: string, name: string): void {
  if (typeof name !== 'string' || name === '' || name.length > 200 || /[\t\r\n]/.test(name)) {
    throw new NoRetry(`sundial: ${what} name ${JSON.stringify(name)}: want 1 to 200 characters without tabs or line breaks`);
  }
}

/** An epoch time in ms in the API's format: RFC 3339, milliseconds, UTC. */
function formatTime(ms: number): string {
  return new Date(Math.round(ms)).toISOString();
}

function truncate(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= MAX_STEP_BYTES ? text : bytes.subarray(0, MAX_STEP_BYTES).toString('utf8');
}

function messageOf(err: unknown): string {
  const text = (err instanceof Error ? err.message : String(err)).trim();
  return text || (err instanceof Error ? err.name : '') || 'step failed';
}

const sleep = (ms: number, signal: AbortSignal): Promise<boolean> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener('abort', onAbort);
  });

/** What one attempt knows of its job's records: loaded once at the first
 * durable call (GET /v1/jobs/{id}), kept up to date by the calls that record. */
export class Durable {
  /** The park a sleep or a wait threw in this attempt: the attempt ends
   * parked whatever the handler does after it. */
  parked: Parked | undefined;
  private loading: Promise<void> | undefined;
  private seq = 0;
  private readonly steps = new Map<number, DurableStep>();
  private readonly signals = new Map<string, DurableSignal>();

  constructor(private readonly att: DurableAttempt) {}

  private load(): Promise<void> {
    this.loading ??= (async () => {
      const job = (await this.att.transport.request<Job>('GET', this.att.path)).body;
      for (const s of job.durable?.steps ?? []) this.steps.set(s.seq, s);
      for (const s of job.durable?.signals ?? []) this.signals.set(s.name, s);
    })().catch((err: unknown) => {
      this.loading = undefined; // the next call tries again
      throw err;
    });
    return this.loading;
  }

  /** Takes the next place in the handler's order and resolves with it and
   * what is recorded there, after checking that what is recorded there has
   * the name the handler gives it. */
  private async next(name: string): Promise<[number, DurableStep | undefined]> {
    if (this.parked) throw this.parked; // the attempt is parked: nothing more runs in it
    this.att.check();
    const seq = ++this.seq;
    await this.load();
    const have = this.steps.get(seq);
    if (have && have.name !== name) throw new NondeterminismError(seq, have.name, name);
    return [seq, have];
  }

  /** Records the step at seq and resolves with the step that holds there
   * now (the one sent, or one recorded before: the answer wins). A 409 is
   * a lost lease: the attempt stops, reporting nothing. */
  private async record(seq: number, step: Omit<StepRequest, 'token' | 'seq'>): Promise<DurableStep> {
    const body: StepRequest = { ...step, seq, token: this.att.token, worker_id: this.att.workerId };
    let answer: StepAnswer;
    try {
      answer = (await this.att.transport.request<StepAnswer>('POST', `${this.att.path}/steps`, { body, idempotent: true })).body;
    } catch (err) {
      if (err instanceof ConflictError) throw this.att.lose(`lease lost: ${err.message}`);
      throw err;
    }
    this.steps.set(seq, answer.step);
    if (answer.signal && step.signal) this.signals.set(step.signal, answer.signal);
    return answer.step;
  }

  private park(delaySeconds: number, signal?: string): Parked {
    const delay = Math.min(Math.max(0, Math.ceil(delaySeconds * 1000) / 1000), MAX_PARK_SECONDS);
    this.parked = new Parked(delay, signal);
    return this.parked;
  }

  async step<T>(name: string, fn: () => Promise<T> | T, opts: StepOptions = {}): Promise<T> {
    checkName('step', name);
    let [seq, rec] = await this.next(name);
    if (!rec) {
      const started = Date.now();
      let value: T | undefined;
      let failure: unknown;
      let failed = false;
      try {
        value = await this.run(fn, Math.max(0, opts.retries ?? 0), Math.max(0, opts.backoffMs ?? 0));
      } catch (err) {
        if (isOutcome(err) || this.att.signal.aborted) throw err; // the attempt ends; the step did not
        failed = true;
        failure = err;
      }
      const body: Omit<StepRequest, 'token' | 'seq'> = { name, status: 'ok', started_at: formatTime(started) };
      if (!failed) {
        let data: string | undefined;
        try {
          data = JSON.stringify(value);
        } catch (err) {
          throw new NoRetry(`sundial: step ${JSON.stringify(name)}: the result does not encode to JSON: ${messageOf(err)}`);
        }
        const size = data === undefined ? 0 : Buffer.byteLength(data, 'utf8');
        if (size > MAX_STEP_BYTES) throw new NoRetry(`sundial: step ${JSON.stringify(name)}: the result is ${size} bytes; at most ${MAX_STEP_BYTES} are kept`);
        if (value !== undefined) body.result = value;
      } else {
        body.status = 'err';
        body.error = truncate(messageOf(failure));
      }
      rec = await this.record(seq, body);
    }
    if (rec.status === 'err') throw new StepError(name, rec.error ?? '');
    return rec.result as T;
  }

  /** Runs fn with the step's own retries. */
  private async run<T>(fn: () => Promise<T> | T, retries: number, backoffMs: number): Promise<T> {
    let wait = backoffMs;
    for (let tries = 0; ; tries++) {
      try {
        return await fn();
      } catch (err) {
        if (isOutcome(err) || err instanceof NoRetry || tries >= retries || this.att.signal.aborted) throw err;
      }
      if (!(await sleep(wait, this.att.signal))) this.att.check();
      wait = Math.min(2 * wait, 60_000);
    }
  }

  async sleepUntil(wakeMs: number): Promise<void> {
    let [seq, rec] = await this.next('sleep');
    const now = Date.now();
    if (!rec) rec = await this.record(seq, { name: 'sleep', status: 'wait', started_at: formatTime(now), deadline: formatTime(wakeMs) });
    if (rec.status !== 'wait') return; // over
    const until = rec.deadline ? Date.parse(rec.deadline) : now;
    if (now < until) throw this.park((until - now) / 1000);
    // Over: recorded as done, so that the job's page shows it ended.
    await this.record(seq, { name: 'sleep', status: 'ok', started_at: rec.started_at });
  }

  async waitSignal<T>(name: string, opts: WaitSignalOptions = {}): Promise<T> {
    checkName('signal', name);
    if (opts.key !== undefined) checkName('signal key', opts.key);
    const stepName = `signal:${name}`;
    let [seq, rec] = await this.next(stepName);
    const now = Date.now();
    if (!rec) {
      const body: Omit<StepRequest, 'token' | 'seq'> = { name: stepName, status: 'wait', started_at: formatTime(now), signal: name };
      if (opts.timeoutMs) body.deadline = formatTime(now + opts.timeoutMs);
      if (opts.key !== undefined) body.signal_key = opts.key;
      rec = await this.record(seq, body);
    }
    if (rec.status === 'timeout') throw new SignalTimeoutError(name);
    if (rec.status === 'ok') return rec.result as T;
    const sig = this.signals.get(name);
    if (sig) {
      const body: Omit<StepRequest, 'token' | 'seq'> = { name: stepName, status: 'ok', started_at: rec.started_at };
      if (sig.value !== undefined && sig.value !== null) body.result = sig.value;
      return ended<T>(name, await this.record(seq, body));
    }
    const deadline = rec.deadline ? Date.parse(rec.deadline) : undefined;
    if (deadline !== undefined && now >= deadline) {
      return ended<T>(name, await this.record(seq, { name: stepName, status: 'timeout', started_at: rec.started_at, deadline: rec.deadline }));
    }
    throw this.park(deadline !== undefined ? (deadline - now) / 1000 : MAX_PARK_SECONDS, name);
  }
}

/** The value of a wait's final record, or its timeout. */
function ended<T>(name: string, rec: DurableStep): T {
  if (rec.status === 'timeout') throw new SignalTimeoutError(name);
  return rec.result as T;
}
