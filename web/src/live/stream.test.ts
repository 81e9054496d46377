import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoffDelay, streamURL, StreamClient, type StreamStatus } from "./stream";
import type { StreamMessage } from "../api/types";

class FakeSocket {
  static all: FakeSocket[] = [];
  url: string;
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: string }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;
  constructor(url: string) {
    this.url = url;
    FakeSocket.all.push(this);
  }
  open() {
    this.onopen?.();
  }
  send(msg: object) {
    this.onmessage?.({ data: JSON.stringify(msg) });
  }
  drop(code = 1006) {
    this.onclose?.({ code });
  }
  close() {
    this.closed = true;
  }
}

const ev = (n: number): StreamMessage => ({
  kind: "event",
  event: { id: `${n}-0`, job_id: `j${n}`, queue: "q", type: "t", event: "succeeded", state: "succeeded", at: new Date().toISOString(), attempt: 1, error: "", worker_id: "w" },
});

function client(extra: Partial<ConstructorParameters<typeof StreamClient>[0]> = {}) {
  const batches: StreamMessage[][] = [];
  const statuses: StreamStatus[] = [];
  const c = new StreamClient({
    base: "http://localhost:8080/jobs",
    onMessages: (b) => batches.push(b),
    onStatus: (s) => statuses.push(s),
    random: () => 0,
    WebSocketImpl: FakeSocket as unknown as typeof WebSocket,
    ...extra,
  });
  return { c, batches, statuses };
}

describe("backoffDelay", () => {
  it("doubles from the initial delay up to the cap", () => {
    const b = { initialMs: 500, maxMs: 8000, jitter: 0 };
    expect([1, 2, 3, 4, 5, 6, 10].map((n) => backoffDelay(n, b))).toEqual([500, 1000, 2000, 4000, 8000, 8000, 8000]);
  });
  it("shortens each delay by up to the jitter fraction", () => {
    const b = { initialMs: 1000, maxMs: 10_000, jitter: 0.5 };
    expect(backoffDelay(1, b, () => 0)).toBe(1000);
    expect(backoffDelay(1, b, () => 0.999)).toBeCloseTo(500, -1);
    for (let i = 0; i < 50; i++) {
      const d = backoffDelay(3, b);
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
  });
});

describe("streamURL", () => {
  it("builds ws and wss addresses with repeated filters and the key", () => {
    expect(streamURL("http://h:8080/x/y?z=1")).toBe("ws://h:8080/v1/stream");
    const u = new URL(streamURL("https://h/", { queue: ["a", "b"], type: ["email.send"], job: ["01J"] }, "k&1"));
    expect(u.protocol).toBe("wss:");
    expect(u.searchParams.getAll("queue")).toEqual(["a", "b"]);
    expect(u.searchParams.getAll("type")).toEqual(["email.send"]);
    expect(u.searchParams.getAll("job")).toEqual(["01J"]);
    expect(u.searchParams.get("access_token")).toBe("k&1");
  });
});

describe("StreamClient", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    FakeSocket.all = [];
  });
  afterEach(() => vi.useRealTimers());

  it("coalesces messages into one batch per flush interval", () => {
    const { c, batches } = client({ flushMs: 100 });
    c.start();
    const ws = FakeSocket.all[0];
    ws.open();
    for (let i = 0; i < 250; i++) ws.send(ev(i));
    expect(batches).toHaveLength(0);
    vi.advanceTimersByTime(100);
    expect(batches).toHaveLength(1);
    expect(batches[0]).toHaveLength(250);
    ws.send(ev(999));
    vi.advanceTimersByTime(100);
    expect(batches).toHaveLength(2);
    // A stats message is delivered at once, with the events before it.
    ws.send(ev(1000));
    ws.send({ kind: "stats", queues: [], workers: 0, at: "" });
    expect(batches).toHaveLength(3);
    expect(batches[2].map((m) => m.kind)).toEqual(["event", "stats"]);
  });

  it("reconnects with growing backoff and resets it once data flows", () => {
    const { c, statuses } = client({ backoff: { initialMs: 500, maxMs: 4000, jitter: 0 } });
    c.start();
    expect(statuses.at(-1)?.state).toBe("connecting");
    FakeSocket.all[0].drop(1013);
    expect(statuses.at(-1)).toMatchObject({ state: "reconnecting", attempt: 1, closeCode: 1013 });
    vi.advanceTimersByTime(499);
    expect(FakeSocket.all).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(FakeSocket.all).toHaveLength(2);
    FakeSocket.all[1].drop();
    vi.advanceTimersByTime(999);
    expect(FakeSocket.all).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(FakeSocket.all).toHaveLength(3);
    FakeSocket.all[2].drop();
    expect(statuses.at(-1)?.attempt).toBe(3);
    vi.advanceTimersByTime(2000);
    const ws = FakeSocket.all[3];
    ws.open();
    expect(statuses.at(-1)?.state).toBe("open");
    ws.send(ev(1));
    expect(statuses.at(-1)).toMatchObject({ state: "open", attempt: 0 });
    ws.drop();
    vi.advanceTimersByTime(500);
    expect(FakeSocket.all).toHaveLength(5);
  });

  it("retries at once on demand", () => {
    const { c } = client({ backoff: { initialMs: 10_000, maxMs: 10_000, jitter: 0 } });
    c.start();
    FakeSocket.all[0].drop();
    c.reconnectNow();
    expect(FakeSocket.all).toHaveLength(2);
    vi.advanceTimersByTime(10_000);
    expect(FakeSocket.all).toHaveLength(2);
  });

  it("stops for good: closes the socket, delivers what it had, no reconnect", () => {
    const { c, batches, statuses } = client();
    c.start();
    const ws = FakeSocket.all[0];
    ws.open();
    ws.send(ev(1));
    c.stop();
    expect(ws.closed).toBe(true);
    expect(batches).toHaveLength(1);
    expect(statuses.at(-1)?.state).toBe("closed");
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all).toHaveLength(1);
  });

  it("reconnects with a new filter", () => {
    const { c } = client({ filter: { queue: ["a"] } });
    c.start();
    c.setFilter({ job: ["01J"] });
    expect(FakeSocket.all).toHaveLength(2);
    expect(FakeSocket.all[0].closed).toBe(true);
    expect(new URL(FakeSocket.all[1].url).searchParams.getAll("job")).toEqual(["01J"]);
    expect(new URL(FakeSocket.all[1].url).searchParams.has("queue")).toBe(false);
  });

  it("ignores messages that are not JSON", () => {
    const { c, batches } = client();
    c.start();
    FakeSocket.all[0].onmessage?.({ data: "not json" });
    vi.advanceTimersByTime(1000);
    expect(batches).toHaveLength(0);
  });
});
