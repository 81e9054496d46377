// The worker: runs handlers for job types over the HTTP worker protocol
// (docs/workers.md) with long-poll claims, leases renewed every third of
// their TTL, progress, fencing tokens, and a graceful shutdown.
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { isEncrypted, keyIdOf, type Keyring, MissingKeyError } from './encryption.js';
import { Durable, type StepOptions, type WaitSignalOptions } from './durable.js';
import { ApiError, Cancel, ConflictError, InvalidArgumentError, LeaseLostError, NoRetry, Parked, RetryAfter, Snooze, TransportError } from './errors.js';
import { JobLog, type JobLogger } from './joblog.js';
import { isTransient, sleep, Transport, type TransportOptions } from './transport.js';
import type { ClaimedJob, Job } from './types.js';

/** What a handler gets: the job and its lease. */
export interface JobContext<P = unknown> {
  readonly id: string;
  readonly type: string;
  readonly queue: string;
  readonly payload: P;
  /** The attempt this is, from 1. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The whole job as claimed. */
  readonly job: Job;
  /** The lease's fencing token: pass it to systems the handler writes to,
   * so that they can refuse a stale attempt. */
  readonly token: string;
  /** The lease's length, in ms. */
  readonly leaseTtlMs: number;
  /** Aborted when the job must stop: its lease was lost (a heartbeat
   * answered 409: reclaimed, cancelled, finished, or past its timeout), could
   * not be renewed in time, or the worker's shutdown deadline passed. Its
   * reason is a LeaseLostError. Nothing is reported for the job then. A
   * timer aborts it when the lease can no longer be trusted, whatever the
   * heartbeats do; reading `aborted` (or calling `throwIfAborted()`) also
   * compares the clock with that bound first, so a handler resumed after a
   * pause sees it before it can act. */
  readonly signal: AbortSignal;
  /** Reports progress (0..100, a short message): shown on the job and as a
   * progress event; it also renews the lease. Rejects with LeaseLostError
   * when the lease is gone; a failed report that does not say so is logged. */
  progress(percent: number, message?: string): Promise<void>;
  /** Throws LeaseLostError when the job must stop. */
  check(): void;
  /** The job's logger: ctx.log.info('charged', { amount: 42 }). Levels
   * debug, info, warn, error, a message and a few fields; the lines are
   * kept with the job, sent every 200 ms and before the attempt's outcome,
   * without ever waiting on the network. */
  readonly log: JobLogger;

  // Durable execution (docs/durable.md)

  /** Runs fn once per job, not once per attempt: its result (any JSON
   * value, at most 256 KiB encoded), or its final error, is recorded with
   * the job under the attempt's fencing token, and a later attempt gets the
   * recorded result back (or a StepError, for a recorded error) without
   * running fn. name identifies the step with its place in the handler's
   * order: a handler whose steps changed under a running job throws
   * NondeterminismError. opts.retries are the step's own retries (with
   * backoff), within one attempt; NoRetry ends them at once (recorded as
   * the step's error); Snooze, Cancel, RetryAfter and LeaseLostError end
   * the attempt and record nothing. A side effect outside Sundial is done at
   * least once: pass ctx.token (or a key made of the job's id and the
   * step's name) to the system it writes, so that a second run is refused. */
  step<T>(name: string, fn: () => Promise<T> | T, opts?: StepOptions): Promise<T>;
  /** Parks the job for ms: throws Parked, which ends the handler (let it
   * propagate), and the worker parks the job, holding neither a slot nor a
   * lease; it runs again once the time passed, skipping its recorded steps,
   * and this call then resolves. */
  sleep(ms: number): Promise<void>;
  /** sleep until when (a Date, or epoch ms). */
  sleepUntil(when: Date | number): Promise<void>;
  /** Waits for the signal name sent to the job (Client.signal) and resolves
   * with its value. While it waits the job is parked, as in sleep (Parked
   * ends the handler), and runs again when the signal arrives, or when
   * opts.timeoutMs passed: this call then throws SignalTimeoutError. A
   * signal sent before the wait began is kept and read at once. With
   * opts.key, callers may send it to the key in the job's queue instead
   * (Client.signalKey). A job takes one signal of each name. */
  waitSignal<T = unknown>(name: string, opts?: WaitSignalOptions): Promise<T>;
}

