import { describe, expect, it } from "vitest";
import type { Batch } from "../api/types";
import { batchDone } from "./BatchDetail";

const batch = (over: Partial<Batch>): Batch => ({
  id: "b", created_at: "2026-11-28T00:00:00Z", total: 3, sealed: true,
  counts: { pending: 0, succeeded: 3, dead: 0, cancelled: 0 }, ...over,
});

describe("batchDone", () => {
  it("waits while members are pending, the batch is open or a callback is to fire", () => {
    expect(batchDone(batch({ counts: { pending: 1, succeeded: 2, dead: 0, cancelled: 0 } }))).toBe(false);
    expect(batchDone(batch({ sealed: false }))).toBe(false);
    expect(batchDone(batch({ on_success: { state: "pending" } }))).toBe(false);
    expect(batchDone(batch({ on_complete: { state: "due" } }))).toBe(false);
  });
  it("is done once every callback fired, or on_success never will (a member failed)", () => {
    expect(batchDone(batch({ on_success: { state: "fired", job_id: "j" }, on_complete: { state: "fired", job_id: "k" } }))).toBe(true);
    expect(batchDone(batch({ counts: { pending: 0, succeeded: 2, dead: 1, cancelled: 0 }, on_success: { state: "pending" }, on_complete: { state: "fired" } }))).toBe(true);
    expect(batchDone(batch({}))).toBe(true);
  });
});
