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
}

export interface JobPage {
  jobs: Job[];
  next_cursor: string;
}

export interface JobEvent {
  type: string;
  at: string;
  state: JobState;
  attempt: number;
  worker_id: string;
  error: string;
}

export interface QueueStats {
  name: string;
  paused: boolean;
  queued: Record<Priority, number>;
  scheduled: number;
  active: number;
  waiting: number;
  dead: number;
  submitted_total?: number;
  succeeded_total: number;
  failed_total: number;
  processed_per_second: number;
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
}

export interface StatsMessage {
  kind: "stats";
  queues: QueueStats[];
  workers: number;
  at: string;
}

export type StreamMessage = { kind: "event"; event: StreamEvent } | StatsMessage;

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
