// @vitest-environment jsdom
// The live job list and bulk actions (issue 36): the API client, the choice
// of source on the Jobs page, the bulk helpers and the pages that use them.
import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { api, isNoHistory, ApiError } from "../api/client";
import type { Job, QueueStats } from "../api/types";
import { chooseSource } from "../lib/source";
import { bulkByIds, matchesDead, previewDead } from "../lib/bulk";
import { describeBulk, describeProgress } from "../components/Bulk";
import { LiveStore, liveStore, maxBulks } from "../live/store";
import { DeadLetters, describeFilter } from "./DeadLetters";
import { Jobs } from "./Jobs";
import { Queues } from "./Queues";
import { mockFetch, renderAt } from "../test/render";

const job = (id: string, over: Partial<Job> = {}): Job => ({
  id, queue: "mail", type: "email.send", priority: "normal", state: "dead", attempt: 1, max_attempts: 1, timeout_seconds: 30,
  backoff: { base_seconds: 5, max_seconds: 3600 }, run_at: "2026-11-28T01:00:00.000Z", created_at: "2026-11-28T01:00:00.000Z",
  finished_at: "2026-11-28T02:00:00.000Z", last_error: "smtp timeout", ...over,
});

const queue = (name: string, over: Partial<QueueStats> = {}): QueueStats => ({
  name, paused: false, queued: { high: 0, normal: 0, low: 0 }, scheduled: 0, active: 0, waiting: 0, dead: 0,
  succeeded_total: 0, failed_total: 0, processed_per_second: 0, ...over,
});

// jsdom lays nothing out: give every element a size, so the virtualized job table renders its rows.
beforeAll(() => {
  Object.defineProperty(HTMLElement.prototype, "clientHeight", { configurable: true, get: () => 800 });
  Object.defineProperty(HTMLElement.prototype, "clientWidth", { configurable: true, get: () => 1200 });
});

const noHistory: [number, unknown] = [503, { error: { code: "unavailable", message: "history store not configured" } }];

describe("API client", () => {
  it("lists a live state of a queue with its filters and cursor", async () => {
    const calls = mockFetch({ "GET /v1/queues/mail/jobs": [200, { jobs: [job("a")], next_cursor: "c2" }] });
    const page = await api.liveJobs("mail", { state: "dead", type: "email.send", priority: "high" }, "c1", 50);
    expect(page.next_cursor).toBe("c2");
    expect(calls[0].path).toBe("/v1/queues/mail/jobs?state=dead&type=email.send&priority=high&cursor=c1&limit=50");
  });
  it("sends a bulk action with its request id", async () => {
    const calls = mockFetch({ "POST /v1/queues/mail/jobs/bulk": [200, { id: "r1", action: "retry", queue: "mail", matched: 2, count: 1, scanned: 0, done: true }] });
    const r = await api.bulk("mail", { action: "retry", ids: ["a", "b"] }, "r1");
    expect(r.count).toBe(1);
    expect(calls[0]).toMatchObject({ method: "POST", body: { action: "retry", ids: ["a", "b"] } });
    expect(calls[0].headers["X-Request-Id"]).toBe("r1");
  });
  it("tells the API's answer without a history store", () => {
    expect(isNoHistory(new ApiError(503, "unavailable", "history store not configured"))).toBe(true);
    expect(isNoHistory(new ApiError(503, "unavailable", "redis: connection refused"))).toBe(false);
  });
});

describe("chooseSource", () => {
  it("reads the live list for a queue and a live state", () => {
    expect(chooseSource({ queue: "mail", state: "queued" }, undefined)).toEqual({ kind: "live", queue: "mail", state: "queued", why: "live-state" });
    expect(chooseSource({ queue: "mail", state: "dead" }, true)).toMatchObject({ kind: "live", state: "dead" });
  });
  it("searches the history for the rest", () => {
    expect(chooseSource({ queue: "mail", state: "succeeded" }, true)).toEqual({ kind: "history" });
    expect(chooseSource({ state: "queued" }, true)).toEqual({ kind: "history" });
    expect(chooseSource({ queue: "mail", state: "queued", from: "2026-11-28T00:00:00Z" }, true)).toEqual({ kind: "history" });
    expect(chooseSource({}, undefined)).toEqual({ kind: "probing" });
  });
  it("without a history store, lists what Redis holds", () => {
    expect(chooseSource({}, false, "default")).toEqual({ kind: "live", queue: "default", state: "queued", why: "no-history" });
    expect(chooseSource({ state: "active", from: "2026-11-28T00:00:00Z" }, false, "a")).toMatchObject({ kind: "live", queue: "a", state: "active" });
    expect(chooseSource({ queue: "mail", state: "succeeded" }, false)).toEqual({ kind: "unavailable", state: "succeeded" });
    expect(chooseSource({}, false)).toEqual({ kind: "need-queue" });
  });
});

