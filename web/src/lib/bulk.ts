// Bulk actions through the API's bulk route (POST /v1/queues/{q}/jobs/bulk):
// one request per queue for a selection of ids, and the preview of what a
// filter on the dead jobs selects, read from the live list.

import { api, bulkRequestId } from "../api/client";
import type { BulkAction, BulkFilter, Job } from "../api/types";

export interface BulkOutcome {
  action: BulkAction;
  /** jobs selected (the ids sent, or what the filter matched) */
  matched: number;
  /** jobs the action changed; the rest no longer qualified */
  count: number;
  /** queues whose request failed, with the error */
  failed: { queue: string; ids: number; error: unknown }[];
}

/**
 * bulkByIds acts on the selected jobs with one bulk request per queue (the
 * route acts on one queue), one queue after the other. onStart is told each
 * request's id before it is sent, so its progress can be followed.
 */
export async function bulkByIds(
  action: BulkAction,
  jobs: Pick<Job, "id" | "queue">[],
  onStart?: (requestId: string, queue: string) => void,
): Promise<BulkOutcome> {
  const byQueue = new Map<string, string[]>();
  for (const j of jobs) {
    const ids = byQueue.get(j.queue) ?? [];
    ids.push(j.id);
    byQueue.set(j.queue, ids);
  }
  const out: BulkOutcome = { action, matched: 0, count: 0, failed: [] };
  for (const [queue, ids] of byQueue) {
    // The route takes at most 10,000 ids a request.
    for (let i = 0; i < ids.length; i += 10_000) {
      const part = ids.slice(i, i + 10_000);
      const rid = bulkRequestId();
      onStart?.(rid, queue);
      try {
        const r = await api.bulk(queue, { action, ids: part }, rid);
        out.matched += r.matched;
        out.count += r.count;
      } catch (error) {
        out.failed.push({ queue, ids: part.length, error });
      }
    }
  }
  return out;
}

/** matchesDead tells whether a dead job is one the bulk filter selects (as the API reads it). */
export function matchesDead(j: Job, f: BulkFilter): boolean {
  if (f.type && j.type !== f.type) return false;
  if (f.tag && !(j.tags ?? []).includes(f.tag)) return false;
  if (f.error_contains && !(j.last_error ?? "").includes(f.error_contains)) return false;
  if (f.since && Date.parse(j.finished_at ?? "") < Date.parse(f.since)) return false;
  return true;
}

export interface DeadPreview {
  /** jobs that match among those read */
  count: number;
  /** the first few of them */
  sample: Job[];
  /** true when every dead job the filter could select was read: count is exact */
  complete: boolean;
  scanned: number;
}

/**
 * previewDead counts the dead jobs of a queue a filter selects, reading the
 * live list (newest death first) a page at a time, at most maxScan jobs; it
 * stops at the first job that died before since, as the API's filter does.
 */
export async function previewDead(queue: string, f: BulkFilter, maxScan = 5000, sampleSize = 5): Promise<DeadPreview> {
  const out: DeadPreview = { count: 0, sample: [], complete: false, scanned: 0 };
  const since = f.since ? Date.parse(f.since) : NaN;
  let cursor: string | undefined;
  while (out.scanned < maxScan) {
    const page = await api.liveJobs(queue, { state: "dead", type: f.type || undefined, tag: f.tag || undefined }, cursor, 500);
    for (const j of page.jobs) {
      out.scanned++;
      if (Number.isFinite(since) && Date.parse(j.finished_at ?? "") < since) {
        out.complete = true;
        return out;
      }
      if (!matchesDead(j, f)) continue;
      out.count++;
      if (out.sample.length < sampleSize) out.sample.push(j);
    }
    if (!page.next_cursor) {
      out.complete = true;
      return out;
    }
    cursor = page.next_cursor;
  }
  return out;
}
