package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

func TestSubmitClaimComplete(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", Payload: json.RawMessage(`{"a":1}`)})[0]
	wantState(t, e.get(t, j.ID), job.Queued)

	ls := e.claim(t, "default", 10)
	if len(ls) != 1 || ls[0].Job.ID != j.ID || ls[0].Job.Attempt != 1 || string(ls[0].Job.Payload) != `{"a":1}` {
		t.Fatalf("claim = %+v", ls)
	}
	got := e.get(t, j.ID)
	wantState(t, got, job.Active)
	if got.WorkerID != "w1" || got.StartedAt == nil {
		t.Fatalf("active job = %+v", got)
	}
	// The lease: the job's fencing token in its active record and its
	// entry in the lease set.
	if rec, _ := e.q.Redis().HGet(e.ctx, queue.QueueKey("default", "active"), j.ID).Result(); parseActive(rec).Token != ls[0].Token || ls[0].Token == "" {
		t.Fatalf("active record %q, want the lease's token %q", rec, ls[0].Token)
	}
	if _, err := e.q.Redis().ZScore(e.ctx, queue.QueueKey("default", "leases"), j.ID).Result(); err != nil {
		t.Fatalf("no lease entry: %v", err)
	}

	// A stale token is refused and changes nothing.
	st := e.complete(t, "default", queue.Outcome{ID: j.ID, Token: "999", Kind: queue.OutcomeSucceeded})
	if st[0] != queue.StatusStale {
		t.Fatalf("stale complete = %v", st)
	}
	wantState(t, e.get(t, j.ID), job.Active)

	st = e.complete(t, "default", queue.Outcome{ID: j.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded, Result: json.RawMessage(`"done"`)})
	if st[0] != queue.StatusSucceeded {
		t.Fatalf("complete = %v", st)
	}
	got = e.get(t, j.ID)
	wantState(t, got, job.Succeeded)
	if string(got.Result) != `"done"` || got.FinishedAt == nil {
		t.Fatalf("finished job = %+v", got)
	}
	// Completing twice is refused.
	st = e.complete(t, "default", queue.Outcome{ID: j.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded})
	if st[0] != queue.StatusStale {
		t.Fatalf("second complete = %v", st)
	}
	if n, _ := queue.Leases(e.ctx, e.q.Redis(), "default"); n != 0 {
		t.Fatal("lease entry left behind after completion")
	}
	var kinds []string
	for _, ev := range e.events(t, "default") {
		kinds = append(kinds, fmt.Sprint(ev.Event, "/", ev.State, "/", ev.Attempt))
	}
	want := []string{"submitted/queued/0", "started/active/1", "succeeded/succeeded/1"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", kinds, want)
	}
}

func TestFailRetryBackoffThenDead(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", MaxAttempts: ptr(2), Backoff: &job.Backoff{BaseSeconds: 10, MaxSeconds: 10}})[0]
	l := e.claim(t, "default", 1)[0]
	st := e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l.Token, Kind: queue.OutcomeFailed, Error: "boom"})
	if st[0] != queue.StatusScheduled {
		t.Fatalf("after first failure: %v", st)
	}
	got := e.get(t, j.ID)
	wantState(t, got, job.Scheduled)
	if got.LastError != "boom" {
		t.Fatalf("last_error = %q", got.LastError)
	}
	delay := got.RunAt.Sub(e.clock.Now())
	if delay < 0 || delay > 10*time.Second {
		t.Fatalf("retry delay %v outside [0, 10s]", delay)
	}
	// Not due yet: nothing to promote until the clock passes run_at.
	if n, _, _ := e.q.Promote(e.ctx, "default", 100); n != 0 && delay > 0 {
		t.Fatalf("promoted %d jobs early", n)
	}
	e.clock.Advance(10*time.Second + time.Millisecond)
	if n, next, err := e.q.Promote(e.ctx, "default", 100); err != nil || n != 1 || !next.IsZero() {
		t.Fatalf("promote = %d, %v, %v", n, next, err)
	}
	l = e.claim(t, "default", 1)[0]
	if l.Job.Attempt != 2 {
		t.Fatalf("attempt = %d", l.Job.Attempt)
	}
	st = e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l.Token, Kind: queue.OutcomeFailed, Error: "boom again"})
	if st[0] != queue.StatusDead {
		t.Fatalf("after last attempt: %v", st)
	}
	got = e.get(t, j.ID)
	wantState(t, got, job.Dead)
	dead, _, err := e.q.Dead(e.ctx, "default", 10, "")
	if err != nil || len(dead) != 1 || dead[0].ID != j.ID {
		t.Fatalf("dead = %v, %v", dead, err)
	}

	// Retry by hand: queued again with attempt 0.
	r, err := e.q.Retry(e.ctx, j.ID)
	if err != nil || r.State != job.Queued || r.Attempt != 0 {
		t.Fatalf("retry = %+v, %v", r, err)
	}
	if _, err := e.q.Retry(e.ctx, j.ID); !errors.Is(err, queue.ErrConflict) {
		t.Fatalf("retry of queued job: %v, want conflict", err)
	}
}

func TestNonRetryableGoesDead(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", MaxAttempts: ptr(5)})[0]
	l := e.claim(t, "default", 1)[0]
	st := e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l.Token, Kind: queue.OutcomeDead, Error: `no handler for type "t"`})
	if st[0] != queue.StatusDead {
		t.Fatalf("status = %v", st)
	}
	if got := e.get(t, j.ID); got.State != job.Dead || got.LastError != `no handler for type "t"` {
		t.Fatalf("job = %+v", got)
	}
}

