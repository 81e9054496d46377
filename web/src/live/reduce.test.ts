import { describe, expect, it } from "vitest";
import { emptyLive, maxJobs, maxRecent, mergeMinutes, reduceBatch, totals, liveState } from "./reduce";
import type { QueueStats, StatsMessage, StreamEvent, StreamMessage } from "../api/types";

const at = (s: number) => new Date(Date.UTC(2026, 10, 23, 10, 0, s)).toISOString();
function ev(job: string, event: string, sec = 0, queue = "q"): StreamMessage {
  const e: StreamEvent = { id: `${sec}-0`, job_id: job, queue, type: "t", event, state: (event === "failed" ? "scheduled" : event) as StreamEvent["state"], at: at(sec), attempt: 1, error: "", worker_id: "" };
  return { kind: "event", event: e };
}
const q = (name: string, over: Partial<QueueStats> = {}): QueueStats => ({
  name, paused: false, queued: { high: 1, normal: 2, low: 3 }, scheduled: 4, active: 5, waiting: 6, dead: 7,
  succeeded_total: 100, failed_total: 10, processed_per_second: 2.5, ...over,
});

describe("reduceBatch", () => {
  it("keeps the latest stats and when they arrived", () => {
    const s1: StatsMessage = { kind: "stats", queues: [q("a")], workers: 2, at: at(0) };
    const s2: StatsMessage = { ...s1, workers: 3 };
    const d = reduceBatch(emptyLive(), [s1, ev("j", "queued"), s2], 5000);
    expect(d.stats?.workers).toBe(3);
    expect(d.statsAt).toBe(5000);
  });

  it("tracks each job's latest event, newest first in recent", () => {
    let d = reduceBatch(emptyLive(), [ev("a", "queued", 1), ev("b", "queued", 2), ev("a", "active", 3)], 1000);
    expect(d.jobs.get("a")?.event).toBe("active");
    expect(d.recent.map((e) => e.job_id + ":" + e.event)).toEqual(["a:active", "b:queued", "a:queued"]);
    d = reduceBatch(d, [ev("a", "succeeded", 4)], 1100);
    expect(liveState(d, "a")).toBe("succeeded");
    expect(liveState(d, "a", at(5))).toBeUndefined();
    expect(d.eventsTotal).toBe(4);
  });

  it("stays bounded however many events arrive", () => {
    let d = emptyLive();
    for (let b = 0; b < 30; b++) {
      const batch = Array.from({ length: 1000 }, (_, i) => ev(`j${b}-${i}`, "succeeded", i % 60));
      d = reduceBatch(d, batch, 1000 + b * 100);
    }
    expect(d.jobs.size).toBe(maxJobs);
    expect(d.jobs.has("j29-999")).toBe(true);
    expect(d.jobs.has("j0-0")).toBe(false);
    expect(d.recent).toHaveLength(maxRecent);
    expect(d.recent[0].job_id).toBe("j29-999");
  });

  it("does not change the previous state (React sees a new snapshot)", () => {
    const d0 = reduceBatch(emptyLive(), [ev("a", "queued")], 1000);
    const d1 = reduceBatch(d0, [ev("a", "succeeded")], 1100);
    expect(d0.jobs.get("a")?.event).toBe("queued");
    expect(d1).not.toBe(d0);
    expect(d1.jobs).not.toBe(d0.jobs);
  });

  it("tallies finished attempts per queue and minute", () => {
    const d = reduceBatch(emptyLive(), [ev("a", "succeeded", 1), ev("b", "failed", 2), ev("c", "dead", 3), ev("d", "lease_expired", 4), ev("e", "queued", 5), ev("f", "succeeded", 1, "other")], 1000);
    const minute = Math.floor(Date.parse(at(0)) / 60_000);
    expect(d.minutes.get("q")?.get(minute)).toEqual({ succeeded: 1, failed: 3, dead: 1 });
    expect(d.minutes.get("other")?.get(minute)).toEqual({ succeeded: 1, failed: 0, dead: 0 });
  });

  it("measures the event rate", () => {
    let d = reduceBatch(emptyLive(), [], 0);
    for (let t = 1; t <= 100; t++) d = reduceBatch(d, Array.from({ length: 100 }, (_, i) => ev(`${t}-${i}`, "queued")), t * 100);
    expect(d.rate).toBeGreaterThan(950);
    expect(d.rate).toBeLessThan(1050);
  });
});

describe("mergeMinutes", () => {
  const m = (sec: number, s: number, f = 0, dd = 0) => ({ minute: new Date(sec * 1000).toISOString(), succeeded: s, failed: f, dead: dd });
  it("takes the larger count per minute and appends newer live minutes", () => {
    const server = [m(600, 10), m(660, 5, 1), m(720, 0)];
    const live = new Map([[11, { succeeded: 7, failed: 0, dead: 0 }], [12, { succeeded: 3, failed: 2, dead: 1 }], [13, { succeeded: 1, failed: 0, dead: 0 }], [2, { succeeded: 99, failed: 0, dead: 0 }]]);
    expect(mergeMinutes(server, live)).toEqual([
      { minute: 10, succeeded: 10, failed: 0, dead: 0 },
      { minute: 11, succeeded: 7, failed: 1, dead: 0 },
      { minute: 12, succeeded: 3, failed: 2, dead: 1 },
      { minute: 13, succeeded: 1, failed: 0, dead: 0 },
    ]);
  });
  it("returns the server's counts without live ones", () => {
    expect(mergeMinutes([m(60, 1)], undefined)).toEqual([{ minute: 1, succeeded: 1, failed: 0, dead: 0 }]);
  });
});

describe("totals", () => {
  it("sums every queue", () => {
    const t = totals([q("a"), q("b", { paused: true, queued: { high: 0, normal: 0, low: 0 } })]);
    expect(t).toMatchObject({ queued: 6, high: 1, scheduled: 8, active: 10, dead: 14, succeeded: 200, failed: 20, rate: 5, paused: 1 });
  });
});