/** A handler: resolves with the job's result (any JSON value). A thrown
 * error fails the attempt (retried while attempts remain); NoRetry fails
 * the job for good. */
export type Handler<P = unknown, R = unknown> = (ctx: JobContext<P>) => Promise<R> | R;

/** Where the worker writes what it does. */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface WorkerOptions extends TransportOptions {
  /** Queues to claim from, in order; default $SUNDIAL_QUEUES (comma-separated) or default. */
  queues?: readonly string[];
  /** How many jobs run at once (default 1). */
  concurrency?: number;
  /** The name in GET /v1/workers and in job events; default
   * $SUNDIAL_WORKER_ID or node-<host>-<pid>. */
  workerId?: string;
  /** The claim's long poll, 0..60 s (default 20). */
  waitSeconds?: number;
  /** How long running jobs may finish after SIGTERM/SIGINT or stop(), in ms
   * (default 30 000); the rest are signalled and given back once their
   * handlers returned, or after the lease margin (see run()). */
  shutdownTimeoutMs?: number;
  /** Stop on SIGTERM and SIGINT (default true). */
  handleSignals?: boolean;
  logger?: Logger;
  /** Decrypts encrypted payloads before the handler sees them (ctx.payload
   * and ctx.job), and encrypts those jobs' results and error text under
   * its primary key (docs/payloads.md, "Encryption"). A job whose payload
   * is encrypted under a key it lacks (or any key, without a keyring), or
   * that does not decrypt, fails for good. */
  keyring?: Keyring;
  /** Leave an encrypted job's result in the clear. */
  clearResults?: boolean;
  /** Leave an encrypted job's error text in the clear. */
  clearErrors?: boolean;
}

const MAX_ERROR_BYTES = 64 << 10;

/** Why an attempt stops when its lease could not be renewed in time. */
const LOST_IN_TIME = 'the lease could not be renewed in time';

/** The default logger: info and above to the console. */
export const consoleLogger: Logger = {
  debug: () => {},
  info: (m) => console.log(`sundial: ${m}`),
  warn: (m) => console.warn(`sundial: ${m}`),
  error: (m) => console.error(`sundial: ${m}`),
};

function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_.:@-]/g, '-').slice(0, 80) || 'host';
  return `node-${host}-${process.pid}`;
}

function messageOf(err: unknown): string {
  let text = err instanceof Error ? err.message : String(err);
  text = text.trim() || (err instanceof Error ? err.name : '') || 'handler failed';
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length > MAX_ERROR_BYTES ? `${bytes.subarray(0, MAX_ERROR_BYTES - 3).toString('utf8')}...` : text;
}

/** checkOnRead makes reading signal.aborted, and signal.throwIfAborted(),
 * run check first: check may abort the signal (a lease whose bound passed
 * while the process was paused, before the guard's timer ran). */
function checkOnRead(signal: AbortSignal, check: () => void): AbortSignal {
  const aborted = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;
  const throwIfAborted = AbortSignal.prototype.throwIfAborted;
  Object.defineProperty(signal, 'aborted', {
    get(): boolean {
      check();
      return aborted.call(signal) as boolean;
    },
  });
  if (throwIfAborted) {
    Object.defineProperty(signal, 'throwIfAborted', {
      value(): void {
        check();
        throwIfAborted.call(signal);
      },
    });
  }
  return signal;
}

/** One claimed job running on this worker. */
class Attempt {
  readonly ttlMs: number;
  readonly path: string;
  readonly controller = new AbortController();
  readonly ctx: JobContext;
  /** Send time (performance.now) of the claim or of the last accepted renewal. */
  renewedAt: number;
  lost = false;
  lostReason = '';
  abandoned = false;
  /** Set while a claim answered late (a long poll) awaits its first renewal:
   * the lease was granted some time after the claim was sent, so the
   * claim's send time bounds nothing yet. The handler starts only once a
   * renewal gave a bound; the guard waits for it too. */
  starting = false;
  done = false;
  beating = false;
  timer: ReturnType<typeof setInterval> | undefined;
  /** The lease guard's timer: due when the lease can no longer be trusted. */
  guard: ReturnType<typeof setTimeout> | undefined;
  finished: Promise<void> = Promise.resolve();
  readonly durable: Durable;
  readonly logs: JobLog;

