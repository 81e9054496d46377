// Which list the Jobs page reads: the live list from Redis
// (GET /v1/queues/{q}/jobs) or the history search (GET /v1/jobs).

import { liveStates, type LiveState } from "../api/types";

export interface SourceFilter {
  queue?: string;
  state?: string;
  from?: string;
  to?: string;
}

export type Source =
  /** the live list of one state of one queue, from Redis */
  | { kind: "live"; queue: string; state: LiveState; why: "live-state" | "no-history" }
  /** the history search */
  | { kind: "history" }
  /** not known yet whether the API has a history store */
  | { kind: "probing" }
  /** history store off, and no queue to list */
  | { kind: "need-queue" }
  /** history store off, and a state only the history keeps (succeeded, cancelled) */
  | { kind: "unavailable"; state: string };

export function isLiveState(s: string | undefined): s is LiveState {
  return !!s && (liveStates as string[]).includes(s);
}

/**
 * chooseSource: a queue and a live state (queued, scheduled, waiting,
 * active, dead) without created-time bounds read the live list, which is
 * current to the moment and O(page) whatever the backlog; anything else
 * (every queue at once, succeeded or cancelled, a time range) is the
 * history search. When the API has no history store (history === false),
 * the live list serves whatever it can: the chosen queue or else the first
 * known one, the chosen live state or else queued. history is undefined
 * while unknown.
 */
export function chooseSource(f: SourceFilter, history: boolean | undefined, fallbackQueue?: string): Source {
  const live = isLiveState(f.state);
  if (f.queue && live && !f.from && !f.to) return { kind: "live", queue: f.queue, state: f.state as LiveState, why: "live-state" };
  if (history === undefined) return { kind: "probing" };
  if (history) return { kind: "history" };
  if (f.state && !live) return { kind: "unavailable", state: f.state };
  const queue = f.queue || fallbackQueue;
  if (!queue) return { kind: "need-queue" };
  return { kind: "live", queue, state: live ? (f.state as LiveState) : "queued", why: "no-history" };
}

/** liveOrder says in which order the live list gives a state's jobs (docs/api.md). */
export const liveOrder: Record<LiveState, string> = {
  queued: "in about the order they would be claimed, the ones held back last",
  scheduled: "by due time",
  waiting: "by creation",
  active: "by lease expiry",
  dead: "newest first",
};
