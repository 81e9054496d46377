// Dead letters per queue: inspect, retry selected or all, purge selected
// or all. Every action is confirmed first.

import { useMemo, useState } from "react";
import { useInfiniteQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, describeError } from "../api/client";
import { useLive } from "../live/store";
import { JobTable } from "../components/JobTable";
import { Confirm, Empty, ErrorBanner } from "../components/ui";
import { num } from "../lib/format";

type Action = { kind: "retry" | "purge"; all: boolean };

export function DeadLetters({ queue }: { queue?: string }) {
  const queues = useLive((s) => s.data.stats?.queues) ?? [];
  const name = queue ?? queues.find((q) => q.dead > 0)?.name ?? queues[0]?.name;
  const deadCount = queues.find((q) => q.name === name)?.dead;
  const qc = useQueryClient();
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [action, setAction] = useState<Action | null>(null);
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);

  const list = useInfiniteQuery({
    queryKey: ["dead", name, deadCount],
    queryFn: ({ pageParam }) => api.dead(name!, pageParam || undefined),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    enabled: !!name,
  });
  const jobs = useMemo(() => list.data?.pages.flatMap((p) => p.jobs) ?? [], [list.data]);

  const run = async () => {
    if (!action || !name) return;
    setBusy(true);
    const ids = action.all ? undefined : [...selected];
    try {
      if (action.kind === "retry") {
        const r = await api.retryDead(name, ids);
        setMessage({ ok: true, text: `Requeued ${r.retried} job${r.retried === 1 ? "" : "s"}.` });
      } else {
        const r = await api.purgeDead(name, ids);
        setMessage({ ok: true, text: `Deleted ${r.deleted} dead job${r.deleted === 1 ? "" : "s"}; their history stays.` });
      }
      setSelected(new Set());
    } catch (err) {
      setMessage({ ok: false, text: describeError(err) });
    }
    setBusy(false);
    setAction(null);
    qc.invalidateQueries({ queryKey: ["dead"] });
  };

  const count = action?.all ? (deadCount ?? jobs.length) : selected.size;
  return (
    <>
      <div className="page-head">
        <h1>Dead letters</h1>
      </div>
      <nav className="tabs" aria-label="Queues">
        {queues.map((q) => (
          <Link key={q.name} href={`/dead/${q.name}`} className={q.name === name ? "current" : ""} aria-current={q.name === name ? "page" : undefined}>
            {q.name} <span className={q.dead > 0 ? "count bad" : "count"}>{num(q.dead)}</span>
          </Link>
        ))}
      </nav>
      {!name ? <Empty>No queues yet.</Empty> : (
        <>
          {message ? (
            <div className={message.ok ? "banner ok" : "banner error"} role="status">
              {message.text} <button type="button" className="link" onClick={() => setMessage(null)}>Dismiss</button>
            </div>
          ) : null}
          <ErrorBanner error={list.error} />
          <div className="toolbar" role="group" aria-label="Dead-letter actions">
            <span>{selected.size} selected</span>
            <button type="button" disabled={selected.size === 0} onClick={() => setAction({ kind: "retry", all: false })}>Retry selected</button>
            <button type="button" disabled={selected.size === 0} onClick={() => setAction({ kind: "purge", all: false })} className="danger-outline">Purge selected</button>
            <span className="spacer" />
            <button type="button" disabled={!deadCount} onClick={() => setAction({ kind: "retry", all: true })}>Retry all</button>
            <button type="button" disabled={!deadCount} onClick={() => setAction({ kind: "purge", all: true })} className="danger-outline">Purge all</button>
          </div>
          {jobs.length === 0 && !list.isLoading ? (
            <Empty>No dead jobs in <strong>{name}</strong>.</Empty>
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
        title={action?.kind === "retry" ? "Retry dead jobs?" : "Purge dead jobs?"}
        body={
          action?.kind === "retry"
            ? <p>Queue {action.all ? "every" : num(count)} dead job{count === 1 ? "" : "s"} of <strong>{name}</strong> again{action.all ? ` (${num(count)})` : ""}, with attempts reset to 0?</p>
            : <p>Delete {action?.all ? "every" : num(count)} dead job{count === 1 ? "" : "s"} of <strong>{name}</strong>{action?.all ? ` (${num(count)})` : ""} from Redis? This cannot be undone; their history stays in the history store.</p>
        }
        confirmLabel={action?.kind === "retry" ? "Retry" : "Purge"}
        danger={action?.kind === "purge"}
        busy={busy}
        onConfirm={run}
        onCancel={() => setAction(null)}
      />
    </>
  );
}
