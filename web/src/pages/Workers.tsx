// Workers: the live worker registry, and the processes registered as
// readers of the storage format (docs/engine.md, "Storage format").

import { useQuery } from "@tanstack/react-query";
import { Link } from "wouter";
import { api } from "../api/client";
import { useLive } from "../live/store";
import { Empty, ErrorBanner, TableWrap } from "../components/ui";
import { ago, num, shortId, when } from "../lib/format";

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
        <TableWrap label="Workers">
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
        </TableWrap>
      )}
      <StorageFormat />
    </>
  );
}

/** StorageFormat shows the format Redis holds and every registered reader. */
function StorageFormat() {
  const q = useQuery({ queryKey: ["storage"], queryFn: api.storage, refetchInterval: 10_000 });
  const st = q.data;
  const readers = st?.readers ?? [];
  const unread = st !== undefined && !st.reads.map(String).includes(st.format);
  return (
    <section aria-labelledby="storage-head" data-testid="storage">
      <div className="page-head">
        <h2 id="storage-head">Storage format</h2>
        {st ? (
          <span className="muted">
            Redis holds format <strong data-testid="storage-format">{st.format}</strong>; this API reads{" "}
            {st.reads.join(", ")} and writes {st.writes} · {num(readers.length)} registered
          </span>
        ) : null}
      </div>
      <ErrorBanner error={q.error} />
      {unread ? (
        <div className="banner error" role="alert">
          This API's release does not read format {st.format}: it is stopping. Run a release that reads it.
        </div>
      ) : null}
      {st && st.held_back_by.length > 0 && st.format !== String(st.newest) ? (
        <div className="banner warn" role="status" data-testid="held-back">
          Format {st.newest} is written once every process reads it.{" "}
          {st.held_back_by.length === 1 ? "This process reads" : "These processes read"} older formats only:{" "}
          <span className="mono">{st.held_back_by.join(", ")}</span>.
        </div>
      ) : null}
      {st && st.writable_at && st.format === String(st.newest) && st.writes < st.newest ? (
        <div className="banner info" role="status" data-testid="writable-at">
          Format {st.format} is written from {when(st.writable_at)}: 30 s after the switch, so that no process of an
          older release still runs.
        </div>
      ) : null}
      {st && st.unregistered_workers.length > 0 ? (
        <div className="banner warn" role="status" data-testid="unregistered">
          {st.unregistered_workers.length === 1 ? "Worker " : "Workers "}
          <span className="mono">{st.unregistered_workers.join(", ")}</span>{" "}
          {st.unregistered_workers.length === 1 ? "is" : "are"} not registered: a release from before the storage
          format. Roll this release out to every process before the next one.
        </div>
      ) : null}
      {st && readers.length === 0 ? (
        <Empty>No API, worker or poller is registered as a reader.</Empty>
      ) : readers.length > 0 ? (
        <TableWrap label="Readers of the storage format">
          <table className="grid" aria-label="Readers of the storage format">
            <thead>
              <tr>
                <th scope="col">role</th>
                <th scope="col">host</th>
                <th scope="col" className="num">pid</th>
                <th scope="col">reads</th>
                <th scope="col" className="num">writes</th>
                <th scope="col">started</th>
                <th scope="col">id</th>
              </tr>
            </thead>
            <tbody>
              {readers.map((r) => (
                <tr key={r.id} data-reader={r.role}>
                  <th scope="row">{r.role}</th>
                  <td>{r.hostname}</td>
                  <td className="num">{r.pid}</td>
                  <td>{r.reads.join(", ")}</td>
                  <td className="num">{r.writes}</td>
                  <td>{ago(r.started_at)}</td>
                  <td className="mono">{r.id}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </section>
  );
}
