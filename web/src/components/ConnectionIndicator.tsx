// The connection state of the live stream, always visible in the header:
// live, connecting, reconnecting (with the countdown), or stale (the socket
// is open but the API cannot read Redis), plus the pause switch.

import { useEffect, useState } from "react";
import { liveStore, useLive } from "../live/store";
import { rate } from "../lib/format";

async function whatIsDown(): Promise<string> {
  try {
    const res = await fetch("/readyz");
    const body = (await res.json()) as { checks?: Record<string, { status: string; detail?: string }> };
    const down = Object.entries(body.checks ?? {}).filter(([, c]) => c.status === "down");
    if (down.length === 0) return "";
    return down.map(([name, c]) => `${name === "redis" ? "Redis" : name === "history" ? "history store" : name} ${c.detail ?? "down"}`).join(", ");
  } catch {
    return "API unreachable";
  }
}

export function ConnectionIndicator() {
  const status = useLive((s) => s.status);
  const stale = useLive((s) => s.stale);
  const eventsRate = useLive((s) => s.data.rate);
  const [now, setNow] = useState(() => Date.now());
  const [lastDown, setDown] = useState("");

  const troubled = stale || status.state === "reconnecting";
  const down = troubled ? lastDown : "";
  useEffect(() => {
    if (!troubled) return;
    let alive = true;
    const check = () => whatIsDown().then((d) => alive && setDown(d));
    check();
    const t = setInterval(() => {
      setNow(Date.now());
      check();
    }, 1000);
    return () => {
      alive = false;
      clearInterval(t);
    };
  }, [troubled]);

  let tone = "ok";
  let label: string;
  let detail = "";
  if (status.state === "open" && !stale) {
    label = "Live";
    detail = `${rate(eventsRate)} events/s`;
  } else if (status.state === "open" && stale) {
    tone = "bad";
    label = down.startsWith("Redis") ? "Redis unavailable" : "No live data";
    detail = down || "the API sends no stats";
  } else if (status.state === "reconnecting") {
    tone = "warn";
    const secs = Math.max(0, Math.ceil(((status.retryAt ?? now) - now) / 1000));
    label = down === "API unreachable" ? "API unreachable" : "Reconnecting";
    detail = secs > 0 ? `retry in ${secs} s` : "retrying…";
  } else if (status.state === "connecting") {
    tone = "warn";
    label = "Connecting…";
  } else {
    tone = "off";
    label = "Offline";
  }
  return (
    <div className={`conn conn-${tone}`} role="status" aria-live="polite" data-testid="connection" data-state={tone}>
      <span className="dot" aria-hidden="true" />
      <span className="conn-label">{label}</span>
      {detail ? <span className="conn-detail">{detail}</span> : null}
      {status.state === "reconnecting" ? (
        <button type="button" className="link" onClick={() => liveStore.reconnectNow()}>Retry now</button>
      ) : null}
    </div>
  );
}

export function PauseButton() {
  const paused = useLive((s) => s.paused);
  const held = useLive((s) => s.held);
  return (
    <button
      type="button"
      className={paused ? "pause on" : "pause"}
      aria-pressed={paused}
      onClick={() => liveStore.setPaused(!paused)}
      title={paused ? "Resume live updates" : "Pause live updates (tables stop moving)"}
    >
      {paused ? `▶ Resume${held ? ` (${held > 999 ? "999+" : held} waiting)` : ""}` : "❚❚ Pause"}
    </button>
  );
}
