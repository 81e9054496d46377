package queue_test

import (
	"slices"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// finishIn claims the job of queue q with id and reports kind for it.
func (e *env) finishIn(t *testing.T, q, id string, kind queue.OutcomeKind) {
	t.Helper()
	ls := e.claim(t, q, 100)
	for _, l := range ls {
		o := queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: kind, WorkerID: "w1", Error: "boom"}
		if l.Job.ID != id {
			o.Kind = queue.OutcomeSucceeded
		}
		e.complete(t, q, o)
	}
}

// TestDependencyOnAnotherQueue: a job may depend on jobs of other queues;
// it waits (counted as waiting, held back naming them) until the poller's
// settle finds them ended; a success starts it once nothing else is
// pending, a dead dependency cancels it and its dependents, and with
// on_dependency_failure "run" it runs anyway. Settling twice changes
// nothing more.
func TestDependencyOnAnotherQueue(t *testing.T) {
	e := newEnv(t)
	build := func(s job.Spec) *job.Job { return e.build(t, s) }
	a := build(job.Spec{Type: "extract", Queue: "qa"})
	c := build(job.Spec{Type: "fetch", Queue: "qc"})
	for _, j := range []*job.Job{a, c} {
		if _, err := e.q.Submit(e.ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	// b in queue qb waits for a (qa) and c (qc); d in qb waits for b.
	b := build(job.Spec{Type: "join", Queue: "qb", DependsOn: []string{a.ID, c.ID}})
	d := build(job.Spec{Type: "report", Queue: "qb", DependsOn: []string{"#0"}})
	res, err := e.q.Submit(e.ctx, []*job.Job{b, d})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Job.State != job.Waiting || res[0].Job.DependsOn[0] != a.ID {
		t.Fatalf("b = %+v", res[0].Job)
	}
	got := e.get(t, b.ID)
	if got.State != job.Waiting || got.DependsOn[0] != a.ID || got.DependsOn[1] != c.ID || got.HeldBack == nil || got.HeldBack.Reason != job.HeldDependencies {
		t.Fatalf("stored b = %+v", got)
	}
	settle := func(want int) {
		t.Helper()
		n, err := e.q.SettleRemoteDeps(e.ctx, "qb", 100)
		if err != nil || n != want {
			t.Fatalf("settle = %d %v, want %d", n, err, want)
		}
	}
	settle(0) // nothing ended yet
	e.finishIn(t, "qa", a.ID, queue.OutcomeSucceeded)
	settle(0) // a succeeded, c pending: b still waits
	wantState(t, e.get(t, b.ID), job.Waiting)
	e.finishIn(t, "qc", c.ID, queue.OutcomeSucceeded)
	settle(1)
	settle(0) // idempotent
	wantState(t, e.get(t, b.ID), job.Queued)
	wantState(t, e.get(t, d.ID), job.Waiting)

	// A dead dependency in another queue cancels the dependent and its own.
	x := build(job.Spec{Type: "x", Queue: "qa", MaxAttempts: ptr(1)})
	if _, err := e.q.Submit(e.ctx, []*job.Job{x}); err != nil {
		t.Fatal(err)
	}
	y := build(job.Spec{Type: "y", Queue: "qb", DependsOn: []string{x.ID}})
	z := build(job.Spec{Type: "z", Queue: "qb", DependsOn: []string{"#0"}})
	run := build(job.Spec{Type: "r", Queue: "qb", DependsOn: []string{x.ID}, OnDependencyFailure: job.DependencyRun})
	if _, err := e.q.Submit(e.ctx, []*job.Job{y, z, run}); err != nil {
		t.Fatal(err)
	}
	e.finishIn(t, "qa", x.ID, queue.OutcomeDead)
	if n, err := e.q.SettleRemoteDeps(e.ctx, "qb", 100); err != nil || n != 2 {
		t.Fatalf("settle after the dead dependency = %d %v, want 2 (y cancelled, r started)", n, err)
	}
	cy := e.get(t, y.ID)
	if cy.State != job.Cancelled || cy.LastError != "dependency "+x.ID+" ended dead" {
		t.Fatalf("y = %s %q", cy.State, cy.LastError)
	}
	wantState(t, e.get(t, z.ID), job.Cancelled)
	r := e.get(t, run.ID)
	if r.State != job.Queued || r.OnDependencyFailure != job.DependencyRun {
		t.Fatalf("run-anyway job = %s %q", r.State, r.OnDependencyFailure)
	}
}

// TestRunAnywayWithinAQueue: on_dependency_failure "run" works for a
// dependency of the same queue too: a dead dependency starts the job
// instead of cancelling it; a bad policy is refused.
func TestRunAnywayWithinAQueue(t *testing.T) {
	e := newEnv(t)
	jobs := e.submit(t, job.Spec{Type: "p", MaxAttempts: ptr(1)},
		job.Spec{Type: "c", DependsOn: []string{"#0"}, OnDependencyFailure: job.DependencyRun},
		job.Spec{Type: "k", DependsOn: []string{"#0"}})
	e.finishIn(t, "default", jobs[0].ID, queue.OutcomeDead)
	wantState(t, e.get(t, jobs[1].ID), job.Queued)
	wantState(t, e.get(t, jobs[2].ID), job.Cancelled)
	s := job.Spec{Type: "c", DependsOn: []string{jobs[0].ID}, OnDependencyFailure: "maybe"}
	if _, err := s.Build(e.clock.Now()); err == nil {
		t.Fatal("on_dependency_failure maybe accepted")
	}
	// A dependency already dead at submit: refused, unless it runs anyway.
	late := e.build(t, job.Spec{Type: "c", DependsOn: []string{jobs[0].ID}, OnDependencyFailure: job.DependencyRun})
	if _, err := e.q.Submit(e.ctx, []*job.Job{late}); err != nil {
		t.Fatalf("run-anyway on a dead dependency: %v", err)
	}
	wantState(t, e.get(t, late.ID), job.Queued)
}

// TestRetryWaitsAgainForAnotherQueue: a dependent cancelled because its
// dependency in another queue died waits again when retried, and the
// poller's settle decides anew (here: the dependency was retried and
// succeeded, so it runs).
func TestRetryWaitsAgainForAnotherQueue(t *testing.T) {
	e := newEnv(t)
	up := e.build(t, job.Spec{Type: "up", Queue: "qa", MaxAttempts: ptr(1)})
	if _, err := e.q.Submit(e.ctx, []*job.Job{up}); err != nil {
		t.Fatal(err)
	}
	down := e.build(t, job.Spec{Type: "down", Queue: "qb", DependsOn: []string{up.ID}})
	if _, err := e.q.Submit(e.ctx, []*job.Job{down}); err != nil {
		t.Fatal(err)
	}
	e.finishIn(t, "qa", up.ID, queue.OutcomeDead)
	if n, err := e.q.SettleRemoteDeps(e.ctx, "qb", 10); err != nil || n != 1 {
		t.Fatalf("settle = %d %v", n, err)
	}
	wantState(t, e.get(t, down.ID), job.Cancelled)
	if _, err := e.q.Retry(e.ctx, down.ID); err != nil {
		t.Fatalf("retry of the dependent: %v", err)
	}
	wantState(t, e.get(t, down.ID), job.Waiting)
	if _, err := e.q.Retry(e.ctx, up.ID); err != nil {
		t.Fatal(err)
	}
	e.finishIn(t, "qa", up.ID, queue.OutcomeSucceeded)
	if n, err := e.q.SettleRemoteDeps(e.ctx, "qb", 10); err != nil || n != 1 {
		t.Fatalf("settle after the retried dependency succeeded = %d %v", n, err)
	}
	wantState(t, e.get(t, down.ID), job.Queued)
}

// TestDependentsReader: the jobs waiting for a job are found in its own
// queue and among other queues' remote waiters, and a reader reads the
// remote waiters of every queue once, however many jobs it is asked about
// (a graph of n jobs must not cost n reads of them).
func TestDependentsReader(t *testing.T) {
	e := newEnv(t)
	var parents []*job.Job
	for i := range 5 {
		p := e.build(t, job.Spec{Type: "extract", Queue: "src"})
		if i == 4 {
			p = e.build(t, job.Spec{Type: "extract", Queue: "other"})
		}
		if _, err := e.q.Submit(e.ctx, []*job.Job{p}); err != nil {
			t.Fatal(err)
		}
		parents = append(parents, p)
	}
	// Each of parents[0..3] has a local child (src) and a remote one (dst);
	// parents[4] has none.
	want := map[string][]string{}
	for _, p := range parents[:4] {
		local := e.build(t, job.Spec{Type: "join", Queue: "src", DependsOn: []string{p.ID}})
		remote := e.build(t, job.Spec{Type: "load", Queue: "dst", DependsOn: []string{p.ID}})
		for _, j := range []*job.Job{local, remote} {
			if _, err := e.q.Submit(e.ctx, []*job.Job{j}); err != nil {
				t.Fatal(err)
			}
		}
		want[p.ID] = []string{local.ID, remote.ID}
	}
	rdb := e.srv.Client()
	before := calls(t, rdb, "srandmember")
	r := e.q.NewDependentsReader()
	for _, p := range parents {
		got, err := r.Dependents(e.ctx, p.Queue, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		w := slices.Clone(want[p.ID])
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("dependents of %s = %v, want %v", p.ID, got, w)
		}
	}
	queues, err := e.q.Queues(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls(t, rdb, "srandmember") - before; n != len(queues) {
		t.Errorf("%d reads of remote waiters for %d jobs over %d queues; want one per queue", n, len(parents), len(queues))
	}
}
