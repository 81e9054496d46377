package queue_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestTypedClaimsShareAQueue: workers that handle different types share one
// queue, and each takes exactly its own types in priority order, whatever
// heads the lists; jobs no claimer handles are counted apart and wait.
func TestTypedClaimsShareAQueue(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for i := range 30 {
		typ := []string{"x", "y", "z"}[i%3] // z: nobody handles it
		prio := []job.Priority{job.Low, job.Normal, job.High}[(i/3)%3]
		specs = append(specs, job.Spec{Type: typ, Priority: prio, Payload: []byte(fmt.Sprint(i))})
	}
	jobs := e.submit(t, specs...)
	// The order each type must start in: high, then normal, then low, each
	// in submit order.
	want := map[string][]string{}
	for _, p := range []job.Priority{job.High, job.Normal, job.Low} {
		for _, j := range jobs {
			if j.Priority == p {
				want[j.Type] = append(want[j.Type], j.ID)
			}
		}
	}
	got := map[string][]string{}
	for i := 0; i < 40; i++ {
		typ := []string{"x", "y"}[i%2]
		ls, err := e.q.Claim(e.ctx, "default", 2, "w-"+typ, typ)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Job.Type != typ {
				t.Fatalf("a claim for %s took a job of type %s", typ, l.Job.Type)
			}
			got[typ] = append(got[typ], l.Job.ID)
		}
	}
	for _, typ := range []string{"x", "y"} {
		if !slices.Equal(got[typ], want[typ]) {
			t.Fatalf("%s started in the order %v, want %v", typ, got[typ], want[typ])
		}
	}
	st := e.stats(t, "default")
	if st.Unhandled != 10 || st.Queued["high"]+st.Queued["normal"]+st.Queued["low"] != 0 || st.Throttled != 0 {
		t.Fatalf("counts %+v: want the 10 z jobs unhandled, nothing else queued", st)
	}
	types, err := e.q.UnhandledTypes(e.ctx, "default")
	if err != nil || !slices.Equal(types, []string{"z"}) {
		t.Fatalf("unhandled types %v %v", types, err)
	}
	hb := e.get(t, want["z"][0]).HeldBack
	if hb == nil || hb.Reason != job.HeldNoHandler || !strings.Contains(hb.Message, `"z"`) {
		t.Fatalf("held back %+v, want no_handler naming z", hb)
	}
	// A worker that handles z takes them, in priority order, parked or not.
	var zs []string
	for range 10 {
		ls, err := e.q.Claim(e.ctx, "default", 3, "w-z", "z", "x")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			zs = append(zs, l.Job.ID)
		}
	}
	if !slices.Equal(zs, want["z"]) {
		t.Fatalf("z started in the order %v, want %v", zs, want["z"])
	}
	if st := e.stats(t, "default"); st.Unhandled != 0 {
		t.Fatalf("unhandled %d after a handler took them", st.Unhandled)
	}
}

// TestUntypedClaimTakesParkedJobs: a claim with no types (an HTTP worker
// that runs anything) takes jobs that typed claims parked, first.
func TestUntypedClaimTakesParkedJobs(t *testing.T) {
	e := newEnv(t)
	jobs := e.submit(t, job.Spec{Type: "a"}, job.Spec{Type: "b"}, job.Spec{Type: "a"})
	if ls, err := e.q.Claim(e.ctx, "default", 5, "w", "c"); err != nil || len(ls) != 0 {
		t.Fatalf("claim of c: %v %v", ls, err)
	}
	ls := e.claim(t, "default", 5)
	if len(ls) != 3 || ls[0].Job.ID != jobs[0].ID || ls[1].Job.ID != jobs[1].ID || ls[2].Job.ID != jobs[2].ID {
		t.Fatalf("untyped claim took %v, want all three in submit order", ls)
	}
}

