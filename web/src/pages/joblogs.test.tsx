// @vitest-environment jsdom
import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { beforeAll, describe, expect, it } from "vitest";
import { JobDetail, linkJobIds } from "./JobDetail";
import { Jobs } from "./Jobs";
import { DeadLetters, describeFilter } from "./DeadLetters";
import type { QueueStats } from "../api/types";
import { appendLog, emptyLog } from "../components/JobLogs";
import { liveStore } from "../live/store";
import { mockFetch, renderAt } from "../test/render";
import type { Job, JobLogLine, StreamEvent } from "../api/types";
import { render } from "@testing-library/react";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";

const at = (s: number) => new Date(Date.UTC(2026, 11, 7, 10, 0, s)).toISOString();
const line = (seq: number, level: JobLogLine["level"], message: string, fields?: Record<string, string>): JobLogLine => ({
  seq, at: at(seq), attempt: 1, level, message, ...(fields ? { fields } : {}),
});

function job(over: Partial<Job> = {}): Job {
  return {
    id: "01JLOGS0000000000000000000", queue: "billing", type: "invoice.charge", priority: "normal", state: "active", attempt: 1, max_attempts: 3,
    timeout_seconds: 30, backoff: { base_seconds: 1, max_seconds: 60 }, run_at: at(0), created_at: at(0), started_at: at(1),
    ...over,
  };
}

describe("appendLog", () => {
  it("adds only lines past the last seq, keeps the larger dropped count, and trims the oldest past the bound", () => {
    let s = appendLog(emptyLog, { lines: [line(1, "info", "a"), line(2, "warn", "b")], dropped: 0, next_after: 2 });
    expect(s.lines.map((l) => l.seq)).toEqual([1, 2]);
    // A page read twice (a tick during a read) adds nothing.
    s = appendLog(s, { lines: [line(2, "warn", "b"), line(3, "error", "c")], dropped: 5, next_after: 3 });
    expect(s.lines.map((l) => l.seq)).toEqual([1, 2, 3]);
    expect([s.dropped, s.next]).toEqual([5, 3]);
    s = appendLog(s, { lines: [line(4, "info", "d"), line(5, "info", "e")], dropped: 0, next_after: 5 }, 3);
    expect(s.lines.map((l) => l.seq)).toEqual([3, 4, 5]);
    expect([s.trimmed, s.dropped, s.next]).toEqual([2, 5, 5]);
  });
});

describe("linkJobIds", () => {
  it("links the job ids a message names", () => {
    const loc = memoryLocation({ path: "/" });
    render(<Router hook={loc.hook}><p data-testid="m">{linkJobIds("waiting for 01JAHEAD000000000000000000 (sequence acct-1) to end")}</p></Router>);
    const link = within(screen.getByTestId("m")).getByRole("link", { name: "01JAHEAD000000000000000000" });
    expect(link).toHaveAttribute("href", "/jobs/01JAHEAD000000000000000000");
    expect(screen.getByTestId("m")).toHaveTextContent("waiting for 01JAHEAD000000000000000000 (sequence acct-1) to end");
  });
});

