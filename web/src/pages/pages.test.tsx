// @vitest-environment jsdom
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { buildSpec, Submit, type SubmitForm } from "./Submit";
import { checkSchedule, ScheduleForm } from "./ScheduleForm";
import { DeadLetters } from "./DeadLetters";
import { Workers } from "./Workers";
import { liveStore } from "../live/store";
import { mockFetch, renderAt } from "../test/render";

const form: SubmitForm = {
  queue: "default", type: "sundial.echo", payload: "{}", priority: "normal", when: "now", delay: "", runAt: "",
  maxAttempts: "", timeout: "", idempotencyKey: "", dependsOn: "",
};

describe("buildSpec", () => {
  it("sends only what was filled in", () => {
    expect(buildSpec(form).spec).toEqual({ queue: "default", type: "sundial.echo", priority: "normal", payload: {} });
    const s = buildSpec({ ...form, when: "delay", delay: "2.5", maxAttempts: "5", dependsOn: "a, b c", idempotencyKey: " k " }).spec;
    expect(s).toMatchObject({ delay_seconds: 2.5, max_attempts: 5, depends_on: ["a", "b", "c"], idempotency_key: "k" });
  });
  it("names every problem", () => {
    const { errors, spec } = buildSpec({ ...form, queue: "Bad Queue", type: "", payload: "{", maxAttempts: "0", when: "at" });
    expect(spec).toBeUndefined();
    expect(Object.keys(errors).sort()).toEqual(["maxAttempts", "payload", "queue", "runAt", "type"]);
  });
});

describe("checkSchedule", () => {
  const f = { id: "x", mode: "every" as const, cron: "", every: "60", timezone: "", queue: "q", type: "t", payload: "", priority: "low" as const, maxAttempts: "", misfire: "skip" as const, enabled: false };
  it("builds the schedule", () => {
    expect(checkSchedule(f, false).schedule).toEqual({ id: "x", every_seconds: 60, timezone: "UTC", job: { queue: "q", type: "t", priority: "low" }, enabled: false, misfire: "skip" });
  });
  it("refuses a bad id, interval and payload", () => {
    expect(Object.keys(checkSchedule({ ...f, id: "a b", every: "0", payload: "[" }, false).errors).sort()).toEqual(["every", "id", "payload"]);
  });
});

describe("Submit page", () => {
  it("checks the payload as you type and opens the new job", async () => {
    const calls = mockFetch({ "POST /v1/jobs": [201, { id: "01JNEW" }] });
    const { loc } = renderAt(<Submit />, "/submit");
    const payload = screen.getByLabelText("Payload (JSON)");
    fireEvent.change(payload, { target: { value: '{"a":' } });
    expect(screen.getByText(/not valid JSON/)).toBeInTheDocument();
    fireEvent.click(screen.getByRole("button", { name: "Submit job" }));
    expect(calls).toHaveLength(0);
    fireEvent.change(payload, { target: { value: '{"a": 1}' } });
    fireEvent.change(screen.getByLabelText("Priority"), { target: { value: "high" } });
    fireEvent.click(screen.getByRole("button", { name: "Submit job" }));
    await waitFor(() => expect(loc.history).toContain("/jobs/01JNEW"));
    expect(calls[0]).toMatchObject({ method: "POST", path: "/v1/jobs", body: { queue: "default", type: "sundial.echo", payload: { a: 1 }, priority: "high" } });
  });

  it("shows the API's refusal in words", async () => {
    mockFetch({ "POST /v1/jobs": [400, { error: { code: "invalid_argument", message: "type: no such thing", field: "type" } }] });
    renderAt(<Submit />, "/submit");
    fireEvent.click(screen.getByRole("button", { name: "Submit job" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("type: no such thing (field type)");
  });
});

describe("ScheduleForm", () => {
  it("previews the next runs from the API and shows its objection", async () => {
    const upcoming = ["2026-11-24T02:00:00Z", "2026-11-25T02:00:00Z", "2026-11-26T02:00:00Z", "2026-11-27T02:00:00Z", "2026-11-28T02:00:00Z"];
    mockFetch({
      "POST /v1/schedules/preview": (b) => ((b as { cron?: string }).cron === "bad"
        ? [400, { error: { code: "invalid_argument", message: "cron: expected 5 or 6 fields, got 1", field: "cron" } }]
        : [200, { upcoming }]),
    });
    renderAt(<ScheduleForm />, "/schedules/new");
    await waitFor(() => expect(screen.getByTestId("preview").querySelectorAll("li")).toHaveLength(5));
    fireEvent.change(screen.getByLabelText("Cron"), { target: { value: "bad" } });
    expect(await screen.findByText(/expected 5 or 6 fields/, {}, { timeout: 3000 })).toBeInTheDocument();
  });
});

describe("DeadLetters page", () => {
  it("retries every dead job of a queue after confirmation", async () => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [{ name: "mail", paused: false, queued: { high: 0, normal: 0, low: 0 }, scheduled: 0, active: 0, waiting: 0, dead: 3, succeeded_total: 0, failed_total: 3, processed_per_second: 0 }] }]);
    const calls = mockFetch({
      "GET /v1/queues/mail/dead": [200, { jobs: [], next_cursor: "" }],
      "POST /v1/queues/mail/jobs/bulk": [200, { id: "x", action: "retry", queue: "mail", matched: 3, count: 3, scanned: 3, done: true }],
    });
    renderAt(<DeadLetters queue="mail" />, "/dead/mail");
    fireEvent.click(screen.getByRole("button", { name: "Retry all" }));
    expect(calls.some((c) => c.method === "POST")).toBe(false);
    fireEvent.click(screen.getByRole("button", { name: "Retry", hidden: true }));
    expect(await screen.findByText("Retried 3 jobs.")).toBeInTheDocument();
    expect(calls.filter((c) => c.method === "POST")).toEqual([
      expect.objectContaining({ path: "/v1/queues/mail/jobs/bulk", body: { action: "retry", filter: {} } }),
    ]);
  });
});

