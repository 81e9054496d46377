package hatest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
)

// TestDAGAcrossShards: on the 3-master Cluster, a 3-level DAG over 6 queues
// on all three masters runs in order (no job starts before every
// dependency ended), with the poller killed (-9) and restarted while it
// waits; a dependency that dies cancels one dependent and lets the one
// marked on_dependency_failure "run" run anyway. Every edge across shards
// is settled by the poller (settle.lua), since no script can read another
// slot.
func TestDAGAcrossShards(t *testing.T) {
	start := time.Now()
	cl := hatest.StartCluster(t)
	var queues []string
	for _, on := range cl.QueuesOnShards("dag", 2) {
		queues = append(queues, on...)
	}
	if len(queues) != 6 {
		t.Fatalf("queues %v", queues)
	}
	s := startStack(t, cl.Seeds(), queues, 1, "SUNDIAL_HISTORY=off")
	type jobView struct {
		ID         string     `json:"id"`
		State      string     `json:"state"`
		LastError  string     `json:"last_error"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
	}
	submit := func(body map[string]any) jobView {
		t.Helper()
		code, b, err := s.Call("POST", "/v1/jobs", body, 10*time.Second)
		var j jobView
		if err != nil || code != http.StatusCreated || json.Unmarshal(b, &j) != nil {
			t.Fatalf("submit %v: %d %s %v", body, code, b, err)
		}
		return j
	}
	get := func(id string) jobView {
		code, b, err := s.Call("GET", "/v1/jobs/"+id, nil, 10*time.Second)
		var j jobView
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &j) != nil {
			return jobView{}
		}
		return j
	}
	// Level 1 sleeps, so the level-2 jobs really wait on it.
	l1 := []jobView{
		submit(map[string]any{"queue": queues[0], "type": "sundial.sleep", "payload": map[string]any{"ms": 1500}}),
		submit(map[string]any{"queue": queues[1], "type": "sundial.sleep", "payload": map[string]any{"ms": 1500}}),
	}
	var l2, l3 []jobView
	for i := range 2 {
		l2 = append(l2, submit(map[string]any{"queue": queues[2+i], "type": "sundial.echo", "depends_on": []string{l1[0].ID, l1[1].ID}}))
	}
	for i := range 2 {
		l3 = append(l3, submit(map[string]any{"queue": queues[4+i], "type": "sundial.echo", "depends_on": []string{l2[0].ID, l2[1].ID}}))
	}
	for _, j := range append(l2, l3...) {
		if j.State != "waiting" {
			t.Fatalf("job %s: %s at submit, want waiting", j.ID, j.State)
		}
	}
	// The dying dependency and its two dependents, on other shards.
	dies := submit(map[string]any{"queue": queues[0], "type": "sundial.fail", "payload": map[string]any{"times": 99}, "max_attempts": 1})
	cancelled := submit(map[string]any{"queue": queues[3], "type": "sundial.echo", "depends_on": []string{dies.ID}})
	anyway := submit(map[string]any{"queue": queues[5], "type": "sundial.echo", "depends_on": []string{dies.ID}, "on_dependency_failure": "run"})

	s.poller.Kill()
	s.poller.Restart(t)
	all := append(append(append([]jobView{}, l1...), l2...), l3...)
	hatest.Eventually(t, 60*time.Second, "the whole DAG succeeded", func() bool {
		for _, j := range all {
			if get(j.ID).State != "succeeded" {
				return false
			}
		}
		return true
	})
	for _, level := range [][2][]jobView{{l1, l2}, {l2, l3}} {
		for _, child := range level[1] {
			c := get(child.ID)
			for _, parent := range level[0] {
				p := get(parent.ID)
				if c.StartedAt.Before(*p.FinishedAt) {
					t.Errorf("job %s started at %v, before its dependency %s ended at %v", c.ID, c.StartedAt, p.ID, p.FinishedAt)
				}
			}
		}
	}
	hatest.Eventually(t, 30*time.Second, "the dying dependency's dependents settled", func() bool {
		return get(cancelled.ID).State == "cancelled" && get(anyway.ID).State == "succeeded"
	})
	if c := get(cancelled.ID); c.LastError != "dependency "+dies.ID+" ended dead" {
		t.Fatalf("cancelled dependent: %q", c.LastError)
	}
	t.Logf("DAG of 6 jobs over 6 queues on 3 masters, a poller kill -9 on the way: %.1fs", time.Since(start).Seconds())
}
