// A small fetch wrapper: the API key from session storage, the API's error
// shape turned into ApiError with a message a person can read.

import type {
  Batch, BulkRequest, BulkResult, HistoryBacklog, Job, JobEvent, JobGraph, JobLogPage, JobPage, Limit, LimitStatus, LiveJobFilter, QueueStats, Readiness, Schedule,
  OutboxRelay, SignalResult, Storage, Throughput, Worker,
} from "./types";

const keyStorage = "sundial.apiKey";

export function getApiKey(): string {
  try {
    return sessionStorage.getItem(keyStorage) ?? "";
  } catch {
    return "";
  }
}

export function setApiKey(key: string) {
  if (key) sessionStorage.setItem(keyStorage, key);
  else sessionStorage.removeItem(keyStorage);
  keyListeners.forEach((l) => l());
}

const keyListeners = new Set<() => void>();
export function onApiKeyChange(l: () => void): () => void {
  keyListeners.add(l);
  return () => keyListeners.delete(l);
}

/** ApiError is an answer in the API's error shape, or a network failure (status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field?: string;
  constructor(status: number, code: string, message: string, field?: string) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** describeError says what went wrong in words, for banners and toasts. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    switch (err.code) {
      case "network":
        return "The API cannot be reached. Is it running?";
      case "unauthenticated":
        return "The API needs a key: enter it with the key button at the top.";
      case "unavailable":
        return `The service is unavailable: ${err.message}. This usually means Redis or the history store is down.`;
      case "rate_limited":
        return "Too many requests: the API's rate limit was reached. Try again in a moment.";
      default:
        return err.field ? `${err.message} (field ${err.field})` : err.message;
    }
  }
  return err instanceof Error ? err.message : String(err);
}

export const unauthorizedListeners = new Set<() => void>();

let signInAt = "";

/** signInPath is where the API said to sign in (its 401s name it when the
 * dashboard's sign-in with OpenID Connect is on), "" otherwise. */
export function signInPath(): string {
  return signInAt;
}

/** csrfToken is the signed-in session's CSRF token (the sundial_csrf cookie), "" without a session. */
export function csrfToken(): string {
  if (typeof document === "undefined") return "";
  const m = /(?:^|;\s*)sundial_csrf=([^;]+)/.exec(document.cookie);
  return m ? decodeURIComponent(m[1]) : "";
}

/** signOut ends the signed-in session, then reloads the dashboard. */
export async function signOut(): Promise<void> {
  await fetch("/auth/logout", { method: "POST", headers: { "X-CSRF-Token": csrfToken() } });
  window.location.assign("/");
}

export async function request<T>(method: string, path: string, body?: unknown, extra?: Record<string, string>): Promise<T> {
  const headers: Record<string, string> = { ...extra };
  const key = getApiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  else if (method !== "GET" && csrfToken()) headers["X-CSRF-Token"] = csrfToken();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, "network", "network error");
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const e = (data as { error?: { code?: string; message?: string; field?: string } } | undefined)?.error;
    if (res.status === 401) {
      signInAt = res.headers.get("X-Sundial-Sign-In") ?? "";
      unauthorizedListeners.forEach((l) => l());
    }
    throw new ApiError(res.status, e?.code ?? "http_" + res.status, e?.message ?? `HTTP ${res.status}`, e?.field);
  }
  return data as T;
}

function qs(params: Record<string, string | string[] | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (Array.isArray(v)) v.forEach((x) => x && p.append(k, x));
    else if (v) p.set(k, v);
  }
  const s = p.toString();
  return s ? "?" + s : "";
}

const enc = encodeURIComponent;

export interface JobFilter {
  queue?: string;
  type?: string;
  state?: string;
  tag?: string;
  from?: string;
  to?: string;
}

/** isNoHistory tells the API's answer when it runs without a history store (GET /v1/jobs). */
export function isNoHistory(err: unknown): boolean {
  return err instanceof ApiError && err.status === 503 && /history store not configured/i.test(err.message);
}

/** bulkRequestId makes an X-Request-Id for a bulk action, so its progress messages on the stream can be told apart. */
export function bulkRequestId(): string {
  return "dash-bulk-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);
}