func TestStrictPriority(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for i := 0; i < 5; i++ {
		for _, p := range []job.Priority{job.Low, job.Normal, job.High} {
			specs = append(specs, job.Spec{Type: "t", Priority: p})
		}
	}
	e.submit(t, specs...)
	var got []job.Priority
	for _, n := range []int{3, 4, 8} {
		for _, l := range e.claim(t, "default", n) {
			got = append(got, l.Job.Priority)
		}
	}
	for i := 1; i < len(got); i++ {
		if rank(got[i]) < rank(got[i-1]) {
			t.Fatalf("claim order %v is not by priority", got)
		}
	}
	if len(got) != 15 {
		t.Fatalf("claimed %d, want 15", len(got))
	}
}

func rank(p job.Priority) int {
	switch p {
	case job.High:
		return 0
	case job.Normal:
		return 1
	}
	return 2
}

func TestDelayedJobPromotedWhenDue(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", DelaySeconds: ptr(5.0)})[0]
	wantState(t, e.get(t, j.ID), job.Scheduled)
	if ls := e.claim(t, "default", 1); len(ls) != 0 {
		t.Fatal("claimed a job that is not due")
	}
	n, next, _ := e.q.Promote(e.ctx, "default", 100)
	if n != 0 || !next.Equal(e.clock.Now().Add(5*time.Second)) {
		t.Fatalf("promote early = %d, next %v", n, next)
	}
	e.clock.Advance(5 * time.Second)
	if n, _, _ := e.q.Promote(e.ctx, "default", 100); n != 1 {
		t.Fatalf("promote = %d", n)
	}
	wantState(t, e.get(t, j.ID), job.Queued)
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	a := e.submit(t, job.Spec{Type: "t", IdempotencyKey: "order-42"})[0]
	res, err := e.q.Submit(e.ctx, []*job.Job{e.build(t, job.Spec{Type: "t", IdempotencyKey: "order-42"})})
	if err != nil || !res[0].Duplicate || res[0].Job.ID != a.ID {
		t.Fatalf("second submit = %+v, %v", res, err)
	}
	// Another queue has its own keys.
	b := e.submit(t, job.Spec{Type: "t", Queue: "other", IdempotencyKey: "order-42"})[0]
	if b.ID == a.ID {
		t.Fatal("idempotency key leaked across queues")
	}
	st, _ := e.q.Stats(e.ctx, "default")
	if st[0].Queued["normal"] != 1 {
		t.Fatalf("queued = %v, want 1 (no duplicate)", st[0].Queued)
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t", DelaySeconds: ptr(60.0)}, job.Spec{Type: "t"})
	// queued
	if j, err := e.q.Cancel(e.ctx, js[0].ID); err != nil || j.State != job.Cancelled {
		t.Fatalf("cancel queued = %+v, %v", j, err)
	}
	// scheduled
	if j, err := e.q.Cancel(e.ctx, js[1].ID); err != nil || j.State != job.Cancelled {
		t.Fatalf("cancel scheduled = %+v, %v", j, err)
	}
	// active: the lease is dropped and the worker's late outcome is refused.
	cancels := e.q.SubscribeCancels(t.Context())
	time.Sleep(0) // subscription is registered asynchronously; the assert below waits
	l := e.claim(t, "default", 1)
	if len(l) != 1 || l[0].Job.ID != js[2].ID {
		t.Fatalf("claim = %+v (cancelled job claimed?)", l)
	}
	if j, err := e.q.Cancel(e.ctx, js[2].ID); err != nil || j.State != job.Cancelled {
		t.Fatalf("cancel active = %+v, %v", j, err)
	}
	if st := e.complete(t, "default", queue.Outcome{ID: js[2].ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded}); st[0] != queue.StatusStale {
		t.Fatalf("complete after cancel = %v", st)
	}
	_ = cancels
	if _, err := e.q.Cancel(e.ctx, js[2].ID); !errors.Is(err, queue.ErrConflict) {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := e.q.Cancel(e.ctx, "01NOPE"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	st, _ := e.q.Stats(e.ctx, "default")
	if s := st[0]; s.Active != 0 || s.Scheduled != 0 || s.Queued["normal"] != 0 {
		t.Fatalf("stats after cancels = %+v", s)
	}
}

func TestDependencies(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t,
		job.Spec{Type: "parent"},
		job.Spec{Type: "child", DependsOn: []string{"#0"}},
		job.Spec{Type: "grandchild", DependsOn: []string{"#1"}},
	)
	wantState(t, e.get(t, js[1].ID), job.Waiting)
	wantState(t, e.get(t, js[2].ID), job.Waiting)
	l := e.claim(t, "default", 10)
	if len(l) != 1 || l[0].Job.ID != js[0].ID {
		t.Fatalf("claim = %+v", l)
	}
	e.complete(t, "default", queue.Outcome{ID: js[0].ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded})
	wantState(t, e.get(t, js[1].ID), job.Queued)
	wantState(t, e.get(t, js[2].ID), job.Waiting)

	// A dependency that ends dead cancels its dependents, transitively.
	l = e.claim(t, "default", 10)
	e.complete(t, "default", queue.Outcome{ID: js[1].ID, Token: l[0].Token, Kind: queue.OutcomeDead, Error: "x"})
	got := e.get(t, js[2].ID)
	wantState(t, got, job.Cancelled)
	if got.LastError == "" {
		t.Fatal("cancelled dependent has no reason")
	}

	// Unknown dependency: rejected, nothing written.
	bad := e.build(t, job.Spec{Type: "t", DependsOn: []string{"01UNKNOWN"}})
	_, err := e.q.Submit(e.ctx, []*job.Job{e.build(t, job.Spec{Type: "ok"}), bad})
	var de *queue.DependencyError
	if !errors.As(err, &de) || de.Index != 1 || de.Reason != "not_found" || de.Field(true) != "jobs[1].depends_on[0]" {
		t.Fatalf("submit with unknown dep: %v", err)
	}
	st, _ := e.q.Stats(e.ctx, "default")
	if st[0].Queued["normal"] != 0 {
		t.Fatalf("a rejected batch wrote jobs: %+v", st[0])
	}
	// A dependency that already failed is rejected too.
	_, err = e.q.Submit(e.ctx, []*job.Job{e.build(t, job.Spec{Type: "t", DependsOn: []string{js[1].ID}})})
	if !errors.As(err, &de) || de.Reason != "failed" {
		t.Fatalf("submit with dead dep: %v", err)
	}
}

// A dependent cancelled while it waits, then retried, waits again for the
// dependencies that have not succeeded (it ran at once before: issue 32,
// finding 5); once they succeed it starts. A dependent whose dependency
// ended dead is not retried: the error names the dependency.
func TestRetriedDependentWaitsForItsDependencies(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t,
		job.Spec{Type: "parent"},
		job.Spec{Type: "other"},
		job.Spec{Type: "child", DependsOn: []string{"#0", "#1"}},
	)
	if _, err := e.q.Cancel(e.ctx, js[2].ID); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.get(t, js[2].ID), job.Cancelled)
	// One dependency succeeds meanwhile.
	l := e.claim(t, "default", 1)
	e.complete(t, "default", queue.Outcome{ID: l[0].Job.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded})
	got, err := e.q.Retry(e.ctx, js[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, got, job.Waiting)
	l = e.claim(t, "default", 10)
	if len(l) != 1 || l[0].Job.ID != js[1].ID {
		t.Fatalf("claim = %+v; want only the second dependency, not the retried dependent", l)
	}
	e.complete(t, "default", queue.Outcome{ID: js[1].ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded})
	wantState(t, e.get(t, js[2].ID), job.Queued)
	if l = e.claim(t, "default", 10); len(l) != 1 || l[0].Job.ID != js[2].ID {
		t.Fatalf("claim = %+v; want the dependent", l)
	}

	// A dependency that ended dead: the retry is refused, naming it.
	ds := e.submit(t, job.Spec{Type: "parent"}, job.Spec{Type: "child", DependsOn: []string{"#0"}})
	l = e.claim(t, "default", 1)
	e.complete(t, "default", queue.Outcome{ID: ds[0].ID, Token: l[0].Token, Kind: queue.OutcomeDead, Error: "x"})
	wantState(t, e.get(t, ds[1].ID), job.Cancelled)
	_, err = e.q.Retry(e.ctx, ds[1].ID)
	var ce *queue.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Error(), ds[0].ID) || !strings.Contains(ce.Error(), "dead") {
		t.Fatalf("retry of a dependent whose dependency is dead: %v", err)
	}
	wantState(t, e.get(t, ds[1].ID), job.Cancelled)
}

