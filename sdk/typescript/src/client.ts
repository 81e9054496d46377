// The client: jobs, queues, schedules and limits over the REST API
// (docs/api.md).
import { type Keyring, sealSpec } from './encryption.js';
import { WaitTimeoutError } from './errors.js';
import { sleep, Transport, type TransportOptions } from './transport.js';
import {
  FINAL_STATES,
  type BulkRequest,
  type BulkResult,
  type Job,
  type JobEvent,
  type JobEventList,
  type JobLogPage,
  type JobLogLine,
  type JobPage,
  type JobSpec,
  type Limit,
  type LimitSpec,
  type QueueStats,
  type Schedule,
  type ScheduleSpec,
  type WorkerInfo,
  type Workflow,
  type WorkflowRequest,
  type Batch,
  type BatchCreateRequest,
  type BatchResult,
  type BatchSubmitted,
  type SignalResult,
} from './types.js';
import type { operations } from './openapi.js';

/** Options of one call. */
export interface CallOptions {
  /** Aborts the call and its retries. */
  signal?: AbortSignal;
}

/** What Client.wait takes. */
export interface WaitOptions extends CallOptions {
  /** How long to wait for a final state, in ms (default 60 000). */
  timeoutMs?: number;
  /** The first interval between reads, in ms (default 50), growing to maxPollMs. */
  pollMs?: number;
  /** The longest interval between reads, in ms (default 1000). */
  maxPollMs?: number;
}

/** A page of a job's events (GET /v1/jobs/{id}/events), from the OpenAPI document. */
export type EventsQuery = NonNullable<operations['jobEvents']['parameters']['query']>;

/** The filters of the history search (GET /v1/jobs), from the OpenAPI document. */
export type SearchQuery = NonNullable<operations['searchJobs']['parameters']['query']>;

/** The history search's filters: tag (only jobs with it), and payload:
 * {field: value} for the payload.<field>=<value> parameters (a top-level
 * payload field's value, compared as text). The API takes both; the
 * OpenAPI document does not list them yet. */
export type SearchFilters = SearchQuery & { tag?: string; payload?: Record<string, unknown> };

/** What Client.logsPage takes: the lines after the line numbered after, at most limit (1..1000); from the OpenAPI document. */
export type LogsQuery = NonNullable<operations['jobLogs']['parameters']['query']>;

function searchParams(query: SearchFilters): Record<string, string | number | boolean | readonly string[] | undefined | null> {
  const { payload, ...rest } = query;
  const out: Record<string, string | number | boolean | readonly string[] | undefined | null> = { ...(rest as Record<string, string | number | undefined>) };
  for (const [k, v] of Object.entries(payload ?? {})) out[`payload.${k}`] = typeof v === 'string' ? v : JSON.stringify(v);
  return out;
}

/** The filters of a queue's live jobs (GET /v1/queues/{q}/jobs), from the OpenAPI document. */
export type QueueJobsQuery = NonNullable<operations['listQueueJobs']['parameters']['query']>;

const seg = (s: string): string => encodeURIComponent(s);

/** A Client's options: the transport's, and a keyring that encrypts every
 * payload submitted (batch callbacks' payloads stay in the clear: the API
 * adds the batch id to them). */
export interface ClientOptions extends TransportOptions {
  keyring?: Keyring;
}

/** A client of the Sundial API. Every error answer rejects with a subclass
 * of ApiError (status, code, field, requestId); 429 and 503 are retried
 * with backoff first, honouring Retry-After. */
export class Client {
  readonly transport: Transport;
  /** Encrypts every payload submitted; decrypt() reads encrypted jobs. */
  readonly keyring: Keyring | undefined;

  constructor(opts: ClientOptions = {}) {
    this.transport = new Transport(opts);
    this.keyring = opts.keyring;
  }

