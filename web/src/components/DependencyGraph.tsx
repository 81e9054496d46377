// A job's dependency graph (GET /v1/jobs/{id}/graph): parents to the left,
// children to the right, each job a link coloured by its state, which
// follows the stream live; and the whole workflow's cancel and retry,
// through the bulk route (one request per queue; a retry layer by layer,
// parents first, so a dependent waits again for its retried parents).

import { useEffect, useMemo, useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "wouter";
import { api, describeError } from "../api/client";
import { finalStates, type GraphNode } from "../api/types";
import { useLive } from "../live/store";
import { bulkByIds, type BulkOutcome } from "../lib/bulk";
import { layoutGraph, retryLayers, stepName } from "../lib/graph";
import { Confirm, ErrorBanner } from "./ui";

const W = 184;
const H = 54;
const GAP_X = 56;
const GAP_Y = 14;

export function DependencyGraph({ id }: { id: string }) {
  const qc = useQueryClient();
  const graph = useQuery({ queryKey: ["graph", id], queryFn: () => api.jobGraph(id), retry: false });
  const nodes = useMemo(() => graph.data?.nodes ?? [], [graph.data]);
  // The latest stream event of each job drawn, as one string: the graph
  // redraws when one of its jobs changes, not on every event.
  const liveSig = useLive((s) => nodes.map((n) => `${n.id}=${s.data.jobs.get(n.id)?.state ?? ""}`).join(","));
  const live = useMemo(() => new Map(liveSig.split(",").map((p) => p.split("=") as [string, string])), [liveSig]);
  useEffect(() => {
    if (!/=[a-z]/.test(liveSig)) return;
    // A job of the graph moved: reread it soon (new children, finished times).
    const t = setTimeout(() => qc.invalidateQueries({ queryKey: ["graph", id] }), 800);
    return () => clearTimeout(t);
  }, [liveSig, id, qc]);

  const [confirm, setConfirm] = useState<"cancel" | "retry" | null>(null);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<BulkOutcome | null>(null);
  const [error, setError] = useState<unknown>(null);

  const withLive = useMemo(() => nodes.map((n) => ({ ...n, state: (live.get(n.id) || n.state) as GraphNode["state"] })), [nodes, live]);
  const layout = useMemo(() => layoutGraph(withLive, graph.data?.edges ?? []), [withLive, graph.data]);

  if (graph.error) return <p className="muted">{describeError(graph.error)}</p>;
  if (!graph.data) return <p aria-busy="true">Loading the graph…</p>;
  if (graph.data.nodes.length <= 1) return <p className="muted" data-testid="graph-none">No dependencies either way.</p>;

  const pos = new Map(layout.placed.map((p) => [p.node.id, { x: p.layer * (W + GAP_X), y: p.row * (H + GAP_Y) }]));
  const width = layout.layers * (W + GAP_X) - GAP_X;
  const height = layout.rows * (H + GAP_Y) - GAP_Y;
  const open = withLive.filter((n) => !n.missing && n.state && !finalStates.has(n.state));
  const failed = retryLayers(layout);

  const run = async (action: "cancel" | "retry") => {
    setBusy(true);
    setError(null);
    try {
      let total: BulkOutcome = { action, matched: 0, count: 0, failed: [] };
      const batches = action === "cancel" ? [open] : failed;
      for (const batch of batches) {
        const r = await bulkByIds(action, batch.map((n) => ({ id: n.id, queue: n.queue ?? "" })));
        total = { action, matched: total.matched + r.matched, count: total.count + r.count, failed: [...total.failed, ...r.failed] };
      }
      setOutcome(total);
      if (total.failed.length) setError(total.failed[0].error);
      qc.invalidateQueries({ queryKey: ["graph", id] });
      qc.invalidateQueries({ queryKey: ["job", id] });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
      setConfirm(null);
    }
  };

  return (
    <div className="graph-wrap">
      <div className="graph-actions">
        <span className="muted">{graph.data.nodes.length} jobs{graph.data.truncated ? " (the nearest; there are more)" : ""}</span>
        <span className="spacer" />
        <button type="button" disabled={open.length === 0 || busy} onClick={() => setConfirm("cancel")}>Cancel workflow</button>
        <button type="button" disabled={failed.length === 0 || busy} onClick={() => setConfirm("retry")}>Retry failed steps</button>
      </div>
      <ErrorBanner error={error} />
      {outcome && !error ? (
        <p className="muted" role="status" data-testid="graph-outcome">
          {outcome.action === "cancel" ? "Cancelled" : "Retried"} {outcome.count} of {outcome.matched} jobs.
        </p>
      ) : null}
      <div className="graph" data-testid="job-graph" style={{ width, height }}>
        <svg width={width} height={height} aria-hidden="true" className="graph-edges">
          <defs>
            <marker id="graph-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto">
              <path d="M0,0 L8,4 L0,8 z" />
            </marker>
          </defs>
          {graph.data.edges.map((e) => {
            const a = pos.get(e.from);
            const b = pos.get(e.to);
            if (!a || !b) return null;
            const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
            const mid = (x1 + x2) / 2;
            return <path key={`${e.from}>${e.to}`} d={`M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`} markerEnd="url(#graph-arrow)" />;
          })}
        </svg>
        {layout.placed.map(({ node }) => {
          const p = pos.get(node.id)!;
          const name = stepName(node) ?? node.type ?? "unknown job";
          const meta = `${node.missing ? "unknown" : node.state} · ${node.queue ?? ""}`;

          const cls = `graph-node state-${node.missing ? "missing" : node.state}${node.id === id ? " is-root" : ""}`;
          const style = { left: p.x, top: p.y, width: W, height: H };
          const body = (
            <>
              <span className="graph-name">{name}</span>{" "}
              <span className="graph-meta">{meta}</span>
              {/* The name is the visible text (WCAG 2.5.3), then what only a screen reader needs. */}
              <span className="sr-only">, job {node.id}{node.id === id ? " (this job)" : ""}</span>
            </>
          );
          return node.id === id ? (
            <div key={node.id} className={cls} style={style} data-node={node.id} data-state={node.state}>{body}</div>
          ) : (
            <Link key={node.id} href={`/jobs/${node.id}`} className={cls} style={style} data-node={node.id} data-state={node.state}>{body}</Link>
          );
        })}
      </div>
      <Confirm
        open={confirm !== null}
        title={confirm === "cancel" ? "Cancel the whole workflow?" : "Retry the failed steps?"}
        body={confirm === "cancel"
          ? <p>{open.length} jobs not yet finished end cancelled; a running one's handler is told to stop.</p>
          : <p>{failed.flat().length} dead or cancelled jobs are queued again, parents first; their dependents wait for them again.</p>}
        confirmLabel={confirm === "cancel" ? "Cancel workflow" : "Retry steps"}
        danger={confirm === "cancel"}
        busy={busy}
        onConfirm={() => confirm && run(confirm)}
        onCancel={() => setConfirm(null)}
      />
    </div>
  );
}
