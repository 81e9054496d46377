// @vitest-environment jsdom
import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { blankLimit, checkLimit, formatRate, formField, Limits } from "./Limits";
import { Queues } from "../pages/Queues";
import { JobDetail } from "../pages/JobDetail";
import { buildSpec, type SubmitForm } from "../pages/Submit";
import { liveStore } from "../live/store";
import { mockFetch, renderAt } from "../test/render";
import type { LimitStatus, QueueStats } from "../api/types";

const limits: LimitStatus[] = [
  { name: "one-at-a-time", types: ["sundial.sleep", "report.build"], concurrency: 1, active: 1, throttled: 4 },
  { name: "per-customer", key: "customer_id", concurrency: 2, rate: { limit: 10, period_seconds: 60 }, active: 3, throttled: 0 },
];

const queue: QueueStats = {
  name: "mail", paused: false, queued: { high: 0, normal: 2, low: 0 }, throttled: 4, scheduled: 0, active: 1, waiting: 0, dead: 0,
  succeeded_total: 0, failed_total: 0, processed_per_second: 0, limits,
};

afterEach(() => {
  act(() => liveStore.receive([{ kind: "stats", queues: [], workers: 0, at: "" }]));
});

describe("checkLimit", () => {
  it("builds the PUT body from what was filled in", () => {
    expect(checkLimit({ ...blankLimit, name: "a", concurrency: "3" }).limit).toEqual({ concurrency: 3 });
    expect(checkLimit({ name: "a.b", types: "x, y z", key: " customer_id ", concurrency: "", rateLimit: "5", ratePeriod: "3600" }).limit)
      .toEqual({ types: ["x", "y", "z"], key: "customer_id", rate: { limit: 5, period_seconds: 3600 } });
  });
  it("names every problem", () => {
    const { errors, limit } = checkLimit({ name: "bad name", types: "ok, no/slash", key: "a.b", concurrency: "0", rateLimit: "20000", ratePeriod: "0" });
    expect(limit).toBeUndefined();
    expect(Object.keys(errors).sort()).toEqual(["concurrency", "key", "name", "rateLimit", "ratePeriod", "types"]);
    expect(checkLimit({ ...blankLimit, name: "a", types: "t, t" }).errors.types).toMatch(/twice/);
  });
  it("wants a concurrency or a rate", () => {
    expect(checkLimit({ ...blankLimit, name: "a" }).errors).toEqual({ concurrency: "set a concurrency, a rate, or both" });
  });
});

describe("formatRate and formField", () => {
  it("says the period in its unit", () => {
    expect(formatRate({ limit: 10, period_seconds: 60 })).toBe("10 / min");
    expect(formatRate({ limit: 5, period_seconds: 7200 })).toBe("5 / 2 h");
    expect(formatRate({ limit: 3, period_seconds: 90 })).toBe("3 / 90 s");
    expect(formatRate({ limit: 1, period_seconds: 86_400 })).toBe("1 / day");
  });
  it("maps the API's field to the form's", () => {
    expect(formField("types[1]")).toBe("types");
    expect(formField("rate.period_seconds")).toBe("ratePeriod");
    expect(formField("rate.limit")).toBe("rateLimit");
    expect(formField("concurrency")).toBe("concurrency");
    expect(formField("queue")).toBeUndefined();
  });
});

