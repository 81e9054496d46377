package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// deadJobs submits n jobs of queueName (type types[i%len]) and lets them
// die, one call per reason in whys (round robin), a second apart.
func (e *env) deadJobs(t *testing.T, queueName string, n int, types []string, whys []string) []*job.Job {
	t.Helper()
	var specs []job.Spec
	for i := range n {
		specs = append(specs, job.Spec{Queue: queueName, Type: types[i%len(types)], MaxAttempts: ptr(1), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	jobs := e.submit(t, specs...)
	per := n / len(whys)
	for i, why := range whys {
		k := per
		if i == len(whys)-1 {
			k = n - per*(len(whys)-1)
		}
		e.kill(t, queueName, k, why)
		e.clock.Advance(time.Second)
	}
	return jobs
}

// TestBulkRetryByFilter: "every dead job of type X whose error contains Y
// since T" is retried in one call over several chunks, nothing else is;
// a second call finds nothing left to do.
func TestBulkRetryByFilter(t *testing.T) {
	e := newEnv(t)
	since := e.clock.Now().Add(1500 * time.Millisecond)
	// 1,300 dead jobs: types x/y/z; errors "smtp 451" (died first, before
	// since), then "smtp 451" and "timeout" after it.
	jobs := e.deadJobs(t, "mail", 1300, []string{"x", "y", "z"}, []string{"smtp 451", "tls timeout", "smtp 451 again"})
	calls := 0
	res, err := e.q.Bulk(e.ctx, "mail", queue.BulkRequest{Action: queue.BulkRetry,
		Filter: &queue.BulkFilter{Type: "x", ErrorContains: "smtp", Since: &since}}, func(queue.BulkResult) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, j := range jobs {
		if got := e.get(t, j.ID); j.Type == "x" && got.State == job.Queued {
			want = append(want, j.ID)
		} else if got.State != job.Dead {
			t.Fatalf("job %s (%s) is %s, want dead", j.ID, j.Type, got.State)
		}
	}
	if res.Count != len(want) || res.Matched != res.Count || len(want) == 0 {
		t.Fatalf("result %+v, %d jobs queued", res, len(want))
	}
	// The x jobs of the last call (434 jobs, a third of them x) died after since.
	if n := len(jobs) - 2*(1300/3); res.Count != (n+2)/3 {
		t.Fatalf("retried %d, want %d", res.Count, (n+2)/3)
	}
	if calls == 0 {
		t.Fatal("no progress reported")
	}
	again, err := e.q.Bulk(e.ctx, "mail", queue.BulkRequest{Action: queue.BulkRetry,
		Filter: &queue.BulkFilter{Type: "x", ErrorContains: "smtp", Since: &since}}, nil)
	if err != nil || again.Count != 0 {
		t.Fatalf("again: %+v %v", again, err)
	}
	// Every dead job at once, in chunks.
	all, err := e.q.Bulk(e.ctx, "mail", queue.BulkRequest{Action: queue.BulkRetry, Filter: &queue.BulkFilter{}}, nil)
	if err != nil || all.Count != 1300-res.Count || e.stats(t, "mail").Dead != 0 {
		t.Fatalf("all: %+v %v", all, err)
	}
}

// TestBulkByIDs: delete, cancel and retry a list of ids; ids that do not
// qualify are skipped and counted out.
func TestBulkByIDs(t *testing.T) {
	e := newEnv(t)
	dead := e.deadJobs(t, "default", 4, []string{"t"}, []string{"boom"})
	queued := e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t", DelaySeconds: ptr(60.0)}, job.Spec{Type: "t"})
	res, err := e.q.Bulk(e.ctx, "default", queue.BulkRequest{Action: queue.BulkDelete, IDs: []string{dead[0].ID, dead[1].ID, queued[0].ID, dead[0].ID, "01NOSUCHJOB"}}, nil)
	if err != nil || res.Count != 2 || res.Matched != 4 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if _, err := e.q.Get(e.ctx, dead[0].ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
	res, err = e.q.Bulk(e.ctx, "default", queue.BulkRequest{Action: queue.BulkCancel, IDs: []string{queued[0].ID, queued[1].ID, dead[2].ID}}, nil)
	if err != nil || res.Count != 2 {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	wantState(t, e.get(t, queued[1].ID), job.Cancelled)
	res, err = e.q.Bulk(e.ctx, "default", queue.BulkRequest{Action: queue.BulkCancel, IDs: []string{queued[2].ID}}, nil)
	if err != nil || res.Count != 1 {
		t.Fatalf("cancel one: %+v %v", res, err)
	}
	// Retry by ids takes dead and cancelled jobs, as one job's retry does.
	res, err = e.q.Bulk(e.ctx, "default", queue.BulkRequest{Action: queue.BulkRetry, IDs: []string{queued[0].ID, dead[2].ID, dead[3].ID}}, nil)
	if err != nil || res.Count != 3 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	wantState(t, e.get(t, dead[3].ID), job.Queued)
}

// TestBulkCancelByFilter: queued jobs of one type are cancelled by a
// filter, the others stay.
func TestBulkCancelByFilter(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for i := range 1200 {
		specs = append(specs, job.Spec{Type: []string{"a", "b"}[i%2]})
	}
	jobs := e.submit(t, specs...)
	res, err := e.q.Bulk(e.ctx, "default", queue.BulkRequest{Action: queue.BulkCancel, Filter: &queue.BulkFilter{State: job.Queued, Type: "b"}}, nil)
	if err != nil || res.Count != 600 {
		t.Fatalf("%+v %v", res, err)
	}
	st := e.stats(t, "default")
	if q := st.Queued["normal"]; q != 600 {
		t.Fatalf("queued %d, want 600", q)
	}
	for _, j := range jobs[:10] {
		want := job.Queued
		if j.Type == "b" {
			want = job.Cancelled
		}
		wantState(t, e.get(t, j.ID), want)
	}
}

// TestBulkMove: dead jobs move to another queue as queued copies with the
// same type, payload and settings, linked by their idempotency key; the
// originals are gone; moving again (a repeat after a crash) makes no
// second copy.
func TestBulkMove(t *testing.T) {
	e := newEnv(t)
	dead := e.deadJobs(t, "src", 3, []string{"t"}, []string{"boom"})
	res, err := e.q.Bulk(e.ctx, "src", queue.BulkRequest{Action: queue.BulkMove, ToQueue: "dst", Filter: &queue.BulkFilter{}}, nil)
	if err != nil || res.Count != 3 {
		t.Fatalf("move: %+v %v", res, err)
	}
	if st := e.stats(t, "src"); st.Dead != 0 {
		t.Fatalf("src still has %d dead", st.Dead)
	}
	moved := e.listAll(t, "dst", queue.ListOptions{State: job.Queued, Limit: 10})
	if len(moved) != 3 {
		t.Fatalf("dst holds %v", moved)
	}
	byKey := map[string]*job.Job{}
	for _, id := range moved {
		j := e.get(t, id)
		byKey[j.IdempotencyKey] = j
	}
	for _, d := range dead {
		cp := byKey[queue.MovedFromPrefix+d.ID]
		if cp == nil || cp.Type != d.Type || string(cp.Payload) != string(d.Payload) || cp.MaxAttempts != d.MaxAttempts || cp.Attempt != 0 {
			t.Fatalf("copy of %s: %+v", d.ID, cp)
		}
	}
	// A crash after the submit and before the purge: the copies exist, the
	// originals are dead. The repeat finds the copies.
	again := e.deadJobs(t, "src", 1, []string{"t"}, []string{"boom"})
	first := queue.BulkRequest{Action: queue.BulkMove, ToQueue: "dst", IDs: []string{again[0].ID}}
	spec := job.Spec{Queue: "dst", Type: "t", Payload: again[0].Payload, MaxAttempts: ptr(1), IdempotencyKey: queue.MovedFromPrefix + again[0].ID}
	e.submit(t, spec)
	if res, err := e.q.Bulk(e.ctx, "src", first, nil); err != nil || res.Count != 1 {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	if n := len(e.listAll(t, "dst", queue.ListOptions{State: job.Queued, Limit: 10})); n != 4 {
		t.Fatalf("dst holds %d jobs, want 4 (no second copy)", n)
	}
}

// TestBulkBadInput: every bad request is refused naming its field, and
// changes nothing.
func TestBulkBadInput(t *testing.T) {
	e := newEnv(t)
	dead := e.deadJobs(t, "default", 2, []string{"t"}, []string{"boom"})
	for _, c := range []struct {
		r     queue.BulkRequest
		field string
	}{
		{queue.BulkRequest{Action: "explode", IDs: []string{dead[0].ID}}, "action"},
		{queue.BulkRequest{Action: queue.BulkRetry}, "ids"},
		{queue.BulkRequest{Action: queue.BulkRetry, IDs: []string{dead[0].ID}, Filter: &queue.BulkFilter{}}, "ids"},
		{queue.BulkRequest{Action: queue.BulkRetry, IDs: []string{}}, "ids"},
		{queue.BulkRequest{Action: queue.BulkRetry, IDs: []string{dead[0].ID, "a:b"}}, "ids[1]"},
		{queue.BulkRequest{Action: queue.BulkRetry, Filter: &queue.BulkFilter{State: job.Queued}}, "filter.state"},
		{queue.BulkRequest{Action: queue.BulkCancel, Filter: &queue.BulkFilter{State: job.Dead}}, "filter.state"},
		{queue.BulkRequest{Action: queue.BulkRetry, Filter: &queue.BulkFilter{Type: "bad type"}}, "filter.type"},
		{queue.BulkRequest{Action: queue.BulkMove, Filter: &queue.BulkFilter{}}, "to_queue"},
		{queue.BulkRequest{Action: queue.BulkMove, ToQueue: "default", Filter: &queue.BulkFilter{}}, "to_queue"},
		{queue.BulkRequest{Action: queue.BulkRetry, ToQueue: "x", Filter: &queue.BulkFilter{}}, "to_queue"},
	} {
		_, err := e.q.Bulk(e.ctx, "default", c.r, nil)
		var fe *job.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Fatalf("%+v: %v, want an error of field %s", c.r, err, c.field)
		}
	}
	if st := e.stats(t, "default"); st.Dead != 2 {
		t.Fatalf("dead %d after refused requests", st.Dead)
	}
}

// TestClusterListAndBulk: the live list and the bulk actions on a real
// Redis Cluster, and a move between queues of two shards.
func TestClusterListAndBulk(t *testing.T) {
	cl := hatest.StartCluster(t)
	rdb := cl.Client()
	clk := &clock{t: time.Now()}
	q := queue.New(rdb, queue.Options{Now: clk.Now, LeaseClock: clk.Now, LeaseTTL: 10 * time.Second, LeaseGrace: time.Second})
	e := &env{q: q, clock: clk, ctx: context.Background()}
	shards := cl.QueuesOnShards("bulk", 1)
	if len(shards) < 3 {
		t.Fatalf("queues on %d shards", len(shards))
	}
	from, to, lq := shards[0][0], shards[1][0], shards[2][0]
	if _, _, err := q.SetLimit(e.ctx, lq, queue.Limit{Name: "one", Types: []string{"limited"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	queued := e.submit(t, job.Spec{Queue: lq, Type: "limited"}, job.Spec{Queue: lq, Type: "limited"})
	e.claim(t, lq, 1)
	e.claim(t, lq, 1) // parks the second limited job
	queued = append(queued, e.submit(t, job.Spec{Queue: lq, Type: "g", Group: "tenant"})...)
	dead := e.deadJobs(t, from, 30, []string{"x", "y"}, []string{"boom"})
	if got := e.listAll(t, lq, queue.ListOptions{State: job.Queued, Limit: 1}); !sameSet(got, idsOf(queued[1:], nil)) {
		t.Fatalf("queued on a cluster: %v", got)
	}
	if got := e.listAll(t, from, queue.ListOptions{State: job.Dead, Type: "x", Limit: 4}); len(got) != 15 {
		t.Fatalf("dead x on a cluster: %d", len(got))
	}
	res, err := q.Bulk(e.ctx, from, queue.BulkRequest{Action: queue.BulkMove, ToQueue: to, Filter: &queue.BulkFilter{Type: "x"}}, nil)
	if err != nil || res.Count != 15 {
		t.Fatalf("move across shards: %+v %v", res, err)
	}
	if got := e.listAll(t, to, queue.ListOptions{State: job.Queued, Limit: 7}); len(got) != 15 {
		t.Fatalf("moved: %d queued in %s", len(got), to)
	}
	res, err = q.Bulk(e.ctx, lq, queue.BulkRequest{Action: queue.BulkCancel, IDs: idsOf(queued, nil)}, nil)
	if err != nil || res.Count != 3 {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	res, err = q.Bulk(e.ctx, from, queue.BulkRequest{Action: queue.BulkDelete, Filter: &queue.BulkFilter{}}, nil)
	if err != nil || res.Count != 15 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	for _, j := range dead {
		if _, err := q.Get(e.ctx, j.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("dead job %s still there: %v", j.ID, err)
		}
	}
}

// TestBulkInterruptedThenRepeated: a bulk retry cut short after its first
// chunk leaves that chunk done and the rest dead; the same request again
// finishes the rest and counts only those.
func TestBulkInterruptedThenRepeated(t *testing.T) {
	e := newEnv(t)
	e.deadJobs(t, "default", 1200, []string{"t"}, []string{"boom"})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	r := queue.BulkRequest{Action: queue.BulkRetry, Filter: &queue.BulkFilter{}}
	res, err := e.q.Bulk(ctx, "default", r, func(queue.BulkResult) { cancel() })
	if !errors.Is(err, context.Canceled) || res.Count != queue.BulkChunk {
		t.Fatalf("interrupted: %+v %v, want one chunk done and context.Canceled", res, err)
	}
	if st := e.stats(t, "default"); st.Dead != 1200-queue.BulkChunk || st.Queued["normal"] != queue.BulkChunk {
		t.Fatalf("after the interruption: %d dead, %d queued", st.Dead, st.Queued["normal"])
	}
	res, err = e.q.Bulk(e.ctx, "default", r, nil)
	if err != nil || res.Count != 1200-queue.BulkChunk {
		t.Fatalf("repeated: %+v %v", res, err)
	}
	if st := e.stats(t, "default"); st.Dead != 0 || st.Queued["normal"] != 1200 {
		t.Fatalf("after the repeat: %d dead, %d queued", st.Dead, st.Queued["normal"])
	}
}
