// Sundial's TypeScript SDK: a client of the REST API and a worker that runs
// jobs over the HTTP worker protocol. Node 18+, the global fetch, no
// runtime dependencies.
export { Client, type CallOptions, type ClientOptions, type EventsQuery, type LogsQuery, type SearchFilters, type SearchQuery, type WaitOptions } from './client.js';
export {
  ApiError,
  apiError,
  Cancel,
  ConflictError,
  InternalError,
  InvalidArgumentError,
  LeaseLostError,
  NondeterminismError,
  NoRetry,
  Parked,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitedError,
  RetryAfter,
  SignalTimeoutError,
  Snooze,
  StepError,
  SundialError,
  TransportError,
  UnauthenticatedError,
  UnavailableError,
  UnsupportedMediaTypeError,
  WaitTimeoutError,
  type ApiErrorInit,
  type ErrorCode,
} from './errors.js';
export {
  ENC_FIELD,
  ENC_TEXT_PREFIX,
  ENC_VERSION,
  type Encrypted,
  EncryptionError,
  isEncrypted,
  Keyring,
  keyIdOf,
  MissingKeyError,
  type Sealable,
  sealSpec,
  validKeyId,
} from './encryption.js';
export { MAX_STEP_BYTES, type StepOptions, type WaitSignalOptions } from './durable.js';
export { LOG_FLUSH_MS, MAX_LOG_FIELDS, MAX_LOG_LINES_PER_CALL, MAX_LOG_MESSAGE_BYTES, type JobLogger, type LogFields, type LogLevel } from './joblog.js';
export { DEFAULT_URL, parseRetryAfter, Transport, type Answer, type RequestOptions, type TransportOptions } from './transport.js';
export * from './types.js';
export { consoleLogger, Worker, type Handler, type JobContext, type Logger, type WorkerOptions } from './worker.js';
