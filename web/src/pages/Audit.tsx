// Audit: who changed what (GET /v1/audit, admin scope), newest first, with
// filters by actor, action, target and time kept in the URL and cursor
// paging. docs/security.md, "Audit log", lists the actions.

import { useMemo } from "react";
import { useInfiniteQuery } from "@tanstack/react-query";
import { Link, useLocation } from "wouter";
import { request } from "../api/client";
import { Empty, ErrorBanner, TableWrap } from "../components/ui";
import { useParams } from "../lib/params";
import { fromInput, toInput, when } from "../lib/format";

/** AuditRecord is one record of GET /v1/audit. */
export interface AuditRecord {
  id: string;
  at: string;
  actor: { kind: string; id?: string; name?: string; ip?: string };
  request_id?: string;
  action: string;
  target?: string;
  filter?: string;
  outcome: "ok" | "refused" | "failed";
  status?: number;
  code?: string;
  detail?: string;
}

export interface AuditPage {
  records: AuditRecord[];
  next_cursor: string;
}

export interface AuditFilter {
  actor?: string;
  action?: string;
  target?: string;
  since?: string;
  until?: string;
}

/** auditPage reads a page of the audit log. */
export function auditPage(f: AuditFilter, cursor?: string, limit = 100): Promise<AuditPage> {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) p.set(k, v);
  if (cursor) p.set("cursor", cursor);
  p.set("limit", String(limit));
  return request<AuditPage>("GET", "/v1/audit?" + p.toString());
}

/** actorLabel names an actor as a person reads it. */
export function actorLabel(a: AuditRecord["actor"]): string {
  if (!a.id) return a.kind;
  return a.name ? `${a.name} (${a.id})` : a.id;
}

/** targetLink links a record's target to its page, when it has one. */
function targetLink(t: string | undefined) {
  if (!t) return <span className="muted">—</span>;
  const job = /^job:([^/]+)/.exec(t);
  if (job) return <Link href={`/jobs/${job[1]}`} className="mono">{t}</Link>;
  const batch = /^batch:([^/]+)$/.exec(t);
  if (batch) return <Link href={`/batches/${batch[1]}`} className="mono">{t}</Link>;
  return <span className="mono">{t}</span>;
}

// The badge colours of the outcomes (the job states' palette).
const outcomeClass: Record<string, string> = { ok: "state-succeeded", refused: "state-dead", failed: "paused" };

export function Audit() {
  const [params, setParams] = useParams();
  const [, navigate] = useLocation();
  const filter: AuditFilter = useMemo(() => ({
    actor: params.get("actor") ?? undefined,
    action: params.get("action") ?? undefined,
    target: params.get("target") ?? undefined,
    since: params.get("since") ?? undefined,
    until: params.get("until") ?? undefined,
  }), [params]);
  const list = useInfiniteQuery({
    queryKey: ["audit", filter],
    queryFn: ({ pageParam }) => auditPage(filter, pageParam || undefined),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_cursor || undefined,
    retry: false,
  });
  const records = list.data?.pages.flatMap((p) => p.records) ?? [];
  return (
    <>
      <div className="page-head">
        <h1>Audit log</h1>
        <span className="muted">who changed what, newest first</span>
      </div>
      <form
        className="filters"
        role="search"
        aria-label="Filter the audit log"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          const text = (k: string) => String(f.get(k) ?? "").trim() || undefined;
          setParams({
            actor: text("actor"), action: text("action"), target: text("target"),
            since: fromInput(String(f.get("since") ?? "")), until: fromInput(String(f.get("until") ?? "")),
          }, false);
        }}
      >
        <div className="filter">
          <label htmlFor="a-actor">Actor</label>
          <input id="a-actor" name="actor" className="mono" defaultValue={filter.actor ?? ""} key={"a" + (filter.actor ?? "")} placeholder="key:1a2b3c4d5e6f" />
        </div>
        <div className="filter">
          <label htmlFor="a-action">Action</label>
          <input id="a-action" name="action" defaultValue={filter.action ?? ""} key={"c" + (filter.action ?? "")} placeholder="e.g. job.cancel" />
        </div>
        <div className="filter">
          <label htmlFor="a-target">Target</label>
          <input id="a-target" name="target" className="mono" defaultValue={filter.target ?? ""} key={"t" + (filter.target ?? "")} placeholder="job:… or queue:…" />
        </div>
        <div className="filter">
          <label htmlFor="a-since">From</label>
          <input id="a-since" type="datetime-local" name="since" defaultValue={toInput(filter.since ?? null)} key={"s" + (filter.since ?? "")} />
        </div>
        <div className="filter">
          <label htmlFor="a-until">to</label>
          <input id="a-until" type="datetime-local" name="until" defaultValue={toInput(filter.until ?? null)} key={"u" + (filter.until ?? "")} />
        </div>
        <div className="filter-actions">
          <button type="submit" className="primary">Search</button>
          <button type="button" onClick={() => navigate("/audit")}>Clear</button>
        </div>
      </form>
      <ErrorBanner error={list.error} title="The audit log cannot be read" />
      {records.length === 0 && !list.isLoading && !list.error ? (
        <Empty>No record matches.</Empty>
      ) : records.length > 0 ? (
        <TableWrap label="Audit records">
          <table className="grid" aria-label="Audit records" data-testid="audit">
            <thead>
              <tr>
                <th scope="col">when</th>
                <th scope="col">actor</th>
                <th scope="col">action</th>
                <th scope="col">target</th>
                <th scope="col">outcome</th>
                <th scope="col">request</th>
                <th scope="col">detail</th>
              </tr>
            </thead>
            <tbody>
              {records.map((r) => (
                <tr key={r.id} data-audit={r.action} data-outcome={r.outcome}>
                  <td title={r.at}>{when(r.at)}</td>
                  <td className="mono">{actorLabel(r.actor)}{r.actor.ip ? <span className="muted"> {r.actor.ip}</span> : null}</td>
                  <th scope="row">{r.action}</th>
                  <td>{targetLink(r.target)}</td>
                  <td><span className={`badge ${outcomeClass[r.outcome] ?? ""}`}>{r.outcome}</span>{r.status ? <span className="muted"> {r.status}</span> : null}</td>
                  <td className="mono">{r.request_id ?? "—"}</td>
                  <td>{[r.filter, r.detail].filter(Boolean).join(" · ") || <span className="muted">—</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {list.hasNextPage ? (
        <p>
          <button type="button" onClick={() => list.fetchNextPage()} disabled={list.isFetchingNextPage}>
            {list.isFetchingNextPage ? "Loading…" : "Load more"}
          </button>
        </p>
      ) : null}
    </>
  );
}