describe("the job page's options and Logs panel", () => {
  it("shows start by, deadline, sequence, debounce key and tags, and the job ahead as a link", async () => {
    const j = job({
      state: "waiting", started_at: undefined, start_by: at(600), deadline: at(1200), debounce_key: "user-7",
      sequence: { key: "acct-1", on_failure: "cancel" }, tags: ["tenant:acme", "vip"],
      held_back: { reason: "dependencies", message: "waiting for 01JAHEAD000000000000000000 (sequence acct-1)" },
    });
    mockFetch({
      [`GET /v1/jobs/${j.id}`]: [200, j],
      [`GET /v1/jobs/${j.id}/events`]: [200, { events: [], next_cursor: "" }],
      [`GET /v1/jobs/${j.id}/graph`]: [200, { root: j.id, nodes: [{ id: j.id, attempt: 1 }], edges: [], truncated: false }],
      [`GET /v1/jobs/${j.id}/logs`]: [200, { lines: [], dropped: 0, next_after: 0 }],
    });
    renderAt(<JobDetail id={j.id} />, `/jobs/${j.id}`);
    expect(await screen.findByTestId("job-sequence")).toHaveTextContent("acct-1");
    expect(screen.getByTestId("job-sequence")).toHaveTextContent("cancelled if one of them ends dead or cancelled");
    expect(screen.getByTestId("job-debounce-key")).toHaveTextContent("user-7");
    expect(screen.getByTestId("job-start-by")).toHaveTextContent("expires unless it starts by then");
    expect(screen.getByTestId("job-deadline")).toHaveAttribute("title", at(1200));
    const tags = screen.getByTestId("job-tags");
    expect(within(tags).getByRole("link", { name: "tenant:acme" })).toHaveAttribute("href", "/jobs?queue=billing&state=waiting&tag=tenant%3Aacme");
    expect(within(screen.getByTestId("job-held-back")).getByRole("link", { name: "01JAHEAD000000000000000000" })).toHaveAttribute("href", "/jobs/01JAHEAD000000000000000000");
    expect(await screen.findByTestId("job-logs-summary")).toHaveTextContent("No lines yet");
  });

  it("lists the lines, reads the new ones after the last seq on the job's log event, and says how many were dropped", async () => {
    const j = job();
    let page: { lines: JobLogLine[]; dropped: number; next_after: number } = {
      lines: [line(3, "info", "charging card", { amount: "42", currency: "EUR" }), line(4, "warn", "slow gateway")],
      dropped: 2,
      next_after: 4,
    };
    const calls = mockFetch({
      [`GET /v1/jobs/${j.id}`]: [200, j],
      [`GET /v1/jobs/${j.id}/events`]: [200, { events: [], next_cursor: "" }],
      [`GET /v1/jobs/${j.id}/graph`]: [200, { root: j.id, nodes: [{ id: j.id, attempt: 1 }], edges: [], truncated: false }],
      [`GET /v1/jobs/${j.id}/logs`]: () => [200, page],
    });
    renderAt(<JobDetail id={j.id} />, `/jobs/${j.id}`);
    const panel = await screen.findByTestId("job-logs");
    const log = await within(panel).findByRole("log", { name: "Job log lines" });
    expect(within(log).getAllByRole("listitem").map((li) => li.dataset.seq)).toEqual(["3", "4"]);
    expect(within(log).getAllByRole("listitem")[0]).toHaveTextContent(/info\s*charging card\s*amount=42\s*currency=EUR/);
    expect(screen.getByTestId("job-logs-dropped")).toHaveTextContent("2 older lines dropped");
    const logReads = () => calls.filter((c) => c.path.startsWith(`/v1/jobs/${j.id}/logs`));
    expect(logReads()[0].path).not.toContain("after=");
    const jobReads = () => calls.filter((c) => c.path === `/v1/jobs/${j.id}`).length;
    const before = jobReads();

    page = { lines: [line(5, "error", "card declined", { code: "51" })], dropped: 2, next_after: 5 };
    const ev: StreamEvent = { id: "77-0", job_id: j.id, queue: "billing", type: "invoice.charge", event: "log", state: "active", at: at(50), attempt: 1, error: "", worker_id: "w1", message: "1" };
    act(() => liveStore.receive([{ kind: "event", event: ev }]));
    await waitFor(() => expect(within(log).getAllByRole("listitem")).toHaveLength(3));
    expect(logReads().at(-1)!.path).toContain("after=4");
    expect(within(log).getAllByRole("listitem")[2]).toHaveAttribute("data-level", "error");
    expect(screen.getByTestId("job-logs-summary")).toHaveTextContent("3 lines");
    // A log event is not a change of the job: it is not read again for it, and the timeline does not list it.
    expect(jobReads()).toBe(before);
    expect(within(screen.getByTestId("timeline")).queryByText("log")).toBeNull();
  });
});

const queue = (name: string, over: Partial<QueueStats> = {}): QueueStats => ({
  name, paused: false, queued: { high: 0, normal: 0, low: 0 }, scheduled: 0, active: 0, waiting: 0, dead: 0,
  succeeded_total: 0, failed_total: 0, processed_per_second: 0, ...over,
});