// TestUnhandledJobsEndDeadAfterTheCutoff: BuryUnhandled ends dead only the
// jobs parked at or before its cutoff, names the type, cancels their
// dependents, and a cancel of a parked job works.
func TestUnhandledJobsEndDeadAfterTheCutoff(t *testing.T) {
	e := newEnv(t)
	old := e.submit(t, job.Spec{Type: "gone", Priority: job.High}, job.Spec{Type: "gone", Priority: job.Low}, job.Spec{Type: "gone"})
	dep := e.submit(t, job.Spec{Type: "x", DependsOn: []string{old[0].ID}})[0]
	if ls, _ := e.q.Claim(e.ctx, "default", 5, "w", "x"); len(ls) != 0 {
		t.Fatalf("claimed %v", ls)
	}
	parkedAt := e.clock.Now()
	e.clock.Advance(time.Minute)
	young := e.submit(t, job.Spec{Type: "gone"})[0]
	if ls, _ := e.q.Claim(e.ctx, "default", 5, "w", "x"); len(ls) != 0 {
		t.Fatalf("claimed %v", ls)
	}
	if _, err := e.q.Cancel(e.ctx, old[2].ID); err != nil {
		t.Fatalf("cancel of a parked job: %v", err)
	}
	n, err := e.q.BuryUnhandled(e.ctx, "default", "gone", parkedAt, 100)
	if err != nil || n != 2 {
		t.Fatalf("buried %d %v, want the 2 old ones left", n, err)
	}
	for _, j := range old[:2] {
		g := e.get(t, j.ID)
		wantState(t, g, job.Dead)
		if g.LastError != `no handler for type "gone"` {
			t.Fatalf("last_error %q", g.LastError)
		}
	}
	wantState(t, e.get(t, dep.ID), job.Cancelled)
	wantState(t, e.get(t, young.ID), job.Queued)
	st := e.stats(t, "default")
	if st.Unhandled != 1 || st.Dead != 2 {
		t.Fatalf("counts %+v: want 1 unhandled, 2 dead", st)
	}
	if err := e.q.Forget(e.ctx, "default", 0); !errors.Is(err, queue.ErrQueueBusy) {
		t.Fatalf("forget of a queue with an unhandled job: %v", err)
	}
}

// TestHandlerOutcomes: a snooze gives the attempt back and runs again after
// its delay; a handler's cancel ends the job cancelled with its reason and
// cancels its dependents; RetryAfter's delay replaces the backoff.
func TestHandlerOutcomes(t *testing.T) {
	e := newEnv(t)
	jobs := e.submit(t, job.Spec{Type: "s", MaxAttempts: ptr(2)}, job.Spec{Type: "c"}, job.Spec{Type: "r", Backoff: &job.Backoff{BaseSeconds: 1000, MaxSeconds: 1000}})
	dep := e.submit(t, job.Spec{Type: "x", DependsOn: []string{jobs[1].ID}})[0]
	ls := e.claim(t, "default", 3)
	if len(ls) != 3 {
		t.Fatalf("claimed %d", len(ls))
	}
	st := e.complete(t, "default",
		queue.Outcome{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSnoozed, Delay: 90 * time.Second, WorkerID: "w1"},
		queue.Outcome{ID: ls[1].Job.ID, Token: ls[1].Token, Kind: queue.OutcomeCancelled, Error: "customer left", WorkerID: "w1"},
		queue.Outcome{ID: ls[2].Job.ID, Token: ls[2].Token, Kind: queue.OutcomeFailed, Error: "429", Delay: 7 * time.Second, WorkerID: "w1"})
	if !slices.Equal(st, []queue.Status{queue.StatusScheduled, queue.StatusCancelled, queue.StatusScheduled}) {
		t.Fatalf("statuses %v", st)
	}
	s := e.get(t, jobs[0].ID)
	if s.State != job.Scheduled || s.MaxAttempts != 3 || s.Attempt != 1 || !s.RunAt.Equal(e.clock.Now().Add(90*time.Second)) {
		t.Fatalf("snoozed job: %s attempt %d/%d run_at %v", s.State, s.Attempt, s.MaxAttempts, s.RunAt)
	}
	if s.HeldBack == nil || s.HeldBack.Reason != job.HeldScheduled {
		t.Fatalf("snoozed job held back %+v", s.HeldBack)
	}
	c := e.get(t, jobs[1].ID)
	if c.State != job.Cancelled || c.LastError != "customer left" {
		t.Fatalf("cancelled job: %s %q", c.State, c.LastError)
	}
	wantState(t, e.get(t, dep.ID), job.Cancelled)
	r := e.get(t, jobs[2].ID)
	if r.State != job.Scheduled || !r.RunAt.Equal(e.clock.Now().Add(7*time.Second)) || r.LastError != "429" {
		t.Fatalf("retry-after job: %s run_at %v %q", r.State, r.RunAt, r.LastError)
	}
	var snoozed bool
	for _, ev := range e.events(t, "default") {
		if ev.JobID == jobs[0].ID && ev.Event == job.EventSnoozed && ev.State == job.Scheduled && ev.Attempt == 1 {
			snoozed = true
		}
	}
	if !snoozed {
		t.Fatal("no snoozed event")
	}
	// The snooze gave the attempt back: two more attempts may fail before
	// the job (max 2 at submit) goes dead.
	e.clock.Advance(2 * time.Minute)
	for attempt := 2; attempt <= 3; attempt++ {
		if _, _, err := e.q.Promote(e.ctx, "default", 100); err != nil {
			t.Fatal(err)
		}
		ls, err := e.q.Claim(e.ctx, "default", 1, "w1", "s")
		if err != nil || len(ls) != 1 || ls[0].Job.Attempt != attempt {
			t.Fatalf("attempt %d: %v %v", attempt, ls, err)
		}
		e.complete(t, "default", queue.Outcome{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeFailed, Error: "no", Delay: time.Millisecond, WorkerID: "w1"})
		e.clock.Advance(time.Second)
	}
	wantState(t, e.get(t, jobs[0].ID), job.Dead)
}

