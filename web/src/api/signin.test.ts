// @vitest-environment jsdom
import { afterEach, describe, expect, it } from "vitest";
import { csrfToken, request, signInPath } from "./client";
import { mockFetch } from "../test/render";

describe("sign-in", () => {
  afterEach(() => {
    document.cookie = "sundial_csrf=; max-age=0";
  });
  it("sends the session's CSRF token on state-changing requests only", async () => {
    document.cookie = "sundial_csrf=tok-123";
    expect(csrfToken()).toBe("tok-123");
    const calls = mockFetch({ "POST /v1/queues/q/pause": [200, {}], "GET /v1/queues": [200, { queues: [] }] });
    await request("POST", "/v1/queues/q/pause", {});
    await request("GET", "/v1/queues");
    expect(calls[0].headers["X-CSRF-Token"]).toBe("tok-123");
    expect(calls[1].headers["X-CSRF-Token"]).toBeUndefined();
  });
  it("learns where to sign in from a 401", async () => {
    globalThis.fetch = (async () => new Response(JSON.stringify({ error: { code: "unauthenticated", message: "sign in" } }),
      { status: 401, headers: { "X-Sundial-Sign-In": "/auth/login" } })) as typeof fetch;
    await expect(request("GET", "/v1/queues")).rejects.toThrow();
    expect(signInPath()).toBe("/auth/login");
  });
});
