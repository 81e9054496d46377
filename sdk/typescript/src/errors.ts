// The errors of the Sundial SDK. Every answer of the API that is not a
// success becomes an ApiError carrying the HTTP status, the API's code,
// message and field, and the answer's request id (X-Request-Id).
import type { components } from './openapi.js';

/** The API's error codes (docs/api.md, "Errors"). */
export type ErrorCode = components['schemas']['ErrorDetail']['code'];

/** The base of every error this package throws. */
export class SundialError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The API could not be reached, or the connection broke before an answer. */
export class TransportError extends SundialError {}

/** The fields of an error answer. */
export interface ApiErrorInit {
  status: number;
  code: ErrorCode | string;
  message: string;
  field?: string | undefined;
  requestId?: string | undefined;
  retryAfterMs?: number | undefined;
}

/** The API answered with an error. */
export class ApiError extends SundialError {
  /** The HTTP status: 400, 404, 409, 429, 503… */
  readonly status: number;
  /** The API's error code: invalid_argument, not_found, conflict… */
  readonly code: ErrorCode | string;
  /** The input at fault (priority, jobs[3].run_at), when one is. */
  readonly field: string | undefined;
  /** The answer's X-Request-Id, which the API's log lines carry too. */
  readonly requestId: string | undefined;
  /** How long the API asked to wait (Retry-After), in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(init: ApiErrorInit) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.field = init.field;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }

  override toString(): string {
    const field = this.field ? ` (field ${this.field})` : '';
    const rid = this.requestId ? ` [request ${this.requestId}]` : '';
    return `${this.name}: ${this.status} ${this.code}: ${this.message}${field}${rid}`;
  }
}

/** 400 invalid_argument: validation failed; field names the input. */
export class InvalidArgumentError extends ApiError {}
/** 401 unauthenticated: a missing or wrong API key. */
export class UnauthenticatedError extends ApiError {}
/** 403 permission_denied: the key lacks the scope the route needs. */
export class PermissionDeniedError extends ApiError {}
/** 404 not_found: no such job, queue, schedule, limit or route. */
export class NotFoundError extends ApiError {}
/** 409 conflict: the job's state forbids the action, or a lease was lost. */
export class ConflictError extends ApiError {}
/** 413 payload_too_large. */
export class PayloadTooLargeError extends ApiError {}
/** 415 unsupported_media_type. */
export class UnsupportedMediaTypeError extends ApiError {}
/** 429 rate_limited: retried by the client, then thrown. */
export class RateLimitedError extends ApiError {}
/** 500 internal. */
export class InternalError extends ApiError {}
/** 503 unavailable: Redis (or the history store) cannot be reached. */
export class UnavailableError extends ApiError {}

const byCode: Record<string, new (init: ApiErrorInit) => ApiError> = {
  invalid_argument: InvalidArgumentError,
  unauthenticated: UnauthenticatedError,
  permission_denied: PermissionDeniedError,
  not_found: NotFoundError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  rate_limited: RateLimitedError,
  internal: InternalError,
  unavailable: UnavailableError,
};

const codeByStatus: Record<number, ErrorCode> = {
  400: 'invalid_argument',
  401: 'unauthenticated',
  403: 'permission_denied',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  500: 'internal',
  503: 'unavailable',
};

/** Builds the error of an answer from its error body when it has one
 * ({"error": {"code", "message", "field"}}), else from its status. */
export function apiError(status: number, body: unknown, requestId?: string, retryAfterMs?: number): ApiError {
  let detail: Record<string, unknown> = {};
  if (body && typeof body === 'object' && 'error' in body) {
    const e = (body as { error: unknown }).error;
    if (e && typeof e === 'object') detail = e as Record<string, unknown>;
  }
  const code = typeof detail.code === 'string' && detail.code ? detail.code : (codeByStatus[status] ?? 'unknown');
  const message = typeof detail.message === 'string' && detail.message ? detail.message : `HTTP ${status}`;
  const field = typeof detail.field === 'string' ? detail.field : undefined;
  const Cls = byCode[code] ?? ApiError;
  return new Cls({ status, code, message, field, requestId, retryAfterMs });
}

/** Client.wait ran out of time; job is the job as last read. */
export class WaitTimeoutError extends SundialError {
  readonly job: unknown;
  constructor(id: string, timeoutMs: number, job: { state?: string } | undefined) {
    super(`job ${id} did not end within ${timeoutMs} ms (state ${job?.state ?? 'unknown'})`);
    this.job = job;
  }
}

/** The worker no longer holds the job's lease (reclaimed, cancelled,
 * finished, past its timeout, or not renewed in time): stop working on it.
 * Thrown by JobContext.progress and JobContext.check. */
export class LeaseLostError extends SundialError {}

/** Throw it (or a subclass) from a handler to fail the job without a retry:
 * it goes to the dead letters at once (fail with retry: false). */
export class NoRetry extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NoRetry';
  }
}