// TestUniquenessByWindowAndUntilFinished: a queue's idempotency window is
// its own, and "until finished" frees a key once its job ended while a
// running or queued job still blocks a second one.
func TestUniquenessByWindowAndUntilFinished(t *testing.T) {
	e := newEnv(t)
	key := job.Spec{Type: "sync", IdempotencyKey: "account-7"}
	if err := e.q.SetUniqueness(e.ctx, "default", queue.Uniqueness{Window: time.Hour, UntilFinished: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.q.SetUniqueness(e.ctx, "default", queue.Uniqueness{Window: time.Millisecond}); err == nil {
		t.Fatal("a 1 ms window accepted")
	}
	u, err := e.q.GetUniqueness(e.ctx, "default")
	if err != nil || u.Window != time.Hour || !u.UntilFinished {
		t.Fatalf("uniqueness %+v %v", u, err)
	}
	first := e.submit(t, key)[0]
	res, err := e.q.Submit(e.ctx, []*job.Job{e.build(t, key)})
	if err != nil || !res[0].Duplicate || res[0].Job.ID != first.ID {
		t.Fatalf("second submit while the first is queued: %+v %v", res, err)
	}
	ls := e.claim(t, "default", 1)
	res, _ = e.q.Submit(e.ctx, []*job.Job{e.build(t, key)})
	if !res[0].Duplicate {
		t.Fatal("a submit while the first runs was not a duplicate")
	}
	e.complete(t, "default", queue.Outcome{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"})
	res, _ = e.q.Submit(e.ctx, []*job.Job{e.build(t, key)})
	if res[0].Duplicate || res[0].Job.ID == first.ID {
		t.Fatalf("a submit after the first finished was a duplicate: %+v", res[0])
	}
	ttl, _ := e.q.Redis().PTTL(e.ctx, "sundial:{default}:idem:account-7").Result()
	if ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("key ttl %v, want the queue's 1 h window", ttl)
	}
	// Without "until finished" an ended job still names the key.
	if err := e.q.SetUniqueness(e.ctx, "default", queue.Uniqueness{}); err != nil {
		t.Fatal(err)
	}
	second := res[0].Job
	if _, err := e.q.Cancel(e.ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	res, _ = e.q.Submit(e.ctx, []*job.Job{e.build(t, key)})
	if !res[0].Duplicate || res[0].Job.ID != second.ID {
		t.Fatalf("with the default rules a cancelled job's key was freed: %+v", res[0])
	}
}

// TestHeldBackByAGoneWorker: an active job whose worker is in the registry
// has no held_back; once the worker's entry is gone, it says so.
func TestHeldBackByAGoneWorker(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t"})[0]
	e.claim(t, "default", 1) // worker w1
	if err := e.q.Heartbeat(e.ctx, queue.WorkerInfo{ID: "w1", Queues: []string{"default"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if hb := e.get(t, j.ID).HeldBack; hb != nil {
		t.Fatalf("held back %+v while its worker heartbeats", hb)
	}
	if err := e.q.Unregister(e.ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	hb := e.get(t, j.ID).HeldBack
	if hb == nil || hb.Reason != job.HeldWorkerGone || !strings.Contains(hb.Message, `"w1"`) {
		t.Fatalf("held back %+v, want worker_gone naming w1", hb)
	}
}
