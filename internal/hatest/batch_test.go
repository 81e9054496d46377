package hatest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestBatchAcrossShardsPollerKilled: on the 3-master Cluster, a batch of
// 10,000 members in queues on all three masters, with both callbacks, runs
// through the real binaries while the poller is killed (-9) and restarted
// three times as the members end. Every member is counted once (the
// counts add up to the total, no more), each callback is submitted exactly
// once (its queue received two jobs), and both fire.
func TestBatchAcrossShardsPollerKilled(t *testing.T) {
	start := time.Now()
	cl := hatest.StartCluster(t)
	var queues []string
	for _, on := range cl.QueuesOnShards("bat", 1) {
		queues = append(queues, on...)
	}
	cbq := "batch-callbacks"
	s := startStack(t, cl.Seeds(), append(append([]string{}, queues...), cbq), 2, "SUNDIAL_HISTORY=off")
	const n = 10_000
	var jobs []map[string]any
	for i := range n {
		jobs = append(jobs, map[string]any{"queue": queues[i%len(queues)], "type": "sundial.echo", "payload": map[string]any{"i": i}})
	}
	body := map[string]any{"id": "ha-batch", "jobs": jobs,
		"on_success":  map[string]any{"queue": cbq, "type": "sundial.echo", "payload": map[string]any{"cb": "success"}},
		"on_complete": map[string]any{"queue": cbq, "type": "sundial.echo", "payload": map[string]any{"cb": "complete"}}}
	t0 := time.Now()
	code, b, err := s.Call("POST", "/v1/batches", body, 30*time.Second)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("submit: %d %s %v", code, b, err)
	}
	submitted := time.Since(t0)
	get := func() queue.BatchInfo {
		var info queue.BatchInfo
		code, b, err := s.Call("GET", "/v1/batches/ha-batch", nil, 10*time.Second)
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &info) != nil {
			return queue.BatchInfo{}
		}
		return info
	}
	// Kill the poller as the members end: after ~a third, ~two thirds, and
	// once more right after the last end was counted.
	for _, frac := range []int{3, 2} {
		hatest.Eventually(t, 60*time.Second, "members ending", func() bool {
			c := get().Counts
			return c.Succeeded >= n/frac
		})
		s.poller.Kill()
		s.poller.Restart(t)
	}
	hatest.Eventually(t, 90*time.Second, "every member counted", func() bool { return get().Counts.Succeeded == n })
	s.poller.Kill()
	s.poller.Restart(t)
	hatest.Eventually(t, 60*time.Second, "both callbacks fired", func() bool {
		info := get()
		return info.OnSuccess != nil && info.OnSuccess.State == "fired" && info.OnComplete != nil && info.OnComplete.State == "fired"
	})
	info := get()
	if info.Total != n || info.Counts != (queue.BatchCounts{Succeeded: n}) {
		t.Fatalf("batch %+v", info)
	}
	q := queue.New(cl.Client(), queue.Options{})
	ctx := context.Background()
	hatest.Eventually(t, 30*time.Second, "the callbacks ran", func() bool {
		st, err := q.Stats(ctx, cbq)
		return err == nil && len(st) == 1 && st[0].SucceededTotal == 2
	})
	// Exactly once: nothing else ever arrived in the callbacks' queue.
	st, err := q.Stats(ctx, cbq)
	if err != nil || st[0].SubmittedTotal != 2 {
		t.Fatalf("callback queue: %+v %v", st, err)
	}
	for _, cb := range []*queue.BatchCallback{info.OnSuccess, info.OnComplete} {
		j, err := q.Get(ctx, cb.JobID)
		if err != nil || j.Batch != "ha-batch" {
			t.Fatalf("callback %s: %+v %v", cb.JobID, j, err)
		}
	}
	s.alive()
	t.Logf("batch of %d members over 3 masters, 3 poller kills -9: POST %.2fs, run, counted and callbacks done %.1fs after it (test %.1fs)",
		n, submitted.Seconds(), time.Since(t0).Seconds(), time.Since(start).Seconds())
}