// A holder that renews forever (an HTTP worker's heartbeat) cannot keep a
// job past its timeout plus the lease grace: Redis refuses the renewal,
// the lease runs out and the job is retried (issue 32, finding 6).
func TestRenewalRefusedPastTheTimeout(t *testing.T) {
	e := newEnv(t) // LeaseTTL 11 s, LeaseGrace 1 s
	j := e.submit(t, job.Spec{Type: "t", TimeoutSeconds: ptr(5), Backoff: &job.Backoff{}})[0]
	l := e.claim(t, "default", 1)
	for range 5 { // renewals every second, up to the timeout plus the grace
		e.clock.Advance(1200 * time.Millisecond)
		if held, err := e.q.Extend(e.ctx, "default", l); err != nil || !held[0] {
			t.Fatalf("renewal at %v: %v, %v; want held", e.clock.Now(), held, err)
		}
	}
	e.clock.Advance(time.Second) // 7 s: past 5 s + 1 s
	if held, err := e.q.Extend(e.ctx, "default", l); err != nil || held[0] {
		t.Fatalf("renewal past the timeout and grace: %v, %v; want refused", held, err)
	}
	e.clock.Advance(11 * time.Second) // the last lease runs out
	if n, _, _ := e.q.Reclaim(e.ctx, "default", 10); n != 1 {
		t.Fatalf("reclaimed %d, want 1", n)
	}
	if got := e.get(t, j.ID); got.LastError != "lease expired" || got.Attempt != 1 {
		t.Fatalf("job = %s %q attempt %d", got.State, got.LastError, got.Attempt)
	}
}

func TestReclaimExpiredLease(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", TimeoutSeconds: ptr(10), MaxAttempts: ptr(2), Backoff: &job.Backoff{}})[0]
	l := e.claim(t, "default", 1)[0]
	if n, _, _ := e.q.Reclaim(e.ctx, "default", 100); n != 0 {
		t.Fatal("reclaimed a live lease")
	}
	e.clock.Advance(11*time.Second + time.Millisecond) // timeout + 1 s grace
	if n, _, _ := e.q.Reclaim(e.ctx, "default", 100); n != 1 {
		t.Fatalf("reclaimed %d, want 1", n)
	}
	got := e.get(t, j.ID)
	wantState(t, got, job.Queued) // zero backoff: at once
	if got.LastError != "lease expired" || got.Attempt != 1 {
		t.Fatalf("reclaimed job = %+v", got)
	}
	// The old owner can no longer complete it.
	if st := e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l.Token, Kind: queue.OutcomeSucceeded}); st[0] != queue.StatusStale {
		t.Fatalf("old owner's complete = %v", st)
	}
	l2 := e.claim(t, "default", 1)[0]
	if l2.Token == l.Token {
		t.Fatal("fencing token reused")
	}
	e.clock.Advance(12 * time.Second)
	e.q.Reclaim(e.ctx, "default", 100)
	wantState(t, e.get(t, j.ID), job.Dead)
	found := false
	for _, ev := range e.events(t, "default") {
		if ev.Event == job.EventLeaseExpired {
			found = true
		}
	}
	if !found {
		t.Fatal("no lease_expired event")
	}
}

