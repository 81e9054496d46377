import { describe, expect, it, vi } from "vitest";
import { LiveStore, staleAfterMs } from "./store";
import type { StatsMessage, StreamMessage } from "../api/types";

const stats: StatsMessage = { kind: "stats", queues: [], workers: 1, at: "2026-11-23T10:00:00.000Z" };
const ev = (id: string): StreamMessage => ({
  kind: "event",
  event: { id: "1-0", job_id: id, queue: "q", type: "t", event: "succeeded", state: "succeeded", at: "2026-11-23T10:00:00.000Z", attempt: 1, error: "", worker_id: "" },
});

describe("LiveStore", () => {
  it("holds the view still while paused and catches up on resume", () => {
    const s = new LiveStore(() => 1000);
    const resumed = vi.fn();
    s.onResume(resumed);
    const seen = vi.fn();
    s.subscribe(seen);
    s.receive([ev("a")]);
    expect(s.getSnapshot().data.jobs.has("a")).toBe(true);
    s.setPaused(true);
    const frozen = s.getSnapshot().data;
    s.receive([ev("b"), ev("c")]);
    expect(s.getSnapshot().data).toBe(frozen);
    expect(s.getSnapshot().held).toBe(2);
    expect(resumed).not.toHaveBeenCalled();
    s.setPaused(false);
    expect(s.getSnapshot().data.jobs.has("c")).toBe(true);
    expect(s.getSnapshot().held).toBe(0);
    expect(resumed).toHaveBeenCalledOnce();
    expect(seen).toHaveBeenCalled();
  });

  it("marks the view stale when stats stop while the socket is open", () => {
    let now = 1_000_000;
    const s = new LiveStore(() => now);
    s.setStatus({ state: "open", attempt: 0 });
    s.receive([stats]);
    now += staleAfterMs - 1;
    s.checkStale();
    expect(s.getSnapshot().stale).toBe(false);
    now += 2;
    s.checkStale();
    expect(s.getSnapshot().stale).toBe(true);
    s.receive([stats]);
    expect(s.getSnapshot().stale).toBe(false);
    // A closed socket is reported as such, not as stale.
    now += 10 * staleAfterMs;
    s.setStatus({ state: "reconnecting", attempt: 1 });
    s.checkStale();
    expect(s.getSnapshot().stale).toBe(false);
  });
});
