// @vitest-environment jsdom
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { actorLabel, Audit } from "./Audit";
import { mockFetch, renderAt } from "../test/render";

describe("Audit page", () => {
  it("lists records, filters through the URL and says when the log cannot be read", async () => {
    const calls = mockFetch({
      "GET /v1/audit": [200, { next_cursor: "", records: [
        { id: "2", at: "2026-12-07T10:00:00.000Z", actor: { kind: "key", id: "key:1a2b3c4d5e6f", ip: "10.0.0.1" }, request_id: "r-1", action: "job.cancel", target: "job:J1", outcome: "ok", status: 200 },
        { id: "1", at: "2026-12-07T09:00:00.000Z", actor: { kind: "anonymous", ip: "10.0.0.9" }, action: "auth.refused", target: "queue:mail", outcome: "refused", status: 401, detail: "invalid API key" },
      ] }],
    });
    const { loc } = renderAt(<Audit />, "/audit");
    await screen.findByText("job.cancel");
    expect(screen.getByRole("link", { name: "job:J1" }).getAttribute("href")).toBe("/jobs/J1");
    expect(screen.getByText("invalid API key")).toBeTruthy();
    fireEvent.change(screen.getByLabelText("Action"), { target: { value: "job.cancel" } });
    fireEvent.click(screen.getByRole("button", { name: "Search" }));
    await waitFor(() => expect(loc.history?.at(-1)).toBe("/audit?action=job.cancel"));
    await waitFor(() => expect(calls.some((c) => c.path.includes("action=job.cancel"))).toBe(true));
  });
  it("shows a 503 as an error", async () => {
    mockFetch({ "GET /v1/audit": [503, { error: { code: "unavailable", message: "audit store not configured" } }] });
    renderAt(<Audit />, "/audit");
    await screen.findByText(/audit store not configured/);
  });
  it("names actors", () => {
    expect(actorLabel({ kind: "user", id: "sub-1", name: "Ann" })).toBe("Ann (sub-1)");
    expect(actorLabel({ kind: "anonymous" })).toBe("anonymous");
  });
});
