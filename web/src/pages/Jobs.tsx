// Jobs: the live list of a queue from Redis (a queue and a live state
// chosen, or no history store) or the history search, with filters kept in
// the URL, cursor paging, rows that follow the stream, and bulk cancel,
// retry and delete through the bulk route (one request per queue); in the
// live list, cancel every job of the queue's state (and type) by filter.

import { useEffect, useMemo, useState } from "react";
import { useInfiniteQuery, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link, useLocation } from "wouter";
import { api, bulkRequestId, isNoHistory, type JobFilter } from "../api/client";
import { jobStates, type BulkAction, type HeldReason, type Job, type Priority } from "../api/types";
import { useLive } from "../live/store";
import { JobTable } from "../components/JobTable";
import { BulkProgress, describeBulk } from "../components/Bulk";
import { Confirm, Empty, ErrorBanner } from "../components/ui";
import { useParams } from "../lib/params";
import { bulkByIds, type BulkOutcome } from "../lib/bulk";
import { fromInput, num, toInput } from "../lib/format";
import { chooseSource, liveOrder } from "../lib/source";

const heldReasons: Record<HeldReason, string> = {
  no_handler: "waiting for a worker that handles their type",
  limit: "held back by a limit",
  paused: "held by the pause of their queue",
  dependencies: "waiting for dependencies",
  scheduled: "scheduled for later",
  worker_gone: "leased by a worker that is gone",
  sleeping: "parked in a durable sleep",
  awaiting_signal: "parked until a signal arrives",
};

/** historyAvailable asks once (a minute) whether the API has a history store. */
async function historyAvailable(): Promise<boolean> {
  try {
    await api.searchJobs({}, undefined, 1);
    return true;
  } catch (e) {
    // Any other failure: the history search itself will show it.
    return !isNoHistory(e);
  }
}

