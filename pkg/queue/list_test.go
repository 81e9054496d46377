package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// listAll pages through queue's jobs in one state with o's filters and
// returns their ids in order, checking that no page is larger than asked
// and that pages come back until the cursor is empty.
func (e *env) listAll(t *testing.T, queueName string, o queue.ListOptions) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("the cursor never ends")
		}
		jobs, next, err := e.q.List(e.ctx, queueName, o)
		if err != nil {
			t.Fatalf("list %+v: %v", o, err)
		}
		if len(jobs) > o.Limit {
			t.Fatalf("a page of %d jobs, limit %d", len(jobs), o.Limit)
		}
		for _, j := range jobs {
			if j.State != o.State || (o.Type != "" && j.Type != o.Type) || (o.Priority != "" && j.Priority != o.Priority) {
				t.Fatalf("job %s (%s, %s, %s) does not match %+v", j.ID, j.State, j.Type, j.Priority, o)
			}
			ids = append(ids, j.ID)
		}
		if next == "" {
			return ids
		}
		o.Cursor = next
	}
}

func idsOf(jobs []*job.Job, keep func(*job.Job) bool) []string {
	var out []string
	for _, j := range jobs {
		if keep == nil || keep(j) {
			out = append(out, j.ID)
		}
	}
	return out
}