func TestReleaseRequeuesAtOnce(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t"})[0]
	l := e.claim(t, "default", 1)
	n, err := e.q.Release(e.ctx, "default", l)
	if err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	got := e.get(t, j.ID)
	if got.State != job.Queued || got.Attempt != 0 {
		t.Fatalf("released job = %+v", got)
	}
	if l2 := e.claim(t, "default", 1); len(l2) != 1 || l2[0].Job.Attempt != 1 {
		t.Fatalf("reclaim after release = %+v", l2)
	}
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	e.submit(t, job.Spec{Type: "t"})
	if err := e.q.Pause(e.ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if l := e.claim(t, "default", 1); len(l) != 0 {
		t.Fatal("claimed from a paused queue")
	}
	st, _ := e.q.Stats(e.ctx, "default")
	if !st[0].Paused {
		t.Fatal("stats do not show paused")
	}
	e.q.Resume(e.ctx, "default")
	if l := e.claim(t, "default", 1); len(l) != 1 {
		t.Fatal("nothing claimed after resume")
	}
}

func TestPurgeAndPrune(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t, job.Spec{Type: "a"}, job.Spec{Type: "b"})
	ls := e.claim(t, "default", 2)
	e.complete(t, "default",
		queue.Outcome{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded},
		queue.Outcome{ID: ls[1].Job.ID, Token: ls[1].Token, Kind: queue.OutcomeDead, Error: "x"})
	if n, err := e.q.PurgeDead(e.ctx, "default", nil); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	if n, _ := e.q.Prune(e.ctx, "default", e.clock.Now().Add(-time.Second), 100); n != 0 {
		t.Fatal("pruned a job finished after the cutoff")
	}
	e.clock.Advance(time.Hour)
	if n, _ := e.q.Prune(e.ctx, "default", e.clock.Now().Add(-time.Minute), 100); n != 1 {
		t.Fatalf("pruned %d, want 1", n)
	}
	for _, j := range js {
		if _, err := e.q.Get(e.ctx, j.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("job %s still readable: %v", j.ID, err)
		}
	}
}

func TestSubmitGuarded(t *testing.T) {
	e := newEnv(t)
	key, rec := queue.QueueKey("default", "sched_next"), queue.QueueKey("default", "sched_meta")
	if err := e.q.Redis().ZAdd(e.ctx, key, redis.Z{Score: 1000, Member: "s1"}).Err(); err != nil {
		t.Fatal(err)
	}
	g := queue.Guard{Key: key, Member: "s1", Expect: 1000, Next: 2000, Record: rec, Fields: []string{"s1.last_run", "1000"}}
	if _, err := e.q.SubmitGuarded(e.ctx, g, []*job.Job{e.build(t, job.Spec{Type: "t"})}); err != nil {
		t.Fatal(err)
	}
	// The same fire time again: refused, nothing written.
	if _, err := e.q.SubmitGuarded(e.ctx, g, []*job.Job{e.build(t, job.Spec{Type: "t"})}); !errors.Is(err, queue.ErrGuardMismatch) {
		t.Fatalf("second guarded submit: %v", err)
	}
	if s, _ := e.q.Redis().ZScore(e.ctx, key, "s1").Result(); s != 2000 {
		t.Fatalf("guard score = %v", s)
	}
	if v, _ := e.q.Redis().HGet(e.ctx, rec, "s1.last_run").Result(); v != "1000" {
		t.Fatalf("record = %q", v)
	}
	st, _ := e.q.Stats(e.ctx, "default")
	if st[0].Queued["normal"] != 1 {
		t.Fatalf("queued = %d, want exactly 1", st[0].Queued["normal"])
	}
}

// Concurrent single submits share script calls; each caller must still get
// back its own job, and every job must be stored exactly once.
func TestConcurrentSingleSubmitsCoalesce(t *testing.T) {
	e := newEnv(t)
	const producers, each = 16, 50
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		go func() {
			for i := 0; i < each; i++ {
				j := e.build(t, job.Spec{Type: fmt.Sprintf("p%d-%d", p, i), IdempotencyKey: fmt.Sprintf("k%d", i%7+p*100)})
				res, err := e.q.Submit(e.ctx, []*job.Job{j})
				if err != nil {
					errs <- err
					return
				}
				if !res[0].Duplicate && res[0].Job.ID != j.ID {
					errs <- fmt.Errorf("caller got job %s back, submitted %s", res[0].Job.ID, j.ID)
					return
				}
				if res[0].Duplicate && res[0].Job.IdempotencyKey != j.IdempotencyKey {
					errs <- fmt.Errorf("duplicate of another key: %+v", res[0].Job)
					return
				}
			}
			errs <- nil
		}()
	}
	for p := 0; p < producers; p++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st, _ := e.q.Stats(e.ctx, "default")
	// 7 distinct keys per producer: the rest were duplicates.
	if got := st[0].Queued["normal"]; got != producers*7 || st[0].SubmittedTotal != producers*7 {
		t.Fatalf("queued %d jobs, want %d", got, producers*7)
	}
}

func TestRetryDeadSkipsCancelled(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t, job.Spec{Type: "t", DelaySeconds: ptr(60.0)})
	if _, err := e.q.Cancel(e.ctx, js[0].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := e.q.RetryDead(e.ctx, "default", []string{js[0].ID}); err != nil || n != 0 {
		t.Fatalf("RetryDead of a cancelled job = %d, %v", n, err)
	}
	wantState(t, e.get(t, js[0].ID), job.Cancelled)
	// Retry of one job by id still accepts cancelled ones.
	if j, err := e.q.Retry(e.ctx, js[0].ID); err != nil || j.State != job.Queued {
		t.Fatalf("Retry = %+v, %v", j, err)
	}
}

