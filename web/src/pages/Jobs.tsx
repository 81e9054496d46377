// Jobs: search the history with filters kept in the URL, cursor paging,
// rows that follow the stream, and bulk cancel and retry.

import { useMemo, useState } from "react";
import { useInfiniteQuery, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link, useLocation } from "wouter";
import { api, type JobFilter } from "../api/client";
import { jobStates, type Job } from "../api/types";
import { useLive } from "../live/store";
import { JobTable } from "../components/JobTable";
import { Confirm, Empty, ErrorBanner } from "../components/ui";
import { useParams } from "../lib/params";
import { runBulk, type BulkResult } from "../lib/bulk";
import { describeError } from "../api/client";

/** toInput turns an RFC 3339 time into a datetime-local value (local time). */
function toInput(iso: string | null): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const off = d.getTimezoneOffset() * 60_000;
  return new Date(d.getTime() - off).toISOString().slice(0, 16);
}

function fromInput(v: string): string | undefined {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

export function Jobs() {
  const [params, setParams] = useParams();
  const [, navigate] = useLocation();
  const filter: JobFilter = {
    queue: params.get("queue") ?? undefined,
    type: params.get("type") ?? undefined,
    state: params.get("state") ?? undefined,
    from: params.get("from") ?? undefined,
    to: params.get("to") ?? undefined,
  };
  const id = params.get("id") ?? "";
  const queues = useLive((s) => s.data.stats?.queues);
  const liveJobs = useLive((s) => s.data.jobs);
  // The filter's queue is listed before the stats arrive, so a reload keeps it selected.
  const queueNames = [...new Set([...(queues ?? []).map((q) => q.name), ...(filter.queue ? [filter.queue] : [])])].sort();
  const qc = useQueryClient();
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [action, setAction] = useState<"cancel" | "retry" | null>(null);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ action: string; r: BulkResult } | null>(null);

  const search = useInfiniteQuery({
    queryKey: ["jobs", filter],
    queryFn: ({ pageParam }) => api.searchJobs(filter, pageParam || undefined),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    enabled: !id,
  });
  const one = useQuery({ queryKey: ["job", id], queryFn: () => api.getJob(id), enabled: !!id, retry: false });

  const jobs: Job[] = useMemo(() => (id ? (one.data ? [one.data] : []) : (search.data?.pages.flatMap((p) => p.jobs) ?? [])), [id, one.data, search.data]);

  // Jobs the stream reported since the list was loaded that match the filter but are not listed.
  const [fq, ft, fs] = [filter.queue, filter.type, filter.state];
  const unseen = (() => {
    if (id) return 0;
    const listed = new Set(jobs.map((j) => j.id));
    const since = search.dataUpdatedAt;
    let n = 0;
    for (const e of liveJobs.values()) {
      if (listed.has(e.job_id) || Date.parse(e.at) < since) continue;
      if (fq && e.queue !== fq) continue;
      if (ft && e.type !== ft) continue;
      if (fs && e.state !== fs) continue;
      n++;
    }
    return n;
  })();

  const doBulk = async () => {
    if (!action) return;
    setBusy(true);
    const ids = [...selected];
    const r = await runBulk(ids, (jid) => (action === "cancel" ? api.cancelJob(jid) : api.retryJob(jid)));
    setBusy(false);
    setAction(null);
    setOutcome({ action, r });
    setSelected(new Set());
    qc.invalidateQueries({ queryKey: ["jobs"] });
  };

  return (
    <>
      <div className="page-head">
        <h1>Jobs</h1>
        <Link href="/submit" className="button primary">Submit a job</Link>
      </div>
      <form
        className="filters"
        role="search"
        aria-label="Filter jobs"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          const jid = String(f.get("id") ?? "").trim();
          setParams({
            queue: String(f.get("queue") ?? "") || undefined,
            type: String(f.get("type") ?? "").trim() || undefined,
            state: String(f.get("state") ?? "") || undefined,
            from: fromInput(String(f.get("from") ?? "")),
            to: fromInput(String(f.get("to") ?? "")),
            id: jid || undefined,
          }, false);
          setSelected(new Set());
        }}
      >
        <div className="filter">
          <label htmlFor="f-queue">Queue</label>
          <select id="f-queue" name="queue" defaultValue={filter.queue ?? ""} key={"q" + (filter.queue ?? "")}>
            <option value="">all</option>
            {queueNames.map((q) => <option key={q} value={q}>{q}</option>)}
          </select>
        </div>
        <div className="filter">
          <label htmlFor="f-type">Type</label>
          <input id="f-type" name="type" defaultValue={filter.type ?? ""} key={"t" + (filter.type ?? "")} placeholder="e.g. sundial.echo" />
        </div>
        <div className="filter">
          <label htmlFor="f-state">State</label>
          <select id="f-state" name="state" defaultValue={filter.state ?? ""} key={"s" + (filter.state ?? "")}>
            <option value="">any</option>
            {jobStates.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div className="filter">
          <label htmlFor="f-created-from">Created from</label>
          <input id="f-created-from" type="datetime-local" name="from" defaultValue={toInput(filter.from ?? null)} key={"f" + (filter.from ?? "")} />
        </div>
        <div className="filter">
          <label htmlFor="f-to">to</label>
          <input id="f-to" type="datetime-local" name="to" defaultValue={toInput(filter.to ?? null)} key={"o" + (filter.to ?? "")} />
        </div>
        <div className="filter">
          <label htmlFor="f-job-id">Job id</label>
          <input id="f-job-id" name="id" defaultValue={id} key={"i" + id} className="mono" placeholder="01J…" />
        </div>
        <div className="filter-actions">
          <button type="submit" className="primary">Search</button>
          <button type="button" onClick={() => navigate("/jobs")}>Clear</button>
        </div>
      </form>

      <ErrorBanner error={id ? one.error : search.error} />
      {outcome ? (
        <div className={outcome.r.failed.length ? "banner warn" : "banner ok"} role="status">
          {outcome.action === "cancel" ? "Cancelled" : "Retried"} {outcome.r.ok} job{outcome.r.ok === 1 ? "" : "s"}.
          {outcome.r.failed.length ? ` ${outcome.r.failed.length} could not be: ${describeError(outcome.r.failed[0].error)}` : ""}
          <button type="button" className="link" onClick={() => setOutcome(null)}>Dismiss</button>
        </div>
      ) : null}

      <div className="toolbar" role="group" aria-label="Selection">
        <span>{selected.size} selected</span>
        <button type="button" disabled={selected.size === 0} onClick={() => setAction("cancel")}>Cancel selected</button>
        <button type="button" disabled={selected.size === 0} onClick={() => setAction("retry")}>Retry selected</button>
        <span className="spacer" />
        {unseen > 0 ? (
          <button type="button" className="link" onClick={() => search.refetch()} data-testid="unseen">
            {unseen} new or changed job{unseen === 1 ? "" : "s"} not listed — refresh
          </button>
        ) : null}
      </div>

      {jobs.length === 0 && !(search.isLoading || one.isLoading) ? (
        <Empty>No jobs match. The search reads the history store, which records jobs within a second or two.</Empty>
      ) : (
        <JobTable
          jobs={jobs}
          label="Jobs"
          selected={selected}
          onSelect={setSelected}
          footer={
            search.hasNextPage && !id ? (
              <div className="load-more">
                <button type="button" onClick={() => search.fetchNextPage()} disabled={search.isFetchingNextPage}>
                  {search.isFetchingNextPage ? "Loading…" : "Load more"}
                </button>
              </div>
            ) : null
          }
        />
      )}
      <Confirm
        open={action !== null}
        title={action === "cancel" ? "Cancel jobs?" : "Retry jobs?"}
        body={
          action === "cancel"
            ? <p>Cancel {selected.size} job{selected.size === 1 ? "" : "s"}? Running handlers are told to stop; jobs already finished are skipped.</p>
            : <p>Queue {selected.size} job{selected.size === 1 ? "" : "s"} again with the attempt count reset? Only dead or cancelled jobs can be retried.</p>
        }
        confirmLabel={action === "cancel" ? "Cancel jobs" : "Retry jobs"}
        danger={action === "cancel"}
        busy={busy}
        onConfirm={doBulk}
        onCancel={() => setAction(null)}
      />
    </>
  );
}