// TestListQueued: the queued list pages through every priority list in
// claim order, a group's jobs where its marker stands, and the jobs held
// back by a limit and by a missing handler; cancelled ids left in a list
// as tombstones are not listed; filters by type and priority hold.
func TestListQueued(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.q.SetLimit(e.ctx, "default", queue.Limit{Name: "one", Types: []string{"limited"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	// Two limited jobs: one runs, one is parked by the limit.
	limited := e.submit(t, job.Spec{Type: "limited"}, job.Spec{Type: "limited"})
	if ls := e.claim(t, "default", 1); len(ls) != 1 {
		t.Fatalf("claim limited: %v", ls)
	}
	e.claim(t, "default", 1)
	// Jobs of a type no claimer handles, at the tails of the lists: a
	// typed claim for type a passes them and parks them for a handler.
	orphans := e.submit(t, job.Spec{Type: "orphan", Priority: job.High}, job.Spec{Type: "orphan", Priority: job.High}, job.Spec{Type: "orphan", Priority: job.High})
	var specs []job.Spec
	for i := range 40 {
		s := job.Spec{Type: []string{"a", "b"}[i%2], Priority: []job.Priority{job.High, job.Normal, job.Low}[i%3], Payload: []byte(fmt.Sprint(i))}
		if i%5 == 0 {
			s.Group = "tenant" + fmt.Sprint(i%2)
		}
		specs = append(specs, s)
	}
	jobs := e.submit(t, specs...)
	cancelled := jobs[7]
	if _, err := e.q.Cancel(e.ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	for _, l := range e.claimTyped(t, 2, "a") {
		jobs = slices.DeleteFunc(jobs, func(j *job.Job) bool { return j.ID == l.Job.ID })
	}
	st := e.stats(t, "default")
	if st.Throttled != 1 || st.Unhandled < 3 {
		t.Fatalf("counts %+v: want 1 throttled, 3 or more unhandled", st)
	}
	queued := func(j *job.Job) bool { return j.ID != cancelled.ID }
	want := append(idsOf(jobs, queued), limited[1].ID)
	want = append(want, idsOf(orphans, nil)...)
	for _, limit := range []int{1, 3, 7, 500} {
		got := e.listAll(t, "default", queue.ListOptions{State: job.Queued, Limit: limit})
		if !sameSet(got, want) {
			t.Fatalf("limit %d: listed %d jobs %v, want %d %v", limit, len(got), got, len(want), want)
		}
	}
	got := e.listAll(t, "default", queue.ListOptions{State: job.Queued, Type: "b", Limit: 4})
	if w := idsOf(jobs, func(j *job.Job) bool { return j.Type == "b" && queued(j) }); !sameSet(got, w) {
		t.Fatalf("type b: %v, want %v", got, w)
	}
	got = e.listAll(t, "default", queue.ListOptions{State: job.Queued, Priority: job.High, Limit: 2})
	w := append(idsOf(jobs, func(j *job.Job) bool { return j.Priority == job.High && queued(j) }), idsOf(orphans, nil)...)
	if !sameSet(got, w) {
		t.Fatalf("priority high: %v, want %v", got, w)
	}
	got = e.listAll(t, "default", queue.ListOptions{State: job.Queued, Type: "orphan", Limit: 2})
	if !sameSet(got, idsOf(orphans, nil)) {
		t.Fatalf("orphans: %v", got)
	}
}

// TestListQueuedInClaimOrder: without groups and limits, the queued list
// is the order claims take the jobs in.
func TestListQueuedInClaimOrder(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for i := range 30 {
		specs = append(specs, job.Spec{Type: "t", Priority: []job.Priority{job.Low, job.High, job.Normal}[i%3]})
	}
	e.submit(t, specs...)
	listed := e.listAll(t, "default", queue.ListOptions{State: job.Queued, Limit: 4})
	var claimed []string
	for range 30 {
		for _, l := range e.claim(t, "default", 1) {
			claimed = append(claimed, l.Job.ID)
		}
	}
	if !slices.Equal(listed, claimed) {
		t.Fatalf("listed %v, claimed %v", listed, claimed)
	}
}

func (e *env) claimTyped(t *testing.T, n int, types ...string) []queue.Lease {
	t.Helper()
	ls, err := e.q.Claim(e.ctx, "default", n, "w-typed", types...)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestListSortedStates: scheduled (by due time), active, waiting and dead
// (newest first) jobs page through their sets, ties of one score
// included, also when the member a cursor names has left the set.
func TestListSortedStates(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for i := range 30 {
		// 10 distinct due times, 3 jobs each: ties share a score.
		specs = append(specs, job.Spec{Type: "s", DelaySeconds: ptr(float64(10 + i%10))})
	}
	sched := e.submit(t, specs...)
	got := e.listAll(t, "default", queue.ListOptions{State: job.Scheduled, Limit: 4})
	if !sameSet(got, idsOf(sched, nil)) {
		t.Fatalf("scheduled: %v", got)
	}
	// Due order.
	page, _, err := e.q.List(e.ctx, "default", queue.ListOptions{State: job.Scheduled, Limit: 30})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(page); i++ {
		if page[i].RunAt.Before(page[i-1].RunAt) {
			t.Fatalf("scheduled out of due order at %d", i)
		}
	}
	// A cursor whose member left the set meanwhile goes on after it.
	first, next, err := e.q.List(e.ctx, "default", queue.ListOptions{State: job.Scheduled, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.Cancel(e.ctx, first[1].ID); err != nil {
		t.Fatal(err)
	}
	rest := e.listAll(t, "default", queue.ListOptions{State: job.Scheduled, Limit: 5, Cursor: next})
	if all := append(idsOf(first[:1], nil), rest...); !sameSet(all, idsOf(sched, func(j *job.Job) bool { return j.ID != first[1].ID })) {
		t.Fatalf("after a removed cursor member: %d jobs, want 29", len(all))
	}

	// Dead: 25 jobs died in one script call (one score) and 5 later.
	specs = specs[:0]
	for i := range 30 {
		specs = append(specs, job.Spec{Queue: "d", Type: []string{"x", "y"}[i%2], MaxAttempts: ptr(1)})
	}
	dead := e.submit(t, specs...)
	e.kill(t, "d", 25, "boom")
	e.clock.Advance(time.Second)
	e.kill(t, "d", 5, "later")
	got = e.listAll(t, "d", queue.ListOptions{State: job.Dead, Limit: 4})
	if !sameSet(got, idsOf(dead, nil)) {
		t.Fatalf("dead: %d listed, want 30", len(got))
	}
	page, _, err = e.q.List(e.ctx, "d", queue.ListOptions{State: job.Dead, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range page {
		if j.LastError != "later" {
			t.Fatalf("dead not newest first: %s died of %q", j.ID, j.LastError)
		}
	}
	got = e.listAll(t, "d", queue.ListOptions{State: job.Dead, Type: "y", Limit: 3})
	if !sameSet(got, idsOf(dead, func(j *job.Job) bool { return j.Type == "y" })) {
		t.Fatalf("dead y: %v", got)
	}

	// Active, and waiting on a dependency.
	act := e.submit(t, job.Spec{Queue: "a", Type: "t"}, job.Spec{Queue: "a", Type: "t"}, job.Spec{Queue: "a", Type: "t"})
	if ls := e.claim(t, "a", 2); len(ls) != 2 {
		t.Fatal("claim")
	}
	wait := e.submit(t, job.Spec{Queue: "a", Type: "t", DependsOn: []string{act[2].ID}})
	if got := e.listAll(t, "a", queue.ListOptions{State: job.Active, Limit: 1}); !sameSet(got, idsOf(act[:2], nil)) {
		t.Fatalf("active: %v", got)
	}
	if got := e.listAll(t, "a", queue.ListOptions{State: job.Waiting, Limit: 1}); !sameSet(got, idsOf(wait, nil)) {
		t.Fatalf("waiting: %v", got)
	}
	if got := e.listAll(t, "a", queue.ListOptions{State: job.Queued, Limit: 10}); !sameSet(got, idsOf(act[2:], nil)) {
		t.Fatalf("queued: %v", got)
	}
}

// kill claims n jobs of queueName and ends them dead with reason why, in
// one call.
func (e *env) kill(t *testing.T, queueName string, n int, why string) {
	t.Helper()
	ls := e.claim(t, queueName, n)
	if len(ls) != n {
		t.Fatalf("claimed %d, want %d", len(ls), n)
	}
	var outs []queue.Outcome
	for _, l := range ls {
		outs = append(outs, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeDead, Error: why, WorkerID: "w1"})
	}
	e.complete(t, queueName, outs...)
}

// TestListBadInput: a cursor of another state, or not a cursor, is refused,
// and so is a state Redis keeps no index of.
func TestListBadInput(t *testing.T) {
	e := newEnv(t)
	e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t"})
	_, next, err := e.q.List(e.ctx, "default", queue.ListOptions{State: job.Queued, Limit: 1})
	if err != nil || next == "" {
		t.Fatalf("list: %q %v", next, err)
	}
	for _, o := range []queue.ListOptions{
		{State: job.Dead, Limit: 1, Cursor: next},
		{State: job.Queued, Limit: 1, Cursor: "nonsense"},
	} {
		if _, _, err := e.q.List(e.ctx, "default", o); !errors.Is(err, queue.ErrInvalidCursor) {
			t.Fatalf("%+v: %v, want ErrInvalidCursor", o, err)
		}
	}
	var fe *job.FieldError
	if _, _, err := e.q.List(e.ctx, "default", queue.ListOptions{State: job.Succeeded, Limit: 1}); !errors.As(err, &fe) || fe.Field != "state" {
		t.Fatalf("state succeeded: %v, want a field error", err)
	}
}

// TestListSaysWhatHoldsJobsBack: listed queued, scheduled and waiting jobs
// carry held_back as Get gives it.
func TestListSaysWhatHoldsJobsBack(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.q.SetLimit(e.ctx, "default", queue.Limit{Name: "one", Types: []string{"limited"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	limited := e.submit(t, job.Spec{Type: "limited"}, job.Spec{Type: "limited"})
	e.claim(t, "default", 1)
	e.claim(t, "default", 1)
	later := e.submit(t, job.Spec{Type: "t", DelaySeconds: ptr(60.0)})
	child := e.submit(t, job.Spec{Type: "t", DependsOn: []string{limited[1].ID}})
	for _, c := range []struct {
		state  job.State
		id     string
		reason string
	}{
		{job.Queued, limited[1].ID, job.HeldLimit},
		{job.Scheduled, later[0].ID, job.HeldScheduled},
		{job.Waiting, child[0].ID, job.HeldDependencies},
	} {
		page, _, err := e.q.List(e.ctx, "default", queue.ListOptions{State: c.state, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := e.get(t, c.id)
		if len(page) != 1 || page[0].ID != c.id || page[0].HeldBack == nil || got.HeldBack == nil ||
			page[0].HeldBack.Reason != c.reason || *page[0].HeldBack != *got.HeldBack {
			t.Fatalf("%s: listed %+v, Get says %+v", c.state, page, got.HeldBack)
		}
	}
}

// BenchmarkList: one page of a queue of 100,000 queued jobs, first and
// deep (a cursor 50,000 jobs in), and filtered by a type that 1 job in
// 10 has.
func BenchmarkList(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	for i := range 100 {
		jobs := benchJobs(b, 1000)
		for k, j := range jobs {
			j.Type = "t" + strconv.Itoa((i*1000+k)%10)
		}
		if _, err := c.Submit(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	deep := ""
	for range 100 {
		_, next, err := c.List(ctx, "default", queue.ListOptions{State: job.Queued, Limit: 500, Cursor: deep})
		if err != nil {
			b.Fatal(err)
		}
		deep = next
	}
	for _, bc := range []struct {
		name string
		o    queue.ListOptions
	}{
		{"first", queue.ListOptions{State: job.Queued, Limit: 50}},
		{"deep", queue.ListOptions{State: job.Queued, Limit: 50, Cursor: deep}},
		{"type", queue.ListOptions{State: job.Queued, Limit: 50, Type: "t3"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if jobs, _, err := c.List(ctx, "default", bc.o); err != nil || len(jobs) != 50 {
					b.Fatalf("%d jobs, %v", len(jobs), err)
				}
			}
		})
	}
}