describe("bulk helpers", () => {
  it("sends one request per queue", async () => {
    const calls = mockFetch({
      "POST /v1/queues/a/jobs/bulk": (b) => [200, { id: "1", action: "cancel", queue: "a", matched: (b as { ids: string[] }).ids.length, count: 2, scanned: 0, done: true }],
      "POST /v1/queues/b/jobs/bulk": [409, { error: { code: "conflict", message: "nope" } }],
    });
    const started: string[] = [];
    const r = await bulkByIds("cancel", [{ id: "1", queue: "a" }, { id: "2", queue: "b" }, { id: "3", queue: "a" }], (_, q) => started.push(q));
    expect(started).toEqual(["a", "b"]);
    expect(calls.map((c) => [c.path, c.body])).toEqual([
      ["/v1/queues/a/jobs/bulk", { action: "cancel", ids: ["1", "3"] }],
      ["/v1/queues/b/jobs/bulk", { action: "cancel", ids: ["2"] }],
    ]);
    expect(r).toMatchObject({ matched: 2, count: 2, failed: [{ queue: "b", ids: 1 }] });
    expect(describeBulk(r)).toBe("Cancelled 2 jobs. 1 job of queue b could not be: nope");
  });
  it("says what was skipped and how far it is", () => {
    expect(describeBulk({ action: "retry", matched: 5, count: 3 })).toBe("Retried 3 jobs. 2 of the 5 selected were skipped: no longer in a state the action applies to.");
    expect(describeProgress("retry", undefined)).toBe("Retrying…");
    expect(describeProgress("delete", { id: "x", action: "delete", queue: "q", matched: 1500, count: 1000, scanned: 1500, done: false }))
      .toBe("Deleting… 1,000 done, 1,500 selected so far (1,500 read).");
  });
  it("matches dead jobs as the API's filter does", () => {
    const j = job("a");
    expect(matchesDead(j, {})).toBe(true);
    expect(matchesDead(j, { type: "email.send", error_contains: "smtp", since: "2026-11-28T02:00:00.000Z" })).toBe(true);
    expect(matchesDead(j, { error_contains: "SMTP" })).toBe(false);
    expect(matchesDead(j, { since: "2026-11-28T02:00:00.001Z" })).toBe(false);
  });
  it("previews a filter page by page and stops at the first job older than since", async () => {
    const pages: Record<string, { jobs: Job[]; next_cursor: string }> = {
      "": { jobs: [job("a", { finished_at: "2026-11-28T03:00:00.000Z" }), job("b", { last_error: "dns", finished_at: "2026-11-28T02:59:00.000Z" })], next_cursor: "p2" },
      p2: { jobs: [job("c", { finished_at: "2026-11-28T02:30:00.000Z" }), job("d", { finished_at: "2026-11-28T01:00:00.000Z" }), job("e")], next_cursor: "p3" },
    };
    const calls = mockFetch({ "GET /v1/queues/mail/jobs": [200, null] });
    globalThis.fetch = (async (input: RequestInfo | URL) => {
      const u = new URL(String(input), "http://localhost");
      calls.push({ method: "GET", path: u.pathname + u.search, body: undefined, headers: {} });
      return new Response(JSON.stringify(pages[u.searchParams.get("cursor") ?? ""]), { status: 200 });
    }) as typeof fetch;
    const p = await previewDead("mail", { type: "email.send", error_contains: "smtp", since: "2026-11-28T02:00:00.000Z" }, 5000, 1);
    expect(p).toMatchObject({ count: 2, complete: true, scanned: 4 });
    expect(p.sample.map((j) => j.id)).toEqual(["a"]);
    expect(calls).toHaveLength(2);
    expect(calls[0].path).toContain("state=dead&type=email.send");
  });
});

describe("LiveStore bulk progress", () => {
  it("keeps the latest progress per request, also while paused, and only the last few", () => {
    const s = new LiveStore(() => 1000);
    s.setPaused(true);
    const b = (id: string, count: number) => ({ kind: "bulk" as const, bulk: { id, action: "retry" as const, queue: "q", matched: 10, count, scanned: 10, done: false } });
    s.receive([b("r1", 1), b("r1", 5)]);
    expect(s.getSnapshot().bulks.get("r1")?.count).toBe(5);
    for (let i = 0; i < maxBulks + 5; i++) s.receive([b("x" + i, i)]);
    expect(s.getSnapshot().bulks.size).toBe(maxBulks);
    expect(s.getSnapshot().bulks.has("r1")).toBe(false);
  });
});