describe("the tag filter", () => {
  // jsdom lays nothing out: give every element a size, so the virtualized job table renders its rows.
  beforeAll(() => {
    Object.defineProperty(HTMLElement.prototype, "clientHeight", { configurable: true, get: () => 800 });
    Object.defineProperty(HTMLElement.prototype, "clientWidth", { configurable: true, get: () => 1200 });
  });

  it("asks the live list for the tag, shows the rows' tags, and cancels the matching jobs with it", async () => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("mail", { queued: { high: 0, normal: 7, low: 0 } })] }]);
    const calls = mockFetch({
      "GET /v1/queues/mail/jobs": [200, { jobs: [job({ id: "t1", queue: "mail", state: "queued", tags: ["tenant:acme", "vip", "eu"] })], next_cursor: "" }],
      "POST /v1/queues/mail/jobs/bulk": [200, { id: "r", action: "cancel", queue: "mail", matched: 1, count: 1, scanned: 1, done: true }],
    });
    const { loc } = renderAt(<Jobs />, "/jobs?queue=mail&state=queued");
    await screen.findByText("t1");
    fireEvent.change(screen.getByLabelText("Tag"), { target: { value: " tenant:acme " } });
    fireEvent.click(screen.getByRole("button", { name: "Search" }));
    await waitFor(() => expect(loc.history!.at(-1)).toBe("/jobs?queue=mail&state=queued&tag=tenant%3Aacme"));
    await waitFor(() => expect(calls.map((c) => c.path)).toContain("/v1/queues/mail/jobs?state=queued&tag=tenant%3Aacme&limit=100"));
    expect(screen.getByTestId("jobs-source")).toHaveTextContent("tagged tenant:acme");
    const row = (await screen.findByText("t1")).closest("[role=row]") as HTMLElement;
    expect(row).toHaveTextContent("tenant:acme");
    expect(row).toHaveTextContent("+1");
    fireEvent.click(screen.getByRole("button", { name: "Cancel all matching…" }));
    expect(screen.getByTestId("cancel-matching-what")).toHaveTextContent("tagged tenant:acme");
    fireEvent.click(screen.getByRole("button", { name: "Cancel matching", hidden: true }));
    await waitFor(() => expect(calls.some((c) => c.method === "POST")).toBe(true));
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({ action: "cancel", filter: { state: "queued", tag: "tenant:acme" } });
  });

  it("lists the dead letters of a tag, and retries and purges by it", async () => {
    liveStore.receive([{ kind: "stats", workers: 1, at: "", queues: [queue("mail", { dead: 3 })] }]);
    const tagged = job({ id: "d1", queue: "mail", state: "dead", tags: ["bad"], finished_at: at(9), last_error: "boom" });
    const calls = mockFetch({
      "GET /v1/queues/mail/dead": [200, { jobs: [tagged], next_cursor: "" }],
      "GET /v1/queues/mail/jobs": [200, { jobs: [tagged], next_cursor: "" }],
      "POST /v1/queues/mail/jobs/bulk": [200, { id: "r", action: "delete", queue: "mail", matched: 1, count: 1, scanned: 1, done: true }],
    });
    const { loc } = renderAt(<DeadLetters queue="mail" />, "/dead/mail");
    const form = screen.getByRole("search", { name: "Show dead jobs by tag" });
    fireEvent.change(within(form).getByLabelText("Tag"), { target: { value: "bad" } });
    fireEvent.click(within(form).getByRole("button", { name: "Show" }));
    await waitFor(() => expect(loc.history!.at(-1)).toBe("/dead/mail?tag=bad"));
    await waitFor(() => expect(calls.map((c) => c.path)).toContain("/v1/queues/mail/dead?tag=bad&limit=100"));
    await screen.findByText("d1");
    // Retry by filter takes the tag; the preview reads the live list with it.
    fireEvent.click(screen.getByRole("button", { name: "Retry matching…" }));
    const dialog = await screen.findByRole("dialog", { name: "Retry matching dead jobs?", hidden: true });
    await waitFor(() => expect(within(dialog).getByTestId("bulk-preview-count")).toHaveTextContent("1"));
    expect(within(dialog).getByText(/tagged bad/)).toBeInTheDocument();
    expect(calls.map((c) => c.path)).toContain("/v1/queues/mail/jobs?state=dead&tag=bad&limit=500");
    fireEvent.click(within(dialog).getByRole("button", { name: "Cancel", hidden: true }));
    // "Purge all tagged" deletes by the tag, not every dead job.
    fireEvent.click(screen.getByRole("button", { name: "Purge all tagged" }));
    fireEvent.click(screen.getByRole("button", { name: "Purge", hidden: true }));
    await waitFor(() => expect(calls.some((c) => c.method === "POST")).toBe(true));
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({ action: "delete", filter: { tag: "bad" } });
    expect(describeFilter({ type: "t", tag: "bad" })).toBe("of type t, tagged bad");
  });
});
