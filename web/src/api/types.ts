// The API's JSON shapes (docs/api.md, /v1/openapi.json).

export type Priority = "high" | "normal" | "low";
export type JobState = "waiting" | "scheduled" | "queued" | "active" | "succeeded" | "dead" | "cancelled";
export const jobStates: JobState[] = ["waiting", "scheduled", "queued", "active", "succeeded", "dead", "cancelled"];
export const finalStates: ReadonlySet<JobState> = new Set(["succeeded", "dead", "cancelled"]);

export interface Job {
  id: string;
  queue: string;
  type: string;
  payload?: unknown;
  priority: Priority;
  state: JobState;
  attempt: number;
  max_attempts: number;
  timeout_seconds: number;
  backoff: { base_seconds: number; max_seconds: number };
  run_at: string;
  depends_on?: string[];
  idempotency_key?: string;
  created_at: string;
  started_at?: string;
  finished_at?: string;
  worker_id?: string;
  result?: unknown;
  last_error?: string;
  /** What the running attempt last reported (active jobs only). */
  progress?: { percent: number; message?: string; at: string };
  /** Fairness group (a tenant): within one priority of a queue, groups take turns. */
  group?: string;
  /** The batch the job is a member (or a callback) of. */
  batch?: string;
  /** W3C trace context the handler's span continues. */
  traceparent?: string;
  /** The limit a queued job waits for (docs/flow-control.md). */
  throttled_by?: string;
  /** Why a job that has not ended does not run now (absent: nothing holds it). */
  held_back?: { reason: HeldReason; message: string };
  /** What a durable job recorded (docs/durable.md): absent for a job that recorded nothing. */
  durable?: Durable;
  /** A job not started by then ends dead ("expired: …"). */
  start_by?: string;
  /** No attempt starts after it; a running one is stopped at it; no retry past it. */
  deadline?: string;
  /** The debounce key whose submits update this job while it has not started. */
  debounce_key?: string;
  /** The queue's jobs of one key run one at a time, in submit order. */
  sequence?: { key: string; on_failure?: "continue" | "cancel" };
  tags?: string[];
  /** The log lines the job keeps, and how many older ones it dropped (past its cap). */
  logs?: { lines: number; dropped: number };
  /** On a submit's answer only: an earlier pending job of the debounce key took the submit. */
  debounced?: boolean;
}

export type LogLevel = "debug" | "info" | "warn" | "error";

/** One line a job's handler logged (GET /v1/jobs/{id}/logs). */
export interface JobLogLine {
  seq: number;
  at: string;
  attempt: number;
  level: LogLevel;
  message: string;
  fields?: Record<string, string>;
}

/** A page of a job's log: lines after a seq, how many the job dropped, and the seq to read after next. */
export interface JobLogPage {
  lines: JobLogLine[];
  dropped: number;
  next_after: number;
}

export type HeldReason = "dependencies" | "scheduled" | "limit" | "no_handler" | "paused" | "worker_gone" | "sleeping" | "awaiting_signal";

/** A recorded step's status: ran (ok), failed for good (err), a wait begun (wait), a wait past its deadline (timeout). */
export type StepStatus = "ok" | "err" | "wait" | "timeout";

/** One recorded step of a durable job; waits are steps named "sleep" and "signal:<name>". */
export interface DurableStep {
  seq: number;
  name: string;
  status: StepStatus;
  started_at: string;
  ended_at?: string;
  result?: unknown;
  error?: string;
  /** A wait's end without its signal (a sleep: its end). */
  deadline?: string;
}

/** A signal sent to a durable job: a named JSON value. */
export interface DurableSignal {
  name: string;
  at: string;
  value?: unknown;
}

/** What a parked durable job waits for: a sleep's end, or a signal until a deadline. */
export interface Awaiting {
  kind: "sleep" | "signal";
  signal?: string;
  until: string;
}