  /** A copy of a job (as get() or wait() resolve it) with its encrypted
   * payload, result and last error decrypted with the client's keyring
   * (docs/payloads.md, "Encryption"). MissingKeyError names a key id the
   * keyring lacks. */
  decrypt<J extends { payload?: unknown; result?: unknown; last_error?: unknown }>(job: J): J {
    if (!this.keyring) throw new TypeError('this client has no keyring (new Client({ keyring: Keyring.fromEnv() }))');
    return this.keyring.decryptJob(job);
  }

  get url(): string {
    return this.transport.url;
  }

  // Jobs

  /** Submits one job and resolves with it (with an idempotency key seen in
   * the queue within 24 h: the earlier job). A submit with an idempotency
   * key is safe to repeat, so it is also sent again after a broken
   * connection.
   *
   * The job's options (docs/api.md): start_by (an RFC 3339 time) or
   * expires_in_seconds: a job not started by then ends dead ("expired:
   * ..."); deadline or deadline_in_seconds: no attempt starts after it, a
   * running one is stopped at it, no retry past it; debounce {key,
   * window_seconds, mode: replace | extend, max_wait_seconds}: submits of the
   * key within the window update one pending job, answered with debounced:
   * true; sequence {key, on_failure: continue | cancel}: the queue's jobs of
   * one key run one at a time, in submit order; tags: up to 10, for the
   * filters of the lists, the dead letters, bulk actions and the history
   * search. */
  async submit(spec: JobSpec, opts: CallOptions = {}): Promise<Job> {
    const idempotent = Boolean(spec.idempotency_key);
    return (await this.transport.request<Job>('POST', '/v1/jobs', { body: sealSpec(this.keyring, spec), idempotent, ...opts })).body;
  }

  /** Submits up to 1000 jobs of one queue at once, all or nothing; "#n" in
   * depends_on names job n of the batch. Resolves with the jobs in order. */
  async submitBatch(specs: readonly JobSpec[], opts: CallOptions = {}): Promise<Job[]> {
    const idempotent = specs.every((s) => Boolean(s.idempotency_key));
    const res = await this.transport.request<{ jobs: Job[] }>('POST', '/v1/jobs/batch', { body: { jobs: specs.map((s) => sealSpec(this.keyring, s)) }, idempotent, ...opts });
    return res.body.jobs;
  }

  /** Submits a workflow (docs/workflows.md): a DAG of named jobs in any
   * queues, checked whole before anything is stored (InvalidArgumentError
   * naming steps[i].after[j], steps[i].job.x…), then stored in dependency
   * order. Resolves with each step's job by name. With an id it is safe to
   * repeat (each step's idempotency key is "wf:<id>:<name>": a repeat
   * stores only what is missing), so it is then also sent again after a
   * broken connection. */
  async submitWorkflow(workflow: WorkflowRequest, opts: CallOptions = {}): Promise<Workflow> {
    const idempotent = Boolean(workflow.id);
    const body = { ...workflow, steps: workflow.steps.map((st) => ({ ...st, job: sealSpec(this.keyring, st.job) })) };
    return (await this.transport.request<Workflow>('POST', '/v1/workflows', { body, idempotent, ...opts })).body;
  }

  // Batches (docs/workflows.md, "Batches")

  /** Submits a batch: jobs in any queues (without depends_on and
   * idempotency_key; up to 10,000 a call) and callbacks submitted once,
   * when every member succeeded (on_success) or ended (on_complete), whose
   * payload (an object or none) gets "batch", the batch's id. Sealed unless
   * open. ConflictError when a batch of that id exists. */
  async createBatch(batch: BatchCreateRequest, opts: CallOptions = {}): Promise<BatchSubmitted> {
    const body = batch.jobs ? { ...batch, jobs: batch.jobs.map((j) => sealSpec(this.keyring, j)) } : batch;
    return (await this.transport.request<BatchSubmitted>('POST', '/v1/batches', { body, ...opts })).body;
  }

