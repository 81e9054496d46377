package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestBatchSurvivesRedisKill: a batch of 300 members over three queues,
// with on_success and on_complete into a fourth, runs with a poller and a
// worker process while Redis is killed (-9) and restarted from its
// append-only file once a third of the members succeeded, with members
// running and failed ones waiting for their retry. Every member ends
// succeeded exactly once (one succeeded event), the batch counts all 300
// as succeeded, and each callback is submitted once and runs once (its
// queue received two jobs, one started and one succeeded event each).
//
// What catches what: a member lost with Redis (a fresh, empty Redis
// instead of the AOF: the batch itself is lost) fails the wait on the
// batch at once (ErrBatchNotFound), a member lost alone fails it by its
// deadline (never counted) and the per-member Get; a member run to success
// twice, or an end counted twice, fails the event counts or the batch's
// counts (pending, or succeeded ≠ 300); a callback submitted twice (its
// idempotency key or its "fired" mark lost) fails the callbacks' queue's
// submitted total and its event counts, checked once the batch left the
// open set, after which the poller fires nothing more.
func TestBatchSurvivesRedisKill(t *testing.T) {
	t.Parallel()
	start := time.Now()
	memberQueues := []string{"bta", "btb", "btc"}
	const cbq = "btcb"
	srv, q := durableStack(t, "bta,btb,btc,"+cbq)
	rdb := srv.Client()
	ctx := context.Background()

	// Every fourth member fails its first attempt (sundial.fail) and is
	// retried up to 2 s later: retries cross the kill. A lease expired by
	// the kill is one more attempt, hence max_attempts 5.
	const n, batchID = 300, "e2e-batch"
	build := func(s job.Spec) *job.Job {
		t.Helper()
		j, err := s.Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	var members, failing []*job.Job
	inQueue := map[string]map[string]bool{}
	for i := range n {
		s := job.Spec{Queue: memberQueues[i%3], Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":30}`),
			MaxAttempts: ptr(5), Backoff: &job.Backoff{BaseSeconds: 2, MaxSeconds: 2}}
		if i%4 == 0 {
			s.Type, s.Payload = "sundial.fail", json.RawMessage(`{"times":1}`)
		}
		j := build(s)
		members = append(members, j)
		if i%4 == 0 {
			failing = append(failing, j)
		}
		if inQueue[s.Queue] == nil {
			inQueue[s.Queue] = map[string]bool{}
		}
		inQueue[s.Queue][j.ID] = true
	}
	callback := func(which string) *job.Job {
		return build(job.Spec{Queue: cbq, Type: "sundial.echo", Payload: json.RawMessage(fmt.Sprintf(`{"cb":%q}`, which))})
	}
	if _, _, err := q.CreateBatch(ctx, queue.BatchSpec{ID: batchID, Jobs: members,
		OnSuccess: callback("success"), OnComplete: callback("complete")}); err != nil {
		t.Fatal(err)
	}

	submitted := time.Now()

	// Mid-way: once a third of the members succeeded (as their queues
	// count them, not yet necessarily the batch), while some run.
	var active int64
	queuetest.Eventually(t, 60*time.Second, "a third of the members succeeded, others running", func() bool {
		var done int64
		active = 0
		for _, name := range memberQueues {
			st, err := q.Stats(ctx, name)
			if err != nil || len(st) != 1 {
				return false
			}
			done += st[0].SucceededTotal
			active += st[0].Active
		}
		return done >= n/3 && active > 0
	})
	retrying := 0 // members that failed once and wait for their retry
	for _, j := range failing {
		if got, err := q.Get(ctx, j.ID); err == nil && got.Attempt >= 1 && !got.State.Final() && got.State != job.Active {
			retrying++
		}
	}
	info, err := q.Batch(ctx, batchID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Counts.Pending == 0 || retrying == 0 {
		t.Fatalf("before the kill: batch %+v, %d members waiting for a retry; the batch ran too fast to test", info.Counts, retrying)
	}
	pendingAtKill := info.Counts.Pending
	srv.Restart()
	killedAt := time.Since(submitted)

	// The batch is the one place that counts every member: wait until it
	// counted all and both callbacks fired. A lost batch fails at once.
	var lastErr error
	queuetest.Eventually(t, 120*time.Second, "the batch counted every member and fired both callbacks", func() bool {
		info, lastErr = q.Batch(ctx, batchID)
		if errors.Is(lastErr, queue.ErrBatchNotFound) {
			t.Fatalf("batch %s lost after the restart", batchID)
		}
		return lastErr == nil && info.Counts.Pending == 0 &&
			info.OnSuccess != nil && info.OnSuccess.State == "fired" &&
			info.OnComplete != nil && info.OnComplete.State == "fired"
	})
	if info.Total != n || !info.Sealed || info.Counts != (queue.BatchCounts{Succeeded: n}) {
		t.Fatalf("batch after the run: %+v", info)
	}
	// Then the callbacks ran, and the batch left the open set: the poller
	// fires nothing of it any more, so what its queue holds now is final.
	queuetest.Eventually(t, 60*time.Second, "both callbacks ran and the batch settled", func() bool {
		st, err := q.Stats(ctx, cbq)
		if err != nil || len(st) != 1 || st[0].SucceededTotal < 2 {
			return false
		}
		open, err := rdb.SIsMember(ctx, "sundial:batches:open", batchID).Result()
		return err == nil && !open
	})

	// Every member: there, succeeded, with one succeeded event; nothing
	// else ran in the members' queues.
	for _, j := range members {
		got, err := q.Get(ctx, j.ID)
		if err != nil {
			t.Fatalf("member %s lost: %v", j.ID, err)
		}
		if got.State != job.Succeeded || got.Batch != batchID {
			t.Errorf("member %s: state %s, batch %q (%s)", j.ID, got.State, got.Batch, got.LastError)
		}
	}
	failed, expired := 0, 0
	for _, name := range memberQueues {
		counts := eventCounts(t, rdb, name)
		for id := range inQueue[name] {
			c := counts[id]
			if c["succeeded"] != 1 || c["cancelled"] != 0 || c["dead"] != 0 {
				t.Errorf("member %s in %s: events %v", id, name, c)
			}
			failed += c["failed"]
			expired += c["lease_expired"]
		}
		for id := range counts {
			if !inQueue[name][id] {
				t.Errorf("job %s in %s is no member: events %v", id, name, counts[id])
			}
		}
		st, err := q.Stats(ctx, name)
		if err != nil || len(st) != 1 || st[0].SubmittedTotal != int64(len(inQueue[name])) {
			t.Errorf("queue %s: %+v %v; want %d submitted", name, st, err, len(inQueue[name]))
		}
	}
	if failed < len(failing) {
		t.Errorf("%d failed attempts; want at least one per failing member, %d", failed, len(failing))
	}
	listed := 0
	for cursor := ""; ; {
		page, next, err := q.BatchResults(ctx, batchID, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			listed++
			if r.State != job.Succeeded {
				t.Errorf("batch result %+v", r)
			}
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if listed != n {
		t.Errorf("the batch lists %d members, want %d", listed, n)
	}

	// The callbacks: exactly two jobs ever arrived in their queue, the ones
	// the batch names, each started and succeeded once, with the batch's
	// id in their payload.
	st, err := q.Stats(ctx, cbq)
	if err != nil || len(st) != 1 || st[0].SubmittedTotal != 2 || st[0].SucceededTotal != 2 {
		t.Fatalf("callbacks' queue: %+v %v; want 2 submitted, 2 succeeded", st, err)
	}
	cbCounts := eventCounts(t, rdb, cbq)
	if len(cbCounts) != 2 {
		t.Errorf("callbacks' queue events name %d jobs, want 2: %v", len(cbCounts), cbCounts)
	}
	for which, cb := range map[string]*queue.BatchCallback{"success": info.OnSuccess, "complete": info.OnComplete} {
		c := cbCounts[cb.JobID]
		if c["started"] != 1 || c["succeeded"] != 1 || c["failed"]+c["lease_expired"]+c["dead"] != 0 {
			t.Errorf("on_%s %s: events %v", which, cb.JobID, c)
		}
		j, err := q.Get(ctx, cb.JobID)
		if err != nil {
			t.Fatalf("on_%s %s: %v", which, cb.JobID, err)
		}
		var p struct{ CB, Batch string }
		if err := json.Unmarshal(j.Payload, &p); err != nil || p.CB != which || p.Batch != batchID || j.Batch != batchID || j.State != job.Succeeded {
			t.Errorf("on_%s: %+v (payload %s) %v", which, j, j.Payload, err)
		}
	}
	t.Logf("a batch of %d members over 3 queues (%d failing once), Redis killed (-9) %.1fs after the submit with %d members pending (%d running, %d waiting for a retry) and restarted from its AOF: %d failed attempts, %d leases expired, both callbacks once; done %.1fs after the submit (test %.1fs)",
		n, len(failing), killedAt.Seconds(), pendingAtKill, active, retrying, failed, expired, time.Since(submitted).Seconds(), time.Since(start).Seconds())
}