describe("Workers page", () => {
  const reader = (role: string) => ({
    id: `${role}-host-1-ab`, role, hostname: "host", pid: 1, reads: [1], writes: 1,
    started_at: "2026-11-24T08:00:00.000Z", expires_at: "2026-11-24T08:00:30.000Z",
  });
  it("shows the storage format and its readers", async () => {
    mockFetch({
      "GET /v1/workers": [200, { workers: [] }],
      "GET /v1/storage": [200, { format: "1", reads: [1], newest: 1, writes: 1, readers: [reader("api"), reader("worker"), reader("poller")], unregistered_workers: [], held_back_by: [] }],
    });
    renderAt(<Workers />, "/workers");
    const table = await screen.findByRole("table", { name: "Readers of the storage format" });
    expect(within(table).getAllByRole("row")).toHaveLength(4);
    expect(within(table).getByRole("rowheader", { name: "poller" })).toBeInTheDocument();
    expect(screen.getByTestId("storage-format")).toHaveTextContent("1");
    expect(screen.queryByRole("alert")).toBeNull();
    expect(screen.queryByTestId("unregistered")).toBeNull();
  });
  it("names the workers of a release from before the storage format", async () => {
    mockFetch({
      "GET /v1/workers": [200, { workers: [] }],
      "GET /v1/storage": [200, { format: "1", reads: [1], newest: 1, writes: 1, readers: [reader("api")], unregistered_workers: ["old-1", "old-2"], held_back_by: [] }],
    });
    renderAt(<Workers />, "/workers");
    expect(await screen.findByTestId("unregistered")).toHaveTextContent("Workers old-1, old-2 are not registered");
  });
  it("names the processes that hold the next format back, and when it is written", async () => {
    mockFetch({
      "GET /v1/workers": [200, { workers: [] }],
      "GET /v1/storage": [200, { format: "1", reads: [1, 2], newest: 2, writes: 1, readers: [reader("api"), reader("worker")], unregistered_workers: [], held_back_by: ["worker-host-1-ab"] }],
    });
    const view = renderAt(<Workers />, "/workers");
    expect(await screen.findByTestId("held-back")).toHaveTextContent("Format 2 is written once every process reads it. This process reads older formats only: worker-host-1-ab.");
    expect(screen.queryByTestId("writable-at")).toBeNull();
    view.unmount();
    const soon = new Date(Date.now() + 20_000).toISOString();
    mockFetch({
      "GET /v1/workers": [200, { workers: [] }],
      "GET /v1/storage": [200, { format: "2", writable_at: soon, reads: [1, 2], newest: 2, writes: 1, readers: [reader("api")], unregistered_workers: [], held_back_by: [] }],
    });
    renderAt(<Workers />, "/workers");
    expect(await screen.findByTestId("writable-at")).toHaveTextContent("Format 2 is written from");
    expect(screen.queryByTestId("held-back")).toBeNull();
  });
  it("says when this API cannot read the format Redis holds", async () => {
    mockFetch({
      "GET /v1/workers": [200, { workers: [] }],
      "GET /v1/storage": [200, { format: "2", reads: [1], newest: 1, writes: 1, readers: [], unregistered_workers: [], held_back_by: [] }],
    });
    renderAt(<Workers />, "/workers");
    expect(await screen.findByRole("alert")).toHaveTextContent("does not read format 2");
    expect(screen.getByText(/No API, worker or poller is registered/)).toBeInTheDocument();
  });
});