describe("Limits table", () => {
  it("shows covers, key, active / N, the rate and throttled", () => {
    renderAt(<Limits queue="mail" limits={limits} />);
    const table = screen.getByRole("table", { name: "Limits of mail" });
    const rows = within(table).getAllByRole("row");
    expect(rows).toHaveLength(3);
    expect(rows[1]).toHaveTextContent("one-at-a-time");
    expect(rows[1]).toHaveTextContent("sundial.sleep");
    expect(rows[1]).toHaveTextContent("report.build");
    expect(within(rows[1]).getByTestId("limit-concurrency")).toHaveTextContent("1 / 1");
    expect(within(rows[1]).getByTestId("limit-throttled")).toHaveTextContent("4");
    expect(rows[2]).toHaveTextContent("all types");
    expect(rows[2]).toHaveTextContent("customer_id");
    expect(rows[2]).toHaveTextContent("10 / min");
    expect(within(rows[2]).getByTestId("limit-concurrency")).toHaveTextContent("3 active2 per key");
  });

  it("says when there are none", () => {
    renderAt(<Limits queue="mail" limits={[]} />);
    expect(screen.getByText(/No limits/)).toBeInTheDocument();
  });

  it("creates a limit, checking as you type", async () => {
    const calls = mockFetch({ "PUT /v1/queues/mail/limits/slow": [201, { name: "slow", concurrency: 2, active: 0, throttled: 0 }] });
    renderAt(<Limits queue="mail" limits={[]} />);
    fireEvent.click(screen.getByRole("button", { name: "Add limit to mail" }));
    const form = screen.getByRole("form", { name: "New limit on mail" });
    fireEvent.click(within(form).getByRole("button", { name: "Create limit" }));
    expect(calls).toHaveLength(0);
    expect(within(form).getByLabelText("Name")).toHaveAttribute("aria-invalid", "true");
    fireEvent.change(within(form).getByLabelText("Name"), { target: { value: "slow" } });
    fireEvent.change(within(form).getByLabelText("Concurrency"), { target: { value: "abc" } });
    expect(within(form).getByText("concurrency must be a whole number")).toBeInTheDocument();
    fireEvent.change(within(form).getByLabelText("Concurrency"), { target: { value: "2" } });
    fireEvent.change(within(form).getByLabelText("Types"), { target: { value: "sundial.sleep" } });
    fireEvent.click(within(form).getByRole("button", { name: "Create limit" }));
    await waitFor(() => expect(screen.queryByRole("form")).toBeNull());
    expect(calls[0]).toMatchObject({ method: "PUT", path: "/v1/queues/mail/limits/slow", body: { types: ["sundial.sleep"], concurrency: 2 } });
  });

  it("shows the API's 400 next to the field it names, and other refusals in a banner", async () => {
    let answer: [number, unknown] = [400, { error: { code: "invalid_argument", message: "key must be a top-level payload field name", field: "key" } }];
    mockFetch({ "PUT /v1/queues/mail/limits/one-at-a-time": () => answer });
    renderAt(<Limits queue="mail" limits={limits} />);
    fireEvent.click(screen.getByRole("button", { name: "Edit limit one-at-a-time" }));
    const form = screen.getByRole("form", { name: "Edit limit one-at-a-time" });
    expect(within(form).getByLabelText("Name")).toHaveValue("one-at-a-time");
    expect(within(form).getByLabelText("Name")).toHaveAttribute("readonly");
    expect(within(form).getByLabelText("Types")).toHaveValue("sundial.sleep, report.build");
    fireEvent.click(within(form).getByRole("button", { name: "Save limit" }));
    const key = within(form).getByLabelText("Key");
    await waitFor(() => expect(key).toHaveAttribute("aria-invalid", "true"));
    expect(within(form).getByText("key must be a top-level payload field name")).toHaveClass("field-error");
    answer = [409, { error: { code: "conflict", message: "a queue holds at most 100 limits" } }];
    fireEvent.change(key, { target: { value: "tenant" } });
    expect(key).not.toHaveAttribute("aria-invalid");
    fireEvent.click(within(form).getByRole("button", { name: "Save limit" }));
    expect(await within(form).findByText(/at most 100 limits/)).toBeInTheDocument();
  });

  it("deletes only after confirmation", async () => {
    const calls = mockFetch({ "DELETE /v1/queues/mail/limits/per-customer": [204, null] });
    renderAt(<Limits queue="mail" limits={limits} />);
    fireEvent.click(screen.getByRole("button", { name: "Delete limit per-customer" }));
    expect(calls).toHaveLength(0);
    fireEvent.click(screen.getByRole("button", { name: "Delete limit", hidden: true }));
    await waitFor(() => expect(calls).toHaveLength(1));
    expect(calls[0]).toMatchObject({ method: "DELETE", path: "/v1/queues/mail/limits/per-customer" });
  });
});

describe("Queues page", () => {
  it("shows throttled and the limits from the live stats", () => {
    act(() => liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue] }]));
    renderAt(<Queues />, "/queues");
    const card = screen.getByRole("article", { name: "Queue mail" });
    expect(within(card).getByTestId("queue-throttled")).toHaveTextContent("4");
    expect(within(card).getByRole("table", { name: "Limits of mail" })).toBeInTheDocument();
  });
});

describe("Job detail", () => {
  it("shows group, the limit a queued job waits for, and the traceparent", async () => {
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    mockFetch({
      "GET /v1/jobs/J1": [200, {
        id: "J1", queue: "mail", type: "sundial.sleep", priority: "normal", state: "queued", attempt: 0, max_attempts: 3, timeout_seconds: 30,
        backoff: { base_seconds: 1, max_seconds: 60 }, run_at: "2026-01-01T00:00:00Z", created_at: "2026-01-01T00:00:00Z",
        group: "acme", traceparent: tp, throttled_by: "one-at-a-time",
      }],
      "GET /v1/jobs/J1/events": [200, { events: [] }],
      "GET /v1/jobs": [200, { jobs: [], next_cursor: "" }],
    });
    renderAt(<JobDetail id="J1" />, "/jobs/J1");
    expect(await screen.findByTestId("job-group")).toHaveTextContent("acme");
    expect(screen.getByTestId("job-throttled-by")).toHaveTextContent("waiting for limit one-at-a-time");
    expect(screen.getByTestId("job-traceparent")).toHaveTextContent(tp);
  });
});

describe("Submit: group and traceparent", () => {
  const f: SubmitForm = {
    queue: "default", type: "sundial.echo", payload: "", priority: "normal", when: "now", delay: "", runAt: "",
    maxAttempts: "", timeout: "", idempotencyKey: "", dependsOn: "",
  };
  it("sends them when filled in and checks their form", () => {
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    expect(buildSpec({ ...f, group: " acme ", traceparent: tp }).spec).toMatchObject({ group: "acme", traceparent: tp });
    expect(buildSpec({ ...f, group: "" }).spec).not.toHaveProperty("group");
    expect(Object.keys(buildSpec({ ...f, group: "a b", traceparent: "00-xyz" }).errors).sort()).toEqual(["group", "traceparent"]);
  });
});
