package httpapi

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// TestJobGraph: a workflow over four queues is found whole from any of its
// steps, from Redis alone: parents by depends_on, children of the same
// queue by their dependents set, children of other queues among the
// remote waiters.
func TestJobGraph(t *testing.T) {
	a := start(t)
	var wf workflowResult
	a.do("POST", "/v1/workflows", map[string]any{"id": "g1", "steps": []map[string]any{
		{"name": "extract", "job": map[string]any{"type": "extract", "queue": "etl"}},
		{"name": "transform", "job": map[string]any{"type": "transform", "queue": "etl"}, "after": []string{"extract"}},
		{"name": "load", "job": map[string]any{"type": "load", "queue": "warehouse"}, "after": []string{"transform"}},
		{"name": "archive", "job": map[string]any{"type": "archive", "queue": "cold"}, "after": []string{"extract"}},
		{"name": "notify", "job": map[string]any{"type": "mail", "queue": "mail"}, "after": []string{"load", "archive"}},
	}}).decode(t, http.StatusCreated, &wf)
	id := func(step string) string { return wf.Steps[step].ID }
	want := []graphEdge{
		{id("extract"), id("transform")}, {id("transform"), id("load")}, {id("extract"), id("archive")},
		{id("load"), id("notify")}, {id("archive"), id("notify")},
	}
	for _, from := range []string{"transform", "notify", "extract"} {
		var g jobGraph
		a.do("GET", "/v1/jobs/"+id(from)+"/graph", nil).decode(t, http.StatusOK, &g)
		if g.Root != id(from) || len(g.Nodes) != 5 || g.Truncated {
			t.Fatalf("from %s: %d nodes, truncated %v: %+v", from, len(g.Nodes), g.Truncated, g.Nodes)
		}
		if g.Nodes[0].ID != id(from) {
			t.Errorf("from %s: the root is not first: %+v", from, g.Nodes[0])
		}
		for _, e := range want {
			if !slices.Contains(g.Edges, e) {
				t.Errorf("from %s: edge %v missing from %v", from, e, g.Edges)
			}
		}
		if len(g.Edges) != len(want) {
			t.Errorf("from %s: edges %v, want %v", from, g.Edges, want)
		}
		for _, n := range g.Nodes {
			st := wf.Steps[n.IdempotencyKey[len("wf:g1:"):]]
			if n.Queue != st.Queue || n.Type != st.Type || n.State != st.State {
				t.Errorf("node %+v, step %+v", n, st)
			}
		}
	}
	// A limit keeps the nearest jobs and the edges between them.
	var g jobGraph
	a.do("GET", "/v1/jobs/"+id("transform")+"/graph?limit=2", nil).decode(t, http.StatusOK, &g)
	if len(g.Nodes) != 2 || !g.Truncated || len(g.Edges) != 1 || g.Edges[0] != (graphEdge{id("extract"), id("transform")}) &&
		g.Edges[0] != (graphEdge{id("transform"), id("load")}) {
		t.Fatalf("limit 2: %+v", g)
	}
	a.do("GET", "/v1/jobs/"+id("transform")+"/graph?limit=0", nil).wantError(t, http.StatusBadRequest, "invalid_argument", "limit")
	a.do("GET", "/v1/jobs/"+id("transform")+"/graph?depth=2", nil).wantError(t, http.StatusBadRequest, "invalid_argument", "depth")
	a.do("GET", "/v1/jobs/01KB0000000000000000000000/graph", nil).wantError(t, http.StatusNotFound, "not_found", "")
}

// TestJobGraphFromHistory: once a job has left Redis, the history store
// gives it and the jobs recorded as depending on it (as "<queue>|<id>"
// when of another queue); an edge to a job nobody knows is a missing node.
func TestJobGraphFromHistory(t *testing.T) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	h := &fakeHistory{jobs: map[string]*job.Job{
		"01KB00000000000000000000P1": {ID: "01KB00000000000000000000P1", Queue: "etl", Type: "extract", State: job.Succeeded, CreatedAt: at,
			DependsOn: []string{"01KB00000000000000000000G0"}},
		"01KB00000000000000000000C1": {ID: "01KB00000000000000000000C1", Queue: "etl", Type: "load", State: job.Succeeded, CreatedAt: at,
			DependsOn: []string{"01KB00000000000000000000P1"}},
		"01KB00000000000000000000C2": {ID: "01KB00000000000000000000C2", Queue: "mail", Type: "mail", State: job.Dead, CreatedAt: at,
			DependsOn: []string{"etl|01KB00000000000000000000P1"}},
	}}
	a := start(t, func(c *Config) { c.History = h })
	var g jobGraph
	a.do("GET", "/v1/jobs/01KB00000000000000000000P1/graph", nil).decode(t, http.StatusOK, &g)
	nodes := map[string]graphNode{}
	for _, n := range g.Nodes {
		nodes[n.ID] = n
	}
	if len(nodes) != 4 || nodes["01KB00000000000000000000C2"].State != job.Dead || !nodes["01KB00000000000000000000G0"].Missing {
		t.Fatalf("nodes %+v", g.Nodes)
	}
	for _, e := range []graphEdge{
		{"01KB00000000000000000000G0", "01KB00000000000000000000P1"},
		{"01KB00000000000000000000P1", "01KB00000000000000000000C1"},
		{"01KB00000000000000000000P1", "01KB00000000000000000000C2"},
	} {
		if !slices.Contains(g.Edges, e) {
			t.Errorf("edge %v missing from %v", e, g.Edges)
		}
	}
}