  /** Adds jobs to an open batch, and seals it with seal (ConflictError once sealed). */
  async addToBatch(id: string, jobs: JobSpec[], seal = false, opts: CallOptions = {}): Promise<BatchSubmitted> {
    const sealed = jobs.map((j) => sealSpec(this.keyring, j));
    const body = seal ? { jobs: sealed, seal } : { jobs: sealed };
    return (await this.transport.request<BatchSubmitted>('POST', `/v1/batches/${seg(id)}/jobs`, { body, ...opts })).body;
  }

  /** A batch: total, sealed, counts, each callback's state and job_id. */
  async getBatch(id: string, opts: CallOptions = {}): Promise<Batch> {
    return (await this.transport.request<Batch>('GET', `/v1/batches/${seg(id)}`, opts)).body;
  }

  /** One page of a batch's members, in the order added. */
  async batchJobs(id: string, page: { limit?: number; cursor?: string } = {}, opts: CallOptions = {}): Promise<JobPage> {
    return (await this.transport.request<JobPage>('GET', `/v1/batches/${seg(id)}/jobs`, { query: { ...page }, ...opts })).body;
  }

  /** Every member's result (fan-in), in the order added, page after page. */
  async *batchResults(id: string, opts: CallOptions = {}): AsyncGenerator<BatchResult, void, undefined> {
    let cursor: string | undefined;
    do {
      const query = cursor ? { limit: 500, cursor } : { limit: 500 };
      const res = await this.transport.request<{ results: BatchResult[]; next_cursor: string }>('GET', `/v1/batches/${seg(id)}/results`, { query, ...opts });
      yield* res.body.results;
      cursor = res.body.next_cursor || undefined;
    } while (cursor);
  }

  /** Seals the batch and cancels its members that have not ended; resolves with how many. */
  async cancelBatch(id: string, opts: CallOptions = {}): Promise<number> {
    return (await this.transport.request<{ cancelled: number }>('POST', `/v1/batches/${seg(id)}/cancel`, { idempotent: true, ...opts })).body.cancelled;
  }

  /** Queues the batch's dead and cancelled members again; resolves with how many. */
  async retryBatch(id: string, opts: CallOptions = {}): Promise<number> {
    return (await this.transport.request<{ retried: number }>('POST', `/v1/batches/${seg(id)}/retry`, { idempotent: true, ...opts })).body.retried;
  }

  /** The job as it is now (NotFoundError when unknown). */
  async get(id: string, opts: CallOptions = {}): Promise<Job> {
    return (await this.transport.request<Job>('GET', `/v1/jobs/${seg(id)}`, opts)).body;
  }