describe("DeadLetters page", () => {
  beforeEach(() => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("mail", { dead: 3 })] }]);
  });
  it("retries every dead job matching a filter after showing what it selects", async () => {
    const dead = [job("j1"), job("j2", { last_error: "dns failure" }), job("j3")];
    const calls = mockFetch({
      "GET /v1/queues/mail/dead": [200, { jobs: dead, next_cursor: "" }],
      "GET /v1/queues/mail/jobs": [200, { jobs: dead, next_cursor: "" }],
      "POST /v1/queues/mail/jobs/bulk": (b) => [200, { id: "r", action: "retry", queue: "mail", matched: 2, count: 2, scanned: 3, done: true, _b: b }],
    });
    renderAt(<DeadLetters queue="mail" />, "/dead/mail");
    const form = screen.getByRole("form", { name: "Retry dead jobs by filter" });
    fireEvent.change(within(form).getByLabelText("Type"), { target: { value: "email.send" } });
    fireEvent.change(within(form).getByLabelText("Error contains"), { target: { value: "smtp" } });
    fireEvent.click(within(form).getByRole("button", { name: "Retry matching…" }));
    const dialog = await screen.findByRole("dialog", { name: "Retry matching dead jobs?", hidden: true });
    await waitFor(() => expect(within(dialog).getByTestId("bulk-preview-count")).toHaveTextContent("2"));
    expect(within(dialog).getByText(/of type email.send, whose error contains “smtp”/)).toBeInTheDocument();
    expect(within(dialog).getByText("j1")).toBeInTheDocument();
    expect(within(dialog).queryByText("j2")).toBeNull();
    expect(calls.some((c) => c.method === "POST")).toBe(false);
    fireEvent.click(within(dialog).getByRole("button", { name: "Retry matching", hidden: true }));
    expect(await screen.findByTestId("bulk-outcome")).toHaveTextContent("Retried 2 jobs.");
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ action: "retry", filter: { type: "email.send", error_contains: "smtp" } });
    expect(post.headers["X-Request-Id"]).toMatch(/^dash-bulk-/);
  });
  it("shows the stream's progress while the action runs", async () => {
    let answer: (r: Response) => void = () => {};
    const calls = mockFetch({ "GET /v1/queues/mail/dead": [200, { jobs: [job("j1")], next_cursor: "" }] });
    const plain = globalThis.fetch;
    globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      if (init?.method === "POST") {
        calls.push({ method: "POST", path: String(input), body: JSON.parse(String(init.body)), headers: { ...(init.headers as Record<string, string>) } });
        return new Promise<Response>((r) => (answer = r));
      }
      return plain(input, init);
    }) as typeof fetch;
    renderAt(<DeadLetters queue="mail" />, "/dead/mail");
    fireEvent.click(await screen.findByRole("checkbox", { name: "Select job j1" }));
    fireEvent.click(screen.getByRole("button", { name: "Purge selected" }));
    fireEvent.click(screen.getByRole("button", { name: "Purge", hidden: true }));
    await waitFor(() => expect(calls.some((c) => c.method === "POST")).toBe(true));
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ action: "delete", ids: ["j1"] });
    const rid = post.headers["X-Request-Id"];
    expect(await screen.findByTestId("bulk-progress")).toHaveTextContent("Deleting…");
    act(() => liveStore.receive([{ kind: "bulk", bulk: { id: rid, action: "delete", queue: "mail", matched: 1, count: 0, scanned: 0, done: false } }]));
    expect(screen.getByTestId("bulk-progress")).toHaveTextContent("Deleting… 0 done, 1 selected so far.");
    await act(async () => answer(new Response(JSON.stringify({ id: rid, action: "delete", queue: "mail", matched: 1, count: 1, scanned: 0, done: true }), { status: 200 })));
    expect(await screen.findByTestId("bulk-outcome")).toHaveTextContent("Deleted 1 job. Their history stays in the history store.");
    expect(screen.queryByTestId("bulk-progress")).toBeNull();
  });
  it("describes a filter in words", () => {
    expect(describeFilter({})).toBe("");
    expect(describeFilter({ type: "t", error_contains: "x" })).toBe("of type t, whose error contains “x”");
  });
});