export interface Durable {
  steps?: DurableStep[];
  signals?: DurableSignal[];
  /** The key callers may send its signals to (POST /v1/signals with the queue and the key). */
  signal_key?: string;
  awaiting?: Awaiting;
}

/** POST /v1/jobs/{id}/signals/{signal}: delivered, or duplicate (sent before with the same idempotency key). */
export interface SignalResult {
  status: "delivered" | "duplicate";
  job_id?: string;
}

export interface JobPage {
  jobs: Job[];
  next_cursor: string;
}

/** The states GET /v1/queues/{q}/jobs lists from Redis; the others are in the history store only. */
export type LiveState = "queued" | "scheduled" | "waiting" | "active" | "dead";
export const liveStates: LiveState[] = ["queued", "scheduled", "waiting", "active", "dead"];

export interface LiveJobFilter {
  state?: LiveState;
  type?: string;
  priority?: Priority;
  tag?: string;
}

export type BulkAction = "retry" | "cancel" | "delete" | "move";

/** BulkFilter selects jobs by what they are; {} is every dead job of the queue. */
export interface BulkFilter {
  state?: LiveState;
  type?: string;
  /** Only jobs with this tag. */
  tag?: string;
  error_contains?: string;
  /** RFC 3339: dead jobs that died at or after it; other states, created at or after it. */
  since?: string;
}

/** POST /v1/queues/{q}/jobs/bulk: ids or a filter, never both. */
export interface BulkRequest {
  action: BulkAction;
  ids?: string[];
  filter?: BulkFilter;
  to_queue?: string;
}

/** A bulk action's answer, and its progress on the stream (done false). */
export interface BulkResult {
  id: string;
  action: BulkAction;
  queue: string;
  to_queue?: string;
  matched: number;
  count: number;
  scanned: number;
  done: boolean;
}

export interface JobEvent {
  type: string;
  at: string;
  state: JobState;
  attempt: number;
  worker_id: string;
  error: string;
  /** step: "<seq> <name> <status>"; parked: what it waits for; signal: the signal's name; progress: its message. */
  message?: string;
  /** Who caused a cancelled, retried or signal event through the API (from the audit log). */
  actor?: { kind: string; id?: string; name?: string };
}

export interface QueueStats {
  name: string;
  paused: boolean;
  queued: Record<Priority, number>;
  scheduled: number;
  /** Parked durable jobs, counted in scheduled too: asleep, and waiting for a signal. */
  sleeping?: number;
  awaiting?: number;
  active: number;
  waiting: number;
  dead: number;
  submitted_total?: number;
  succeeded_total: number;
  failed_total: number;
  processed_per_second: number;
  /** Queued jobs a limit holds back (not counted in queued). */
  throttled?: number;
  /** Queued jobs waiting for a worker that handles their type (not counted in queued). */
  unhandled?: number;
  limits?: LimitStatus[];
}

/** A limit's cap on starts: limit per any window of period_seconds. */
export interface LimitRate {
  limit: number;
  period_seconds: number;
}

/** Limit is what PUT /v1/queues/{q}/limits/{name} accepts (docs/flow-control.md). */
export interface Limit {
  name?: string;
  /** Job types it covers; absent: every type of the queue. */
  types?: string[];
  /** A top-level payload field whose every value gets its own caps. */
  key?: string;
  /** At most this many covered jobs active at once (0 or absent: none). */
  concurrency?: number;
  rate?: LimitRate;
}

/** LimitStatus is a limit with what it holds now. */
export interface LimitStatus extends Limit {
  name: string;
  /** Running jobs holding a concurrency slot of it. */
  active: number;
  /** Queued jobs it holds back. */
  throttled: number;
}

export interface Worker {
  id: string;
  hostname: string;
  pid: number;
  queues: string[];
  concurrency: number;
  active_jobs: string[] | null;
  started_at: string;
  last_seen_at: string;
  processed: number;
  failed: number;
}

