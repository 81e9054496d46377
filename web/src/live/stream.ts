// StreamClient keeps one websocket to GET /v1/stream open: it reconnects
// with exponential backoff and jitter, coalesces messages into batches (one
// delivery per flush interval, however many messages arrive), and reports
// its connection state.

import type { StreamMessage } from "../api/types";

export type ConnState = "connecting" | "open" | "reconnecting" | "closed";

export interface StreamFilter {
  queue?: string[];
  type?: string[];
  job?: string[];
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** jitter in [0, 1): each delay is shortened by up to this fraction. */
  jitter: number;
}

export const defaultBackoff: Backoff = { initialMs: 500, maxMs: 15_000, jitter: 0.3 };

/** backoffDelay is the wait before reconnect attempt n (1-based). */
export function backoffDelay(attempt: number, b: Backoff = defaultBackoff, random: () => number = Math.random): number {
  const base = Math.min(b.maxMs, b.initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (1 - b.jitter * random()));
}

/** streamURL builds the websocket address of the stream for a page at base. */
export function streamURL(base: string, filter: StreamFilter = {}, token = ""): string {
  const u = new URL("/v1/stream", base);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  for (const k of ["queue", "type", "job"] as const) {
    for (const v of filter[k] ?? []) if (v) u.searchParams.append(k, v);
  }
  if (token) u.searchParams.set("access_token", token);
  return u.toString();
}

export interface StreamStatus {
  state: ConnState;
  /** attempt counts reconnects since the last message arrived. */
  attempt: number;
  /** retryAt is when the next attempt starts (ms since epoch) while reconnecting. */
  retryAt?: number;
  /** closeCode is the code of the last close, for the indicator's tooltip. */
  closeCode?: number;
}

export interface StreamClientOptions {
  base: string;
  filter?: StreamFilter;
  token?: () => string;
  onMessages: (batch: StreamMessage[]) => void;
  onStatus?: (s: StreamStatus) => void;
  /** flushMs: messages are delivered in batches at most this often (default 200 ms: five view updates a second). */
  flushMs?: number;
  backoff?: Backoff;
  random?: () => number;
  WebSocketImpl?: typeof WebSocket;
}

export class StreamClient {
  private opts: Required<Omit<StreamClientOptions, "onStatus" | "token" | "filter">> &
    Pick<StreamClientOptions, "onStatus" | "token" | "filter">;
  private ws: WebSocket | null = null;
  private pending: StreamMessage[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private stopped = true;
  status: StreamStatus = { state: "closed", attempt: 0 };

  constructor(opts: StreamClientOptions) {
    this.opts = {
      flushMs: 200,
      backoff: defaultBackoff,
      random: Math.random,
      WebSocketImpl: globalThis.WebSocket,
      ...opts,
    };
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.flush();
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      ws.close(1000);
    }
    this.setStatus({ state: "closed", attempt: 0 });
  }

  /** setFilter reconnects with a new filter. */
  setFilter(filter: StreamFilter) {
    this.opts.filter = filter;
    if (this.stopped) return;
    this.stop();
    this.start();
  }

  /** reconnectNow skips the wait of a pending reconnect. */
  reconnectNow() {
    if (this.stopped || this.status.state !== "reconnecting") return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.connect();
  }

  private setStatus(s: StreamStatus) {
    this.status = s;
    this.opts.onStatus?.(s);
  }

  private connect() {
    const url = streamURL(this.opts.base, this.opts.filter, this.opts.token?.() ?? "");
    this.setStatus({ state: this.status.attempt > 0 ? "reconnecting" : "connecting", attempt: this.status.attempt });
    let ws: WebSocket;
    try {
      ws = new this.opts.WebSocketImpl(url);
    } catch {
      this.scheduleRetry(undefined);
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.setStatus({ state: "open", attempt: this.status.attempt });
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (this.status.attempt !== 0) this.setStatus({ state: "open", attempt: 0 });
      let msg: StreamMessage;
      try {
        msg = JSON.parse(typeof ev.data === "string" ? ev.data : "");
      } catch {
        return;
      }
      this.pending.push(msg);
      // Stats (once a second) go out at once, with the events before them:
      // the overview's numbers are then as fresh as the server's tick.
      if (msg.kind === "stats") this.flush();
      else if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), this.opts.flushMs);
    };
    ws.onclose = (ev: CloseEvent) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.flush();
      this.scheduleRetry(ev.code);
    };
    ws.onerror = () => {
      // onclose follows and schedules the retry.
    };
  }

  private scheduleRetry(code: number | undefined) {
    if (this.stopped) return;
    const attempt = this.status.attempt + 1;
    const delay = backoffDelay(attempt, this.opts.backoff, this.opts.random);
    this.setStatus({ state: "reconnecting", attempt, retryAt: Date.now() + delay, closeCode: code });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, delay);
  }

  private flush() {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.opts.onMessages(batch);
  }
}
