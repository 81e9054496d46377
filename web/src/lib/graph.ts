// Layout of a dependency graph (GET /v1/jobs/{id}/graph) in layers, left
// to right: a job stands one layer right of its furthest parent, so every
// edge points right; within a layer, jobs keep the order the API gave them
// (nearest to the root first) unless a parent's order says otherwise.

import type { GraphEdge, GraphNode } from "../api/types";

export interface Placed {
  node: GraphNode;
  layer: number;
  row: number;
}

export interface Layout {
  placed: Placed[];
  layers: number;
  rows: number;
}

/** layoutGraph places each node in a layer (its longest path from a source) and a row. */
export function layoutGraph(nodes: GraphNode[], edges: GraphEdge[]): Layout {
  const ids = new Set(nodes.map((n) => n.id));
  const parents = new Map<string, string[]>();
  for (const e of edges) {
    if (!ids.has(e.from) || !ids.has(e.to) || e.from === e.to) continue;
    const p = parents.get(e.to) ?? [];
    p.push(e.from);
    parents.set(e.to, p);
  }
  // Longest path from a source, with a guard against cycles (a graph the
  // engine refuses, but a drawing must not loop on bad data).
  const layer = new Map<string, number>();
  const visiting = new Set<string>();
  const depth = (id: string): number => {
    const known = layer.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0;
    visiting.add(id);
    let d = 0;
    for (const p of parents.get(id) ?? []) d = Math.max(d, depth(p) + 1);
    visiting.delete(id);
    layer.set(id, d);
    return d;
  };
  for (const n of nodes) depth(n.id);
  const byLayer = new Map<number, GraphNode[]>();
  for (const n of nodes) {
    const l = layer.get(n.id) ?? 0;
    const list = byLayer.get(l) ?? [];
    list.push(n);
    byLayer.set(l, list);
  }
  const layers = byLayer.size === 0 ? 0 : Math.max(...byLayer.keys()) + 1;
  const rowOf = new Map<string, number>();
  const placed: Placed[] = [];
  let rows = 0;
  for (let l = 0; l < layers; l++) {
    const list = byLayer.get(l) ?? [];
    // Children near their parents: order a layer by its jobs' mean parent row.
    const key = (n: GraphNode) => {
      const ps = (parents.get(n.id) ?? []).map((p) => rowOf.get(p) ?? 0);
      return ps.length ? ps.reduce((a, b) => a + b, 0) / ps.length : 0;
    };
    const ordered = l === 0 ? list : list.map((n, i) => ({ n, i, k: key(n) })).sort((a, b) => a.k - b.k || a.i - b.i).map((x) => x.n);
    ordered.forEach((n, row) => {
      rowOf.set(n.id, row);
      placed.push({ node: n, layer: l, row });
    });
    rows = Math.max(rows, ordered.length);
  }
  return { placed, layers, rows };
}

/** stepName is a workflow step's name, from its idempotency key wf:<workflow>:<step>. */
export function stepName(n: GraphNode): string | undefined {
  const k = n.idempotency_key;
  if (!k?.startsWith("wf:")) return undefined;
  const i = k.lastIndexOf(":");
  return i > 3 ? k.slice(i + 1) : undefined;
}

/** retryOrder lists the nodes to retry (dead or cancelled), parents before children, grouped by layer. */
export function retryLayers(layout: Layout): GraphNode[][] {
  const out: GraphNode[][] = [];
  for (const p of layout.placed) {
    if (p.node.state !== "dead" && p.node.state !== "cancelled") continue;
    (out[p.layer] ??= []).push(p.node);
  }
  return out.filter((l) => l && l.length > 0);
}
