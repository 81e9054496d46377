// Workers: the live worker registry.

import { useQuery } from "@tanstack/react-query";
import { Link } from "wouter";
import { api } from "../api/client";
import { useLive } from "../live/store";
import { Empty, ErrorBanner } from "../components/ui";
import { ago, num, shortId } from "../lib/format";

export function Workers() {
  const count = useLive((s) => s.data.stats?.workers);
  const q = useQuery({ queryKey: ["workers", count], queryFn: api.workers, refetchInterval: 5_000 });
  const workers = q.data?.workers ?? [];
  return (
    <>
      <div className="page-head">
        <h1>Workers</h1>
        <span className="muted">{num(workers.length)} online</span>
      </div>
      <ErrorBanner error={q.error} />
      {workers.length === 0 && !q.isLoading ? (
        <Empty>No worker has sent a heartbeat in the last 15 seconds.</Empty>
      ) : (
        <div className="table-wrap">
          <table className="grid" aria-label="Workers">
            <thead>
              <tr>
                <th scope="col">id</th>
                <th scope="col">host</th>
                <th scope="col" className="num">pid</th>
                <th scope="col">queues</th>
                <th scope="col" className="num">concurrency</th>
                <th scope="col">active jobs</th>
                <th scope="col" className="num">processed</th>
                <th scope="col" className="num">failed</th>
                <th scope="col">started</th>
                <th scope="col">last seen</th>
              </tr>
            </thead>
            <tbody>
              {workers.map((w) => (
                <tr key={w.id}>
                  <th scope="row" className="mono">{w.id}</th>
                  <td>{w.hostname}</td>
                  <td className="num">{w.pid}</td>
                  <td>{w.queues.join(", ")}</td>
                  <td className="num">{w.concurrency}</td>
                  <td>
                    {(w.active_jobs ?? []).length === 0
                      ? <span className="muted">idle</span>
                      : (w.active_jobs ?? []).slice(0, 5).map((id) => (
                          <Link key={id} href={`/jobs/${id}`} className="mono chip">{shortId(id)}</Link>
                        ))}
                    {(w.active_jobs ?? []).length > 5 ? <span className="muted"> +{(w.active_jobs ?? []).length - 5}</span> : null}
                  </td>
                  <td className="num">{num(w.processed)}</td>
                  <td className="num">{num(w.failed)}</td>
                  <td>{ago(w.started_at)}</td>
                  <td>{ago(w.last_seen_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
