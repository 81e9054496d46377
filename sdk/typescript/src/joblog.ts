// Per-job logs for the worker: ctx.log.info('charged', { amount: 42 }) in a
// handler buffers a line, and the worker sends the buffered lines with
// POST /v1/jobs/{id}/logs under the attempt's fencing token: every 200 ms
// while the handler runs, and once more when it ends, before its outcome.
// Logging never waits on the network; lines the API will not take for the
// attempt (404, 409: it is no longer the job's running one) are dropped
// silently.
import { ApiError } from './errors.js';
import type { Transport } from './transport.js';
import type { LogRequest } from './types.js';

/** A log line's level. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** A few fields of a line: string values (others are sent as JSON text). */
export type LogFields = Record<string, unknown>;

/** A handler's logger, ctx.log: the lines are kept with the job (GET
 * /v1/jobs/{id}/logs, client.logs, the dashboard's job page, sundial jobs
 * logs). Each call returns at once. */
export interface JobLogger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  log(level: LogLevel, message: string, fields?: LogFields): void;
  /** Lines dropped here: the buffer was full while the API could not take
   * them, or the API refused the attempt's lines (404, 409). */
  readonly dropped: number;
}

/** How often a running attempt's buffered lines are sent, in ms. */
export const LOG_FLUSH_MS = 200;
/** The most lines one POST /v1/jobs/{id}/logs takes. */
export const MAX_LOG_LINES_PER_CALL = 100;
/** The longest message the API keeps (it cuts longer ones); cut here too. */
export const MAX_LOG_MESSAGE_BYTES = 8 << 10;
/** The most fields a line keeps (the first 20). */
export const MAX_LOG_FIELDS = 20;
/** The most lines held while the API cannot take them; the oldest go first. */
export const MAX_LOG_BUFFERED = 1000;

const LEVELS: ReadonlySet<string> = new Set(['debug', 'info', 'warn', 'error']);

interface Line {
  level: LogLevel;
  message: string;
  fields?: Record<string, string>;
}

function text(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

function cut(message: string): string {
  const bytes = Buffer.from(message, 'utf8');
  if (bytes.length <= MAX_LOG_MESSAGE_BYTES) return message;
  // a cut through a character leaves U+FFFD: drop it
  return bytes.subarray(0, MAX_LOG_MESSAGE_BYTES).toString('utf8').replace(/\uFFFD$/, '');
}

/** What a JobLog needs of its attempt. */
export interface LogTarget {
  path: string;
  token: string;
  ttlMs: number;
  transport: Transport;
  /** Whether the attempt can still send (its lease holds). */
  live(): boolean;
  warn(message: string): void;
}

/** The buffer and flusher of one attempt's lines. @internal */
export class JobLog implements JobLogger {
  private buffer: Array<{ n: number; line: Line }> = [];
  private numbered = 0;
  private closed = false;
  private refused = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private sending: Promise<void> | undefined;
  dropped = 0;

  constructor(private readonly target: LogTarget) {}

  debug(message: string, fields?: LogFields): void {
    this.log('debug', message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.log('info', message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.log('warn', message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.log('error', message, fields);
  }

  log(level: LogLevel, message: string, fields?: LogFields): void {
    if (!LEVELS.has(level)) throw new RangeError(`level must be debug, info, warn or error, not ${String(level)}`);
    if (this.closed || this.refused) {
      this.dropped++;
      return;
    }
    const line: Line = { level, message: cut(text(message)) };
    if (fields) {
      const entries = Object.entries(fields).slice(0, MAX_LOG_FIELDS);
      if (entries.length > 0) line.fields = Object.fromEntries(entries.map(([k, v]) => [k, text(v)]));
    }
    this.buffer.push({ n: ++this.numbered, line });
    if (this.buffer.length > MAX_LOG_BUFFERED) {
      this.buffer.shift();
      this.dropped++;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush(false).finally(() => {
        if (this.buffer.length > 0) this.schedule();
      });
    }, LOG_FLUSH_MS);
  }

  /** Ends the attempt's logging: with send, sends what is left (bounded
   * by the lease) before the outcome goes; without it, drops it. */
  async close(send: boolean): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (send) await this.flush(true);
    else await this.sending;
    this.dropped += this.buffer.length;
    this.buffer = [];
  }

  /** Sends the buffered lines, 100 a call, one flush at a time. */
  private async flush(final: boolean): Promise<void> {
    while (this.sending) await this.sending;
    const run = (async (): Promise<void> => {
      while (!this.refused && this.buffer.length > 0 && this.target.live()) {
        const batch = this.buffer.slice(0, MAX_LOG_LINES_PER_CALL);
        const sent = await this.send(
          batch.map((b) => b.line),
          final,
        );
        if (sent === 'refused') {
          this.refused = true;
          this.dropped += this.buffer.length;
          this.buffer = [];
          return;
        }
        if (sent === 'later') return;
        if (sent === 'bad') this.dropped += batch.length;
        const last = batch[batch.length - 1]!.n;
        this.buffer = this.buffer.filter((b) => b.n > last);
      }
    })();
    this.sending = run;
    try {
      await run;
    } finally {
      this.sending = undefined;
    }
  }

  private async send(lines: Line[], final: boolean): Promise<'sent' | 'later' | 'refused' | 'bad'> {
    const t = this.target;
    const body: LogRequest = { token: t.token, lines };
    try {
      await t.transport.request('POST', `${t.path}/logs`, {
        body,
        retries: final ? 1 : 0,
        idempotent: false,
        timeoutMs: Math.max(1000, Math.min(5000, t.ttlMs / 2)),
      });
      return 'sent';
    } catch (err) {
      if (err instanceof ApiError) {
        if (err.status === 404 || err.status === 409) return 'refused';
        if (err.status === 400 || err.status === 413) {
          t.warn(`log lines refused: ${err.message}`);
          return 'bad';
        }
      }
      return 'later';
    }
  }
}