// CompleteAndClaim writes outcomes and claims new jobs in one call, with
// the same fencing and the same events as Complete then Claim.
func TestCompleteAndClaim(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t, job.Spec{Type: "a"}, job.Spec{Type: "b"}, job.Spec{Type: "c", Priority: job.High}, job.Spec{Type: "d"})
	first := e.claim(t, "default", 2) // c (high), then a
	if len(first) != 2 || first[0].Job.ID != js[2].ID || first[1].Job.ID != js[0].ID {
		t.Fatalf("claimed %v", first)
	}
	outs := []queue.Outcome{
		{ID: first[0].Job.ID, Token: first[0].Token, Kind: queue.OutcomeSucceeded, Result: json.RawMessage(`1`), WorkerID: "w1"},
		{ID: first[1].Job.ID, Token: "stale", Kind: queue.OutcomeSucceeded, WorkerID: "w1"},
	}
	st, ls, err := e.q.CompleteAndClaim(e.ctx, "default", outs, 5, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st) != "[succeeded stale]" {
		t.Fatalf("statuses = %v", st)
	}
	if len(ls) != 2 || ls[0].Job.ID != js[1].ID || ls[1].Job.ID != js[3].ID || ls[0].Job.Attempt != 1 || ls[0].Job.Type != "b" {
		t.Fatalf("claimed %+v", ls)
	}
	wantState(t, e.get(t, js[2].ID), job.Succeeded)
	wantState(t, e.get(t, js[0].ID), job.Active) // the stale outcome changed nothing
	// The new leases hold: completing them works.
	st, ls2, err := e.q.CompleteAndClaim(e.ctx, "default", []queue.Outcome{
		{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded},
		{ID: ls[1].Job.ID, Token: ls[1].Token, Kind: queue.OutcomeFailed, Error: "boom"},
	}, 0, "w1")
	if err != nil || fmt.Sprint(st) != "[succeeded scheduled]" || len(ls2) != 0 {
		t.Fatalf("second call = %v, %v, %v", st, ls2, err)
	}
	var kinds []string
	for _, ev := range e.events(t, "default") {
		if ev.Event != job.EventSubmitted {
			kinds = append(kinds, fmt.Sprint(ev.JobID == js[1].ID, "/", ev.Event))
		}
	}
	// c, a started; c succeeded; b, d started; b succeeded; d failed.
	want := "[false/started false/started false/succeeded true/started false/started true/succeeded false/failed]"
	if fmt.Sprint(kinds) != want {
		t.Fatalf("events = %v\nwant %s", kinds, want)
	}
}