  constructor(
    worker: Worker,
    claimed: ClaimedJob,
    claimSent: number,
    private readonly log: Logger,
  ) {
    const { job, lease } = claimed;
    this.ttlMs = (lease.ttl_seconds || 15) * 1000;
    this.path = `/v1/jobs/${encodeURIComponent(job.id)}`;
    this.renewedAt = claimSent;
    this.logs = new JobLog({
      path: this.path,
      token: lease.token,
      ttlMs: this.ttlMs,
      transport: worker.transport,
      live: () => !this.lost && !this.abandoned,
      warn: (m) => this.log.warn(`job ${job.id}: ${m}`),
    });
    this.ctx = {
      id: job.id,
      type: job.type,
      queue: job.queue,
      payload: job.payload,
      attempt: job.attempt,
      maxAttempts: job.max_attempts,
      job,
      token: lease.token,
      leaseTtlMs: this.ttlMs,
      signal: checkOnRead(this.controller.signal, () => void this.expired()),
      progress: async (percent: number, message?: string): Promise<void> => {
        if (!(percent >= 0 && percent <= 100)) throw new RangeError('percent must be 0..100');
        this.ctx.check();
        if (!(await worker.renew(this, Math.round(percent), message ?? ''))) throw this.lostError();
      },
      check: (): void => {
        if (this.expired() || this.controller.signal.aborted) throw this.lostError();
      },
      log: this.logs,
      step: (name, fn, opts) => this.durable.step(name, fn, opts),
      sleep: (ms) => this.durable.sleepUntil(Date.now() + ms),
      sleepUntil: (when) => this.durable.sleepUntil(when instanceof Date ? when.getTime() : when),
      waitSignal: (name, opts) => this.durable.waitSignal(name, opts),
    };
    this.durable = new Durable({
      path: this.path,
      token: lease.token,
      workerId: worker.workerId,
      transport: worker.transport,
      signal: this.ctx.signal,
      check: () => this.ctx.check(),
      lose: (reason) => {
        this.lose(reason);
        return this.lostError();
      },
    });
  }

  /** The lease margin, the Go worker's: a fifth of the TTL, for clocks and
   * delays (and what a shutdown leaves a signalled handler), in ms. */
  get marginMs(): number {
    return this.ttlMs / 5;
  }

  /** Until when (performance.now) the lease surely holds: the last accepted
   * renewal's send time plus the TTL, less the margin. */
  get trustedUntil(): number {
    return this.renewedAt + this.ttlMs - this.marginMs;
  }

  /** Moves the bound to an accepted renewal's send time, unless the bound
   * passed first: a lease once lost stays lost. */
  renewed(sent: number): void {
    if (!this.expired()) this.renewedAt = Math.max(this.renewedAt, sent);
  }

  /** Marks the attempt lost when its lease can no longer be trusted (the
   * bound passed on the clock); true once it is lost. */
  expired(): boolean {
    if (this.starting || this.lost || this.done || performance.now() < this.trustedUntil) return this.lost;
    this.lose(LOST_IN_TIME);
    this.log.warn(`job ${this.ctx.id}: ${LOST_IN_TIME}; stopping it, reporting nothing`);
    return true;
  }

  /** The lease guard: a timer due at the bound marks the attempt lost, on
   * time even while a renewal hangs, since it waits for no answer. When
   * accepted renewals moved the bound meanwhile, it waits again. */
  armGuard(): void {
    this.guard = undefined;
    if (this.starting || this.expired() || this.done) return;
    this.guard = setTimeout(() => this.armGuard(), Math.max(1, Math.ceil(this.trustedUntil - performance.now())));
  }

  lostError(): LeaseLostError {
    return new LeaseLostError(this.lostReason || 'lease lost');
  }

