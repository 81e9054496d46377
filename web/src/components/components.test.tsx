// @vitest-environment jsdom
import { act, fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConnectionIndicator, PauseButton } from "./ConnectionIndicator";
import { Confirm, ErrorBanner } from "./ui";
import { rowState } from "./JobTable";
import { isolatedPoints } from "../lib/series";
import { liveStore } from "../live/store";
import { emptyLive } from "../live/reduce";
import { ApiError } from "../api/client";
import { mockFetch, renderAt } from "../test/render";
import type { Job } from "../api/types";

afterEach(() => {
  liveStore.setPaused(false);
  liveStore.setStatus({ state: "closed", attempt: 0 });
});

describe("ConnectionIndicator", () => {
  it("says live, then reconnecting with a countdown", async () => {
    renderAt(<ConnectionIndicator />);
    act(() => liveStore.setStatus({ state: "open", attempt: 0 }));
    expect(screen.getByRole("status")).toHaveTextContent("Live");
    expect(screen.getByRole("status")).toHaveAttribute("data-state", "ok");
    mockFetch({ "GET /readyz": [200, { status: "ok", checks: { redis: { status: "ok" } } }] });
    act(() => liveStore.setStatus({ state: "reconnecting", attempt: 2, retryAt: Date.now() + 4000 }));
    expect(screen.getByRole("status")).toHaveTextContent(/Reconnecting.*retry in [45] s/);
    expect(screen.getByRole("button", { name: "Retry now" })).toBeInTheDocument();
  });

  it("names Redis when the socket is open but stats stopped", async () => {
    mockFetch({ "GET /readyz": [503, { status: "unavailable", checks: { redis: { status: "down", detail: "connection refused" } } }] });
    let now = Date.now();
    vi.spyOn(Date, "now").mockImplementation(() => now);
    renderAt(<ConnectionIndicator />);
    act(() => {
      liveStore.setStatus({ state: "open", attempt: 0 });
      liveStore.receive([{ kind: "stats", queues: [], workers: 0, at: "" }]);
    });
    now += 10_000;
    act(() => liveStore.checkStale());
    await waitFor(() => expect(screen.getByRole("status")).toHaveTextContent("Redis unavailable"));
    expect(screen.getByRole("status")).toHaveAttribute("data-state", "bad");
    expect(screen.getByRole("status")).toHaveTextContent("connection refused");
    act(() => liveStore.receive([{ kind: "stats", queues: [], workers: 0, at: "" }]));
    expect(screen.getByRole("status")).toHaveTextContent("Live");
    vi.restoreAllMocks();
  });
});

describe("PauseButton", () => {
  it("pauses live updates and shows what waits", () => {
    renderAt(<PauseButton />);
    const b = screen.getByRole("button", { name: /Pause/ });
    expect(b).toHaveAttribute("aria-pressed", "false");
    fireEvent.click(b);
    expect(liveStore.getSnapshot().paused).toBe(true);
    act(() => liveStore.receive([{ kind: "stats", queues: [], workers: 0, at: "" }, { kind: "stats", queues: [], workers: 0, at: "" }]));
    expect(screen.getByRole("button")).toHaveTextContent("Resume (2 waiting)");
    fireEvent.click(screen.getByRole("button"));
    expect(liveStore.getSnapshot().paused).toBe(false);
  });
});

describe("Confirm", () => {
  it("asks before acting", () => {
    const yes = vi.fn();
    const no = vi.fn();
    renderAt(<Confirm open title="Purge dead jobs?" body={<p>Really?</p>} confirmLabel="Purge" danger onConfirm={yes} onCancel={no} />);
    fireEvent.click(screen.getByRole("button", { name: "Cancel", hidden: true }));
    expect(no).toHaveBeenCalledOnce();
    fireEvent.click(screen.getByRole("button", { name: "Purge", hidden: true }));
    expect(yes).toHaveBeenCalledOnce();
  });
});

describe("ErrorBanner", () => {
  it("puts API errors in words", () => {
    renderAt(<ErrorBanner error={new ApiError(503, "unavailable", "job store unavailable; try again later")} />);
    expect(screen.getByRole("alert")).toHaveTextContent("Redis or the history store is down");
  });
  it("names the field at fault", () => {
    renderAt(<ErrorBanner error={new ApiError(400, "invalid_argument", "priority must be one of high, normal, low", "priority")} />);
    expect(screen.getByRole("alert")).toHaveTextContent("(field priority)");
  });
});

describe("rowState", () => {
  const job = { id: "j", state: "queued", created_at: "2026-11-23T10:00:00.000Z" } as Job;
  it("shows the stream's state when it is newer than the row", () => {
    const d = emptyLive();
    expect(rowState(job, d)).toBe("queued");
    d.jobs.set("j", { id: "", job_id: "j", queue: "q", type: "t", event: "succeeded", state: "succeeded", at: "2026-11-23T10:00:01.000Z", attempt: 1, error: "", worker_id: "" });
    expect(rowState(job, d)).toBe("succeeded");
    expect(rowState({ ...job, state: "dead", finished_at: "2026-11-23T10:00:05.000Z" }, d)).toBe("dead");
  });
});

describe("isolatedPoints", () => {
  it("marks values no line can reach: present, with no present neighbour", () => {
    expect(isolatedPoints([null, null, 4, null])).toEqual([2]);
    expect(isolatedPoints([5, null, 1, 2, null, 3])).toEqual([0, 5]);
    expect(isolatedPoints([0, 0, 0])).toEqual([]);
    expect(isolatedPoints([null, null])).toEqual([]);
    expect(isolatedPoints([7])).toEqual([0]);
  });
});
