// @vitest-environment jsdom
import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { eventDetail, JobDetail, mergeTimeline } from "./JobDetail";
import { checkSignalName, stepKind } from "../components/Durable";
import { liveStore } from "../live/store";
import { mockFetch, renderAt } from "../test/render";
import type { Job, StreamEvent } from "../api/types";

const at = (s: number) => new Date(Date.UTC(2026, 10, 24, 8, 0, s)).toISOString();

/** A durable job parked for the signal "shipped", as GET /v1/jobs/{id} answers it. */
function parked(over: Partial<Job> = {}): Job {
  return {
    id: "01JDUR", queue: "orders", type: "order", priority: "normal", state: "scheduled", attempt: 2, max_attempts: 4,
    timeout_seconds: 30, backoff: { base_seconds: 1, max_seconds: 60 }, run_at: "2027-11-24T09:00:00.000Z", created_at: at(0),
    held_back: { reason: "awaiting_signal", message: 'waiting for signal "shipped" (until 2027-11-24T09:00:00.000Z)' },
    durable: {
      steps: [
        { seq: 1, name: "charge", status: "ok", started_at: at(1), ended_at: at(3), result: { charge_id: "ch_42", amount: 1200 } },
        { seq: 2, name: "signal:shipped", status: "wait", started_at: at(4), deadline: "2027-11-24T09:00:00.000Z" },
      ],
      signal_key: "order-1042",
      awaiting: { kind: "signal", signal: "shipped", until: "2027-11-24T09:00:00.000Z" },
    },
    ...over,
  };
}

function routes(job: Job, extra: Record<string, [number, unknown] | ((body: unknown) => [number, unknown])> = {}) {
  return mockFetch({
    [`GET /v1/jobs/${job.id}`]: [200, job],
    [`GET /v1/jobs/${job.id}/events`]: [200, { events: [], next_cursor: "" }],
    [`GET /v1/jobs/${job.id}/graph`]: [200, { root: job.id, nodes: [{ id: job.id, attempt: job.attempt }], edges: [], truncated: false }],
    ...extra,
  });
}

describe("stepKind", () => {
  it("reads waits and children from the step's name", () => {
    expect(stepKind({ name: "charge" })).toEqual({ kind: "step", label: "charge" });
    expect(stepKind({ name: "sleep" }).kind).toBe("sleep");
    expect(stepKind({ name: "signal:shipped" })).toMatchObject({ kind: "signal", signal: "shipped" });
    expect(stepKind({ name: "children:thumbs", result: "01JP.c3" })).toMatchObject({ kind: "children", batch: "01JP.c3" });
    expect(stepKind({ name: "signal:sundial.children:01JP.c3" })).toMatchObject({ kind: "children-wait", batch: "01JP.c3" });
    expect(stepKind({ name: "children:thumbs:results" }).kind).toBe("children-results");
  });
  it("checks a signal's name as the API does", () => {
    expect(checkSignalName("shipped")).toBeUndefined();
    expect(checkSignalName("")).toBe("required");
    expect(checkSignalName("a\tb")).toBe("no tabs or line breaks");
    expect(checkSignalName("x".repeat(201))).toBe("at most 200 characters");
  });
});

describe("the event timeline of a durable job", () => {
  const live = (id: string, event: string, message: string, s: number): StreamEvent => ({
    id, job_id: "01JDUR", queue: "orders", type: "order", event, state: "active", at: at(s), attempt: 1, error: "", worker_id: "w1", message,
  });
  it("keeps two steps of one millisecond, and takes the stream's message for a recorded event", () => {
    const recorded = [{ type: "step", at: at(3), state: "active" as const, attempt: 1, worker_id: "w1", error: "" }];
    const t = mergeTimeline(recorded, [live("1-0", "step", "1 charge ok", 3), live("1-1", "step", "2 signal:shipped wait", 3), live("2-0", "parked", "signal:shipped", 4)]);
    expect(t.map((e) => e.message)).toEqual(["1 charge ok", "2 signal:shipped wait", "signal:shipped"]);
  });
  it("says what a step, parked and signal event mean", () => {
    expect(eventDetail({ type: "step", message: "1 charge card ok", error: "" })).toBe("step 1 charge card: ok");
    expect(eventDetail({ type: "signal", message: "shipped", error: "" })).toBe("signal shipped");
    expect(eventDetail({ type: "succeeded", error: "" })).toBe("");
    expect(eventDetail({ type: "parked", error: "signal:shipped" })).toBe("waits for signal shipped");
    expect(eventDetail({ type: "parked", error: "sleep" })).toBe("sleeps");
  });
});