/** A process registered as a reader of the storage format (GET /v1/storage). */
export interface Reader {
  id: string;
  /** api, worker or poller. */
  role: string;
  hostname: string;
  pid: number;
  reads: number[];
  writes: number;
  started_at: string;
  expires_at: string;
}

/** GET /v1/storage: the storage format Redis holds and its live readers. */
export interface Storage {
  /** The format marker's value ("1" until the processes move it to a newer one once no live reader lacks it). */
  format: string;
  /** When the marker's format became, or becomes, writable; absent while it never moved. */
  writable_at?: string;
  /** The formats this API's release reads, the newest it writes once every process reads it, and what it writes now. */
  reads: number[];
  newest: number;
  writes: number;
  readers: Reader[];
  /** Live workers without a registration: a release from before the storage format. */
  unregistered_workers: string[];
  /** Live readers that lack the newest format: the marker does not move while there are any. */
  held_back_by: string[];
}

export interface JobTemplate {
  queue?: string;
  type: string;
  payload?: unknown;
  priority?: Priority;
  max_attempts?: number;
  timeout_seconds?: number;
}

export type Misfire = "skip" | "run_once" | "run_all";

export interface Schedule {
  id: string;
  cron?: string;
  every_seconds?: number;
  timezone?: string;
  job: JobTemplate;
  enabled?: boolean;
  misfire?: Misfire;
  next_run_at?: string | null;
  last_run_at?: string | null;
  last_job_id?: string;
  upcoming?: string[];
  created_at?: string;
  updated_at?: string;
}

export interface StreamEvent {
  id: string;
  job_id: string;
  queue: string;
  type: string;
  event: string;
  state: JobState;
  at: string;
  attempt: number;
  error: string;
  worker_id: string;
  /** step, parked, signal and progress events: see JobEvent.message. */
  message?: string;
}

export interface StatsMessage {
  kind: "stats";
  queues: QueueStats[];
  workers: number;
  at: string;
}

export type StreamMessage = { kind: "event"; event: StreamEvent } | StatsMessage | { kind: "bulk"; bulk: BulkResult };

export interface MinuteCount {
  minute: string;
  succeeded: number;
  failed: number;
  dead: number;
}

export interface Throughput {
  window: string;
  queues: { queue: string; minutes: MinuteCount[] }[];
}

// OutboxRelay is one transactional outbox's relay (GET /v1/outbox).
export interface OutboxRelay {
  store: string;
  relay_id: string;
  lag_seconds: number;
  relayed: number;
  at: string;
  running: boolean;
}

export interface HistoryBacklog {
  at: string;
  events: number;
  lag_seconds: number;
  queues: { queue: string; events: number; lag_seconds: number }[];
}

export interface Readiness {
  status: "ok" | "unavailable";
  checks: Record<string, { status: string; detail?: string }>;
}

/** A job of a dependency graph (GET /v1/jobs/{id}/graph). */
export interface GraphNode {
  id: string;
  queue?: string;
  type?: string;
  state?: JobState;
  attempt: number;
  /** a workflow step's is wf:<workflow>:<step> */
  idempotency_key?: string;
  created_at?: string;
  finished_at?: string;
  /** neither Redis nor the history store knows it */
  missing?: boolean;
}

/** to waits for (depends on) from. */
export interface GraphEdge {
  from: string;
  to: string;
}

export interface JobGraph {
  root: string;
  nodes: GraphNode[];
  edges: GraphEdge[];
  truncated: boolean;
}

/** A batch (GET /v1/batches/{id}): its members by how they ended, its callbacks. */
export interface Batch {
  id: string;
  created_at: string;
  total: number;
  /** no member can be added; the callbacks wait for the seal */
  sealed: boolean;
  cancelled_at?: string;
  counts: { pending: number; succeeded: number; dead: number; cancelled: number };
  on_success?: BatchCallback;
  on_complete?: BatchCallback;
}

export interface BatchCallback {
  state: "pending" | "due" | "fired";
  job_id?: string;
}
