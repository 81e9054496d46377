// LiveStore connects the stream to React: it folds batches into LiveData,
// holds the view still while live updates are paused, and tells when the
// API stops sending stats (its Redis is unreachable).

import { useSyncExternalStore } from "react";
import type { BulkResult, StreamMessage } from "../api/types";
import { emptyLive, reduceBatch, type LiveData } from "./reduce";
import { StreamClient, type StreamClientOptions, type StreamStatus } from "./stream";

/** staleAfterMs: stats come every second; this long without one means trouble. */
export const staleAfterMs = 3500;

export interface LiveSnapshot {
  data: LiveData;
  status: StreamStatus;
  paused: boolean;
  /** held counts the messages received while paused. */
  held: number;
  /** stale: the socket is open but stats stopped (the API cannot read Redis). */
  stale: boolean;
  /** bulks: the latest progress of recent bulk actions by request id (kept while paused too: a bulk action's progress is not a list that jumps). */
  bulks: ReadonlyMap<string, BulkResult>;
}

/** maxBulks bounds the bulk actions whose progress is kept. */
export const maxBulks = 20;

type Listener = () => void;

export class LiveStore {
  private live: LiveData = emptyLive();
  private snap: LiveSnapshot;
  private listeners = new Set<Listener>();
  private client: StreamClient | null = null;
  private staleTimer: ReturnType<typeof setInterval> | null = null;
  private now: () => number;
  private resumeListeners = new Set<Listener>();

  constructor(now: () => number = () => Date.now()) {
    this.now = now;
    this.snap = { data: this.live, status: { state: "closed", attempt: 0 }, paused: false, held: 0, stale: false, bulks: new Map() };
  }

  subscribe = (l: Listener) => {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  };

  getSnapshot = () => this.snap;

  private publish(next: Partial<LiveSnapshot>) {
    this.snap = { ...this.snap, ...next };
    this.listeners.forEach((l) => l());
  }

  /** receive folds a batch in; exported for tests and the stream client. */
  receive = (batch: StreamMessage[]) => {
    this.live = reduceBatch(this.live, batch, this.now());
    let bulks: Map<string, BulkResult> | undefined;
    for (const m of batch) {
      if (m.kind !== "bulk" || !m.bulk?.id) continue;
      bulks ??= new Map(this.snap.bulks);
      bulks.delete(m.bulk.id);
      bulks.set(m.bulk.id, m.bulk);
    }
    if (bulks) for (const id of bulks.keys()) {
      if (bulks.size <= maxBulks) break;
      bulks.delete(id);
    }
    const extra = bulks ? { bulks } : {};
    if (this.snap.paused) {
      this.publish({ held: this.snap.held + batch.length, stale: false, ...extra });
    } else {
      this.publish({ data: this.live, stale: false, ...extra });
    }
  };

  setStatus = (status: StreamStatus) => {
    this.publish({ status, stale: status.state === "open" ? this.snap.stale : false });
  };

  /** checkStale marks the view stale when stats stopped while the socket is open. */
  checkStale = () => {
    const open = this.snap.status.state === "open";
    const since = this.live.statsAt || this.openedAt;
    const stale = open && since > 0 && this.now() - since > staleAfterMs;
    if (stale !== this.snap.stale) this.publish({ stale });
  };

  private openedAt = 0;

  setPaused(paused: boolean) {
    if (paused === this.snap.paused) return;
    if (paused) this.publish({ paused: true, held: 0 });
    else {
      this.publish({ paused: false, held: 0, data: this.live });
      this.resumeListeners.forEach((l) => l());
    }
  }

  /** onResume registers a callback run when live updates resume (to refetch lists). */
  onResume(l: Listener) {
    this.resumeListeners.add(l);
    return () => this.resumeListeners.delete(l);
  }

  connect(opts: Omit<StreamClientOptions, "onMessages" | "onStatus">) {
    this.disconnect();
    this.client = new StreamClient({
      ...opts,
      onMessages: this.receive,
      onStatus: (s) => {
        if (s.state === "open" && this.snap.status.state !== "open") this.openedAt = this.now();
        this.setStatus(s);
      },
    });
    this.client.start();
    this.staleTimer = setInterval(this.checkStale, 1000);
  }

  reconnect() {
    this.client?.setFilter({});
  }

  reconnectNow() {
    this.client?.reconnectNow();
  }

  disconnect() {
    this.client?.stop();
    this.client = null;
    if (this.staleTimer) clearInterval(this.staleTimer);
    this.staleTimer = null;
  }
}

export const liveStore = new LiveStore();

/** useLive returns a part of the live snapshot; select must return a value held by the snapshot. */
export function useLive<T>(select: (s: LiveSnapshot) => T, store: LiveStore = liveStore): T {
  return useSyncExternalStore(store.subscribe, () => select(store.getSnapshot()));
}
