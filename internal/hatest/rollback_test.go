package hatest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestBatchSlotRolledBack: on a Cluster of 3 masters (no replicas), the
// master of a batch's slot is killed (-9) and comes back on its port from
// an older copy of its append-only files, taken when the batch had counted
// no end. Meanwhile half the members ended, were counted in the batch's
// slot and left their queues' lists of ends (bends), on the two other
// masters, which keep that: those counted ends are lost, and nothing will
// relay them again. The poller's recount (SUNDIAL_BATCH_RECOUNT_AFTER=2s)
// must find them from the members' jobs once the count stands still: every
// member counted exactly, both callbacks fire, each submitted once, and
// sundial_poller_batch_ends_recounted_total is above 0.
//
// The members are in two halves, in queues paused at the submit: the
// first half's queues are resumed after the copy, the second's only after
// the rollback, so the batch cannot complete (and fire) before it, and the
// ends of the second half are relayed in the ordinary way after it.
func TestBatchSlotRolledBack(t *testing.T) {
	start := time.Now()
	cl := hatest.StartClusterReplicas(t, 0)
	const id, n = "rolled-back", 400
	bm := cl.MasterOf(cl.KeySlot("sundial:{batch." + id + "}:meta"))
	// Member queues and the callbacks' queue on the two other masters:
	// what the rollback loses is the batch's slot alone. The callbacks'
	// queue keeps its idempotency keys and its counts of submitted jobs,
	// which tell a callback submitted twice.
	var off []string
	for _, on := range cl.QueuesOnShards("rb", 3) {
		for _, q := range on {
			if cl.MasterOf(cl.KeySlot("{"+q+"}")) != bm {
				off = append(off, q)
			}
		}
	}
	first, second, cbq := off[0:2], off[2:4], off[4]
	t.Logf("batch slot on %s; first half in %v, second in %v, callbacks in %s; sundial:batches:open on the batch's master: %v",
		bm.Addr(), first, second, cbq, cl.MasterOf(cl.KeySlot("sundial:batches:open")) == bm)
	queues := append(append([]string{}, off[:4]...), cbq)
	// SUNDIAL_LOG_LEVEL=info: the poller logs where its /metrics listens.
	s := startStack(t, cl.Seeds(), queues, 1, "SUNDIAL_HISTORY=off", "SUNDIAL_LOG_LEVEL=info",
		"SUNDIAL_BATCH_RECOUNT_AFTER=2s")
	rdb := cl.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	call := func(method, path string, body any) []byte {
		t.Helper()
		code, b, err := s.Call(method, path, body, 30*time.Second)
		if err != nil || code/100 != 2 {
			t.Fatalf("%s %s: %d %s %v", method, path, code, b, err)
		}
		return b
	}
	for _, name := range queues[:4] {
		call("POST", "/v1/queues/"+name+"/pause", nil)
	}
	var jobs []map[string]any
	for i := range n {
		half := first
		if i >= n/2 {
			half = second
		}
		jobs = append(jobs, map[string]any{"queue": half[i%2], "type": "sundial.echo", "payload": map[string]any{"i": i}})
	}
	call("POST", "/v1/batches", map[string]any{"id": id, "jobs": jobs,
		"on_success":  map[string]any{"queue": cbq, "type": "sundial.echo", "payload": map[string]any{"cb": "success"}},
		"on_complete": map[string]any{"queue": cbq, "type": "sundial.echo", "payload": map[string]any{"cb": "complete"}}})
	get := func() (queue.BatchInfo, bool) {
		var info queue.BatchInfo
		code, b, err := s.Call("GET", "/v1/batches/"+id, nil, 5*time.Second)
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &info) != nil {
			return queue.BatchInfo{}, false
		}
		return info, true
	}
	done := func(info queue.BatchInfo) int { return info.Total - info.Counts.Pending }

	// The older copy: the batch sealed, no member run (their queues are
	// paused). Redis writes the append-only file before it answers, so the
	// copy holds the batch.
	if info, ok := get(); !ok || !info.Sealed || info.Total != n || done(info) != 0 {
		t.Fatalf("batch at the copy: %+v", info)
	}
	aof := filepath.Join(bm.Dir(), "appendonlydir")
	older := t.TempDir()
	if err := os.CopyFS(older, os.DirFS(aof)); err != nil {
		t.Fatal(err)
	}

	// The first half runs; its ends are counted in the batch's slot and
	// taken off their queues' lists.
	for _, name := range first {
		call("POST", "/v1/queues/"+name+"/resume", nil)
	}
	hatest.Eventually(t, 30*time.Second, "the first half counted, its ends off the queues' lists", func() bool {
		info, ok := get()
		if !ok || info.Counts.Succeeded != n/2 {
			return false
		}
		for _, name := range first {
			if l, err := rdb.LLen(ctx, "sundial:{"+name+"}:bends").Result(); err != nil || l != 0 {
				return false
			}
		}
		return true
	})
	before, _ := get()

	// The batch's master loses it all back to the copy.
	bm.Kill()
	if err := os.RemoveAll(aof); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(aof, os.DirFS(older)); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	bm.Restart()
	// Read on the node itself, as soon as it serves its slot: before the
	// poller could recount (which waits for the count to stand still).
	var after int
	direct := bm.Client()
	hatest.Eventually(t, 15*time.Second, "the restarted master serves the batch", func() bool {
		v, err := direct.HGet(ctx, "sundial:{batch."+id+"}:meta", "done").Result()
		if err != nil {
			return false
		}
		after, err = strconv.Atoi(v)
		return err == nil
	})
	if after >= done(before) {
		t.Fatalf("the rollback lost nothing: test not testing (counted %d before, %d after)", done(before), after)
	}
	cl.WaitHealthy(30 * time.Second)
	t.Logf("the rollback took the batch's count from %d to %d", done(before), after)

	// The second half runs now; its ends are relayed as usual. The first
	// half's are for the recount alone.
	for _, name := range second {
		call("POST", "/v1/queues/"+name+"/resume", nil)
	}
	hatest.Eventually(t, 30*time.Second, "every member counted and both callbacks fired after the rollback", func() bool {
		info, ok := get()
		return ok && info.Counts.Succeeded == n && info.Counts.Pending == 0 &&
			info.OnSuccess != nil && info.OnSuccess.State == "fired" &&
			info.OnComplete != nil && info.OnComplete.State == "fired"
	})
	repaired := time.Since(restarted)
	info, _ := get()
	if info.Total != n || info.Counts != (queue.BatchCounts{Succeeded: n}) {
		t.Fatalf("batch %+v", info)
	}
	hatest.Eventually(t, 30*time.Second, "the callbacks ran", func() bool {
		st, err := q.Stats(ctx, cbq)
		return err == nil && len(st) == 1 && st[0].SucceededTotal == 2
	})
	// Exactly once: nothing else ever arrived in the callbacks' queue.
	if st, err := q.Stats(ctx, cbq); err != nil || st[0].SubmittedTotal != 2 {
		t.Fatalf("callback queue: %+v %v", st, err)
	}
	for _, cb := range []*queue.BatchCallback{info.OnSuccess, info.OnComplete} {
		j, err := q.Get(ctx, cb.JobID)
		if err != nil || j.Batch != id || j.Queue != cbq {
			t.Fatalf("callback %s: %+v %v", cb.JobID, j, err)
		}
	}
	recounted := pollerMetric(t, s, "sundial_poller_batch_ends_recounted_total")
	if recounted < float64(done(before)-after) {
		t.Fatalf("sundial_poller_batch_ends_recounted_total %v: %d ends were lost", recounted, done(before)-after)
	}
	s.alive()
	t.Logf("batch of %d: %d ends lost with the rollback, %v recounted; counted in full and both callbacks fired %.1fs after the restart (test %.1fs)",
		n, done(before)-after, recounted, repaired.Seconds(), time.Since(start).Seconds())
}

// pollerMetric reads one unlabelled series from the poller's /metrics,
// whose address the poller logs at info.
func pollerMetric(t *testing.T, s *stack, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`operations endpoint listening.*url="?(http://[0-9.:]+)`).FindStringSubmatch(s.poller.Output())
	if m == nil {
		t.Fatalf("the poller logged no operations endpoint:\n%s", s.poller.Output())
	}
	resp, err := http.Get(m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if v == nil {
		t.Fatalf("the poller's /metrics has no %s", name)
	}
	f, err := strconv.ParseFloat(string(v[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
