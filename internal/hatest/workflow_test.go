package hatest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
)

// TestWorkflowAcrossShards: on the 3-master Cluster, one POST /v1/workflows
// stores a 3-level DAG over 6 queues on all three masters, and a step back
// in the first queue after the last level; the steps run in order. A step
// that ends dead cancels the step after it and lets the one marked
// on_dependency_failure "run" run. The same document sent again stores
// nothing (200, the same jobs).
func TestWorkflowAcrossShards(t *testing.T) {
	start := time.Now()
	cl := hatest.StartCluster(t)
	var q []string
	for _, on := range cl.QueuesOnShards("wf", 2) {
		q = append(q, on...)
	}
	if len(q) != 6 {
		t.Fatalf("queues %v", q)
	}
	s := startStack(t, cl.Seeds(), q, 1, "SUNDIAL_HISTORY=off")
	sleep := func(queue string) map[string]any {
		return map[string]any{"type": "sundial.sleep", "queue": queue, "payload": map[string]any{"ms": 300}}
	}
	echo := func(queue string) map[string]any { return map[string]any{"type": "sundial.echo", "queue": queue} }
	after := map[string][]string{
		"l2a": {"l1a", "l1b"}, "l2b": {"l1a", "l1b"},
		"l3a": {"l2a", "l2b"}, "l3b": {"l2a", "l2b"},
		"end": {"l3a", "l3b", "l1a"},
	}
	doc := map[string]any{"id": "dag-across-shards", "steps": []map[string]any{
		{"name": "end", "job": echo(q[0]), "after": after["end"]},
		{"name": "l1a", "job": sleep(q[0])},
		{"name": "l1b", "job": sleep(q[1])},
		{"name": "l2a", "job": sleep(q[2]), "after": after["l2a"]},
		{"name": "l2b", "job": sleep(q[3]), "after": after["l2b"]},
		{"name": "l3a", "job": echo(q[4]), "after": after["l3a"]},
		{"name": "l3b", "job": echo(q[5]), "after": after["l3b"]},
		{"name": "dies", "job": map[string]any{"type": "sundial.fail", "queue": q[1], "payload": map[string]any{"times": 99}, "max_attempts": 1}},
		{"name": "cancelled", "job": echo(q[3]), "after": []string{"dies"}},
		{"name": "anyway", "job": map[string]any{"type": "sundial.echo", "queue": q[5], "on_dependency_failure": "run"}, "after": []string{"dies"}},
	}}
	type jobView struct {
		ID         string     `json:"id"`
		State      string     `json:"state"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
	}
	var run struct {
		ID    string             `json:"id"`
		Steps map[string]jobView `json:"steps"`
	}
	code, b, err := s.Call("POST", "/v1/workflows", doc, 10*time.Second)
	if err != nil || code != http.StatusCreated || json.Unmarshal(b, &run) != nil || len(run.Steps) != 10 {
		t.Fatalf("submit: %d %s %v", code, b, err)
	}
	submitted := time.Since(start)
	get := func(id string) jobView {
		code, b, err := s.Call("GET", "/v1/jobs/"+id, nil, 10*time.Second)
		var j jobView
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &j) != nil {
			return jobView{}
		}
		return j
	}
	want := map[string]string{"dies": "dead", "cancelled": "cancelled"}
	ended := map[string]jobView{}
	hatest.Eventually(t, 60*time.Second, "every step ended as it should", func() bool {
		for name, st := range run.Steps {
			w, ok := want[name]
			if !ok {
				w = "succeeded"
			}
			j := get(st.ID)
			if j.State != w {
				return false
			}
			ended[name] = j
		}
		return true
	})
	for step, deps := range after {
		for _, d := range deps {
			c, p := ended[step], ended[d]
			if c.StartedAt == nil || p.FinishedAt == nil || c.StartedAt.Before(*p.FinishedAt) {
				t.Errorf("%s started at %v, before %s ended at %v", step, c.StartedAt, d, p.FinishedAt)
			}
		}
	}
	var again struct {
		Steps map[string]jobView `json:"steps"`
	}
	code, b, err = s.Call("POST", "/v1/workflows", doc, 10*time.Second)
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &again) != nil {
		t.Fatalf("again: %d %s %v", code, b, err)
	}
	for name, st := range run.Steps {
		if again.Steps[name].ID != st.ID {
			t.Errorf("%s stored again: %s, first %s", name, again.Steps[name].ID, st.ID)
		}
	}
	t.Logf("a workflow of 10 steps over 6 queues on 3 masters: submitted in %.1fs (cluster start included), all ended at %.1fs",
		submitted.Seconds(), time.Since(start).Seconds())
}
