// A batch (GET /v1/batches/{id}): its progress, its members by how they
// ended, its callbacks and their jobs, its members paged; cancel it whole or
// retry its dead and cancelled members. It rereads itself every second
// while members are pending or a callback is to fire (and for 30 s after
// an action), every 5 s after.

import { useMemo, useState } from "react";
import { useInfiniteQuery, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, describeError } from "../api/client";
import type { Batch, BatchCallback } from "../api/types";
import { JobTable } from "../components/JobTable";
import { Confirm, Empty, ErrorBanner } from "../components/ui";
import { ago, num, when } from "../lib/format";

/** batchDone tells whether nothing more will happen to a batch by itself. */
export function batchDone(b: Batch): boolean {
  const settled = (c?: BatchCallback) => !c || c.state === "fired" || (c.state === "pending" && b.counts.dead + b.counts.cancelled > 0 && c === b.on_success);
  return b.sealed && b.counts.pending === 0 && settled(b.on_success) && settled(b.on_complete);
}

function Callback({ name, cb, hint }: { name: string; cb?: BatchCallback; hint?: string }) {
  if (!cb) return null;
  return (
    <>
      <dt>{name}</dt>
      <dd data-testid={`batch-${name}`} data-state={cb.state}>
        {cb.state}
        {cb.job_id ? <> — <Link href={`/jobs/${cb.job_id}`} className="mono">{cb.job_id}</Link></> : null}
        {hint && cb.state === "pending" ? <span className="muted"> — {hint}</span> : null}
      </dd>
    </>
  );
}

export function BatchDetail({ id }: { id: string }) {
  const qc = useQueryClient();
  // Until then (30 s after a cancel or retry here) the page rereads every second.
  const [fastUntil, setFastUntil] = useState(0);
  const batch = useQuery({
    queryKey: ["batch", id],
    queryFn: () => api.getBatch(id),
    retry: false,
    // Every second while something is to happen or an action was just
    // taken; every 5 s after, since a member retried alone (or the batch
    // retried elsewhere) can still make on_success fire.
    refetchInterval: (q) => (q.state.data && batchDone(q.state.data) && Date.now() > fastUntil ? 5000 : 1000),
  });
  const members = useInfiniteQuery({
    queryKey: ["batch-jobs", id, batch.data?.counts],
    queryFn: ({ pageParam }) => api.batchJobs(id, pageParam || undefined),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    enabled: !!batch.data,
  });
  const jobs = useMemo(() => members.data?.pages.flatMap((p) => p.jobs) ?? [], [members.data]);
  const [confirm, setConfirm] = useState<"cancel" | "retry" | null>(null);
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);

  const act = async (a: "cancel" | "retry") => {
    setBusy(true);
    setMessage(null);
    try {
      const members = (n: number) => `${num(n)} member${n === 1 ? "" : "s"}`;
      const text = a === "cancel"
        ? `Cancelled ${members((await api.cancelBatch(id)).cancelled)}.`
        : `Retried ${members((await api.retryBatch(id)).retried)}.`;
      setMessage({ ok: true, text });
      setFastUntil(Date.now() + 30_000); // what follows (the members' runs, a callback) shows within a second
    } catch (e) {
      setMessage({ ok: false, text: describeError(e) });
    }
    setBusy(false);
    setConfirm(null);
    qc.invalidateQueries({ queryKey: ["batch", id] });
  };

  if (batch.error && !batch.data) {
    return (
      <>
        <h1>Batch <span className="mono">{id}</span></h1>
        <ErrorBanner error={batch.error} />
      </>
    );
  }
  const b = batch.data;
  if (!b) return <p aria-busy="true">Loading…</p>;
  const ended = b.total - b.counts.pending;
  const failed = b.counts.dead + b.counts.cancelled;
  return (
    <>
      <div className="page-head">
        <h1>Batch <span className="mono small-id">{b.id}</span></h1>
        <span className={`badge ${b.sealed ? "" : "paused"}`} data-testid="batch-sealed">{b.sealed ? "sealed" : "open"}</span>
        <span className="spacer" />
        <button type="button" disabled={busy || b.counts.pending === 0} onClick={() => setConfirm("cancel")}>Cancel batch</button>
        <button type="button" disabled={busy || failed === 0} onClick={() => setConfirm("retry")}>Retry failed members</button>
      </div>
      {message ? <div className={message.ok ? "banner ok" : "banner error"} role="status" data-testid="batch-outcome">{message.text}</div> : null}
      <section aria-labelledby="progress">
        <h2 id="progress">Progress</h2>
        <p data-testid="batch-progress" data-ended={ended} data-total={b.total}>
          <progress max={Math.max(b.total, 1)} value={ended} aria-label="Members ended" /> {num(ended)} of {num(b.total)} members ended
        </p>
        <dl className="kv">
          <dt>pending</dt><dd data-testid="batch-pending">{num(b.counts.pending)}</dd>
          <dt>succeeded</dt><dd data-testid="batch-succeeded">{num(b.counts.succeeded)}</dd>
          <dt>dead</dt><dd data-testid="batch-dead">{num(b.counts.dead)}</dd>
          <dt>cancelled</dt><dd data-testid="batch-cancelled">{num(b.counts.cancelled)}</dd>
          <dt>created</dt><dd title={b.created_at}>{when(b.created_at)} ({ago(b.created_at)})</dd>
          {b.cancelled_at ? (<><dt>cancelled at</dt><dd>{when(b.cancelled_at)}</dd></>) : null}
          <Callback name="on_success" cb={b.on_success} hint={failed > 0 ? "fires only once every member succeeded: retry the failed ones" : undefined} />
          <Callback name="on_complete" cb={b.on_complete} />
        </dl>
      </section>
      <h2>Members</h2>
      <ErrorBanner error={members.error} />
      {jobs.length === 0 && !members.isLoading ? <Empty>No members yet.</Empty> : (
        <JobTable
          jobs={jobs}
          label={`Members of batch ${b.id}`}
          showError
          footer={members.hasNextPage ? (
            <div className="load-more">
              <button type="button" onClick={() => members.fetchNextPage()} disabled={members.isFetchingNextPage}>Load more</button>
            </div>
          ) : null}
        />
      )}
      <Confirm
        open={confirm !== null}
        title={confirm === "cancel" ? "Cancel the whole batch?" : "Retry the failed members?"}
        body={confirm === "cancel"
          ? <p>The batch is sealed and its {num(b.counts.pending)} pending members end cancelled (a running one's handler is told to stop). on_complete then fires; on_success does not.</p>
          : <p>Its {num(failed)} dead and cancelled members are queued again with their attempts reset; on_success fires once every member succeeded.</p>}
        confirmLabel={confirm === "cancel" ? "Cancel batch" : "Retry members"}
        danger={confirm === "cancel"}
        busy={busy}
        onConfirm={() => confirm && act(confirm)}
        onCancel={() => setConfirm(null)}
      />
    </>
  );
}
