// Dead letters per queue: inspect, retry, move or purge the selected jobs,
// all of them, or retry or move to another queue every dead job matching a
// filter (type, error, since). Each
// is one request to the bulk route, confirmed first; its progress comes from
// the stream's bulk messages.

import { useMemo, useState } from "react";
import { useInfiniteQuery, useQuery, useQueryClient, type UseQueryResult } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, bulkRequestId, describeError } from "../api/client";
import type { BulkAction, BulkFilter, BulkRequest } from "../api/types";
import { useLive } from "../live/store";
import { JobTable } from "../components/JobTable";
import { BulkProgress, describeBulk } from "../components/Bulk";
import { Confirm, Empty, ErrorBanner } from "../components/ui";
import { ago, fromInput, num } from "../lib/format";
import { previewDead, type DeadPreview } from "../lib/bulk";
import { useParams } from "../lib/params";

type Action = { kind: "retry" | "purge"; all: boolean } | { kind: "filter"; filter: BulkFilter } | { kind: "move"; filter?: BulkFilter };

/** validQueue tells whether a queue name is one the API takes. */
const validQueue = (q: string) => /^[a-z0-9_-]{1,64}$/.test(q);

/** describeFilter says in words which dead jobs a filter selects. */
export function describeFilter(f: BulkFilter): string {
  const parts: string[] = [];
  if (f.type) parts.push(`of type ${f.type}`);
  if (f.tag) parts.push(`tagged ${f.tag}`);
  if (f.error_contains) parts.push(`whose error contains “${f.error_contains}”`);
  if (f.since) parts.push(`that died since ${new Date(f.since).toLocaleString()}`);
  return parts.join(", ");
}

function FilterPreview({ queue, filter, preview }: { queue: string; filter: BulkFilter; preview: UseQueryResult<DeadPreview> }) {
  const what = describeFilter(filter);
  if (preview.isLoading) return <p>Counting the dead jobs of <strong>{queue}</strong>{what ? " " + what : ""}…</p>;
  if (preview.error || !preview.data) return <ErrorBanner error={preview.error} />;
  const r = preview.data;
  return (
    <div data-testid="bulk-preview" data-count={r.count}>
      <p>
        Queue again, with attempts reset to 0, {r.count === 0 ? "no" : r.complete ? "the" : "at least"}{" "}
        <strong data-testid="bulk-preview-count">{num(r.count)}</strong> dead job{r.count === 1 ? "" : "s"} of <strong>{queue}</strong>{what ? " " + what : ""}
        {r.complete ? "." : ` (the first ${num(r.scanned)} read; the server finds every one).`}
      </p>
      {r.sample.length ? (
        <ul className="bulk-sample" aria-label="Some of the jobs it retries">
          {r.sample.map((j) => (
            <li key={j.id}><span className="mono">{j.id}</span> · <span className="mono">{j.type}</span> · died {ago(j.finished_at)} · {j.last_error}</li>
          ))}
          {r.count > r.sample.length ? <li className="muted">…and {num(r.count - r.sample.length)} more</li> : null}
        </ul>
      ) : null}
    </div>
  );
}

