// Overview: every queue's counts live from the stream's stats, throughput
// and failure-rate charts over a chosen window (server counts merged with
// what the stream shows since the page loaded), workers, history lag and
// each transactional outbox's relay lag.

import { useMemo } from "react";
import { useQuery } from "@tanstack/react-query";
import { Link } from "wouter";
import { api } from "../api/client";
import { useLive } from "../live/store";
import { mergeMinutes, totals, type MinuteTally } from "../live/reduce";
import { Chart } from "../components/Chart";
import { ErrorBanner, Stat, Empty, TableWrap } from "../components/ui";
import { duration, num, rate } from "../lib/format";
import { useParams } from "../lib/params";
import type { QueueStats } from "../api/types";
import { QueueActions } from "./Queues";

export const windows = ["5m", "15m", "1h", "6h", "24h"] as const;

export function Overview() {
  const [params, setParams] = useParams();
  const win = windows.includes(params.get("window") as (typeof windows)[number]) ? params.get("window")! : "1h";
  const stats = useLive((s) => s.data.stats);
  const liveMinutes = useLive((s) => s.data.minutes);
  const fallback = useQuery({ queryKey: ["queues"], queryFn: api.queues, enabled: !stats });
  const queues: QueueStats[] = stats?.queues ?? fallback.data?.queues ?? [];
  const t = totals(queues);

  const tput = useQuery({ queryKey: ["throughput", win], queryFn: () => api.throughput(win), refetchInterval: 30_000 });
  const backlog = useQuery({ queryKey: ["backlog"], queryFn: api.historyBacklog, refetchInterval: 5_000, retry: false });
  const outbox = useQuery({ queryKey: ["outbox"], queryFn: api.outbox, refetchInterval: 5_000, retry: false });

  const chart = useMemo(() => {
    // Sum the queues minute by minute.
    const sum = new Map<number, MinuteTally>();
    for (const q of tput.data?.queues ?? []) {
      for (const m of mergeMinutes(q.minutes, liveMinutes.get(q.queue))) {
        const s = sum.get(m.minute) ?? { succeeded: 0, failed: 0, dead: 0 };
        s.succeeded += m.succeeded;
        s.failed += m.failed;
        s.dead += m.dead;
        sum.set(m.minute, s);
      }
    }
    const minutes = [...sum.keys()].sort((a, b) => a - b);
    return {
      x: minutes.map((m) => m * 60),
      succeeded: minutes.map((m) => sum.get(m)!.succeeded),
      failed: minutes.map((m) => sum.get(m)!.failed),
      dead: minutes.map((m) => sum.get(m)!.dead),
      failure: minutes.map((m) => {
        const s = sum.get(m)!;
        const all = s.succeeded + s.failed;
        return all === 0 ? null : (100 * s.failed) / all;
      }),
    };
  }, [tput.data, liveMinutes]);

  const lag = backlog.data?.lag_seconds;
  return (
    <>
      <div className="page-head">
        <h1>Overview</h1>
        <div className="segmented" role="group" aria-label="Chart window">
          {windows.map((w) => (
            <button key={w} type="button" aria-pressed={w === win} onClick={() => setParams({ window: w === "1h" ? undefined : w })}>
              {w}
            </button>
          ))}
        </div>
      </div>
      <ErrorBanner error={fallback.error} title="Queues" />
      <section className="stats" aria-label="Totals" data-testid="totals" data-stats-at={stats?.at ?? ""}>
        <Stat label="queued" value={<span data-testid="total-queued">{num(t.queued)}</span>} hint={`high ${t.high}, normal ${t.normal}, low ${t.low}`} />
        <Stat label="active" value={num(t.active)} />
        <Stat label="scheduled" value={num(t.scheduled)} />
        <Stat label="waiting" value={num(t.waiting)} />
        <Stat label="dead" value={num(t.dead)} tone={t.dead > 0 ? "bad" : undefined} />
        <Stat label="succeeded" value={<span data-testid="total-succeeded">{num(t.succeeded)}</span>} tone="good" />
        <Stat label="jobs / s" value={rate(t.rate)} />
        <Stat label="workers online" value={<Link href="/workers">{num(stats?.workers)}</Link>} tone={stats && stats.workers === 0 ? "warn" : undefined} />
        <Stat
          label="history lag"
          value={backlog.error ? "n/a" : lag === undefined ? "–" : duration(lag)}
          hint={backlog.data ? `${num(backlog.data.events)} events not yet in the history store` : "history writer lag"}
          tone={lag !== undefined && lag > 30 ? "warn" : undefined}
        />
        {outbox.data?.relays.map((r) => (
          <Stat
            key={r.store}
            label={`${r.store} outbox lag`}
            value={<span data-testid={`outbox-lag-${r.store}`}>{!r.running ? "stopped" : r.lag_seconds < 0 ? "unreadable" : duration(r.lag_seconds)}</span>}
            hint={`${num(r.relayed)} rows relayed${r.running ? "" : `, no relay since ${new Date(r.at).toLocaleString()}`}`}
            tone={!r.running || r.lag_seconds < 0 || r.lag_seconds > 30 ? "warn" : undefined}
          />
        ))}
      </section>

      <section className="charts">
        <Chart
          title={`Finished attempts per minute, last ${win}`}
          x={chart.x}
          series={[
            { label: "succeeded", color: "--good", values: chart.succeeded, fill: true },
            { label: "failed", color: "--warn", values: chart.failed },
            { label: "dead", color: "--bad", values: chart.dead },
          ]}
        />
        <Chart title={`Failure rate, last ${win}`} x={chart.x} unit="%" yMax={100} series={[{ label: "failed attempts", color: "--bad", values: chart.failure, fill: true }]} />
      </section>
      <ErrorBanner error={tput.error} title="Throughput" />

      <h2>Queues</h2>
      {queues.length === 0 ? (
        <Empty>No queues yet. <Link href="/submit">Submit a job</Link> to create one.</Empty>
      ) : (
        <TableWrap label="Queues">
          <table className="grid" aria-label="Queues">
            <thead>
              <tr>
                <th scope="col">queue</th>
                <th scope="col" className="num">high</th>
                <th scope="col" className="num">normal</th>
                <th scope="col" className="num">low</th>
                <th scope="col" className="num" title="queued jobs held back by a limit">throttled</th>
                <th scope="col" className="num" title="queued jobs no worker of the queue handles the type of">no handler</th>
                <th scope="col" className="num">scheduled</th>
                <th scope="col" className="num">active</th>
                <th scope="col" className="num">waiting</th>
                <th scope="col" className="num">dead</th>
                <th scope="col" className="num">jobs/s</th>
                <th scope="col">state</th>
                <th scope="col"><span className="sr-only">actions</span></th>
              </tr>
            </thead>
            <tbody>
              {queues.map((q) => (
                <tr key={q.name} data-queue={q.name}>
                  <th scope="row"><Link href={`/jobs?queue=${q.name}`}>{q.name}</Link></th>
                  <td className="num">{num(q.queued.high)}</td>
                  <td className="num">{num(q.queued.normal)}</td>
                  <td className="num">{num(q.queued.low)}</td>
                  <td className="num">{q.throttled ? <Link href="/queues" className="warn-text">{num(q.throttled)}</Link> : "0"}</td>
                  <td className="num" data-testid="overview-unhandled">
                    {q.unhandled ? <Link href={`/jobs?queue=${encodeURIComponent(q.name)}&state=queued&held=no_handler`} className="warn-text">{num(q.unhandled)}</Link> : "0"}
                  </td>
                  <td className="num">{num(q.scheduled)}</td>
                  <td className="num">{num(q.active)}</td>
                  <td className="num">{num(q.waiting)}</td>
                  <td className="num">{q.dead > 0 ? <Link href={`/dead/${q.name}`} className="bad">{num(q.dead)}</Link> : "0"}</td>
                  <td className="num">{rate(q.processed_per_second)}</td>
                  <td>{q.paused ? <span className="badge paused">paused</span> : <span className="badge running">running</span>}</td>
                  <td><QueueActions q={q} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </>
  );
}