  /** Reads the job until it is in a final state (succeeded, dead,
   * cancelled) and resolves with it; rejects with WaitTimeoutError after
   * timeoutMs. */
  async wait(id: string, opts: WaitOptions = {}): Promise<Job> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    let poll = opts.pollMs ?? 50;
    const maxPoll = opts.maxPollMs ?? 1000;
    for (;;) {
      const job = await this.get(id, opts);
      if (FINAL_STATES.has(job.state)) return job;
      const left = deadline - Date.now();
      if (left <= 0) throw new WaitTimeoutError(id, timeoutMs, job);
      await sleep(Math.min(poll, left), opts.signal);
      poll = Math.min(maxPoll, poll * 1.5);
    }
  }

  /** One page of the job's log lines (ctx.log in a handler), oldest first,
   * those after the line numbered after: {lines, dropped, next_after}. A job
   * keeps its last lines up to a cap; dropped counts those it let go. */
  async logsPage(id: string, query: LogsQuery = {}, opts: CallOptions = {}): Promise<JobLogPage> {
    return (await this.transport.request<JobLogPage>('GET', `/v1/jobs/${seg(id)}/logs`, { query: { ...query }, ...opts })).body;
  }

  /** Every log line of the job kept now (after the line numbered after), page after page. */
  async logs(id: string, after = 0, opts: CallOptions = {}): Promise<JobLogLine[]> {
    const out: JobLogLine[] = [];
    for (;;) {
      const page = await this.logsPage(id, after > 0 ? { after, limit: 1000 } : { limit: 1000 }, opts);
      out.push(...page.lines);
      const next = page.next_after ?? 0;
      if (page.lines.length === 0 || next <= after) return out;
      after = next;
    }
  }

  /** Cancels a job that has not ended (an active one is stopped by its
   * worker); ConflictError in a final state. */
  async cancel(id: string, opts: CallOptions = {}): Promise<Job> {
    return (await this.transport.request<Job>('POST', `/v1/jobs/${seg(id)}/cancel`, opts)).body;
  }

  /** Queues a dead or cancelled job again, attempt 0; else ConflictError. */
  async retry(id: string, opts: CallOptions = {}): Promise<Job> {
    return (await this.transport.request<Job>('POST', `/v1/jobs/${seg(id)}/retry`, opts)).body;
  }

  // Signals to durable jobs (docs/durable.md)

  /** Sends the signal name (a JSON value) to a durable job, for its
   * ctx.waitSignal(name): a job parked waiting for it runs at once; one sent
   * before the wait began is kept. Resolves with {status: delivered |
   * duplicate, job_id}. A job takes one signal of each name: sent again with
   * the same idempotencyKey it answers duplicate (so it is then also sent
   * again after a broken connection), otherwise ConflictError; ConflictError
   * too for a job that ended, NotFoundError for an unknown one. */
  async signal(id: string, name: string, value?: unknown, idempotencyKey?: string, opts: CallOptions = {}): Promise<SignalResult> {
    const body: Record<string, unknown> = {};
    if (value !== undefined) body.value = value;
    if (idempotencyKey !== undefined) body.idempotency_key = idempotencyKey;
    const idempotent = idempotencyKey !== undefined;
    return (await this.transport.request<SignalResult>('POST', `/v1/jobs/${seg(id)}/signals/${seg(name)}`, { body, idempotent, ...opts })).body;
  }

  /** Sends the signal name to the job of queue that waits (or waited) with
   * key (ctx.waitSignal(name, {key})): an order number, say. Resolves with
   * {status: delivered | duplicate, job_id}, or {status: pending} (202)
   * when no job chose the key yet: the signal is kept for the one that
   * will. ConflictError as for signal. */
  async signalKey(queue: string, key: string, name: string, value?: unknown, idempotencyKey?: string, opts: CallOptions = {}): Promise<SignalResult> {
    const body: Record<string, unknown> = { queue, key, name };
    if (value !== undefined) body.value = value;
    if (idempotencyKey !== undefined) body.idempotency_key = idempotencyKey;
    const idempotent = idempotencyKey !== undefined;
    return (await this.transport.request<SignalResult>('POST', '/v1/signals', { body, idempotent, ...opts })).body;
  }

  /** One page of the job's events from the history store, oldest first
   * (UnavailableError without one). */
  async eventsPage(id: string, page: EventsQuery = {}, opts: CallOptions = {}): Promise<JobEventList> {
    return (await this.transport.request<JobEventList>('GET', `/v1/jobs/${seg(id)}/events`, { query: { ...page }, ...opts })).body;
  }

  /** Every event of the job, oldest first, page after page. */
  async events(id: string, opts: CallOptions = {}): Promise<JobEvent[]> {
    const out: JobEvent[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.eventsPage(id, cursor ? { limit: 500, cursor } : { limit: 500 }, opts);
      out.push(...page.events);
      cursor = page.next_cursor || undefined;
    } while (cursor);
    return out;
  }

  /** One page of the history search, newest first; tag keeps the jobs with
   * that tag, payload ({field: value}) those whose payload's top-level field
   * has that value. Needs the history store (UnavailableError without one). */
  async search(query: SearchFilters = {}, opts: CallOptions = {}): Promise<JobPage> {
    return (await this.transport.request<JobPage>('GET', '/v1/jobs', { query: searchParams(query), ...opts })).body;
  }

  /** Every job the search finds, page after page. */
  async *searchAll(query: Omit<SearchFilters, 'cursor'> = {}, opts: CallOptions = {}): AsyncGenerator<Job, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: JobPage = await this.search(cursor ? { ...query, cursor } : query, opts);
      yield* page.jobs;
      cursor = page.next_cursor || undefined;
    } while (cursor);
  }

  // Audit log and session

  /** Who this client is to the API: its actor (an API key by id), scopes and
   * the queue patterns it is limited to ("*": every queue). */
  async session(opts: CallOptions = {}): Promise<operations['session']['responses'][200]['content']['application/json']> {
    return (await this.transport.request<operations['session']['responses'][200]['content']['application/json']>('GET', '/v1/session', opts)).body;
  }

  /** One page of the audit log, newest first (admin scope; UnavailableError
   * without a history store). */
  async audit(query: { actor?: string; action?: string; target?: string; since?: string; until?: string; limit?: number; cursor?: string } = {},
    opts: CallOptions = {}): Promise<operations['listAudit']['responses'][200]['content']['application/json']> {
    const q: Record<string, string> = {};
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q[k] = String(v);
    return (await this.transport.request<operations['listAudit']['responses'][200]['content']['application/json']>('GET', '/v1/audit', { query: q, ...opts })).body;
  }

  // Queues

  /** Every known queue's counts, sorted by name. */
  async queues(opts: CallOptions = {}): Promise<QueueStats[]> {
    return (await this.transport.request<{ queues: QueueStats[] }>('GET', '/v1/queues', opts)).body.queues;
  }

  /** One queue's counts (NotFoundError when unknown). */
  async queue(name: string, opts: CallOptions = {}): Promise<QueueStats> {
    return (await this.transport.request<QueueStats>('GET', `/v1/queues/${seg(name)}`, opts)).body;
  }

  /** Pauses a queue (creating it when unknown); resolves with its counts. */
  async pause(name: string, opts: CallOptions = {}): Promise<QueueStats> {
    return (await this.transport.request<QueueStats>('POST', `/v1/queues/${seg(name)}/pause`, { idempotent: true, ...opts })).body;
  }

  /** Resumes a paused queue (NotFoundError when unknown). */
  async resume(name: string, opts: CallOptions = {}): Promise<QueueStats> {
    return (await this.transport.request<QueueStats>('POST', `/v1/queues/${seg(name)}/resume`, { idempotent: true, ...opts })).body;
  }

  /** One page of a queue's dead jobs, newest first (only those with tag when given). */
  async dead(name: string, page: { limit?: number; cursor?: string; tag?: string } = {}, opts: CallOptions = {}): Promise<JobPage> {
    return (await this.transport.request<JobPage>('GET', `/v1/queues/${seg(name)}/dead`, { query: { ...page }, ...opts })).body;
  }

  /** Queues a queue's dead jobs again (those named, or all); resolves with how many. */
  async retryDead(name: string, ids?: readonly string[], opts: CallOptions = {}): Promise<number> {
    const body = ids ? { ids } : undefined;
    return (await this.transport.request<{ retried: number }>('POST', `/v1/queues/${seg(name)}/dead/retry`, { body, ...opts })).body.retried;
  }

  /** Deletes a queue's dead jobs (those named, or all); resolves with how many. */
  async purgeDead(name: string, ids?: readonly string[], opts: CallOptions = {}): Promise<number> {
    const body = ids ? { ids } : undefined;
    return (await this.transport.request<{ deleted: number }>('DELETE', `/v1/queues/${seg(name)}/dead`, { body, ...opts })).body.deleted;
  }

  /** One page of a queue's live jobs in one state (queued by default),
   * read from Redis. With a type, priority or tag filter a page may be short,
   * even empty, while next_cursor says there is more: follow it. */
  async queueJobs(name: string, query: QueueJobsQuery = {}, opts: CallOptions = {}): Promise<JobPage> {
    return (await this.transport.request<JobPage>('GET', `/v1/queues/${seg(name)}/jobs`, { query: { ...query }, ...opts })).body;
  }

  /** Retries, cancels, deletes or moves a selection of a queue's jobs (ids,
   * or a filter) on the server, in chunks; resolves with the counts. Safe
   * to send again after an interruption (docs/api.md, "Bulk actions"). */
  async bulk(name: string, request: BulkRequest, opts: CallOptions = {}): Promise<BulkResult> {
    return (await this.transport.request<BulkResult>('POST', `/v1/queues/${seg(name)}/jobs/bulk`, { body: request, idempotent: true, ...opts })).body;
  }

  // Schedules

  /** Creates or replaces a schedule; resolves with it. */
  async putSchedule(id: string, schedule: ScheduleSpec, opts: CallOptions = {}): Promise<Schedule> {
    return (await this.transport.request<Schedule>('PUT', `/v1/schedules/${seg(id)}`, { body: schedule, ...opts })).body;
  }

  async getSchedule(id: string, opts: CallOptions = {}): Promise<Schedule> {
    return (await this.transport.request<Schedule>('GET', `/v1/schedules/${seg(id)}`, opts)).body;
  }

  /** Every schedule, ordered by id (only those whose jobs go to queue when given). */
  async schedules(filter: { queue?: string } = {}, opts: CallOptions = {}): Promise<Schedule[]> {
    const res = await this.transport.request<{ schedules: Schedule[] }>('GET', '/v1/schedules', { query: { ...filter }, ...opts });
    return res.body.schedules;
  }

  /** Changes a schedule with a JSON merge patch (null removes a member). */
  async patchSchedule(id: string, patch: Record<string, unknown>, opts: CallOptions = {}): Promise<Schedule> {
    return (await this.transport.request<Schedule>('PATCH', `/v1/schedules/${seg(id)}`, { body: patch, ...opts })).body;
  }

  async deleteSchedule(id: string, opts: CallOptions = {}): Promise<void> {
    await this.transport.request<undefined>('DELETE', `/v1/schedules/${seg(id)}`, opts);
  }

  /** Submits the schedule's job now; resolves with the job. */
  async triggerSchedule(id: string, opts: CallOptions = {}): Promise<Job> {
    return (await this.transport.request<Job>('POST', `/v1/schedules/${seg(id)}/trigger`, opts)).body;
  }

  /** The next five fire times of a timing, without storing anything. */
  async previewSchedule(timing: { cron?: string; timezone?: string; every_seconds?: number }, opts: CallOptions = {}): Promise<string[]> {
    const res = await this.transport.request<{ upcoming: string[] }>('POST', '/v1/schedules/preview', { body: timing, idempotent: true, ...opts });
    return res.body.upcoming;
  }

  // Limits

  /** Creates or replaces a limit of a queue; resolves with it. */
  async setLimit(queue: string, name: string, limit: LimitSpec, opts: CallOptions = {}): Promise<Limit> {
    return (await this.transport.request<Limit>('PUT', `/v1/queues/${seg(queue)}/limits/${seg(name)}`, { body: limit, ...opts })).body;
  }

  async getLimit(queue: string, name: string, opts: CallOptions = {}): Promise<Limit> {
    return (await this.transport.request<Limit>('GET', `/v1/queues/${seg(queue)}/limits/${seg(name)}`, opts)).body;
  }

  async limits(queue: string, opts: CallOptions = {}): Promise<Limit[]> {
    return (await this.transport.request<{ limits: Limit[] }>('GET', `/v1/queues/${seg(queue)}/limits`, opts)).body.limits;
  }

  async deleteLimit(queue: string, name: string, opts: CallOptions = {}): Promise<void> {
    await this.transport.request<undefined>('DELETE', `/v1/queues/${seg(queue)}/limits/${seg(name)}`, opts);
  }

  // Workers

  /** The live workers, Go and HTTP. */
  async workers(opts: CallOptions = {}): Promise<WorkerInfo[]> {
    return (await this.transport.request<{ workers: WorkerInfo[] }>('GET', '/v1/workers', opts)).body.workers;
  }
}
