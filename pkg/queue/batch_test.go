package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// newBatch creates batch id of n members spread over queues, with the
// callbacks given (in queue "cb").
func (e *env) newBatch(t *testing.T, id string, n int, queues []string, onSuccess, onComplete, open bool) []*job.Job {
	t.Helper()
	b := queue.BatchSpec{ID: id, Open: open}
	for i := range n {
		b.Jobs = append(b.Jobs, e.build(t, job.Spec{Type: "member", Queue: queues[i%len(queues)], Payload: []byte(`{"i":1}`)}))
	}
	if onSuccess {
		b.OnSuccess = e.build(t, job.Spec{Type: "all-good", Queue: "cb", Payload: []byte(`{"to":"ops"}`)})
	}
	if onComplete {
		b.OnComplete = e.build(t, job.Spec{Type: "all-done", Queue: "cb"})
	}
	info, subs, err := e.q.CreateBatch(e.ctx, b)
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	if info.Total != n || info.Sealed == open || len(subs) != n {
		t.Fatalf("batch = %+v, %d submitted", info, len(subs))
	}
	for _, s := range subs {
		if s.Job.Batch != id {
			t.Fatalf("member %+v has no batch", s.Job)
		}
	}
	return b.Jobs
}

// runAll claims every job of q and reports kind for those in fail, success
// for the others.
func (e *env) runAll(t *testing.T, q string, fail map[string]queue.OutcomeKind) {
	t.Helper()
	for {
		ls := e.claim(t, q, 1000)
		if len(ls) == 0 {
			return
		}
		outs := make([]queue.Outcome, len(ls))
		for i, l := range ls {
			kind := queue.OutcomeSucceeded
			if k, ok := fail[l.Job.ID]; ok {
				kind = k
			}
			outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: kind, WorkerID: "w1", Error: "boom", Result: []byte(`{"r":"` + l.Job.ID + `"}`)}
		}
		e.complete(t, q, outs...)
	}
}

// pollBatches is one poller pass's batch work: relay every queue's ends,
// then fire the callbacks due.
func (e *env) pollBatches(t *testing.T, queues ...string) int {
	t.Helper()
	for _, q := range queues {
		if _, err := e.q.RelayBatchEnds(e.ctx, q, 1000); err != nil {
			t.Fatalf("relay %s: %v", q, err)
		}
	}
	n, err := e.q.FireBatchCallbacks(e.ctx, 100)
	if err != nil {
		t.Fatalf("fire: %v", err)
	}
	return n
}

func (e *env) batch(t *testing.T, id string) *queue.BatchInfo {
	t.Helper()
	info, err := e.q.Batch(e.ctx, id)
	if err != nil {
		t.Fatalf("batch %s: %v", id, err)
	}
	return info
}

// callbacks are the jobs of queue cb by type.
func (e *env) callbacks(t *testing.T) map[string][]queue.Lease {
	t.Helper()
	out := map[string][]queue.Lease{}
	for _, l := range e.claim(t, "cb", 100) {
		out[l.Job.Type] = append(out[l.Job.Type], l)
	}
	return out
}

