// Rendering helpers for component tests: a query client and an in-memory router.

import type { ReactElement } from "react";
import { render } from "@testing-library/react";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";

export function renderAt(ui: ReactElement, path = "/") {
  const loc = memoryLocation({ path, record: true });
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  const r = render(
    <QueryClientProvider client={qc}>
      <Router hook={loc.hook} searchHook={loc.searchHook}>{ui}</Router>
    </QueryClientProvider>,
  );
  return { ...r, loc, qc };
}

/** mockFetch answers fetch calls from a table of "METHOD /path" → [status, body]. */
export function mockFetch(routes: Record<string, [number, unknown] | ((body: unknown) => [number, unknown])>) {
  const calls: { method: string; path: string; body: unknown; headers: Record<string, string> }[] = [];
  const fn = async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input), "http://localhost");
    const method = init?.method ?? "GET";
    const body = init?.body ? JSON.parse(String(init.body)) : undefined;
    calls.push({ method, path: url.pathname + url.search, body, headers: { ...(init?.headers as Record<string, string> | undefined) } });
    const r = routes[`${method} ${url.pathname}`];
    if (!r) return new Response(JSON.stringify({ error: { code: "not_found", message: "no mock" } }), { status: 404 });
    const [status, data] = typeof r === "function" ? r(body) : r;
    return new Response(status === 204 ? null : JSON.stringify(data), { status });
  };
  globalThis.fetch = fn as typeof fetch;
  return calls;
}
