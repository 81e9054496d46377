import { describe, expect, it } from "vitest";
import type { GraphNode } from "../api/types";
import { layoutGraph, retryLayers, stepName } from "./graph";

const n = (id: string, state: GraphNode["state"] = "succeeded", key?: string): GraphNode => ({ id, state, attempt: 0, queue: "q", idempotency_key: key });

describe("layoutGraph", () => {
  it("puts a job one layer right of its furthest parent, so every edge points right", () => {
    // a → b → c, a → c, a → d
    const nodes = [n("c"), n("a"), n("b"), n("d")];
    const edges = [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "a", to: "c" }, { from: "a", to: "d" }];
    const l = layoutGraph(nodes, edges);
    const at = new Map(l.placed.map((p) => [p.node.id, p]));
    expect(at.get("a")!.layer).toBe(0);
    expect(at.get("b")!.layer).toBe(1);
    expect(at.get("d")!.layer).toBe(1);
    expect(at.get("c")!.layer).toBe(2);
    for (const e of edges) expect(at.get(e.to)!.layer).toBeGreaterThan(at.get(e.from)!.layer);
    expect(l.layers).toBe(3);
    expect(l.rows).toBe(2);
    // No two jobs share a place.
    expect(new Set(l.placed.map((p) => `${p.layer}/${p.row}`)).size).toBe(nodes.length);
  });

  it("ignores edges to jobs it was not given and survives a cycle", () => {
    const l = layoutGraph([n("a"), n("b")], [{ from: "a", to: "b" }, { from: "b", to: "a" }, { from: "a", to: "zzz" }]);
    expect(l.placed).toHaveLength(2);
  });

  it("orders a layer by its parents' rows", () => {
    // two chains a1 → b1, a2 → b2, given in crossed order
    const l = layoutGraph([n("a1"), n("a2"), n("b2"), n("b1")], [{ from: "a1", to: "b1" }, { from: "a2", to: "b2" }]);
    const row = (id: string) => l.placed.find((p) => p.node.id === id)!.row;
    expect(row("b1")).toBe(row("a1"));
    expect(row("b2")).toBe(row("a2"));
  });
});

describe("retryLayers", () => {
  it("lists the dead and cancelled jobs, parents' layer first", () => {
    const nodes = [n("a"), n("b", "dead"), n("c", "cancelled"), n("d", "queued")];
    const l = layoutGraph(nodes, [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "a", to: "d" }]);
    expect(retryLayers(l).map((layer) => layer.map((x) => x.id))).toEqual([["b"], ["c"]]);
  });
});

describe("stepName", () => {
  it("reads a workflow step's name from its idempotency key", () => {
    expect(stepName(n("x", "queued", "wf:order-42:load"))).toBe("load");
    expect(stepName(n("x", "queued", "mine"))).toBeUndefined();
    expect(stepName(n("x"))).toBeUndefined();
  });
});
