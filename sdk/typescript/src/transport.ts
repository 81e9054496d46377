// HTTP to the Sundial API with the global fetch: JSON in and out, the API
// key, request ids, and retries with backoff (429 and 503 always, honouring
// Retry-After; a broken connection only for calls that are safe to repeat).
import { randomBytes } from 'node:crypto';
import { apiError, ApiError, TransportError } from './errors.js';

/** Options of a client or worker's connection to the API. */
export interface TransportOptions {
  /** The API's base URL; default $SUNDIAL_URL or http://127.0.0.1:8080. */
  url?: string;
  /** Sent as Authorization: Bearer <key>; default $SUNDIAL_API_KEY. */
  apiKey?: string;
  /** How long to wait for one answer, in ms (default 30 000). */
  timeoutMs?: number;
  /** Tries after a 429 or 503 and, for calls safe to repeat, after a broken
   * connection (default 4). */
  maxRetries?: number;
  /** The first wait between tries in ms, doubled each time with jitter
   * (default 200). */
  backoffMs?: number;
  /** The longest wait between tries (default 30 000 ms); a Retry-After
   * longer than this is not waited for: the error is thrown. */
  maxBackoffMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
}

/** One call. */
export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | readonly string[] | undefined | null>;
  /** Whether a call whose connection broke may be sent again (default: GET,
   * PUT, PATCH and DELETE are). */
  idempotent?: boolean;
  timeoutMs?: number;
  /** Overrides maxRetries for this call. */
  retries?: number;
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
}

/** A successful answer. */
export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
  requestId: string | undefined;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** Milliseconds to wait from a Retry-After header (seconds or an HTTP
 * date); undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.max(0, Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Resolves after ms, or rejects with the signal's reason when it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

const idempotentMethods = new Set(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']);

/** Sends requests to one API base URL. */
export class Transport {
  readonly url: string;
  readonly apiKey: string | undefined;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  private readonly fetch: typeof fetch;

  constructor(opts: TransportOptions = {}) {
    const url = opts.url ?? process.env.SUNDIAL_URL ?? DEFAULT_URL;
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`not an http(s) URL: ${url}`);
    this.url = url.replace(/\/+$/, '');
    this.apiKey = opts.apiKey ?? (process.env.SUNDIAL_API_KEY || undefined);
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.maxRetries = opts.maxRetries ?? 4;
    this.backoffMs = opts.backoffMs ?? 200;
    this.maxBackoffMs = opts.maxBackoffMs ?? 30_000;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  /** The wait before try attempt + 1 (attempt counts from 0), in ms. */
  delay(attempt: number): number {
    const base = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** attempt);
    return base / 2 + Math.random() * (base / 2);
  }

  /** Sends one call, trying again as the class says; resolves with the
   * answer or rejects with an ApiError or a TransportError (or the signal's
   * reason when it aborted). */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<Answer<T>> {
    const idempotent = opts.idempotent ?? idempotentMethods.has(method);
    const retries = opts.retries ?? this.maxRetries;
    const requestId = `sdk-ts-${randomBytes(8).toString('hex')}`;
    let target = this.url + path;
    if (opts.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(opts.query)) {
        if (Array.isArray(v)) for (const x of v) q.append(k, String(x));
        else if (v !== undefined && v !== null) q.append(k, String(v));
      }
      const s = q.toString();
      if (s) target += `?${s}`;
    }
    const headers: Record<string, string> = { Accept: 'application/json', 'X-Request-Id': requestId };
    let payload: string | undefined;
    if (opts.body !== undefined) {
      payload = JSON.stringify(opts.body);
      headers['Content-Type'] = 'application/json';
    }
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;

    for (let attempt = 0; ; attempt++) {
      let res: Response;
      let text: string;
      try {
        ({ res, text } = await this.send(method, target, headers, payload, opts.timeoutMs ?? this.timeoutMs, opts.signal));
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        if (idempotent && attempt < retries) {
          await sleep(this.delay(attempt), opts.signal);
          continue;
        }
        throw new TransportError(`${method} ${path}: ${describe(err)}`, { cause: err });
      }
      const body = decode(text);
      if (res.ok) {
        return { status: res.status, body: body as T, headers: res.headers, requestId: res.headers.get('x-request-id') ?? undefined };
      }
      const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'));
      const err = apiError(res.status, body, res.headers.get('x-request-id') ?? undefined, retryAfterMs);
      if ((res.status === 429 || res.status === 503) && attempt < retries) {
        const wait = retryAfterMs ?? this.delay(attempt);
        if (wait <= this.maxBackoffMs) {
          await sleep(wait, opts.signal);
          continue;
        }
      }
      throw err;
    }
  }

  private async send(
    method: string,
    target: string,
    headers: Record<string, string>,
    payload: string | undefined,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ res: Response; text: string }> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new TransportError(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => ac.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const init: RequestInit = { method, headers, signal: ac.signal };
      if (payload !== undefined) init.body = payload;
      const res = await this.fetch(target, init);
      const text = await res.text();
      return { res, text };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }
}

function decode(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return { error: { code: '', message: text.slice(0, 200) } };
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}

/** True for the errors after which an outcome report may be sent again:
 * a broken connection, 429, and 5xx answers. */
export function isTransient(err: unknown): boolean {
  if (err instanceof TransportError) return true;
  return err instanceof ApiError && (err.status === 429 || err.status >= 500);
}
