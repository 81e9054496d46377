// The live state the stream feeds, and the pure functions that fold a batch
// of stream messages into it. Every collection is bounded, so memory stays
// flat however long the page stays open.

import type { JobState, QueueStats, StatsMessage, StreamEvent, StreamMessage } from "../api/types";

export const maxRecent = 100;
export const maxJobs = 10_000;
export const keepMinutes = 30;

export interface MinuteTally {
  succeeded: number;
  failed: number;
  dead: number;
}

export interface LiveData {
  stats: StatsMessage | null;
  /** statsAt is when the last stats message arrived (client clock, ms). */
  statsAt: number;
  /** recent events, newest first. */
  recent: StreamEvent[];
  /** the latest event of each job seen, oldest first (Map keeps insertion order). */
  jobs: Map<string, StreamEvent>;
  /** per queue, per unix minute: finished attempts seen since the page loaded. */
  minutes: Map<string, Map<number, MinuteTally>>;
  eventsTotal: number;
  /** events per second, smoothed. */
  rate: number;
  rateAt: number;
}

export function emptyLive(): LiveData {
  return { stats: null, statsAt: 0, recent: [], jobs: new Map(), minutes: new Map(), eventsTotal: 0, rate: 0, rateAt: 0 };
}

const tallyOf: Record<string, (t: MinuteTally) => void> = {
  succeeded: (t) => t.succeeded++,
  failed: (t) => t.failed++,
  lease_expired: (t) => t.failed++,
  dead: (t) => {
    t.failed++;
    t.dead++;
  },
};

/** reduceBatch folds a batch of messages, received at now (ms), into d. */
export function reduceBatch(d: LiveData, batch: StreamMessage[], now: number): LiveData {
  const events: StreamEvent[] = [];
  let stats = d.stats;
  let statsAt = d.statsAt;
  for (const m of batch) {
    if (m.kind === "event") events.push(m.event);
    else if (m.kind === "stats") {
      stats = m;
      statsAt = now;
    }
  }
  const next: LiveData = { ...d, stats, statsAt };
  if (events.length > 0) {
    const jobs = new Map(d.jobs);
    for (const e of events) {
      jobs.delete(e.job_id); // re-insert: most recent last
      jobs.set(e.job_id, e);
    }
    for (const id of jobs.keys()) {
      if (jobs.size <= maxJobs) break;
      jobs.delete(id);
    }
    next.jobs = jobs;
    const recent = events.length >= maxRecent ? events.slice(-maxRecent) : events.slice();
    recent.reverse();
    next.recent = recent.length >= maxRecent ? recent : recent.concat(d.recent.slice(0, maxRecent - recent.length));
    next.minutes = tallyMinutes(d.minutes, events);
    next.eventsTotal = d.eventsTotal + events.length;
  }
  // Events per second over the last flushes (exponential smoothing with a 2 s horizon).
  if (d.rateAt === 0) {
    next.rate = 0;
    next.rateAt = now;
  } else if (now > d.rateAt) {
    const dt = (now - d.rateAt) / 1000;
    const instant = events.length / dt;
    const a = 1 - Math.exp(-dt / 2);
    next.rate = d.rate + a * (instant - d.rate);
    next.rateAt = now;
  }
  return next;
}

function tallyMinutes(old: Map<string, Map<number, MinuteTally>>, events: StreamEvent[]): Map<string, Map<number, MinuteTally>> {
  const out = new Map(old);
  const touched = new Set<string>();
  let newest = 0;
  for (const e of events) {
    const f = tallyOf[e.event];
    if (!f) continue;
    const minute = Math.floor(Date.parse(e.at) / 60_000);
    if (!Number.isFinite(minute)) continue;
    newest = Math.max(newest, minute);
    let q = out.get(e.queue);
    if (!touched.has(e.queue)) {
      q = new Map(q ?? []);
      out.set(e.queue, q);
      touched.add(e.queue);
    }
    let t = q!.get(minute);
    if (!t) {
      t = { succeeded: 0, failed: 0, dead: 0 };
    } else {
      t = { ...t };
    }
    f(t);
    q!.set(minute, t);
  }
  for (const name of touched) {
    const q = out.get(name)!;
    for (const m of q.keys()) if (m < newest - keepMinutes) q.delete(m);
  }
  return out;
}

/** liveState returns the state of a job as the stream last reported it, if newer than at. */
export function liveState(d: LiveData, id: string, at?: string): JobState | undefined {
  const e = d.jobs.get(id);
  if (!e) return undefined;
  if (at && Date.parse(e.at) < Date.parse(at)) return undefined;
  return e.state;
}

/** totals sums the counts of every queue. */
export function totals(queues: QueueStats[]) {
  const t = { queued: 0, high: 0, normal: 0, low: 0, scheduled: 0, active: 0, waiting: 0, dead: 0, succeeded: 0, failed: 0, rate: 0, paused: 0 };
  for (const q of queues) {
    t.high += q.queued.high;
    t.normal += q.queued.normal;
    t.low += q.queued.low;
    t.queued += q.queued.high + q.queued.normal + q.queued.low;
    t.scheduled += q.scheduled;
    t.active += q.active;
    t.waiting += q.waiting;
    t.dead += q.dead;
    t.succeeded += q.succeeded_total;
    t.failed += q.failed_total;
    t.rate += q.processed_per_second;
    if (q.paused) t.paused++;
  }
  return t;
}

/**
 * mergeMinutes combines the server's per-minute counts with what the stream
 * showed since the page loaded: per minute the larger of the two, so that
 * the current minute moves before the next fetch and nothing counts twice.
 */
export function mergeMinutes(
  server: { minute: string; succeeded: number; failed: number; dead: number }[],
  live: Map<number, MinuteTally> | undefined,
): { minute: number; succeeded: number; failed: number; dead: number }[] {
  const out = server.map((m) => ({ ...m, minute: Math.floor(Date.parse(m.minute) / 60_000) }));
  if (!live || out.length === 0) return out;
  const index = new Map(out.map((m, i) => [m.minute, i]));
  const last = out[out.length - 1].minute;
  for (const [minute, t] of live) {
    let i = index.get(minute);
    if (i === undefined) {
      if (minute <= last) continue; // older than the window
      out.push({ minute, succeeded: 0, failed: 0, dead: 0 });
      i = out.length - 1;
      index.set(minute, i);
    }
    const m = out[i];
    m.succeeded = Math.max(m.succeeded, t.succeeded);
    m.failed = Math.max(m.failed, t.failed);
    m.dead = Math.max(m.dead, t.dead);
  }
  out.sort((a, b) => a.minute - b.minute);
  return out;
}