const MAX_DELAY_SECONDS = 365 * 24 * 3600;

/** Throw it from a handler to run the job again after `seconds` (0: queued
 * again at once) without spending an attempt: the attempt ends,
 * max_attempts grows by one, and a snoozed event records the reason. For
 * "not yet", not for failures. */
export class Snooze extends Error {
  readonly seconds: number;
  readonly reason: string;
  constructor(seconds: number, reason = '') {
    if (!(seconds >= 0 && seconds <= MAX_DELAY_SECONDS)) throw new RangeError('seconds must be 0..31536000');
    super(reason || `snoozed for ${seconds} s`);
    this.name = 'Snooze';
    this.seconds = seconds;
    this.reason = reason;
  }
}

/** Throw it from a handler to end the job cancelled, not dead, with the
 * message as its reason: the job must not run (its dependents are
 * cancelled too). */
export class Cancel extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'Cancel';
  }
}

/** Throw it from a handler to fail the attempt with its retry after
 * `seconds` instead of the job's backoff (e.g. a 429's Retry-After). The
 * attempt counts: without attempts left the job goes dead. */
export class RetryAfter extends Error {
  readonly seconds: number;
  constructor(seconds: number, message = '') {
    if (!(seconds > 0 && seconds <= MAX_DELAY_SECONDS)) throw new RangeError('seconds must be more than 0 and at most 31536000');
    super(message || `retry after ${seconds} s`);
    this.name = 'RetryAfter';
    this.seconds = seconds;
  }
}

/** Thrown by ctx.sleep and ctx.waitSignal while the job must wait: it ends
 * the handler, and the worker parks the job (POST /v1/jobs/{id}/park)
 * instead of reporting an outcome. The attempt is given back; the job runs
 * again when the sleep ends or the signal arrives, skipping its recorded
 * steps. A catch-all in the handler catches it too: rethrow it there
 * (`if (err instanceof Parked) throw err`). A handler that swallows it is
 * parked all the same, and its durable calls after that throw it again
 * (logged as a warning). */
export class Parked extends Error {
  /** When the job runs again at the latest, in seconds from the park. */
  readonly delaySeconds: number;
  /** The signal it waits for (it runs again as soon as it arrives); undefined for a sleep. */
  readonly signal: string | undefined;
  constructor(delaySeconds: number, signal?: string) {
    super(`parked for ${delaySeconds} s at most, waiting for ${signal ? `the signal ${JSON.stringify(signal)}` : "a sleep's end"}`);
    this.name = 'Parked';
    this.delaySeconds = delaySeconds;
    this.signal = signal;
  }
}

/** The handler's steps no longer match what the job recorded: the code
 * changed under a running job. The attempt fails (and is retried, so that
 * rolling the code back lets the job go on). */
export class NondeterminismError extends SundialError {
  readonly seq: number;
  readonly recorded: string;
  readonly inCode: string;
  constructor(seq: number, recorded: string, inCode: string) {
    super(
      `sundial: step ${seq} is ${JSON.stringify(inCode)} in the handler but the job recorded ${JSON.stringify(recorded)} there: ` +
        `the handler's steps changed under a running job (docs/durable.md, "Versioning")`,
    );
    this.seq = seq;
    this.recorded = recorded;
    this.inCode = inCode;
  }
}

/** A step's final error as recorded: thrown by the attempt that ran the
 * step and by every later one, without running it again. */
export class StepError extends Error {
  readonly step: string;
  /** The step's error message, as recorded. */
  readonly stepMessage: string;
  constructor(step: string, message: string) {
    super(`step ${JSON.stringify(step)} failed: ${message}`);
    this.name = 'StepError';
    this.step = step;
    this.stepMessage = message;
  }
}

/** ctx.waitSignal's timeout passed before the signal arrived. It is
 * recorded: a later attempt gets it too. */
export class SignalTimeoutError extends SundialError {
  readonly signal: string;
  constructor(signal: string) {
    super(`sundial: the wait for the signal ${JSON.stringify(signal)} timed out`);
    this.signal = signal;
  }
}