describe("Jobs page", () => {
  beforeEach(() => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("alpha"), queue("mail")] }]);
  });
  it("reads the live list for a queue and a live state, without asking the history", async () => {
    const calls = mockFetch({ "GET /v1/queues/mail/jobs": [200, { jobs: [job("q1", { state: "queued" })], next_cursor: "" }] });
    renderAt(<Jobs />, "/jobs?queue=mail&state=queued&priority=high");

    expect(await screen.findByText("q1")).toBeInTheDocument();
    expect(screen.getByTestId("jobs-source")).toHaveAttribute("data-source", "live");
    expect(calls.map((c) => c.path)).toEqual(["/v1/queues/mail/jobs?state=queued&priority=high&limit=100"]);
  });
  it("falls back to the live list of the first queue when the API has no history store", async () => {
    const calls = mockFetch({
      "GET /v1/jobs": noHistory,
      "GET /v1/queues/alpha/jobs": [200, { jobs: [job("a1", { queue: "alpha", state: "queued" })], next_cursor: "" }],
    });
    renderAt(<Jobs />, "/jobs");
    expect(await screen.findByText("a1")).toBeInTheDocument();
    expect(screen.getByTestId("jobs-source")).toHaveTextContent("without a history store");
    expect(screen.queryByRole("alert")).toBeNull();
    expect(calls.filter((c) => c.path.startsWith("/v1/jobs"))).toHaveLength(1);
  });
  it("says when a final state needs the history store", async () => {
    mockFetch({ "GET /v1/jobs": noHistory });
    renderAt(<Jobs />, "/jobs?queue=mail&state=succeeded");
    expect(await screen.findByText(/Redis keeps no list of succeeded jobs/)).toBeInTheDocument();
  });
  it("lists only the jobs waiting for a handler, following the cursor", async () => {
    const pages: Record<string, { jobs: Job[]; next_cursor: string }> = {
      "": { jobs: [job("plain", { state: "queued" })], next_cursor: "p2" },
      p2: { jobs: [job("stuck", { state: "queued", held_back: { reason: "no_handler", message: "no worker handles it" } })], next_cursor: "" },
    };
    globalThis.fetch = (async (input: RequestInfo | URL) => {
      const u = new URL(String(input), "http://localhost");
      return new Response(JSON.stringify(pages[u.searchParams.get("cursor") ?? ""]), { status: 200 });
    }) as typeof fetch;
    renderAt(<Jobs />, "/jobs?queue=mail&state=queued&held=no_handler");
    expect(await screen.findByText("stuck")).toBeInTheDocument();
    expect(screen.queryByText("plain")).toBeNull();
    expect(screen.getByTestId("jobs-source")).toHaveTextContent("only those waiting for a worker that handles their type");
  });
  it("retries the selected jobs with one bulk request per queue", async () => {
    const calls = mockFetch({
      "GET /v1/jobs": [200, { jobs: [job("d1"), job("d2", { queue: "alpha" }), job("d3")], next_cursor: "" }],
      "POST /v1/queues/mail/jobs/bulk": [200, { id: "r", action: "retry", queue: "mail", matched: 2, count: 2, scanned: 0, done: true }],
      "POST /v1/queues/alpha/jobs/bulk": [200, { id: "r", action: "retry", queue: "alpha", matched: 1, count: 0, scanned: 0, done: true }],
    });
    renderAt(<Jobs />, "/jobs?state=dead");
    await screen.findByText("d3");
    fireEvent.click(await screen.findByRole("checkbox", { name: "Select all loaded rows" }));
    fireEvent.click(screen.getByRole("button", { name: "Retry selected" }));
    fireEvent.click(screen.getByRole("button", { name: "Retry jobs", hidden: true }));
    expect(await screen.findByTestId("bulk-outcome")).toHaveTextContent("Retried 2 jobs. 1 of the 3 selected was skipped");
    expect(calls.filter((c) => c.method === "POST").map((c) => [c.path, c.body])).toEqual([
      ["/v1/queues/mail/jobs/bulk", { action: "retry", ids: ["d1", "d3"] }],
      ["/v1/queues/alpha/jobs/bulk", { action: "retry", ids: ["d2"] }],
    ]);
  });
});

describe("Queues page", () => {
  it("links a queue's jobs waiting for a handler to the live list of them", () => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("mail", { unhandled: 4 })] }]);
    renderAt(<Queues />, "/queues");
    const link = within(screen.getByTestId("queue-unhandled")).getByRole("link");
    expect(link).toHaveAttribute("href", "/jobs?queue=mail&state=queued&held=no_handler");
    expect(link).toHaveTextContent("4");
  });
  it("says how many of a queue's scheduled jobs are parked durable jobs", () => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("mail", { scheduled: 9, sleeping: 3, awaiting: 2 })] }]);
    renderAt(<Queues />, "/queues");
    expect(screen.getByTestId("queue-scheduled")).toHaveTextContent("9 (durable: 3 asleep, 2 awaiting a signal)");
  });
  it("says nothing of durable jobs for a queue without parked ones", () => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("mail", { scheduled: 9 })] }]);
    renderAt(<Queues />, "/queues");
    expect(screen.getByTestId("queue-scheduled")).toHaveTextContent(/^9$/);
  });
});