describe("JobDetail of a durable job", () => {
  it("shows the steps as a timeline, with status labels, times, the result collapsed and the error", async () => {
    const job = parked({
      state: "active", held_back: undefined,
      durable: {
        steps: [
          { seq: 1, name: "charge", status: "ok", started_at: at(1), ended_at: at(3), result: { charge_id: "ch_42" } },
          { seq: 2, name: "signal:shipped", status: "ok", started_at: at(4), ended_at: at(9), result: "ups" },
          { seq: 3, name: "sleep", status: "wait", started_at: at(10), deadline: "2027-01-01T00:00:00.000Z" },
          { seq: 4, name: "email", status: "err", started_at: at(11), ended_at: at(12), error: "smtp: 451 try later" },
          { seq: 5, name: "signal:approved", status: "timeout", started_at: at(13), ended_at: at(14) },
        ],
        signals: [{ name: "shipped", at: at(8), value: "ups" }],
      },
    });
    routes(job);
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    const steps = await screen.findByTestId("steps");
    const items = within(steps).getAllByRole("listitem");
    expect(items).toHaveLength(5);
    expect(items[0]).toHaveTextContent("charge");
    expect(items[0]).toHaveTextContent("ok");
    expect(items[0]).toHaveTextContent(/took\s*2\.0 s/);
    // The result is there, collapsed.
    const details = items[0].querySelector("details")!;
    expect(details.open).toBe(false);
    expect(within(details).getByText(/"charge_id": "ch_42"/)).toBeInTheDocument();
    expect(items[1]).toHaveTextContent("Wait for signal “shipped”");
    expect(items[1]).toHaveTextContent(/took\s*5\.0 s/);
    expect(items[2]).toHaveTextContent("Sleep");
    expect(items[2]).toHaveTextContent("waiting");
    expect(items[2]).toHaveTextContent(/until/);
    expect(items[3]).toHaveTextContent("failed");
    expect(items[3]).toHaveTextContent("smtp: 451 try later");
    expect(items[4]).toHaveTextContent("timed out");
    // Status in words, not colour alone.
    expect(items.map((li) => li.querySelector("[data-status]")?.textContent?.replace(/^\W+/, ""))).toEqual(["ok", "ok", "waiting", "failed", "timed out"]);
    // The signals it received.
    const signals = screen.getByRole("table", { name: "Signals received" });
    expect(within(signals).getByRole("rowheader", { name: "shipped" })).toBeInTheDocument();
    expect(within(signals).getByText('"ups"')).toBeInTheDocument();
    // Not parked: no wait banner.
    expect(screen.queryByTestId("durable-wait")).toBeNull();
  });

  it("makes a parked job's wait prominent, with its signal key, and prefills the signal", async () => {
    const job = parked();
    routes(job);
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    const wait = await screen.findByTestId("durable-wait");
    expect(wait).toHaveTextContent("Parked: Waiting for signal shipped until");
    expect(wait).toHaveAttribute("data-kind", "signal");
    expect(within(wait).getByTestId("signal-key")).toHaveTextContent("order-1042");
    expect(screen.getByLabelText("Signal")).toHaveValue("shipped");
  });

  it("says what a sleeping job waits for", async () => {
    const job = parked({ durable: { steps: [{ seq: 1, name: "sleep", status: "wait", started_at: at(1), deadline: "2027-11-24T09:00:00.000Z" }], awaiting: { kind: "sleep", until: "2027-11-24T09:00:00.000Z" } } });
    routes(job);
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    expect(await screen.findByTestId("durable-wait")).toHaveTextContent("Parked: Sleeping until");
    expect(screen.getByLabelText("Signal")).toHaveValue("");
  });

  it("checks the value as you type, sends the signal and shows the answer", async () => {
    const job = parked();
    const calls = routes(job, { "POST /v1/jobs/01JDUR/signals/shipped": [200, { status: "delivered", job_id: "01JDUR" }] });
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    const value = await screen.findByLabelText("Value (JSON)");
    fireEvent.change(value, { target: { value: '"ups' } });
    expect(screen.getByText(/not valid JSON/)).toBeInTheDocument();
    expect(value).toHaveAttribute("aria-invalid", "true");
    fireEvent.click(screen.getByRole("button", { name: "Send signal" }));
    expect(calls.filter((c) => c.method === "POST")).toHaveLength(0);
    fireEvent.change(value, { target: { value: '"ups"' } });
    expect(screen.queryByText(/not valid JSON/)).toBeNull();
    fireEvent.change(screen.getByLabelText("Idempotency key"), { target: { value: "ship-1042" } });
    fireEvent.click(screen.getByRole("button", { name: "Send signal" }));
    expect(await screen.findByTestId("signal-answer")).toHaveTextContent("Delivered: signal shipped");
    expect(calls.filter((c) => c.method === "POST")).toEqual([
      expect.objectContaining({ path: "/v1/jobs/01JDUR/signals/shipped", body: { value: "ups", idempotency_key: "ship-1042" } }),
    ]);
    // The job is read again.
    await waitFor(() => expect(calls.filter((c) => c.path === "/v1/jobs/01JDUR").length).toBeGreaterThan(1));
  });

  it("sends no value when the value is empty, and says a duplicate", async () => {
    const job = parked();
    const calls = routes(job, { "POST /v1/jobs/01JDUR/signals/approved": [200, { status: "duplicate", job_id: "01JDUR" }] });
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    fireEvent.change(await screen.findByLabelText("Signal"), { target: { value: "approved" } });
    fireEvent.click(screen.getByRole("button", { name: "Send signal" }));
    expect(await screen.findByTestId("signal-answer")).toHaveTextContent("Duplicate");
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({});
  });

  it("refuses an empty name before sending", async () => {
    const job = parked();
    const calls = routes(job);
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    fireEvent.change(await screen.findByLabelText("Signal"), { target: { value: "" } });
    fireEvent.click(screen.getByRole("button", { name: "Send signal" }));
    expect(screen.getByLabelText("Signal")).toHaveAttribute("aria-invalid", "true");
    expect(calls.filter((c) => c.method === "POST")).toHaveLength(0);
  });

  it("shows the API's refusal in words", async () => {
    const job = parked();
    routes(job, {
      "POST /v1/jobs/01JDUR/signals/shipped": [409, { error: { code: "conflict", message: "the job has a signal of this name already (a job takes one signal of each name; send it again with the first idempotency_key to get its answer)" } }],
    });
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    fireEvent.click(await screen.findByRole("button", { name: "Send signal" }));
    const alert = await screen.findByRole("alert");
    expect(alert).toHaveTextContent("Not delivered: the job has a signal of this name already");
    expect(screen.queryByTestId("signal-answer")).toBeNull();
  });

  it("shows a 404 as the API says it", async () => {
    const job = parked();
    routes(job, { "POST /v1/jobs/01JDUR/signals/shipped": [404, { error: { code: "not_found", message: "job not found" } }] });
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    fireEvent.click(await screen.findByRole("button", { name: "Send signal" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Refused: job not found");
  });

  it("offers no form once the job ended", async () => {
    const job = parked({ state: "succeeded", held_back: undefined, finished_at: at(30), durable: { steps: parked().durable!.steps } });
    routes(job);
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    expect(await screen.findByText("The job has ended: it takes no more signals.")).toBeInTheDocument();
    expect(screen.queryByRole("form", { name: "Send a signal" })).toBeNull();
  });

  it("rereads the job on its step, parked and signal events, and lists them with their messages", async () => {
    const job = parked();
    const calls = routes(job);
    renderAt(<JobDetail id={job.id} />, `/jobs/${job.id}`);
    await screen.findByTestId("steps");
    const reads = () => calls.filter((c) => c.path === "/v1/jobs/01JDUR").length;
    const before = reads();
    const ev = (id: string, event: string, message: string, s: number): StreamEvent => ({
      id, job_id: "01JDUR", queue: "orders", type: "order", event, state: event === "parked" ? "scheduled" : "active", at: at(40 + s), attempt: 2, error: "", worker_id: "w1", message,
    });
    // Two events in one batch: both reach the timeline.
    act(() => liveStore.receive([{ kind: "event", event: ev("9-0", "step", "3 sleep wait", 0) }, { kind: "event", event: { ...ev("9-1", "parked", "", 1), error: "sleep" } }]));
    const timeline = screen.getByTestId("timeline");
    expect(within(timeline).getByText("step 3 sleep: wait")).toBeInTheDocument();
    expect(within(timeline).getByText("sleeps")).toBeInTheDocument();
    expect(timeline.querySelector(".error-text")).toBeNull();
    await waitFor(() => expect(reads()).toBeGreaterThan(before));
    act(() => liveStore.receive([{ kind: "event", event: ev("9-2", "signal", "shipped", 2) }]));
    expect(within(timeline).getByText("signal shipped")).toBeInTheDocument();
  });
});
