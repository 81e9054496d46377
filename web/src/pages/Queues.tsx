// Queues: counts and totals per queue, pause and resume, and each queue's
// limits (created, edited and deleted here).

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, describeError } from "../api/client";
import type { QueueStats } from "../api/types";
import { useLive } from "../live/store";
import { Empty, ErrorBanner } from "../components/ui";
import { Limits } from "../components/Limits";
import { num, rate } from "../lib/format";

export function QueueActions({ q }: { q: QueueStats }) {
  const qc = useQueryClient();
  const m = useMutation({
    mutationFn: () => (q.paused ? api.resumeQueue(q.name) : api.pauseQueue(q.name)),
    onSettled: () => qc.invalidateQueries({ queryKey: ["queues"] }),
  });
  return (
    <>
      <button
        type="button"
        className="small"
        onClick={() => m.mutate()}
        disabled={m.isPending}
        aria-label={`${q.paused ? "Resume" : "Pause"} queue ${q.name}`}
      >
        {q.paused ? "Resume" : "Pause"}
      </button>
      {m.error ? <span className="inline-error" role="alert">{describeError(m.error)}</span> : null}
    </>
  );
}

export function Queues() {
  const stats = useLive((s) => s.data.stats);
  const fallback = useQuery({ queryKey: ["queues"], queryFn: api.queues, enabled: !stats });
  const queues = stats?.queues ?? fallback.data?.queues ?? [];
  return (
    <>
      <div className="page-head">
        <h1>Queues</h1>
      </div>
      <p className="muted">
        A paused queue keeps accepting and promoting jobs, but no worker claims from it. A limit holds back
        the jobs it has no room for (throttled) until a slot frees. A job whose type no worker of the queue handles
        waits apart (no handler) and ends dead after the unhandled timeout. Counts are live.
      </p>
      <ErrorBanner error={fallback.error} />
      {queues.length === 0 ? (
        <Empty>No queues yet.</Empty>
      ) : (
        <div className="queue-list">
          {queues.map((q) => (
            <article key={q.name} className={q.paused ? "card queue-card paused" : "card queue-card"} data-queue={q.name} aria-label={`Queue ${q.name}`}>
              <header>
                <h2>{q.name}</h2>
                {q.paused ? <span className="badge paused">paused</span> : <span className="badge running">running</span>}
              </header>
              <div className="queue-body">
                <div>
                  <dl className="kv">
                    <dt>queued (high / normal / low)</dt>
                    <dd>{num(q.queued.high)} / {num(q.queued.normal)} / {num(q.queued.low)}</dd>
                    <dt>throttled by limits</dt>
                    <dd data-testid="queue-throttled">{q.throttled ? <strong className="warn-text">{num(q.throttled)}</strong> : "0"}</dd>
                    <dt>waiting for a handler</dt>
                    <dd data-testid="queue-unhandled">
                      {q.unhandled ? (
                        <Link href={`/jobs?queue=${encodeURIComponent(q.name)}&state=queued&held=no_handler`} aria-label={`${num(q.unhandled)} jobs of ${q.name} waiting for a handler: list them`}>
                          <strong className="warn-text">{num(q.unhandled)}</strong>
                        </Link>
                      ) : "0"}
                    </dd>
                    <dt>scheduled</dt>
                    <dd data-testid="queue-scheduled">
                      {num(q.scheduled)}
                      {q.sleeping || q.awaiting ? (
                        <span className="muted"> (durable: {num(q.sleeping ?? 0)} asleep, {num(q.awaiting ?? 0)} awaiting a signal)</span>
                      ) : null}
                    </dd>
                    <dt>active</dt><dd>{num(q.active)}</dd>
                    <dt>waiting on dependencies</dt><dd>{num(q.waiting)}</dd>
                    <dt>dead</dt><dd>{q.dead > 0 ? <Link href={`/dead/${q.name}`}>{num(q.dead)}</Link> : "0"}</dd>
                    <dt>submitted / succeeded / failed (total)</dt>
                    <dd>{num(q.submitted_total)} / {num(q.succeeded_total)} / {num(q.failed_total)}</dd>
                    <dt>jobs per second</dt><dd>{rate(q.processed_per_second)}</dd>
                  </dl>
                  <footer>
                    <QueueActions q={q} />
                    <Link href={`/jobs?queue=${q.name}`}>Jobs</Link>
                  </footer>
                </div>
                <Limits queue={q.name} limits={q.limits ?? []} />
              </div>
            </article>
          ))}
        </div>
      )}
    </>
  );
}