// A submit whose jobs have no idempotency key and no dependency skips the
// script's checking pass (submit.lua): it must write exactly what the
// checking pass writes. The same specs go in once without keys and once
// each with one; their hashes must match field for field (but the id and
// the key), and each job must wait where its twin does.
func TestSubmitWritesTheSameJobWithOrWithoutChecks(t *testing.T) {
	e := newEnv(t)
	later := e.clock.Now().Add(time.Hour)
	specs := []job.Spec{
		{Type: "plain"},
		{Type: "payload", Payload: json.RawMessage(`{"n":1,"s":"x\ty"}`), Priority: job.High},
		{Type: "later", RunAt: &later, Priority: job.Low, MaxAttempts: ptr(7), TimeoutSeconds: ptr(45),
			Backoff: &job.Backoff{BaseSeconds: 0.5, MaxSeconds: 90}},
		{Type: "grouped", Group: "g1", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	plain := e.submit(t, specs...)
	keyed := make([]job.Spec, len(specs))
	for i, s := range specs {
		s.IdempotencyKey = fmt.Sprintf("key-%d", i)
		keyed[i] = s
	}
	checked := e.submit(t, keyed...)
	rdb := e.srv.Client()
	for i := range specs {
		a := rdb.HGetAll(e.ctx, queue.JobKey("default", plain[i].ID)).Val()
		b := rdb.HGetAll(e.ctx, queue.JobKey("default", checked[i].ID)).Val()
		if len(a) == 0 {
			t.Fatalf("job %d: no hash", i)
		}
		if b["idempotency_key"] != keyed[i].IdempotencyKey {
			t.Fatalf("job %d: key %q", i, b["idempotency_key"])
		}
		delete(b, "idempotency_key")
		if !maps.Equal(a, b) {
			t.Errorf("job %d (%s): without checks %v, with checks %v", i, specs[i].Type, a, b)
		}
		if ga, gb := e.get(t, plain[i].ID), e.get(t, checked[i].ID); ga.State != gb.State {
			t.Errorf("job %d: state %s, with checks %s", i, ga.State, gb.State)
		}
	}
	st, err := e.q.Stats(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Queued["high"] != 2 || st[0].Scheduled != 2 {
		t.Fatalf("stats %+v: want 2 high queued and 2 scheduled", st[0])
	}
}

// TestSubmitSharesProfilesAndNamesDuplicatesByPosition checks the submit
// call's compact form (submit.lua): jobs that share their fixed fields are
// sent with one profile, others with their own, and each stored job has
// its own fields whatever profile it used; the reply names only the
// duplicates, each at its position in the batch.
// TestSubmitReturnsPlainJobsAsGiven pins UnchangedBySubmit: jobs with
// neither an idempotency key nor dependencies come back as the very jobs
// given, unchanged, so that a caller may read them while Submit runs.
func TestSubmitReturnsPlainJobsAsGiven(t *testing.T) {
	e := newEnv(t)
	jobs := []*job.Job{
		e.build(t, job.Spec{Type: "a", Payload: json.RawMessage(`{"i":0}`)}),
		e.build(t, job.Spec{Type: "b", Group: "g", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
	}
	if !queue.UnchangedBySubmit(jobs) {
		t.Fatal("plain jobs reported as changed by Submit")
	}
	before := make([]job.Job, len(jobs))
	for i, j := range jobs {
		before[i] = *j
	}
	res, err := e.q.Submit(e.ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Job != jobs[i] || !reflect.DeepEqual(*r.Job, before[i]) {
			t.Fatalf("job %d came back as %+v, want the job given, unchanged: %+v", i, r.Job, before[i])
		}
	}
	for _, s := range []job.Spec{{Type: "a", IdempotencyKey: "k"}, {Type: "a", DependsOn: []string{"#0"}}} {
		if queue.UnchangedBySubmit([]*job.Job{jobs[0], e.build(t, s)}) {
			t.Errorf("%+v reported as unchanged by Submit", s)
		}
	}
}

func TestSubmitSharesProfilesAndNamesDuplicatesByPosition(t *testing.T) {
	e := newEnv(t)
	first := e.submit(t, job.Spec{Type: "stored", IdempotencyKey: "stored-key"})[0]
	later := e.clock.Now().Add(time.Hour)
	specs := []job.Spec{
		{Type: "a", Payload: json.RawMessage(`{"i":0}`)},
		{Type: "b", Priority: job.High, MaxAttempts: ptr(9), Payload: json.RawMessage(`{"i":1}`)},
		{Type: "a", Payload: json.RawMessage(`{"i":2}`)}, // job 0's profile again, after another
		{Type: "dup", IdempotencyKey: "stored-key"},      // names the stored job
		{Type: "a", RunAt: &later, TimeoutSeconds: ptr(5), Backoff: &job.Backoff{BaseSeconds: 0.25, MaxSeconds: 7.5}},
		{Type: "a", Group: "g", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", IdempotencyKey: "in-batch"},
		{Type: "dup2", IdempotencyKey: "in-batch"}, // names job 5 of this batch
		{Type: "b", Priority: job.High, MaxAttempts: ptr(9), Payload: json.RawMessage(`{"i":7}`)},
	}
	jobs := make([]*job.Job, len(specs))
	for i, s := range specs {
		jobs[i] = e.build(t, s)
	}
	res, err := e.q.Submit(e.ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	wantDup := map[int]string{3: first.ID, 6: jobs[5].ID}
	for i, r := range res {
		if id, dup := wantDup[i]; dup {
			if !r.Duplicate || r.Job.ID != id {
				t.Fatalf("job %d: duplicate %v of %s, want a duplicate of %s", i, r.Duplicate, r.Job.ID, id)
			}
			continue
		}
		if r.Duplicate || r.Job.ID != jobs[i].ID {
			t.Fatalf("job %d: duplicate %v, id %s; want new %s", i, r.Duplicate, r.Job.ID, jobs[i].ID)
		}
		if got := e.get(t, jobs[i].ID); !storedAsSubmitted(got, jobs[i]) {
			t.Errorf("job %d stored as %+v, submitted %+v", i, got, jobs[i])
		}
	}
	st, err := e.q.Stats(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if st[0].SubmittedTotal != 1+6 || st[0].Scheduled != 1 {
		t.Fatalf("stats %+v: want 7 submitted, 1 scheduled", st[0])
	}
}

// TestSuccessWritesAResultOnlyWhenThereIsOne checks that a success without
// a result adds no result field to the job hash (an empty field costs every
// success a scan and a copy), that one with a result keeps it, and that
// both read back as before, in both storage formats' attempt records.
func TestSuccessWritesAResultOnlyWhenThereIsOne(t *testing.T) {
	for _, format := range []int{1, queue.WriteFormat} {
		t.Run(fmt.Sprintf("format%d", format), func(t *testing.T) {
			e := newEnv(t)
			queue.SetWriteFormat(e.q, format)
			jobs := e.submit(t, job.Spec{Type: "with"}, job.Spec{Type: "without"})
			ls := e.claim(t, "default", 2)
			if len(ls) != 2 {
				t.Fatalf("claimed %d jobs, want 2", len(ls))
			}
			outs := make([]queue.Outcome, len(ls))
			for i, l := range ls {
				outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"}
				if l.Job.ID == jobs[0].ID {
					outs[i].Result = json.RawMessage(`{"ok":true}`)
				}
			}
			for i, st := range e.complete(t, "default", outs...) {
				if st != queue.StatusSucceeded {
					t.Fatalf("outcome %d: %s", i, st)
				}
			}
			rdb := e.srv.Client()
			for i, want := range []string{`{"ok":true}`, ""} {
				got := e.get(t, jobs[i].ID)
				if got.State != job.Succeeded || string(got.Result) != want || got.Attempt != 1 || got.WorkerID != "w1" {
					t.Errorf("job %d: state %s, result %q, attempt %d, worker %q; want succeeded, %q, 1, w1",
						i, got.State, got.Result, got.Attempt, got.WorkerID, want)
				}
				has, err := rdb.HExists(e.ctx, queue.JobKey("default", jobs[i].ID), "result").Result()
				if err != nil {
					t.Fatal(err)
				}
				if has != (want != "") {
					t.Errorf("job %d: result field present %v, want %v", i, has, want != "")
				}
			}
		})
	}
}

// TestSubmitLargestBatchOfDistinctJobs submits the API's largest batch
// (1000 jobs) in its costliest form: every job its own profile (a run_at
// of its own) and every extra (idempotency key, group, traceparent), the
// most arguments a submit call carries, then reads every job back.
func TestSubmitLargestBatchOfDistinctJobs(t *testing.T) {
	e := newEnv(t)
	const n = 1000
	jobs := make([]*job.Job, n)
	for i := range jobs {
		at := e.clock.Now().Add(time.Duration(i+1) * time.Minute)
		jobs[i] = e.build(t, job.Spec{Type: fmt.Sprintf("t%d", i%7), RunAt: &at, IdempotencyKey: fmt.Sprintf("k%d", i),
			Group: fmt.Sprintf("g%d", i%3), Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	res, err := e.q.Submit(e.ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate || r.Job.ID != jobs[i].ID {
			t.Fatalf("job %d: duplicate %v, id %s", i, r.Duplicate, r.Job.ID)
		}
		if got := e.get(t, jobs[i].ID); !storedAsSubmitted(got, jobs[i]) || got.State != job.Scheduled {
			t.Fatalf("job %d stored as %+v, submitted %+v", i, got, jobs[i])
		}
	}
	st, err := e.q.Stats(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Scheduled != n || st[0].SubmittedTotal != n {
		t.Fatalf("stats %+v: want %d scheduled and submitted", st[0], n)
	}
}

// storedAsSubmitted tells whether a job read back has the fields of the
// job submitted (those a submit writes and a claim reads).
func storedAsSubmitted(got, want *job.Job) bool {
	return got.Type == want.Type && got.Priority == want.Priority && got.MaxAttempts == want.MaxAttempts &&
		got.TimeoutSeconds == want.TimeoutSeconds && got.Backoff == want.Backoff &&
		got.RunAt.Equal(want.RunAt) && got.CreatedAt.Equal(want.CreatedAt) && string(got.Payload) == string(want.Payload) &&
		got.Group == want.Group && got.Traceparent == want.Traceparent && got.IdempotencyKey == want.IdempotencyKey
}

// A batch's submitted events are one stream entry listing "id type
// attempt" per job, comma-separated; a call of one job writes a plain
// entry (queue.ParseEvents reads both).
func TestSubmittedEventsAreOneEntryPerCall(t *testing.T) {
	e := newEnv(t)
	batch := e.submit(t, job.Spec{Type: "a"}, job.Spec{Type: "b.c"}, job.Spec{Type: "a"})
	one := e.submit(t, job.Spec{Type: "d"})[0]
	xs, err := e.q.Redis().XRange(e.ctx, queue.EventStreamKey("default"), "-", "+").Result()
	if err != nil || len(xs) != 2 {
		t.Fatalf("%d stream entries (%v), want 2", len(xs), err)
	}
	want := batch[0].ID + " a 0," + batch[1].ID + " b.c 0," + batch[2].ID + " a 0"
	if got := xs[0].Values["jobs"]; got != want || xs[0].Values["event"] != "submitted" {
		t.Fatalf("the batch's entry = %v, want jobs %q", xs[0].Values, want)
	}
	if v := xs[1].Values; v["job_id"] != one.ID || v["type"] != "d" || v["attempt"] != "0" || v["jobs"] != nil {
		t.Fatalf("the single submit's entry = %v", v)
	}
}

// A dependency that ends dead cancels its dependents transitively, however
// long the chain: the cascade works through a list (it recursed in Lua,
// which overflowed a few hundred deep and left the rest waiting).
func TestCancelCascadeOverALongChain(t *testing.T) {
	e := newEnv(t)
	const n = 10_000
	root := e.submit(t, job.Spec{Type: "root"})[0]
	prev := root.ID
	var last string
	for done := 1; done < n; {
		size := min(500, n-done)
		specs := make([]job.Spec, size)
		for i := range specs {
			dep := prev
			if i > 0 {
				dep = fmt.Sprintf("#%d", i-1)
			}
			specs[i] = job.Spec{Type: "link", DependsOn: []string{dep}}
		}
		js := e.submit(t, specs...)
		prev = js[size-1].ID
		last = prev
		done += size
	}
	l := e.claim(t, "default", 1)
	if len(l) != 1 || l[0].Job.ID != root.ID {
		t.Fatalf("claim = %+v", l)
	}
	e.complete(t, "default", queue.Outcome{ID: root.ID, Token: l[0].Token, Kind: queue.OutcomeDead, Error: "x"})
	got := e.get(t, last)
	wantState(t, got, job.Cancelled)
	c, err := e.q.Counts(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if c.Waiting != 0 {
		t.Fatalf("%d jobs still waiting after the chain's root went dead", c.Waiting)
	}
}

// Recorded times never contradict the order the engine enforces, whatever
// the clocks of the processes that record them (issue 33, item 5: on a
// Cluster a dependent's started_at read 1 ms before its parent's
// finished_at): a dependent starts no earlier than its dependency ended,
// and an attempt ends no earlier than it started.
func TestRecordedTimesKeepTheEnginesOrder(t *testing.T) {
	e := newEnv(t)
	behind := &clock{t: e.clock.Now().Add(-5 * time.Second)}
	slow := queue.New(e.srv.Client(), queue.Options{Now: behind.Now, LeaseClock: e.clock.Now, LeaseTTL: 11 * time.Second, LeaseGrace: time.Second})
	queue.SetWriteFormat(slow, queue.WriteFormat)
	js := e.submit(t, job.Spec{Type: "parent"}, job.Spec{Type: "child", DependsOn: []string{"#0"}})
	e.clock.Advance(time.Second)
	l := e.claim(t, "default", 1) // the parent, by a process whose clock is right
	e.clock.Advance(time.Second)
	e.complete(t, "default", queue.Outcome{ID: l[0].Job.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded})
	parent := e.get(t, js[0].ID)
	// The child, claimed by a process whose clock is 5 s behind.
	cl, err := slow.Claim(e.ctx, "default", 1, "slow")
	if err != nil || len(cl) != 1 || cl[0].Job.ID != js[1].ID {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	child := e.get(t, js[1].ID)
	if child.StartedAt == nil || child.StartedAt.Before(*parent.FinishedAt) {
		t.Fatalf("the child started at %v, before its parent finished at %v", child.StartedAt, parent.FinishedAt)
	}
	// Completed by the process that is behind: it ends no earlier than it started.
	if st, err := slow.Complete(e.ctx, "default", []queue.Outcome{{ID: cl[0].Job.ID, Token: cl[0].Token, Kind: queue.OutcomeSucceeded}}); err != nil || st[0] != queue.StatusSucceeded {
		t.Fatalf("complete = %v, %v", st, err)
	}
	child = e.get(t, js[1].ID)
	if child.FinishedAt.Before(*child.StartedAt) {
		t.Fatalf("the child finished at %v, before it started at %v", child.FinishedAt, child.StartedAt)
	}
}

// An empty, idle queue can be forgotten: it leaves the set of known queues
// (pollers and lookups stop visiting it) until a submit lists it again. A
// queue with jobs, limits or a pause, or used recently, is refused with the
// reason, and stays (issue 32, finding 8: the set only grew).
func TestForgetAnEmptyQueue(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", Queue: "fleeting"})[0]
	if err := e.q.Forget(e.ctx, "fleeting", 0); !errors.Is(err, queue.ErrQueueBusy) || !strings.Contains(err.Error(), "queued") {
		t.Fatalf("forget of a queue with a queued job: %v", err)
	}
	l := e.claim(t, "fleeting", 1)
	e.complete(t, "fleeting", queue.Outcome{ID: j.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded})
	if err := e.q.Forget(e.ctx, "fleeting", 0); !errors.Is(err, queue.ErrQueueBusy) || !strings.Contains(err.Error(), "finished") {
		t.Fatalf("forget of a queue that still holds a finished job: %v", err)
	}
	e.clock.Advance(48 * time.Hour)
	if n, err := e.q.Prune(e.ctx, "fleeting", e.clock.Now().Add(-24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v", n, err)
	}
	if err := e.q.Forget(e.ctx, "fleeting", time.Hour); !errors.Is(err, queue.ErrQueueBusy) || !strings.Contains(err.Error(), "recently") {
		t.Fatalf("forget of a queue used within the idle time: %v", err)
	}
	if err := e.q.Forget(e.ctx, "fleeting", 0); err != nil {
		t.Fatalf("forget of an empty queue: %v", err)
	}
	qs, err := e.q.Queues(e.ctx)
	if err != nil || slices.Contains(qs, "fleeting") {
		t.Fatalf("known queues after the forget: %v, %v", qs, err)
	}
	// Another client that registered the queue before the forget still
	// lists it again with its next submit.
	other := queue.New(e.srv.Client(), queue.Options{Now: e.clock.Now, LeaseClock: e.clock.Now})
	queue.SetWriteFormat(other, queue.WriteFormat)
	if err := other.Pause(e.ctx, "fleeting"); err != nil { // registers it (cached)
		t.Fatal(err)
	}
	if err := other.Resume(e.ctx, "fleeting"); err != nil {
		t.Fatal(err)
	}
	if err := e.q.Forget(e.ctx, "fleeting", 0); err != nil {
		t.Fatalf("forget again: %v", err)
	}
	j2, err := (&job.Spec{Type: "t", Queue: "fleeting"}).Build(e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Submit(e.ctx, []*job.Job{j2}); err != nil {
		t.Fatalf("submit to a forgotten queue: %v", err)
	}
	if qs, _ := e.q.Queues(e.ctx); !slices.Contains(qs, "fleeting") {
		t.Fatalf("a submit did not list the forgotten queue again: %v", qs)
	}
	if got := e.get(t, j2.ID); got.State != job.Queued {
		t.Fatalf("job in the queue listed again = %s", got.State)
	}
}

// A submit that lands between Forget's script (the marker set) and its
// removal of the queue's listing lifts the marker and lists the queue; the
// removal must not then leave the new job in a queue no poller visits.
func TestForgetRacingASubmit(t *testing.T) {
	e := newEnv(t)
	other := queue.New(e.srv.Client(), queue.Options{Now: e.clock.Now, LeaseClock: e.clock.Now})
	queue.SetWriteFormat(other, queue.WriteFormat)
	if err := other.Pause(e.ctx, "racing"); err != nil { // registers it (cached)
		t.Fatal(err)
	}
	if err := other.Resume(e.ctx, "racing"); err != nil {
		t.Fatal(err)
	}
	var submitted *job.Job
	queue.SetAfterForgetScript(e.q, func() {
		j, err := (&job.Spec{Type: "t", Queue: "racing"}).Build(e.clock.Now())
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := other.Submit(e.ctx, []*job.Job{j}); err != nil {
			t.Errorf("submit during the forget: %v", err)
		}
		submitted = j
	})
	err := e.q.Forget(e.ctx, "racing", 0)
	if qs, _ := e.q.Queues(e.ctx); !slices.Contains(qs, "racing") {
		t.Fatalf("forget (answered %v) unlisted a queue a job was submitted to meanwhile: %v", err, qs)
	}
	if !errors.Is(err, queue.ErrQueueBusy) {
		t.Fatalf("forget racing a submit answered %v, want ErrQueueBusy", err)
	}
	if submitted == nil || e.get(t, submitted.ID).State != job.Queued {
		t.Fatal("the job submitted meanwhile is not queued")
	}
}