export function DeadLetters({ queue }: { queue?: string }) {
  const queues = useLive((s) => s.data.stats?.queues) ?? [];
  const name = queue ?? queues.find((q) => q.dead > 0)?.name ?? queues[0]?.name;
  const deadCount = queues.find((q) => q.name === name)?.dead;
  const qc = useQueryClient();
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [action, setAction] = useState<Action | null>(null);
  const [running, setRunning] = useState<{ id: string; action: BulkAction } | null>(null);
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const [form, setForm] = useState({ type: "", error: "", since: "" });
  const [moveTo, setMoveTo] = useState("");
  const [params, setParams] = useParams();
  const tag = params.get("tag") ?? "";

  const list = useInfiniteQuery({
    queryKey: ["dead", name, deadCount, tag],
    queryFn: ({ pageParam }) => api.dead(name!, pageParam || undefined, 100, tag || undefined),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    enabled: !!name,
  });
  const jobs = useMemo(() => list.data?.pages.flatMap((p) => p.jobs) ?? [], [list.data]);
  // What a retry by filter selects, read from the live list while its confirmation is open.
  const previewFilter = action?.kind === "filter" ? action.filter : null;
  const preview = useQuery({
    queryKey: ["dead-preview", name, previewFilter],
    queryFn: () => previewDead(name!, previewFilter!),
    enabled: !!name && previewFilter !== null,
    retry: false,
    staleTime: 0,
    gcTime: 0,
  });

  const run = async () => {
    if (!action || !name) return;
    const a = action;
    const body: BulkRequest =
      a.kind === "filter" ? { action: "retry", filter: a.filter }
        : a.kind === "move" ? { action: "move", to_queue: moveTo.trim(), ...(a.filter ? { filter: a.filter } : { ids: [...selected] }) }
          : { action: a.kind === "retry" ? "retry" : "delete", ...(a.all ? { filter: tag ? { tag } : {} } : { ids: [...selected] }) };
    const id = bulkRequestId();
    setAction(null);
    setMessage(null);
    setRunning({ id, action: body.action });
    try {
      const r = await api.bulk(name, body, id);
      let text = describeBulk(r);
      if (body.action === "delete") text += " Their history stays in the history store.";
      if (body.action === "move") text += ` They are queued in ${body.to_queue} with new ids (idempotency key moved-from:<old id>).`;
      setMessage({ ok: true, text });
      if (a.kind !== "filter" && !(a.kind === "move" && a.filter)) setSelected(new Set());
    } catch (err) {
      setMessage({ ok: false, text: describeError(err) });
    }
    setRunning(null);
    qc.invalidateQueries({ queryKey: ["dead"] });
  };

  const filter: BulkFilter = {
    ...(form.type.trim() ? { type: form.type.trim() } : {}),
    ...(tag ? { tag } : {}),
    ...(form.error ? { error_contains: form.error } : {}),
    ...(fromInput(form.since) ? { since: fromInput(form.since) } : {}),
  };
  const count = action?.kind === "retry" || action?.kind === "purge" ? (action.all ? (deadCount ?? jobs.length) : selected.size) : 0;
  const busy = running !== null;
  return (
    <>
      <div className="page-head">
        <h1>Dead letters</h1>
      </div>
      <nav className="tabs" aria-label="Queues">
        {queues.map((q) => (
          <Link key={q.name} href={`/dead/${q.name}${tag ? `?tag=${encodeURIComponent(tag)}` : ""}`} className={q.name === name ? "current" : ""} aria-current={q.name === name ? "page" : undefined}>
            {q.name} <span className={q.dead > 0 ? "count bad" : "count"}>{num(q.dead)}</span>
          </Link>
        ))}
      </nav>
      {!name ? <Empty>No queues yet.</Empty> : (
        <>
          {running ? <BulkProgress requestId={running.id} action={running.action} /> : null}
          {message ? (
            <div className={message.ok ? "banner ok" : "banner error"} role="status" data-testid="bulk-outcome">
              {message.text} <button type="button" className="link" onClick={() => setMessage(null)}>Dismiss</button>
            </div>
          ) : null}
          <ErrorBanner error={list.error} />
          <form
            className="filters"
            role="search"
            aria-label="Show dead jobs by tag"
            onSubmit={(e) => {
              e.preventDefault();
              const t = String(new FormData(e.currentTarget).get("tag") ?? "").trim();
              setParams({ tag: t || undefined });
              setSelected(new Set());
            }}
          >
            <div className="filter">
              <label htmlFor="d-tag">Tag</label>
              <input id="d-tag" name="tag" defaultValue={tag} key={"tag" + tag} className="mono" placeholder="any tag" data-testid="dead-filter-tag" />
            </div>
            <div className="filter-actions">
              <button type="submit">Show</button>
              {tag ? <button type="button" onClick={() => setParams({ tag: undefined })}>All tags</button> : null}
            </div>
            {tag ? <p className="muted small">Only the dead jobs tagged <strong className="mono">{tag}</strong> are listed; the retry and move by filter below take the tag too.</p> : null}
          </form>
          <form
            className="filters"
            aria-label="Retry dead jobs by filter"
            onSubmit={(e) => {
              e.preventDefault();
              setAction({ kind: "filter", filter });
            }}
          >
            <p className="filters-title">Retry every dead job of <strong>{name}</strong>{tag ? <> tagged <strong className="mono">{tag}</strong></> : null} that matches:</p>
            <div className="filter">
              <label htmlFor="d-type">Type</label>
              <input id="d-type" value={form.type} onChange={(e) => setForm({ ...form, type: e.target.value })} placeholder="any type" />
            </div>
            <div className="filter">
              <label htmlFor="d-error">Error contains</label>
              <input id="d-error" value={form.error} onChange={(e) => setForm({ ...form, error: e.target.value })} placeholder="any error" />
            </div>
            <div className="filter">
              <label htmlFor="d-since">Died since</label>
              <input id="d-since" type="datetime-local" value={form.since} onChange={(e) => setForm({ ...form, since: e.target.value })} />
            </div>
            <div className="filter-actions">
              <button type="submit" disabled={!deadCount || busy}>Retry matching…</button>
              <button type="button" disabled={!deadCount || busy} onClick={() => setAction({ kind: "move", filter })}>Move matching…</button>
            </div>
          </form>
          <div className="toolbar" role="group" aria-label="Dead-letter actions">
            <span>{selected.size} selected</span>
            <button type="button" disabled={selected.size === 0 || busy} onClick={() => setAction({ kind: "retry", all: false })}>Retry selected</button>
            <button type="button" disabled={selected.size === 0 || busy} onClick={() => setAction({ kind: "move" })}>Move selected…</button>
            <button type="button" disabled={selected.size === 0 || busy} onClick={() => setAction({ kind: "purge", all: false })} className="danger-outline">Purge selected</button>
            <span className="spacer" />
            <button type="button" disabled={!deadCount || busy || (!!tag && jobs.length === 0)} onClick={() => setAction({ kind: "retry", all: true })}>{tag ? "Retry all tagged" : "Retry all"}</button>
            <button type="button" disabled={!deadCount || busy || (!!tag && jobs.length === 0)} onClick={() => setAction({ kind: "purge", all: true })} className="danger-outline">{tag ? "Purge all tagged" : "Purge all"}</button>
          </div>
          {jobs.length === 0 && !list.isLoading ? (
            <Empty>No dead jobs{tag ? <> tagged <span className="mono">{tag}</span></> : null} in <strong>{name}</strong>.</Empty>
          ) : (
            <JobTable
              jobs={jobs}
              label={`Dead jobs of ${name}`}
              selected={selected}
              onSelect={setSelected}
              showError
              footer={list.hasNextPage ? (
                <div className="load-more">
                  <button type="button" onClick={() => list.fetchNextPage()} disabled={list.isFetchingNextPage}>Load more</button>
                </div>
              ) : null}
            />
          )}
        </>
      )}
      <Confirm
        open={action !== null}
        title={action?.kind === "purge" ? "Purge dead jobs?" : action?.kind === "filter" ? "Retry matching dead jobs?"
          : action?.kind === "move" ? "Move dead jobs to another queue?" : "Retry dead jobs?"}
        body={
          action?.kind === "move" && name
            ? (
              <div>
                <p>
                  Move {action.filter ? <>every dead job of <strong>{name}</strong>{describeFilter(action.filter) ? " " + describeFilter(action.filter) : ""}</>
                    : <>{num(selected.size)} dead job{selected.size === 1 ? "" : "s"} of <strong>{name}</strong></>}{" "}
                  to another queue? Each is queued there as a new job (a new id, attempts at 0, its idempotency key
                  moved-from:&lt;old id&gt;) and leaves the dead letters of {name}; its history stays under its old id.
                </p>
                <div className="filter">
                  <label htmlFor="d-move-to">To queue</label>
                  <input id="d-move-to" value={moveTo} onChange={(e) => setMoveTo(e.target.value)} placeholder="queue name" aria-invalid={moveTo !== "" && (!validQueue(moveTo.trim()) || moveTo.trim() === name)} />
                </div>
                {moveTo !== "" && !validQueue(moveTo.trim()) ? <p className="error-text">A queue name is 1 to 64 of a-z, 0-9, _ and -.</p> : null}
                {moveTo.trim() === name ? <p className="error-text">Choose another queue than {name}.</p> : null}
              </div>
            )
            : action?.kind === "filter" && name
            ? <FilterPreview queue={name} filter={action.filter} preview={preview} />
            : action?.kind === "retry"
              ? (action.all && tag
                ? <p>Queue every dead job of <strong>{name}</strong> tagged <strong className="mono">{tag}</strong> again, with attempts reset to 0?</p>
                : <p>Queue {action.all ? "every" : num(count)} dead job{count === 1 ? "" : "s"} of <strong>{name}</strong> again{action.all ? ` (${num(count)})` : ""}, with attempts reset to 0?</p>)
              : action?.kind === "purge" && action.all && tag
                ? <p>Delete every dead job of <strong>{name}</strong> tagged <strong className="mono">{tag}</strong> from Redis? This cannot be undone; their history stays in the history store.</p>
                : <p>Delete {action?.kind === "purge" && action.all ? "every" : num(count)} dead job{count === 1 ? "" : "s"} of <strong>{name}</strong>{action?.kind === "purge" && action.all ? ` (${num(count)})` : ""} from Redis? This cannot be undone; their history stays in the history store.</p>
        }
        confirmLabel={action?.kind === "purge" ? "Purge" : action?.kind === "filter" ? "Retry matching" : action?.kind === "move" ? "Move" : "Retry"}
        danger={action?.kind === "purge"}
        disabled={(action?.kind === "filter" && !preview.data?.count) || (action?.kind === "move" && (!validQueue(moveTo.trim()) || moveTo.trim() === name))}
        busy={busy}
        onConfirm={run}
        onCancel={() => setAction(null)}
      />
    </>
  );
}