  lose(reason: string): void {
    if (this.lost) return;
    this.lost = true;
    this.lostReason = reason;
    this.controller.abort(this.lostError());
  }

  stopBeating(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.guard) clearTimeout(this.guard);
    this.timer = this.guard = undefined;
  }

  abandon(): void {
    this.abandoned = true;
    this.lostReason ||= 'the worker is shutting down';
    this.stopBeating();
    this.controller.abort(this.lostError());
  }
}

/** Runs jobs of the types it has handlers for. */
export class Worker {
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly workerId: string;
  readonly waitSeconds: number;
  readonly shutdownTimeoutMs: number;
  readonly keyring: Keyring | undefined;
  readonly clearResults: boolean;
  readonly clearErrors: boolean;
  readonly transport: Transport;
  private readonly handleSignals: boolean;
  private readonly log: Logger;
  private readonly handlers = new Map<string, Handler<never, unknown>>();
  private readonly attempts = new Map<string, Attempt>();
  private readonly claimAbort = new AbortController();
  private slotWaiters: Array<() => void> = [];
  private stopping = false;
  private resolveStopped: () => void = () => {};
  private readonly stopped = new Promise<void>((resolve) => {
    this.resolveStopped = resolve;
  });

  constructor(opts: WorkerOptions = {}) {
    this.queues = opts.queues ?? (process.env.SUNDIAL_QUEUES || 'default').split(',').filter(Boolean);
    this.concurrency = opts.concurrency ?? 1;
    if (!(this.concurrency >= 1)) throw new RangeError('concurrency must be at least 1');
    this.workerId = opts.workerId ?? (process.env.SUNDIAL_WORKER_ID || defaultWorkerId());
    this.waitSeconds = opts.waitSeconds ?? 20;
    this.shutdownTimeoutMs = opts.shutdownTimeoutMs ?? 30_000;
    this.keyring = opts.keyring;
    this.clearResults = opts.clearResults ?? false;
    this.clearErrors = opts.clearErrors ?? false;
    this.handleSignals = opts.handleSignals ?? true;
    this.log = opts.logger ?? consoleLogger;
    this.transport = new Transport(opts);
  }

  /** Runs fn for jobs of type. Its result is the job's; a thrown error fails
   * the attempt, NoRetry fails the job for good, RetryAfter picks the
   * retry's delay, Snooze runs it again later without spending an attempt,
   * Cancel ends it cancelled. */
  handle<P = unknown, R = unknown>(type: string, fn: Handler<P, R>): this {
    this.handlers.set(type, fn as Handler<never, unknown>);
    return this;
  }

  /** The ids of the jobs running now. */
  get running(): string[] {
    return [...this.attempts.keys()];
  }

