package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/internal/netfault"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// lostReplyEnv is a queue client whose Redis connection runs through a
// proxy that can drop a script's reply after Redis ran it, with
// go-redis' default retries (MaxRetries 3): the retry sends the same
// command again, as it does for every user of the library.
type lostReplyEnv struct {
	*env
	proxy *netfault.Proxy
	raw   *redis.Client // straight to Redis, for the checks
}

func newLostReplyEnv(t *testing.T) *lostReplyEnv {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	p := netfault.Start(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	clk := &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	q := queue.New(rdb, queue.Options{Now: clk.Now, LeaseClock: clk.Now, LeaseTTL: 11 * time.Second, LeaseGrace: time.Second})
	queue.SetWriteFormat(q, queue.WriteFormat)
	e := &lostReplyEnv{env: &env{srv: srv, q: q, clock: clk, ctx: context.Background()}, proxy: p, raw: srv.Client()}
	// Load the function library first: FUNCTION LOAD's body names every
	// script, and the drops below match a script's name.
	if _, err := q.Claim(e.ctx, "warm", 1, "w0"); err != nil {
		t.Fatal(err)
	}
	return e
}

// drop arms one lost reply for the next call of script (its function
// name ends in "_"+script) and returns a check that it happened.
func (e *lostReplyEnv) drop(t *testing.T, script string) func() {
	t.Helper()
	before := e.proxy.Dropped.Load()
	e.proxy.DropReply("_"+script+"\r\n", 1)
	return func() {
		t.Helper()
		if e.proxy.Dropped.Load() != before+1 {
			t.Fatalf("the reply of %s was not dropped: the test did not test a lost reply", script)
		}
	}
}

// listed counts id in queue's normal list.
func (e *lostReplyEnv) listed(t *testing.T, queueName, id string) int {
	t.Helper()
	ids, err := e.raw.LRange(e.ctx, queue.NormalListKey(queueName), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

func (e *lostReplyEnv) countEvents(t *testing.T, queueName, id string, kind job.EventType) int {
	t.Helper()
	n := 0
	for _, ev := range e.events(t, queueName) {
		if ev.JobID == id && ev.Event == kind {
			n++
		}
	}
	return n
}

// TestLostReplySubmit: a submit whose reply was lost after Redis ran it is
// sent again by go-redis; the job must be queued once, not twice, and the
// answer must be the first call's.
func TestLostReplySubmit(t *testing.T) {
	e := newLostReplyEnv(t)
	dropped := e.drop(t, "submit")
	jobs := e.submit(t, job.Spec{Queue: "lr", Type: "t"})
	dropped()
	if n := e.listed(t, "lr", jobs[0].ID); n != 1 {
		t.Fatalf("job listed %d times in its queue, want 1", n)
	}
	if n := e.countEvents(t, "lr", jobs[0].ID, job.EventSubmitted); n != 1 {
		t.Fatalf("%d submitted events, want 1", n)
	}
	// With an idempotency key naming an earlier job: the answer of the
	// call sent again still names it.
	first := e.submit(t, job.Spec{Queue: "lr", Type: "t", IdempotencyKey: "k1"})
	dropped = e.drop(t, "submit")
	j2 := e.build(t, job.Spec{Queue: "lr", Type: "t", IdempotencyKey: "k1"})
	j3 := e.build(t, job.Spec{Queue: "lr", Type: "t"})
	res, err := e.q.Submit(e.ctx, []*job.Job{j2, j3})
	if err != nil {
		t.Fatal(err)
	}
	dropped()
	if !res[0].Duplicate || res[0].Job.ID != first[0].ID {
		t.Fatalf("the duplicate's answer: %+v, want the earlier job %s", res[0], first[0].ID)
	}
	if res[1].Duplicate || e.listed(t, "lr", j3.ID) != 1 {
		t.Fatalf("the new job: duplicate %v, listed %d times", res[1].Duplicate, e.listed(t, "lr", j3.ID))
	}
}

// TestLostReplyClaim: a claim whose reply was lost, sent again, gets the
// same jobs and tokens back: the job is neither leased twice nor left
// leased to nobody (which ended it dead with "lease expired", an attempt
// it never ran).
func TestLostReplyClaim(t *testing.T) {
	e := newLostReplyEnv(t)
	jobs := e.submit(t, job.Spec{Queue: "lc", Type: "t", MaxAttempts: ptr(1)}, job.Spec{Queue: "lc", Type: "t", MaxAttempts: ptr(1)})
	dropped := e.drop(t, "claim")
	leases := e.claim(t, "lc", 2)
	dropped()
	if len(leases) != 2 {
		t.Fatalf("the claim sent again answered %d leases, want the 2 the first call took", len(leases))
	}
	for _, l := range leases {
		rec, err := e.raw.HGet(e.ctx, queue.ActiveKey("lc"), l.Job.ID).Result()
		if err != nil {
			t.Fatal(err)
		}
		a, _ := queue.ParseActive(rec)
		if a.Token != l.Token || l.Job.Attempt != 1 {
			t.Fatalf("job %s: answered token %s attempt %d, Redis holds %s", l.Job.ID, l.Token, l.Job.Attempt, a.Token)
		}
		if n := e.countEvents(t, "lc", l.Job.ID, job.EventStarted); n != 1 {
			t.Fatalf("job %s started %d times", l.Job.ID, n)
		}
	}
	// The replay leased nothing more, and a new claim finds nothing.
	if more := e.claim(t, "lc", 2); len(more) != 0 {
		t.Fatalf("a new claim took %d more", len(more))
	}
	// The outcomes land: the jobs succeed on their one attempt.
	for _, l := range leases {
		e.complete(t, "lc", queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded})
	}
	for _, j := range jobs {
		wantState(t, e.get(t, j.ID), job.Succeeded)
	}
}

// TestLostReplyCycle: outcomes and a claim in one call (cycle.lua), its
// reply lost: the outcomes are not applied twice (answered as the first
// call answered them, not "stale"), and the claim answers the same jobs.
func TestLostReplyCycle(t *testing.T) {
	e := newLostReplyEnv(t)
	jobs := e.submit(t, job.Spec{Queue: "ly", Type: "t"}, job.Spec{Queue: "ly", Type: "t"})
	l := e.claim(t, "ly", 1)
	dropped := e.drop(t, "cycle")
	st, next, err := e.q.CompleteAndClaim(e.ctx, "ly", []queue.Outcome{{ID: l[0].Job.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded}}, 1, "w1")
	if err != nil {
		t.Fatal(err)
	}
	dropped()
	if len(st) != 1 || st[0] != queue.StatusSucceeded {
		t.Fatalf("statuses %v, want [succeeded]", st)
	}
	if len(next) != 1 || next[0].Job.ID == l[0].Job.ID {
		t.Fatalf("claimed %d jobs, want the other one", len(next))
	}
	if n := e.countEvents(t, "ly", l[0].Job.ID, job.EventSucceeded); n != 1 {
		t.Fatalf("%d succeeded events, want 1", n)
	}
	e.complete(t, "ly", queue.Outcome{ID: next[0].Job.ID, Token: next[0].Token, Kind: queue.OutcomeSucceeded})
	for _, j := range jobs {
		wantState(t, e.get(t, j.ID), job.Succeeded)
	}
}

// TestLostReplySafeTwice: the other transitions, each sent again after its
// reply was lost, do what one call does: the fencing token, or the state
// the first call left, makes the second a no-op.
func TestLostReplySafeTwice(t *testing.T) {
	e := newLostReplyEnv(t)
	// complete: a failure counted once (one attempt, one retry scheduled).
	j := e.submit(t, job.Spec{Queue: "ls", Type: "t", MaxAttempts: ptr(3)})[0]
	l := e.claim(t, "ls", 1)[0]
	dropped := e.drop(t, "complete")
	if _, err := e.q.Complete(e.ctx, "ls", []queue.Outcome{{ID: j.ID, Token: l.Token, Kind: queue.OutcomeFailed, Error: "boom"}}); err != nil {
		t.Fatal(err)
	}
	dropped()
	if got := e.get(t, j.ID); got.State != job.Scheduled || got.Attempt != 1 {
		t.Fatalf("after a failure sent twice: state %s attempt %d, want scheduled after attempt 1", got.State, got.Attempt)
	}
	if n := e.countEvents(t, "ls", j.ID, job.EventFailed); n != 1 {
		t.Fatalf("%d failed events, want 1", n)
	}
	// cancel, then retry: each once.
	dropped = e.drop(t, "cancel")
	if _, err := e.q.Cancel(e.ctx, j.ID); err != nil {
		t.Logf("cancel sent again answered %v (the job was cancelled by the first call)", err)
	}
	dropped()
	wantState(t, e.get(t, j.ID), job.Cancelled)
	dropped = e.drop(t, "retry")
	if _, err := e.q.Retry(e.ctx, j.ID); err != nil {
		t.Logf("retry sent again answered %v (the first call queued it)", err)
	}
	dropped()
	wantState(t, e.get(t, j.ID), job.Queued)
	if n := e.listed(t, "ls", j.ID); n != 1 {
		t.Fatalf("retried job listed %d times, want 1", n)
	}
	// release: given back once.
	l = e.claim(t, "ls", 1)[0]
	dropped = e.drop(t, "release")
	if _, err := e.q.Release(e.ctx, "ls", []queue.Lease{l}); err != nil {
		t.Fatal(err)
	}
	dropped()
	if n := e.listed(t, "ls", j.ID); n != 1 {
		t.Fatalf("released job listed %d times, want 1", n)
	}
}

// TestLostReplyMoreScripts: renewals, promotions, reclaims, limits,
// purges and the batch scripts, each sent again after its reply was lost,
// leave what one call leaves.
func TestLostReplyMoreScripts(t *testing.T) {
	e := newLostReplyEnv(t)
	// extend: the lease is held, once renewed.
	e.submit(t, job.Spec{Queue: "lm", Type: "t", MaxAttempts: ptr(1)})
	l := e.claim(t, "lm", 1)[0]
	dropped := e.drop(t, "extend")
	held, err := e.q.Extend(e.ctx, "lm", []queue.Lease{l})
	if err != nil || !held[0] {
		t.Fatalf("a renewal sent again: %v %v, want held", held, err)
	}
	dropped()
	// reclaim: an expired lease counts one attempt, not two (the job has
	// max_attempts 1: dead once, one lease_expired event).
	e.clock.Advance(12 * time.Second)
	dropped = e.drop(t, "reclaim")
	if _, _, err := e.q.Reclaim(e.ctx, "lm", 100); err != nil {
		t.Fatal(err)
	}
	dropped()
	if n := e.countEvents(t, "lm", l.Job.ID, job.EventLeaseExpired); n != 1 {
		t.Fatalf("%d lease_expired events, want 1", n)
	}
	wantState(t, e.get(t, l.Job.ID), job.Dead)
	// purge: the dead job deleted once.
	dropped = e.drop(t, "purge")
	if _, err := e.q.PurgeDead(e.ctx, "lm", []string{l.Job.ID}); err != nil {
		t.Fatal(err)
	}
	dropped()
	if _, err := e.q.Get(e.ctx, l.Job.ID); err == nil {
		t.Fatal("the purged job is still there")
	}
	// promote: a due job listed once.
	d := e.submit(t, job.Spec{Queue: "lm", Type: "t", DelaySeconds: ptr(1.0)})[0]
	e.clock.Advance(2 * time.Second)
	dropped = e.drop(t, "promote")
	if _, _, err := e.q.Promote(e.ctx, "lm", 100); err != nil {
		t.Fatal(err)
	}
	dropped()
	if n := e.listed(t, "lm", d.ID); n != 1 {
		t.Fatalf("promoted job listed %d times, want 1", n)
	}
	// limit: set once, as asked.
	dropped = e.drop(t, "limit")
	if _, _, err := e.q.SetLimit(e.ctx, "lm", queue.Limit{Name: "one", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	dropped()
	ls, err := e.q.Limits(e.ctx, "lm")
	if err != nil || len(ls) != 1 || ls[0].Concurrency != 1 {
		t.Fatalf("limits after a set sent again: %+v %v", ls, err)
	}
	// batchadd and batchsettle: a batch of one member created, its end
	// relayed, both with lost replies; the member counts once, the
	// callback fires once.
	b := queue.BatchSpec{ID: "lrb", Jobs: []*job.Job{e.build(t, job.Spec{Queue: "lb", Type: "t"})},
		OnComplete: e.build(t, job.Spec{Queue: "lcb", Type: "done"})}
	dropped = e.drop(t, "batchadd")
	if _, _, err := e.q.CreateBatch(e.ctx, b); err != nil {
		t.Logf("create sent again answered %v", err)
	}
	dropped()
	m := e.claim(t, "lb", 10)
	if len(m) != 1 {
		t.Fatalf("the batch's member listed %d times", len(m))
	}
	e.complete(t, "lb", queue.Outcome{ID: m[0].Job.ID, Token: m[0].Token, Kind: queue.OutcomeSucceeded})
	dropped = e.drop(t, "batchsettle")
	if _, err := e.q.RelayBatchEnds(e.ctx, "lb", 100); err != nil {
		t.Fatal(err)
	}
	dropped()
	if _, err := e.q.FireBatchCallbacks(e.ctx, 100); err != nil {
		t.Fatal(err)
	}
	info, err := e.q.Batch(e.ctx, "lrb")
	if err != nil || info.Total != 1 || info.Counts.Succeeded != 1 || info.OnComplete.State != "fired" {
		t.Fatalf("batch after lost replies: %+v %v", info, err)
	}
	if cb := e.claim(t, "lcb", 10); len(cb) != 1 {
		t.Fatalf("the callback was submitted %d times", len(cb))
	}
}

// A call that shares only some job ids with an earlier one (two outbox
// relays over the same rows, each job with its idempotency key) is no
// replay: the jobs that exist are duplicates, the others are written.
func TestSubmitOverlappingAnEarlierCall(t *testing.T) {
	e := newEnv(t)
	a := e.build(t, job.Spec{Queue: "ov", Type: "t", IdempotencyKey: "row-a"})
	if _, err := e.q.Submit(e.ctx, []*job.Job{a}); err != nil {
		t.Fatal(err)
	}
	a2 := *a
	b := e.build(t, job.Spec{Queue: "ov", Type: "t", IdempotencyKey: "row-b"})
	res, err := e.q.Submit(e.ctx, []*job.Job{&a2, b})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("overlapping submit: duplicate %v %v, want true false", res[0].Duplicate, res[1].Duplicate)
	}
	wantState(t, e.get(t, b.ID), job.Queued)
	if n := len(e.claim(t, "ov", 10)); n != 2 {
		t.Fatalf("%d jobs queued, want 2 (each once)", n)
	}
}

// TestLostReplySignal: a signal without an idempotency key whose reply was
// lost, sent again, is answered as delivered (not refused as another
// sender's signal of that name), and delivered once.
func TestLostReplySignal(t *testing.T) {
	e := newLostReplyEnv(t)
	jobs := e.submit(t, job.Spec{Queue: "lr", Type: "t"})
	dropped := e.drop(t, "signal")
	st, id, err := e.q.SendSignal(e.ctx, queue.Signal{Queue: "lr", ID: jobs[0].ID, Name: "go", Value: []byte(`1`)})
	dropped()
	if err != nil || st != queue.SignalDelivered || id != jobs[0].ID {
		t.Fatalf("signal sent again after a lost reply: %v %s %v, want delivered", st, id, err)
	}
	if n := e.countEvents(t, "lr", jobs[0].ID, job.EventSignal); n != 1 {
		t.Fatalf("%d signal events, want 1", n)
	}
	// Another sender's signal of the name is still refused.
	if st, _, _ := e.q.SendSignal(e.ctx, queue.Signal{Queue: "lr", ID: jobs[0].ID, Name: "go"}); st != queue.SignalConflict {
		t.Fatalf("a second signal: %v, want conflict", st)
	}
	// By key, to no job yet: pending, also when sent again.
	dropped = e.drop(t, "signal")
	if st, _, err := e.q.SendSignal(e.ctx, queue.Signal{Queue: "lr", Key: "k", Name: "go"}); err != nil || st != queue.SignalPending {
		t.Fatalf("signal by key sent again: %v %v, want pending", st, err)
	}
	dropped()
}

// Log lines whose reply was lost are sent again and kept once.
func TestLostReplyLogs(t *testing.T) {
	e := newLostReplyEnv(t)
	jobs := e.submit(t, job.Spec{Queue: "lr", Type: "t"})
	l, err := e.q.Claim(e.ctx, "lr", 1, "w1")
	if err != nil || len(l) != 1 {
		t.Fatalf("claim: %v %v", l, err)
	}
	dropped := e.drop(t, "log")
	first, err := e.q.AppendLogs(e.ctx, "lr", l[0], []queue.LogEntry{{Level: "info", Message: "a"}, {Level: "info", Message: "b"}})
	dropped()
	if err != nil || first != 1 {
		t.Fatalf("log lines sent again after a lost reply: first %d, %v; want 1", first, err)
	}
	lines, _, err := e.q.Logs(e.ctx, "lr", jobs[0].ID, 0, 100)
	if err != nil || len(lines) != 2 {
		t.Fatalf("%d lines kept (%v), want 2", len(lines), err)
	}
	if n := e.countEvents(t, "lr", jobs[0].ID, job.EventLog); n != 1 {
		t.Fatalf("%d log events, want 1", n)
	}
	if first, err := e.q.AppendLogs(e.ctx, "lr", l[0], []queue.LogEntry{{Level: "info", Message: "c"}}); err != nil || first != 3 {
		t.Fatalf("the next call: first %d, %v; want 3", first, err)
	}
}
