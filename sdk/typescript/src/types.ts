// Names for the API's objects. They come from src/openapi.ts, which
// openapi-typescript generates from the served OpenAPI document
// (pkg/httpapi/openapi.json; npm run generate): a test fails when it is not
// up to date, so these types cannot drift from the API.
import type { components, operations } from './openapi.js';

type Schemas = components['schemas'];

/** A job, as every route answers it. */
export type Job = Schemas['Job'];
/** What POST /v1/jobs takes. */
export type JobSpec = Schemas['JobSpec'];
/** A job's state. */
export type JobState = Job['state'];
/** A job's event from the history store. */
export type JobEvent = Schemas['JobEvent'];
/** A page of a job's events: {events, next_cursor}. */
export type JobEventList = Schemas['JobEventList'];
/** A page of jobs: {jobs, next_cursor}. */
export type JobPage = Schemas['JobPage'];
/** What POST /v1/workflows takes: an optional id and the steps, each a
 * name, a job spec and the names of the steps it comes after. */
export type WorkflowRequest = Schemas['WorkflowRequest'];
/** A submitted workflow: its id and each step's job by step name. */
export type Workflow = Schemas['Workflow'];
/** What POST /v1/batches takes: members (job specs), callbacks, open. */
export type BatchCreateRequest = Schemas['BatchCreateRequest'];
/** A batch: total, sealed, counts per state, its callbacks. */
export type Batch = Schemas['Batch'];
/** The answer of a batch submit or add: the batch and the jobs' ids. */
export type BatchSubmitted = Schemas['BatchSubmitted'];
/** What one member of a batch produced: id, queue, state, result, last_error. */
export type BatchResult = Schemas['BatchResult'];
/** A queue's counts. */
export type QueueStats = Schemas['QueueStats'];
/** What POST /v1/queues/{q}/jobs/bulk takes: an action and ids or a filter. */
export type BulkRequest = Schemas['BulkRequest'];
/** What a bulk action did: matched, count, scanned. */
export type BulkResult = Schemas['BulkResult'];
/** A recurring schedule. */
export type Schedule = Schemas['Schedule'];
/** What PUT /v1/schedules/{id} takes (the read-only fields are ignored). */
export type ScheduleSpec = Schedule;
/** A job template of a schedule. */
export type JobTemplate = Schemas['JobTemplate'];
/** A limit of a queue, with its active and throttled counts. */
export type Limit = Schemas['Limit'];
/** What PUT /v1/queues/{q}/limits/{name} takes. */
export type LimitSpec = Schemas['LimitSpec'];
/** A live worker of GET /v1/workers. */
export type WorkerInfo = Schemas['Worker'];
/** A claimed job's lease. */
export type Lease = Schemas['Lease'];
/** A job and its lease, as a claim answers them. */
export type ClaimedJob = Schemas['ClaimedJob'];
/** The fields of an error answer. */
export type ErrorDetail = Schemas['ErrorDetail'];
/** What a durable job recorded (a job's durable field): steps, signals,
 * signal_key, awaiting (docs/durable.md). */
export type Durable = NonNullable<Job['durable']>;
/** One recorded step of a durable job. */
export type DurableStep = NonNullable<Durable['steps']>[number];
/** A signal sent to a durable job. */
export type DurableSignal = NonNullable<Durable['signals']>[number];
/** What POST /v1/jobs/{id}/steps takes (the worker sends it). */
export type StepRequest = operations['recordStep']['requestBody']['content']['application/json'];
/** What POST /v1/jobs/{id}/steps answers: the step as it now stands, and
 * for a wait, the signal when one arrived. */
export type StepAnswer = operations['recordStep']['responses'][200]['content']['application/json'];
/** What POST /v1/jobs/{id}/park takes (the worker sends it). */
export type ParkRequest = operations['parkJob']['requestBody']['content']['application/json'];
/** What a signal became: status delivered, duplicate or (by key) pending, and job_id. */
export type SignalResult = operations['signalJob']['responses'][200]['content']['application/json'];

/** A page of a job's log (GET /v1/jobs/{id}/logs): its lines, how many the
 * job dropped (past its cap), and the seq to read after next. */
export type JobLogPage = operations['jobLogs']['responses'][200]['content']['application/json'];
/** One line of a job's log: seq, at, attempt, level, message, fields. */
export type JobLogLine = JobLogPage['lines'][number];
/** What POST /v1/jobs/{id}/logs takes (the worker sends it). */
export type LogRequest = operations['appendJobLogs']['requestBody']['content']['application/json'];

export type { components, operations, paths } from './openapi.js';

/** The states a job does not leave on its own. */
export const FINAL_STATES: ReadonlySet<JobState> = new Set<JobState>(['succeeded', 'dead', 'cancelled']);