// TestBatchCallbacksFireOnceAllSucceeded: members in two queues; the
// callbacks wait for the last member, then fire once each, carrying the
// batch's id, and the members' results read back in order.
func TestBatchCallbacksFireOnceAllSucceeded(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "b1", 5, []string{"qa", "qb"}, true, true, false)
	e.runAll(t, "qa", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 0 {
		t.Fatalf("fired %d callbacks with qb's members pending", n)
	}
	info := e.batch(t, "b1")
	if info.Counts.Succeeded != 3 || info.Counts.Pending != 2 || info.OnSuccess.State != "pending" {
		t.Fatalf("after qa: %+v %+v", info.Counts, info.OnSuccess)
	}
	e.runAll(t, "qb", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 2 {
		t.Fatalf("fired %d callbacks, want 2", n)
	}
	if n := e.pollBatches(t, "qa", "qb"); n != 0 {
		t.Fatalf("fired %d callbacks again", n)
	}
	info = e.batch(t, "b1")
	if info.Counts != (queue.BatchCounts{Succeeded: 5}) || info.OnSuccess.State != "fired" || info.OnComplete.State != "fired" {
		t.Fatalf("batch = %+v %+v %+v", info.Counts, info.OnSuccess, info.OnComplete)
	}
	cbs := e.callbacks(t)
	if len(cbs["all-good"]) != 1 || len(cbs["all-done"]) != 1 || len(cbs) != 2 {
		t.Fatalf("callbacks = %v", cbs)
	}
	good := e.get(t, cbs["all-good"][0].Job.ID)
	if good.ID != info.OnSuccess.JobID || good.Batch != "b1" || good.IdempotencyKey != "batch:b1:on_success" ||
		string(good.Payload) != `{"batch":"b1","to":"ops"}` {
		t.Fatalf("on_success job = %+v", good)
	}
	// The callback's own end is not a member's: counts stay.
	e.complete(t, "cb", queue.Outcome{ID: good.ID, Token: cbs["all-good"][0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w"})
	e.pollBatches(t, "cb")
	if got := e.batch(t, "b1"); got.Total != 5 || got.Counts != (queue.BatchCounts{Succeeded: 5}) {
		t.Fatalf("after the callback ended: %+v", got)
	}
	// Fan-in: results in the order the members were added, paged.
	var got []queue.BatchResult
	cursor := ""
	for {
		page, next, err := e.q.BatchResults(e.ctx, "b1", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != 5 {
		t.Fatalf("%d results", len(got))
	}
	for i, r := range got {
		if r.ID != members[i].ID || r.State != job.Succeeded || string(r.Result) != `{"r":"`+r.ID+`"}` {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
}

// TestBatchMemberDiesThenRetried: a dead member keeps on_success from
// firing while on_complete fires once; RetryBatch runs it again, and its
// success fires on_success, once.
func TestBatchMemberDiesThenRetried(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "b2", 4, []string{"qa", "qb"}, true, true, false)
	e.runAll(t, "qa", map[string]queue.OutcomeKind{members[0].ID: queue.OutcomeDead})
	e.runAll(t, "qb", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d, want on_complete alone", n)
	}
	info := e.batch(t, "b2")
	if info.Counts != (queue.BatchCounts{Succeeded: 3, Dead: 1}) || info.OnSuccess.State != "pending" || info.OnComplete.State != "fired" {
		t.Fatalf("batch = %+v %+v %+v", info.Counts, info.OnSuccess, info.OnComplete)
	}
	if cbs := e.callbacks(t); len(cbs["all-done"]) != 1 || len(cbs["all-good"]) != 0 {
		t.Fatalf("callbacks = %v", cbs)
	}
	n, err := e.q.RetryBatch(e.ctx, "b2")
	if err != nil || n != 1 {
		t.Fatalf("retry = %d %v", n, err)
	}
	if got := e.get(t, members[0].ID); got.State != job.Queued {
		t.Fatalf("retried member = %s", got.State)
	}
	e.runAll(t, "qa", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d after the retry, want on_success", n)
	}
	info = e.batch(t, "b2")
	if info.Counts != (queue.BatchCounts{Succeeded: 4}) || info.OnSuccess.State != "fired" {
		t.Fatalf("batch = %+v %+v", info.Counts, info.OnSuccess)
	}
	if cbs := e.callbacks(t); len(cbs["all-good"]) != 1 || len(cbs["all-done"]) != 0 {
		t.Fatalf("callbacks = %v", cbs)
	}
	if n := e.pollBatches(t, "qa", "qb"); n != 0 {
		t.Fatalf("fired %d again", n)
	}
}

// TestBatchAddWhileOpen: an open batch whose members all ended fires
// nothing until it is sealed; members added meanwhile count; a sealed
// batch takes no more.
func TestBatchAddWhileOpen(t *testing.T) {
	e := newEnv(t)
	e.newBatch(t, "b3", 2, []string{"qa"}, false, true, true)
	e.runAll(t, "qa", nil)
	if n := e.pollBatches(t, "qa"); n != 0 {
		t.Fatalf("an open batch fired %d", n)
	}
	more := []*job.Job{e.build(t, job.Spec{Type: "member", Queue: "qb"})}
	info, subs, err := e.q.AddToBatch(e.ctx, "b3", more, false)
	if err != nil || info.Total != 3 || info.Sealed || subs[0].Job.Batch != "b3" {
		t.Fatalf("add = %+v %v", info, err)
	}
	if info, _, err = e.q.AddToBatch(e.ctx, "b3", nil, true); err != nil || !info.Sealed || info.Counts.Pending != 1 {
		t.Fatalf("seal = %+v %v", info, err)
	}
	if n := e.pollBatches(t, "qa", "qb"); n != 0 {
		t.Fatalf("fired %d with a member pending", n)
	}
	e.runAll(t, "qb", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d, want 1", n)
	}
	if _, _, err := e.q.AddToBatch(e.ctx, "b3", []*job.Job{e.build(t, job.Spec{Type: "member", Queue: "qb"})}, false); !errors.Is(err, queue.ErrBatchSealed) {
		t.Fatalf("add to a sealed batch: %v", err)
	}
	if _, _, err := e.q.AddToBatch(e.ctx, "nope", nil, true); !errors.Is(err, queue.ErrBatchNotFound) {
		t.Fatalf("add to a missing batch: %v", err)
	}
	if _, _, err := e.q.CreateBatch(e.ctx, queue.BatchSpec{ID: "b3", Open: true}); !errors.Is(err, queue.ErrBatchExists) {
		t.Fatalf("create again: %v", err)
	}
	if got := e.batch(t, "b3"); got.Total != 3 {
		t.Fatalf("refused calls changed the batch: %+v", got)
	}
}

// TestBatchCancelWhole: cancelling a batch cancels its members that have
// not ended (queued, scheduled, active), seals it, and on_complete fires
// once; on_success never.
func TestBatchCancelWhole(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "b4", 4, []string{"qa", "qb"}, true, true, false)
	// One member of qa runs to success, one is active when cancelled.
	ls := e.claim(t, "qa", 1)
	e.complete(t, "qa", queue.Outcome{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w"})
	e.claim(t, "qa", 1)
	n, err := e.q.CancelBatch(e.ctx, "b4")
	if err != nil || n != 3 {
		t.Fatalf("cancel = %d %v", n, err)
	}
	for _, m := range members {
		if st := e.get(t, m.ID).State; st != job.Cancelled && st != job.Succeeded {
			t.Fatalf("member %s is %s", m.ID, st)
		}
	}
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d, want on_complete", n)
	}
	info := e.batch(t, "b4")
	if info.Counts != (queue.BatchCounts{Succeeded: 1, Cancelled: 3}) || !info.Sealed || info.Cancelled == nil ||
		info.OnSuccess.State != "pending" || info.OnComplete.State != "fired" {
		t.Fatalf("batch = %+v %+v %+v", info, info.OnSuccess, info.OnComplete)
	}
	if cbs := e.callbacks(t); len(cbs["all-done"]) != 1 || len(cbs["all-good"]) != 0 {
		t.Fatalf("callbacks = %v", cbs)
	}
}

// TestBatchRelayRepeatedAfterCrash: a relay that counted the ends but
// died before trimming them runs again over the same entries (put back
// here), and a second poller runs it at the same time: nothing counts
// twice, and the callback fires once.
func TestBatchRelayRepeatedAfterCrash(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "b5", 6, []string{"qa"}, false, true, false)
	e.runAll(t, "qa", map[string]queue.OutcomeKind{members[1].ID: queue.OutcomeDead, members[2].ID: queue.OutcomeCancelled})
	rdb := e.srv.Client()
	key := "sundial:{qa}:bends"
	entries, err := rdb.LRange(e.ctx, key, 0, -1).Result()
	if err != nil || len(entries) != 6 {
		t.Fatalf("entries = %v %v", entries, err)
	}
	if _, err := e.q.RelayBatchEnds(e.ctx, "qa", 1000); err != nil {
		t.Fatal(err)
	}
	// The crash: the entries are back as if never trimmed.
	for _, en := range entries {
		rdb.RPush(e.ctx, key, en)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := e.q.RelayBatchEnds(context.Background(), "qa", 1000); done <- err }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := rdb.LLen(e.ctx, key).Result(); n != 0 {
		t.Fatalf("%d entries left", n)
	}
	info := e.batch(t, "b5")
	if info.Counts != (queue.BatchCounts{Succeeded: 4, Dead: 1, Cancelled: 1}) {
		t.Fatalf("counts = %+v", info.Counts)
	}
	if n := e.pollBatches(t, "qa"); n != 1 {
		t.Fatalf("fired %d", n)
	}
	if n := e.pollBatches(t, "qa"); n != 0 {
		t.Fatalf("fired %d again", n)
	}
	// A crash between the callback's submit and its marking: due again,
	// the idempotency key answers the same job.
	first := e.batch(t, "b5").OnComplete.JobID
	// (The batch leaves the open set only after the marking.)
	rdb.HSet(e.ctx, "sundial:{batch.b5}:meta", "complete", "due")
	rdb.SAdd(e.ctx, "sundial:batches:open", "b5")
	if n := e.pollBatches(t, "qa"); n != 1 {
		t.Fatalf("fired %d after the simulated crash", n)
	}
	if again := e.batch(t, "b5").OnComplete.JobID; again != first {
		t.Fatalf("callback submitted twice: %s then %s", first, again)
	}
	if cbs := e.callbacks(t); len(cbs["all-done"]) != 1 {
		t.Fatalf("callbacks = %v", cbs)
	}
}

// TestBatchTenThousandMembers: a batch of 10,000 members over two queues
// (more than MaxDependencies and BatchChunk) and one callback.
func TestBatchTenThousandMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	e := newEnv(t)
	start := time.Now()
	e.newBatch(t, "big", 10_000, []string{"qa", "qb"}, true, true, false)
	created := time.Since(start)
	e.runAll(t, "qa", nil)
	e.runAll(t, "qb", nil)
	ran := time.Since(start)
	fired := 0
	for range 20 { // 10 entries of 1000 per queue at most
		fired += e.pollBatches(t, "qa", "qb")
		if fired == 2 {
			break
		}
	}
	if fired != 2 {
		t.Fatalf("fired %d", fired)
	}
	info := e.batch(t, "big")
	if info.Counts != (queue.BatchCounts{Succeeded: 10_000}) {
		t.Fatalf("counts = %+v", info.Counts)
	}
	t.Logf("10,000 members: created in %v, run in %v, settled and fired in %v (total %v)",
		created.Round(time.Millisecond), (ran - created).Round(time.Millisecond),
		time.Since(start.Add(ran)).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestBatchSurvivesRedisRestart: Redis killed (-9) and restarted from its
// AOF between the relay of some ends and the rest, and again after the
// callback fired: the counts come back as they were, the callback fires
// once.
func TestBatchSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	srv := queuetest.StartWith(t, "--appendfsync", "always")
	clk := &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	q := queue.New(srv.Client(), queue.Options{Now: clk.Now, LeaseClock: clk.Now, LeaseTTL: 11 * time.Second, LeaseGrace: time.Second})
	queue.SetWriteFormat(q, queue.WriteFormat)
	e := &env{srv: srv, q: q, clock: clk, ctx: context.Background()}
	e.newBatch(t, "aof", 20, []string{"qa", "qb"}, false, true, false)
	e.runAll(t, "qa", nil)
	e.pollBatches(t, "qa", "qb")
	srv.Kill()
	srv.Restart()
	if info := e.batch(t, "aof"); info.Counts != (queue.BatchCounts{Succeeded: 10, Pending: 10}) {
		t.Fatalf("after the restart: %+v", info.Counts)
	}
	// qb's jobs were never claimed, but its fence came with its first job:
	// the restart quarantine holds its claims for a lease TTL.
	if l := e.claim(t, "qb", 1); len(l) != 0 {
		t.Fatalf("claimed %d right after the restart", len(l))
	}
	clk.Advance(12 * time.Second)
	e.runAll(t, "qb", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d", n)
	}
	srv.Kill()
	srv.Restart()
	if n := e.pollBatches(t, "qa", "qb"); n != 0 {
		t.Fatalf("fired %d again after a restart", n)
	}
	if info := e.batch(t, "aof"); info.Counts != (queue.BatchCounts{Succeeded: 20}) || info.OnComplete.State != "fired" {
		t.Fatalf("batch %+v %+v", info.Counts, info.OnComplete)
	}
	if l := e.claim(t, "cb", 1); len(l) != 0 { // the restart quarantine
		t.Fatalf("claimed %d callbacks right after the restart", len(l))
	}
	clk.Advance(12 * time.Second)
	if cbs := e.callbacks(t); len(cbs["all-done"]) != 1 {
		t.Fatalf("callbacks %v", cbs)
	}
}

// TestBatchMemberRetriedAlone: a member retried on its own (not through
// RetryBatch), after the batch had nothing left to fire and left the open
// set, still fires on_success once it succeeds.
func TestBatchMemberRetriedAlone(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "b6", 2, []string{"qa"}, true, false, false)
	e.runAll(t, "qa", map[string]queue.OutcomeKind{members[0].ID: queue.OutcomeDead})
	if n := e.pollBatches(t, "qa"); n != 0 {
		t.Fatalf("fired %d", n)
	}
	if open, _ := e.srv.Client().SIsMember(e.ctx, "sundial:batches:open", "b6").Result(); open {
		t.Fatal("a batch with nothing left to fire stays open")
	}
	if _, err := e.q.Retry(e.ctx, members[0].ID); err != nil {
		t.Fatal(err)
	}
	e.runAll(t, "qa", nil)
	if n := e.pollBatches(t, "qa"); n != 1 {
		t.Fatalf("fired %d after the member's retry", n)
	}
	if info := e.batch(t, "b6"); info.Counts != (queue.BatchCounts{Succeeded: 2}) || info.OnSuccess.State != "fired" {
		t.Fatalf("batch %+v %+v", info.Counts, info.OnSuccess)
	}
}

// TestBatchRelayFailsPerBatch: a batch whose keys cannot be written (here
// its meta is of the wrong type, as a failing shard would be) keeps its
// ends in the queue's list for the next pass, and the relay error says
// so, while another batch's ends in the same list are relayed.
func TestBatchRelayFailsPerBatch(t *testing.T) {
	e := newEnv(t)
	e.newBatch(t, "ok", 2, []string{"qa"}, false, true, false)
	e.newBatch(t, "broken", 2, []string{"qa"}, false, true, false)
	rdb := e.srv.Client()
	rdb.Del(e.ctx, "sundial:{batch.broken}:meta")
	rdb.Set(e.ctx, "sundial:{batch.broken}:meta", "x", 0)
	e.runAll(t, "qa", nil)
	n, err := e.q.RelayBatchEnds(e.ctx, "qa", 1000)
	if err == nil || n != 2 {
		t.Fatalf("relay = %d %v, want 2 relayed and an error", n, err)
	}
	left, _ := rdb.LRange(e.ctx, "sundial:{qa}:bends", 0, -1).Result()
	if len(left) != 2 || !strings.HasPrefix(left[0], "broken\t") || !strings.HasPrefix(left[1], "broken\t") {
		t.Fatalf("left %q", left)
	}
	if info := e.batch(t, "ok"); info.Counts != (queue.BatchCounts{Succeeded: 2}) {
		t.Fatalf("ok batch %+v", info.Counts)
	}
}

// TestBatchRecount: ends the relay never brought (the queue's list of
// ends lost while the jobs kept their end, as after a failover that lost
// the batch slot's last writes, or a member ended by a release without
// batches) leave a batch waiting until RecountBatch counts them from the
// members' jobs: each once, whether or not the relay brings them later,
// and a member's later real end still replaces its recounted one.
func TestBatchRecount(t *testing.T) {
	e := newEnv(t)
	rdb := e.srv.Client()
	members := e.newBatch(t, "b8", 6, []string{"qa", "qb"}, true, true, false)
	// members[0] dies; members[1] ends without reporting (no batch_ends):
	// a worker of a release without batches.
	e.runAll(t, "qa", map[string]queue.OutcomeKind{members[0].ID: queue.OutcomeDead})
	e.runAll(t, "qb", nil)
	lost := map[string][]string{}
	for _, q := range []string{"qa", "qb"} {
		key := "sundial:{" + q + "}:bends"
		ends, err := rdb.LRange(e.ctx, key, 0, -1).Result()
		if err != nil || len(ends) != 3 {
			t.Fatalf("%s ends %v %v", q, ends, err)
		}
		lost[q] = ends
		rdb.Del(e.ctx, key)
	}
	if err := rdb.HDel(e.ctx, queue.JobKey("qb", members[1].ID), "batch_ends").Err(); err != nil {
		t.Fatal(err)
	}
	if n := e.pollBatches(t, "qa", "qb"); n != 0 {
		t.Fatalf("fired %d with every end lost", n)
	}
	if info := e.batch(t, "b8"); info.Counts.Pending != 6 {
		t.Fatalf("counts before the recount %+v", info.Counts)
	}

	for i, want := range []int{6, 0} { // a second recount finds nothing new
		n, err := e.q.RecountBatch(e.ctx, "b8")
		if err != nil || n != want {
			t.Fatalf("recount %d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	if info := e.batch(t, "b8"); info.Counts != (queue.BatchCounts{Succeeded: 5, Dead: 1}) || info.OnComplete.State != "due" {
		t.Fatalf("after the recount %+v %+v", info.Counts, info.OnComplete)
	}
	// The lost ends turn up after all: nothing counts twice.
	for q, ends := range lost {
		rdb.RPush(e.ctx, "sundial:{"+q+"}:bends", ends)
	}
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d, want on_complete alone", n)
	}
	if info := e.batch(t, "b8"); info.Counts != (queue.BatchCounts{Succeeded: 5, Dead: 1}) {
		t.Fatalf("after the late relay %+v", info.Counts)
	}
	// The dead member retried and succeeding replaces its recounted end.
	if _, err := e.q.Retry(e.ctx, members[0].ID); err != nil {
		t.Fatal(err)
	}
	e.runAll(t, "qa", nil)
	if n := e.pollBatches(t, "qa", "qb"); n != 1 {
		t.Fatalf("fired %d after the retry, want on_success", n)
	}
	if info := e.batch(t, "b8"); info.Counts != (queue.BatchCounts{Succeeded: 6}) || info.OnSuccess.State != "fired" {
		t.Fatalf("after the retry %+v %+v", info.Counts, info.OnSuccess)
	}
	if cbs := e.callbacks(t); len(cbs["all-good"]) != 1 || len(cbs["all-done"]) != 1 {
		t.Fatalf("callbacks %v", cbs)
	}
}

// TestBatchSettledThenRolledBack: a batch whose slot comes back with less
// than it had when it settled (its counts, its callbacks' marks, its
// expiry gone; the open set, on another master, kept the removal) is
// found by CheckSettledBatches, put back in the open set, recounted, and
// its callbacks' second submits are duplicates: each ran once.
func TestBatchSettledThenRolledBack(t *testing.T) {
	e := newEnv(t)
	rdb := e.srv.Client()
	e.newBatch(t, "b9", 4, []string{"qa"}, true, true, false)
	e.runAll(t, "qa", nil)
	if n := e.pollBatches(t, "qa"); n != 2 {
		t.Fatalf("fired %d", n)
	}
	for i, want := range []int{0, 0} { // settled, then checked: nothing to put back
		if back, err := e.q.CheckSettledBatches(e.ctx, 10); err != nil || len(back) != want {
			t.Fatalf("check %d: %v %v", i, back, err)
		}
	}
	cbs := e.callbacks(t)
	if len(cbs["all-good"]) != 1 || len(cbs["all-done"]) != 1 {
		t.Fatalf("callbacks %v", cbs)
	}
	// The batch's slot as it was before its members ended.
	meta := "sundial:{batch.b9}:meta"
	rdb.HSet(e.ctx, meta, "done", 0, "n_succeeded", 0, "success", "pending", "complete", "pending")
	rdb.HDel(e.ctx, meta, "success_job", "complete_job")
	rdb.Del(e.ctx, "sundial:{batch.b9}:done")
	for _, k := range []string{meta, "sundial:{batch.b9}:members", "sundial:{batch.b9}:queues"} {
		rdb.Persist(e.ctx, k)
	}
	if back, err := e.q.CheckSettledBatches(e.ctx, 10); err != nil || len(back) != 1 || back[0] != "b9" {
		t.Fatalf("check after the rollback: %v %v", back, err)
	}
	if n, err := e.q.RecountBatch(e.ctx, "b9"); err != nil || n != 4 {
		t.Fatalf("recount %d %v", n, err)
	}
	if n := e.pollBatches(t, "qa"); n != 2 {
		t.Fatalf("fired %d after the recount", n)
	}
	info := e.batch(t, "b9")
	if info.Counts != (queue.BatchCounts{Succeeded: 4}) || info.OnSuccess.State != "fired" || info.OnComplete.State != "fired" {
		t.Fatalf("after the repair %+v %+v %+v", info.Counts, info.OnSuccess, info.OnComplete)
	}
	if open, _ := rdb.SIsMember(e.ctx, "sundial:batches:open", "b9").Result(); open {
		t.Fatal("the repaired batch stays open")
	}
	if ttl := rdb.PTTL(e.ctx, meta).Val(); ttl <= 0 {
		t.Fatalf("the repaired batch's keys do not expire: %v", ttl)
	}
	if cbs := e.callbacks(t); len(cbs) != 0 {
		t.Fatalf("callbacks submitted again: %v", cbs)
	}
}

// On a Cluster a member's queue lives on another master than its batch,
// and its slot can roll back alone (a failover to a replica that lagged):
// the member's end, already counted by its batch, is forgotten with the
// job's count of ends, and the member runs again. Its new end must replace
// the old one in the batch's counts: a member that succeeded, was rolled
// back, and then ended dead must count as dead (on_success must not fire).
func TestBatchMemberSlotRolledBack(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "rb", 2, []string{"rbq", "rbq2"}, true, true, false)
	rollback := snapshot(t, e.q.Redis(), "*{rbq}*")
	e.runAll(t, "rbq", nil) // succeeds
	if _, err := e.q.RelayBatchEnds(e.ctx, "rbq", 1000); err != nil {
		t.Fatal(err)
	}
	info, err := e.q.Batch(e.ctx, "rb")
	if err != nil || info.Counts.Succeeded != 1 || info.Counts.Pending != 1 {
		t.Fatalf("after the first end: %+v %v", info, err)
	}
	rollback() // the member's slot, to before its end (the batch's does not roll back)
	e.clock.Advance(time.Second)
	e.runAll(t, "rbq", map[string]queue.OutcomeKind{members[0].ID: queue.OutcomeDead})
	e.runAll(t, "rbq2", nil)
	n := e.pollBatches(t, "rbq", "rbq2")
	info, err = e.q.Batch(e.ctx, "rb")
	if n != 1 {
		t.Fatalf("fired %d callbacks, want on_complete alone (counts %+v)", n, info.Counts)
	}
	if err != nil {
		t.Fatal(err)
	}
	if info.Counts.Dead != 1 || info.Counts.Succeeded != 1 {
		t.Fatalf("after the re-run ended dead the batch counts %+v: the member's new end was ignored", info.Counts)
	}
	if info.OnSuccess.State != "pending" || info.OnComplete.State != "fired" {
		t.Fatalf("on_success is %s (a member is dead), on_complete %s", info.OnSuccess.State, info.OnComplete.State)
	}
}