export const api = {
  searchJobs: (f: JobFilter, cursor?: string, limit = 100) =>
    request<JobPage>("GET", "/v1/jobs" + qs({ ...f, cursor, limit: String(limit) })),
  getJob: (id: string) => request<Job>("GET", `/v1/jobs/${enc(id)}`),
  jobEvents: (id: string) => request<{ events: JobEvent[] }>("GET", `/v1/jobs/${enc(id)}/events`),
  /** jobLogs reads a job's log lines after the line numbered after (0: from the first kept). */
  jobLogs: (id: string, after = 0, limit = 1000) =>
    request<JobLogPage>("GET", `/v1/jobs/${enc(id)}/logs` + qs({ after: after > 0 ? String(after) : undefined, limit: String(limit) })),
  /** jobGraph is the jobs connected to a job by dependencies, both ways (a workflow). */
  jobGraph: (id: string) => request<JobGraph>("GET", `/v1/jobs/${enc(id)}/graph`),
  submitJob: (spec: Record<string, unknown>) => request<Job>("POST", "/v1/jobs", spec),
  cancelJob: (id: string) => request<Job>("POST", `/v1/jobs/${enc(id)}/cancel`),
  retryJob: (id: string) => request<Job>("POST", `/v1/jobs/${enc(id)}/retry`),
  /** signalJob sends a durable job a signal; value and idempotency_key are left out when undefined. */
  signalJob: (id: string, signal: string, body: { value?: unknown; idempotency_key?: string }) =>
    request<SignalResult>("POST", `/v1/jobs/${enc(id)}/signals/${enc(signal)}`, body),

  getBatch: (id: string) => request<Batch>("GET", `/v1/batches/${enc(id)}`),
  batchJobs: (id: string, cursor?: string, limit = 100) =>
    request<JobPage>("GET", `/v1/batches/${enc(id)}/jobs` + qs({ cursor, limit: String(limit) })),
  cancelBatch: (id: string) => request<{ cancelled: number }>("POST", `/v1/batches/${enc(id)}/cancel`),
  retryBatch: (id: string) => request<{ retried: number }>("POST", `/v1/batches/${enc(id)}/retry`),

  queues: () => request<{ queues: QueueStats[] }>("GET", "/v1/queues"),
  pauseQueue: (q: string) => request<QueueStats>("POST", `/v1/queues/${enc(q)}/pause`),
  resumeQueue: (q: string) => request<QueueStats>("POST", `/v1/queues/${enc(q)}/resume`),
  limits: (q: string) => request<{ limits: LimitStatus[] }>("GET", `/v1/queues/${enc(q)}/limits`),
  getLimit: (q: string, name: string) => request<LimitStatus>("GET", `/v1/queues/${enc(q)}/limits/${enc(name)}`),
  /** putLimit creates (201) or replaces (200) a limit; the answer is its status. */
  putLimit: (q: string, name: string, limit: Limit) =>
    request<LimitStatus>("PUT", `/v1/queues/${enc(q)}/limits/${enc(name)}`, limit),
  deleteLimit: (q: string, name: string) => request<void>("DELETE", `/v1/queues/${enc(q)}/limits/${enc(name)}`),
  /** liveJobs pages through one live state of a queue, from Redis (no history store needed). */
  liveJobs: (q: string, f: LiveJobFilter, cursor?: string, limit = 100) =>
    request<JobPage>("GET", `/v1/queues/${enc(q)}/jobs` + qs({ state: f.state, type: f.type, priority: f.priority, tag: f.tag, cursor, limit: String(limit) })),
  /** bulk acts on a selection of a queue's jobs in one request; requestId names it in the stream's progress messages. */
  bulk: (q: string, body: BulkRequest, requestId?: string) =>
    request<BulkResult>("POST", `/v1/queues/${enc(q)}/jobs/bulk`, body, requestId ? { "X-Request-Id": requestId } : undefined),
  dead: (q: string, cursor?: string, limit = 100, tag?: string) =>
    request<JobPage>("GET", `/v1/queues/${enc(q)}/dead` + qs({ tag, cursor, limit: String(limit) })),
  retryDead: (q: string, ids?: string[]) =>
    request<{ retried: number }>("POST", `/v1/queues/${enc(q)}/dead/retry`, ids ? { ids } : undefined),
  purgeDead: (q: string, ids?: string[]) =>
    request<{ deleted: number }>("DELETE", `/v1/queues/${enc(q)}/dead`, ids ? { ids } : undefined),

  workers: () => request<{ workers: Worker[] }>("GET", "/v1/workers"),
  storage: () => request<Storage>("GET", "/v1/storage"),
  throughput: (window: string) => request<Throughput>("GET", "/v1/throughput" + qs({ window })),
  historyBacklog: () => request<HistoryBacklog>("GET", "/v1/history/backlog"),
  outbox: () => request<{ relays: OutboxRelay[] }>("GET", "/v1/outbox"),
  readyz: () => request<Readiness>("GET", "/readyz"),

  schedules: () => request<{ schedules: Schedule[] }>("GET", "/v1/schedules"),
  getSchedule: (id: string) => request<Schedule>("GET", `/v1/schedules/${enc(id)}`),
  putSchedule: (s: Schedule) => request<Schedule>("PUT", `/v1/schedules/${enc(s.id)}`, s),
  patchSchedule: (id: string, patch: Partial<Schedule>) => request<Schedule>("PATCH", `/v1/schedules/${enc(id)}`, patch),
  deleteSchedule: (id: string) => request<void>("DELETE", `/v1/schedules/${enc(id)}`),
  triggerSchedule: (id: string) => request<Job>("POST", `/v1/schedules/${enc(id)}/trigger`),
  previewSchedule: (spec: { cron?: string; every_seconds?: number; timezone?: string }) =>
    request<{ upcoming: string[] }>("POST", "/v1/schedules/preview", spec),
};