export function Jobs() {
  const [params, setParams] = useParams();
  const [, navigate] = useLocation();
  const filter: JobFilter = {
    queue: params.get("queue") ?? undefined,
    type: params.get("type") ?? undefined,
    state: params.get("state") ?? undefined,
    tag: params.get("tag") ?? undefined,
    from: params.get("from") ?? undefined,
    to: params.get("to") ?? undefined,
  };
  const priority = (params.get("priority") ?? undefined) as Priority | undefined;
  const held = params.get("held") ?? "";
  const id = params.get("id") ?? "";
  const queues = useLive((s) => s.data.stats?.queues);
  const liveJobs = useLive((s) => s.data.jobs);
  // The filter's queue is listed before the stats arrive, so a reload keeps it selected.
  const queueNames = [...new Set([...(queues ?? []).map((q) => q.name), ...(filter.queue ? [filter.queue] : [])])].sort();
  const qc = useQueryClient();
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [action, setAction] = useState<BulkAction | null>(null);
  const [cancelMatching, setCancelMatching] = useState(false);
  const [running, setRunning] = useState<{ id: string; action: BulkAction } | null>(null);
  const [outcome, setOutcome] = useState<BulkOutcome | null>(null);

  // Asked only when the filter alone does not point at the live list.
  const needProbe = !id && chooseSource(filter, undefined).kind === "probing";
  const probe = useQuery({ queryKey: ["history-available"], queryFn: historyAvailable, staleTime: 60_000, enabled: needProbe });
  const source = chooseSource(filter, probe.data, queueNames[0]);

  const search = useInfiniteQuery({
    queryKey: ["jobs", filter],
    queryFn: ({ pageParam }) => api.searchJobs(filter, pageParam || undefined),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    enabled: !id && source.kind === "history",
  });
  const liveQueue = source.kind === "live" ? source.queue : "";
  const liveState = source.kind === "live" ? source.state : undefined;
  const live = useInfiniteQuery({
    queryKey: ["live-jobs", liveQueue, liveState, filter.type, priority, filter.tag, held],
    queryFn: ({ pageParam }) =>
      api.liveJobs(liveQueue, { state: liveState, type: filter.type, priority, tag: filter.tag }, pageParam || undefined, held ? 500 : 100),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    enabled: !id && source.kind === "live",
  });
  const one = useQuery({ queryKey: ["job", id], queryFn: () => api.getJob(id), enabled: !!id, retry: false });
  const liveMode = source.kind === "live";
  const list = liveMode ? live : search;
  const pages = list.data?.pages;

  const loaded = useMemo(() => pages?.flatMap((p) => p.jobs) ?? [], [pages]);
  const heldOnly = liveMode ? held : "";
  const jobs: Job[] = id ? (one.data ? [one.data] : []) : heldOnly ? loaded.filter((j) => j.held_back?.reason === heldOnly) : loaded;

  // A filter by type, priority or reason may leave pages short, even empty,
  // with more to read: follow the cursor a few pages (a bounded number).
  const pagesRead = list.data?.pages.length ?? 0;
  const autoPages = held ? 20 : 5;
  const { hasNextPage, isFetching, fetchNextPage } = list;
  useEffect(() => {
    if (id || source.kind !== "live" || !hasNextPage || isFetching) return;
    if (jobs.length < 50 && pagesRead < autoPages) fetchNextPage();
  }, [id, source.kind, hasNextPage, isFetching, fetchNextPage, jobs.length, pagesRead, autoPages]);

  // Jobs the stream reported since the list was loaded that match the filter but are not listed.
  const [fq, ft] = [source.kind === "live" ? source.queue : filter.queue, filter.type];
  const fs = source.kind === "live" ? source.state : filter.state;
  const unseen = (() => {
    // The stream's events do not carry tags: with a tag filter, it cannot tell.
    if (id || held || filter.tag) return 0;
    const listed = new Set(jobs.map((j) => j.id));
    const since = list.dataUpdatedAt;
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
    const a = action;
    const chosen = jobs.filter((j) => selected.has(j.id));
    setAction(null);
    setOutcome(null);
    const r = await bulkByIds(a, chosen, (rid) => setRunning({ id: rid, action: a }));
    setRunning(null);
    setOutcome(r);
    setSelected(new Set());
    qc.invalidateQueries({ queryKey: ["jobs"] });
    qc.invalidateQueries({ queryKey: ["live-jobs"] });
  };

  // Cancel by filter: every job of the live list's queue and state (and
  // type), however many, in one request that the server runs in chunks.
  const cancellable = liveMode && !id && !held && (liveState === "queued" || liveState === "scheduled" || liveState === "waiting");
  const stateCount = (() => {
    const st = queues?.find((q) => q.name === liveQueue);
    if (!st || !liveState) return undefined;
    if (liveState === "queued") return st.queued.high + st.queued.normal + st.queued.low;
    return liveState === "scheduled" ? st.scheduled : st.waiting;
  })();
  const doCancelMatching = async () => {
    if (!liveState) return;
    setCancelMatching(false);
    setOutcome(null);
    const rid = bulkRequestId();
    setRunning({ id: rid, action: "cancel" });
    try {
      const r = await api.bulk(liveQueue, { action: "cancel", filter: { state: liveState, ...(filter.type ? { type: filter.type } : {}), ...(filter.tag ? { tag: filter.tag } : {}) } }, rid);
      setOutcome({ action: "cancel", matched: r.matched, count: r.count, failed: [] });
    } catch (error) {
      setOutcome({ action: "cancel", matched: 0, count: 0, failed: [{ queue: liveQueue, ids: stateCount ?? 0, error }] });
    }
    setRunning(null);
    qc.invalidateQueries({ queryKey: ["live-jobs"] });
  };

  const sourceNote = (() => {
    switch (source.kind) {
      case "live":
        return (
          <>
            Live from Redis: the <strong>{source.state}</strong> jobs of <strong>{source.queue}</strong>
            {filter.tag ? <> tagged <strong className="mono">{filter.tag}</strong></> : null}, {liveOrder[source.state]}
            {held ? <>, only those {heldReasons[held as HeldReason] ?? held}</> : null}.{" "}
            {source.why === "no-history"
              ? "The API runs without a history store, so the page lists what Redis holds; succeeded and cancelled jobs are not listed."
              : "The history search covers every queue and state: choose no queue, or a final state."}
          </>
        );
      case "history":
        return <>From the history store, newest first (jobs are recorded within a second or two). Choose a queue and a live state for the live list from Redis.</>;
      default:
        return null;
    }
  })();

  const selectedCount = selected.size;
  const verb = action === "cancel" ? "Cancel" : action === "delete" ? "Delete" : "Retry";
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
            tag: String(f.get("tag") ?? "").trim() || undefined,
            priority: String(f.get("priority") ?? "") || undefined,
            from: fromInput(String(f.get("from") ?? "")),
            to: fromInput(String(f.get("to") ?? "")),
            id: jid || undefined,
            held: undefined,
          }, false);
          setSelected(new Set());
        }}
      >
        <div className="filter">
          <label htmlFor="f-queue">Queue</label>
          <select id="f-queue" name="queue" defaultValue={filter.queue ?? ""} key={"q" + (filter.queue ?? "") + queueNames.length}>
            <option value="">{probe.data === false ? `first (${queueNames[0] ?? "none"})` : "all"}</option>
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
          <label htmlFor="f-tag">Tag</label>
          <input id="f-tag" name="tag" defaultValue={filter.tag ?? ""} key={"g" + (filter.tag ?? "")} className="mono" placeholder="e.g. tenant:acme" data-testid="filter-tag" />
        </div>
        <div className="filter">
          <label htmlFor="f-priority">Priority (live list)</label>
          <select id="f-priority" name="priority" defaultValue={priority ?? ""} key={"p" + (priority ?? "")}>
            <option value="">any</option>
            <option value="high">high</option>
            <option value="normal">normal</option>
            <option value="low">low</option>
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

      {!id && sourceNote ? <p className="muted source-note" data-testid="jobs-source" data-source={source.kind}>{sourceNote}</p> : null}
      <ErrorBanner error={id ? one.error : list.error} />
      {running ? <BulkProgress requestId={running.id} action={running.action} /> : null}
      {outcome ? (
        <div className={outcome.failed.length || outcome.count < outcome.matched ? "banner warn" : "banner ok"} role="status" data-testid="bulk-outcome">
          {describeBulk(outcome)}
          <button type="button" className="link" onClick={() => setOutcome(null)}>Dismiss</button>
        </div>
      ) : null}

      <div className="toolbar" role="group" aria-label="Selection">
        <span>{selectedCount} selected</span>
        <button type="button" disabled={selectedCount === 0 || !!running} onClick={() => setAction("cancel")}>Cancel selected</button>
        <button type="button" disabled={selectedCount === 0 || !!running} onClick={() => setAction("retry")}>Retry selected</button>
        <button type="button" disabled={selectedCount === 0 || !!running} onClick={() => setAction("delete")} className="danger-outline">Delete selected</button>
        <span className="spacer" />
        {cancellable ? (
          <button type="button" disabled={!!running || stateCount === 0} onClick={() => setCancelMatching(true)} className="danger-outline">
            Cancel all matching…
          </button>
        ) : null}
        {source.kind === "live" && !id ? (
          <button type="button" className="link" onClick={() => live.refetch()}>Refresh</button>
        ) : null}
        {unseen > 0 ? (
          <button type="button" className="link" onClick={() => list.refetch()} data-testid="unseen">
            {unseen} new or changed job{unseen === 1 ? "" : "s"} not listed — refresh
          </button>
        ) : null}
      </div>

      {source.kind === "unavailable" && !id ? (
        <Empty>The API runs without a history store, and Redis keeps no list of {source.state} jobs. Choose a live state: queued, scheduled, waiting, active or dead.</Empty>
      ) : source.kind === "need-queue" && !id ? (
        <Empty>The API runs without a history store: the jobs are listed from Redis, one queue at a time, and there is no queue yet.</Empty>
      ) : jobs.length === 0 && !(list.isLoading || one.isLoading || (needProbe && probe.isLoading) || list.isFetching) ? (
        <Empty>
          {source.kind === "live"
            ? <>No {source.state} jobs{filter.tag ? <> tagged <span className="mono">{filter.tag}</span></> : ""}{held ? ` ${heldReasons[held as HeldReason] ?? held}` : ""} in <strong>{source.queue}</strong> match{list.hasNextPage ? " among those read so far" : ""}.</>
            : "No jobs match. The search reads the history store, which records jobs within a second or two."}
          {list.hasNextPage && !id ? <> <button type="button" className="link" onClick={() => list.fetchNextPage()}>Read further</button></> : null}
        </Empty>
      ) : (
        <JobTable
          jobs={jobs}
          label="Jobs"
          selected={selected}
          onSelect={setSelected}
          showError={source.kind === "live" && source.state === "dead"}
          footer={
            list.hasNextPage && !id ? (
              <div className="load-more">
                <button type="button" onClick={() => list.fetchNextPage()} disabled={list.isFetchingNextPage}>
                  {list.isFetchingNextPage ? "Loading…" : "Load more"}
                </button>
              </div>
            ) : null
          }
        />
      )}
      <Confirm
        open={action !== null}
        title={`${verb} jobs?`}
        body={
          action === "cancel"
            ? <p>Cancel {selectedCount} job{selectedCount === 1 ? "" : "s"}? Running handlers are told to stop; jobs already finished are skipped.</p>
            : action === "delete"
              ? <p>Delete {selectedCount} job{selectedCount === 1 ? "" : "s"} from Redis? Only dead jobs are deleted (the others are skipped); this cannot be undone, their history stays in the history store.</p>
              : <p>Queue {selectedCount} job{selectedCount === 1 ? "" : "s"} again with the attempt count reset? Only dead or cancelled jobs can be retried.</p>
        }
        confirmLabel={`${verb} jobs`}
        danger={action === "cancel" || action === "delete"}
        busy={!!running}
        onConfirm={doBulk}
        onCancel={() => setAction(null)}
      />
      <Confirm
        open={cancelMatching}
        title="Cancel every matching job?"
        body={
          <p data-testid="cancel-matching-what">
            Cancel every <strong>{liveState}</strong> job{filter.type ? <> of type <strong className="mono">{filter.type}</strong></> : null}
            {filter.tag ? <> tagged <strong className="mono">{filter.tag}</strong></> : null} of{" "}
            <strong>{liveQueue}</strong>{stateCount !== undefined ? <> ({num(stateCount)} {liveState} in the queue now{filter.type || filter.tag ? ", of every type and tag" : ""})</> : null}?
            The server cancels them in chunks and says how many; their dependents are cancelled too.
          </p>
        }
        confirmLabel="Cancel matching"
        danger
        busy={!!running}
        onConfirm={doCancelMatching}
        onCancel={() => setCancelMatching(false)}
      />
    </>
  );
}