  /**
   * Claims and runs jobs until SIGTERM or SIGINT (with handleSignals) or
   * stop(). Then it stops claiming, lets running jobs finish for up to
   * shutdownTimeoutMs and resolves. A job still running at the deadline is
   * signalled (ctx.signal), nothing is reported for it, and its lease is
   * given back (POST /v1/jobs/{id}/release) once its handler returned, or
   * after the lease margin (a fifth of the lease TTL) if it still runs then
   * (logged as a warning): the job is queued again and the interrupted
   * attempt does not count. If the release cannot be sent, the lease
   * expires instead and the poller reclaims the job after one lease TTL (a
   * counted attempt). A handler that ignores its signal may keep the
   * process alive: call process.exit() after run() if so.
   */
  async run(): Promise<void> {
    if (this.handlers.size === 0) throw new Error('no handlers: register one with handle() before run()');
    const onSignal = (sig: NodeJS.Signals): void => {
      this.log.info(`worker ${this.workerId}: ${sig}, stopping`);
      this.stop();
    };
    if (this.handleSignals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    try {
      this.log.info(`worker ${this.workerId} serving ${this.queues.join(',')} at ${this.transport.url}`);
      const claiming = this.claimLoop();
      await this.stopped;
      const deadline = performance.now() + this.shutdownTimeoutMs;
      await claiming;
      const left = deadline - performance.now();
      if (this.attempts.size > 0 && left > 0) {
        const timeout = new AbortController();
        await Promise.race([
          Promise.allSettled([...this.attempts.values()].map((a) => a.finished)),
          sleep(left, timeout.signal).catch(() => {}),
        ]);
        timeout.abort();
      }
      const givenBack = [...this.attempts.values()];
      for (const att of givenBack) {
        this.log.warn(`job ${att.ctx.id} still running at the shutdown deadline: giving it back`);
        att.abandon();
      }
      await Promise.all(givenBack.map((att) => this.giveBack(att)));
      this.log.info(`worker ${this.workerId} stopped`);
    } finally {
      if (this.handleSignals) {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    }
  }

  /** Asks run() to stop (as SIGTERM does); returns at once. */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.claimAbort.abort(new Error('worker stopping'));
    this.wakeClaimer();
    this.resolveStopped();
  }

  private wakeClaimer(): void {
    const waiters = this.slotWaiters;
    this.slotWaiters = [];
    for (const w of waiters) w();
  }

  private async claimLoop(): Promise<void> {
    let failures = 0;
    const types = [...this.handlers.keys()];
    while (!this.stopping) {
      while (this.attempts.size >= this.concurrency && !this.stopping) {
        await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
      }
      if (this.stopping) return;
      const body = { worker_id: this.workerId, queues: this.queues, types, max: this.concurrency - this.attempts.size, wait_seconds: this.waitSeconds };
      const sent = performance.now();
      let jobs: ClaimedJob[];
      try {
        const res = await this.transport.request<{ jobs: ClaimedJob[] }>('POST', '/v1/claim', {
          body,
          retries: 0,
          timeoutMs: this.waitSeconds * 1000 + this.transport.timeoutMs,
          signal: this.claimAbort.signal,
        });
        jobs = res.body.jobs ?? [];
      } catch (err) {
        if (this.stopping) return;
        failures++;
        let wait = Math.min(5000, 200 * 2 ** Math.min(failures, 5));
        if (err instanceof InvalidArgumentError) wait = 5000;
        if (err instanceof ApiError && err.retryAfterMs !== undefined) wait = err.retryAfterMs;
        this.log.warn(`claim failed (${String(err)}); trying again in ${Math.round(wait)} ms`);
        await sleep(wait, this.claimAbort.signal).catch(() => {});
        continue;
      }
      failures = 0;
      for (const claimed of jobs) this.start(claimed, sent);
    }
  }

  private start(claimed: ClaimedJob, claimSent: number): void {
    const att = new Attempt(this, claimed, claimSent, this.log);
    this.attempts.set(att.ctx.id, att);
    att.starting = performance.now() - claimSent > att.marginMs;
    att.armGuard();
    att.timer = setInterval(() => {
      if (!att.beating && !att.lost) {
        att.beating = true;
        void this.renew(att).finally(() => {
          att.beating = false;
        });
      }
    }, att.ttlMs / 3);
    att.finished = this.execute(att);
  }

  /** Gives back the lease of an attempt signalled at the shutdown deadline
   * once its handler returned or, at the latest, once the lease margin
   * passed (a fifth of its TTL, the margin the lease guard keeps): a job
   * given back at once would run elsewhere while its handler here still
   * unwinds. Nothing renews the lease meanwhile; the margin ends well
   * before it expires. */
  private async giveBack(att: Attempt): Promise<void> {
    const timeout = new AbortController();
    const returned = await Promise.race([
      att.finished.then(
        () => true,
        () => true,
      ),
      sleep(att.marginMs, timeout.signal).then(
        () => false,
        () => false,
      ),
    ]);
    timeout.abort();
    if (!returned) {
      this.log.warn(`job ${att.ctx.id}: its handler is still running ${(att.marginMs / 1000).toFixed(1)} s after it was signalled (the lease margin); giving its lease back anyway`);
    }
    await this.release(att);
  }

  /** Gives the lease back (shutdown): the job is queued again at once, the
   * interrupted attempt not counted. A 409 means it had already ended (its
   * outcome landed, or it was cancelled or reclaimed). */
  private async release(att: Attempt): Promise<void> {
    try {
      await this.transport.request('POST', `${att.path}/release`, {
        body: { token: att.ctx.token, worker_id: this.workerId },
        idempotent: true,
        retries: 1,
        timeoutMs: Math.max(1000, Math.min(5000, att.ttlMs / 2)),
      });
      this.log.info(`job ${att.ctx.id}: lease given back; it runs again elsewhere`);
    } catch (err) {
      if (err instanceof ConflictError) this.log.info(`job ${att.ctx.id}: nothing to give back (${err.message})`);
      else this.log.warn(`job ${att.ctx.id}: giving the lease back failed (${String(err)}); it runs again once the lease expires`);
    }
  }

  /** @internal Renews the lease (with progress when given); false once it is lost. */
  async renew(att: Attempt, percent?: number, message = ''): Promise<boolean> {
    const body: Record<string, unknown> = { token: att.ctx.token, worker_id: this.workerId };
    if (percent !== undefined) {
      body.progress = percent;
      if (message) body.message = message.slice(0, 1024);
    }
    const sent = performance.now();
    try {
      await this.transport.request('POST', `${att.path}/heartbeat`, { body, idempotent: true, retries: 0, timeoutMs: Math.max(1000, att.ttlMs / 2) });
    } catch (err) {
      if (err instanceof ConflictError) {
        att.lose(`lease lost: ${err.message}`);
        this.log.warn(`job ${att.ctx.id}: ${err.message}; stopping it, reporting nothing`);
        return false;
      }
      if (att.expired()) return false;
      this.log.info(`job ${att.ctx.id}: renewal failed (${String(err)}); the next one tries again`);
      return !att.lost;
    }
    att.renewed(sent);
    return !att.lost;
  }

  private async execute(att: Attempt): Promise<void> {
    const ctx = att.ctx;
    try {
      // A claim that waited long may have been granted well after it was
      // sent: renew at once for a fresh bound on the lease, and start the
      // handler (and the guard) only with it.
      if (att.starting) {
        await this.renew(att);
        att.starting = false;
        if (att.expired() || att.lost) return;
        att.armGuard();
      }
      let kind: Outcome | undefined;
      let body: Record<string, unknown> = {};
      let thrown: Parked | undefined;
      let opened = false; // the payload was encrypted and is now decrypted: seal what goes back
      try {
        const handler = this.handlers.get(ctx.type);
        if (!handler) throw new NoRetry(`no handler for job type ${ctx.type} on worker ${this.workerId}`);
        if (isEncrypted(ctx.payload)) {
          const payload = this.openPayload(ctx.payload);
          Object.assign(ctx, { payload, job: { ...ctx.job, payload } });
          opened = true;
        }
        const result = await handler(ctx as JobContext<never>);
        JSON.stringify(result); // a result that is not JSON (a cycle, a BigInt) fails the attempt here
        kind = 'complete';
        body = { result: result === undefined ? null : result };
      } catch (err) {
        if (err instanceof Parked) thrown = err;
        else if (!(err instanceof LeaseLostError && att.lost)) [kind, body] = outcomeOf(err);
      }
      const parked = att.durable.parked ?? thrown;
      if (parked) {
        // A sleep or a wait parked the attempt: it ends parked, even when
        // the handler caught Parked and went on.
        if (!thrown) this.log.warn(`job ${ctx.id}: the handler caught Parked and went on (rethrow it); parking the job all the same`);
        kind = 'park';
        body = parked.signal ? { delay_seconds: parked.delaySeconds, signal: parked.signal } : { delay_seconds: parked.delaySeconds };
      }
      if (opened && kind) body = this.seal(body);
      // The attempt's last log lines go before its outcome: once the outcome
      // landed, the attempt's token no longer takes them.
      await att.logs.close(!(att.expired() || att.abandoned));
      if (att.expired() || att.abandoned || !kind) {
        this.log.info(`job ${ctx.id}: ${att.lostReason || 'lease lost'}; its outcome is not reported`);
        return;
      }
      await this.report(att, kind, { ...body, token: ctx.token, worker_id: this.workerId });
    } finally {
      // The slot frees as soon as the outcome is in: a parked or finished
      // job holds none, whatever its lines still being sent.
      att.done = true;
      att.stopBeating();
      if (this.attempts.get(ctx.id) === att) this.attempts.delete(ctx.id);
      this.wakeClaimer();
      await att.logs.close(false);
    }
  }

  /** The plaintext of an encrypted payload; a key the keyring lacks, or a
   * payload that does not decrypt, fails the job for good. */
  private openPayload(payload: unknown): unknown {
    try {
      if (!this.keyring) throw new MissingKeyError('payload', keyIdOf(payload) ?? '');
      return this.keyring.open('payload', payload);
    } catch (err) {
      if (err instanceof MissingKeyError) throw new NoRetry(`payload encrypted with key "${err.keyId}", which this worker's keyring lacks`);
      throw new NoRetry((err as Error).message);
    }
  }

  /** An encrypted job's outcome with its result and error text sealed. */
  private seal(body: Record<string, unknown>): Record<string, unknown> {
    const kr = this.keyring!;
    const out = { ...body };
    if (out.result !== undefined && out.result !== null && !this.clearResults) out.result = kr.seal('result', out.result);
    for (const f of ['error', 'reason']) {
      if (typeof out[f] !== 'string' || !out[f] || this.clearErrors) continue;
      // The API takes at most MAX_ERROR_BYTES: cut the text until its sealed form fits.
      let text = out[f] as string;
      let sealed = kr.sealText('error', text);
      while (sealed.length > MAX_ERROR_BYTES) {
        text = `${text.slice(0, Math.floor(text.length / 2))}...`;
        sealed = kr.sealText('error', text);
      }
      out[f] = sealed;
    }
    return out;
  }

  /** Sends the outcome, again after a broken connection or a 429/5xx, while
   * the lease can be trusted (heartbeats go on meanwhile). A complete is
   * retried as a complete, never turned into a fail. */
  private async report(att: Attempt, kind: Outcome, body: Record<string, unknown>): Promise<void> {
    let broken = false;
    let last: unknown;
    for (let tries = 0; !att.abandoned; tries++) {
      if (performance.now() >= att.trustedUntil) {
        this.log.error(`job ${att.ctx.id}: could not report ${kind} while its lease could be trusted (${String(last)}); it will run again`);
        return;
      }
      try {
        await this.transport.request('POST', `${att.path}/${kind}`, { body, retries: 0 });
        return;
      } catch (err) {
        if (err instanceof ConflictError) {
          if (broken) this.log.info(`job ${att.ctx.id}: ${kind} refused after a broken connection (${err.message}): the first one probably landed`);
          else this.log.warn(`job ${att.ctx.id}: ${kind} refused: ${err.message}`);
          return;
        }
        if (!isTransient(err)) {
          this.log.error(`job ${att.ctx.id}: ${kind} refused: ${String(err)}`);
          return;
        }
        broken ||= err instanceof TransportError;
        last = err;
        const left = Math.max(0, att.trustedUntil - performance.now());
        const wait = (err instanceof ApiError && err.retryAfterMs) || this.transport.delay(Math.min(tries, 4));
        this.log.warn(`job ${att.ctx.id}: reporting ${kind} failed (${String(err)}); trying again`);
        await sleep(Math.min(wait, left));
      }
    }
  }
}

/** The route an attempt's outcome is reported to. */
type Outcome = 'complete' | 'fail' | 'snooze' | 'park';

/** outcomeOf is the route and body that report what a handler threw. */
function outcomeOf(err: unknown): [Outcome, Record<string, unknown>] {
  if (err instanceof Snooze) return ['snooze', { delay_seconds: err.seconds, reason: err.reason }];
  if (err instanceof Cancel) return ['fail', { error: messageOf(err), cancel: true }];
  if (err instanceof RetryAfter) return ['fail', { error: messageOf(err), retry_in_seconds: err.seconds }];
  return ['fail', { error: messageOf(err), retry: !(err instanceof NoRetry) }];
}
