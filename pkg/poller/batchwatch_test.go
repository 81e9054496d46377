package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// A sealed batch whose members' ends never reach it (the queue's list of
// ends lost) is recounted by a running poller once its count stood still
// for BatchRecountAfter, not before: its callback then fires, and the
// recount is counted in the poller's metric. Then the same batch, settled,
// loses its settling to a rollback of its slot, and is repaired again.
func TestPollerRecountsAStalledBatch(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	build := func(s job.Spec) *job.Job {
		j, err := s.Build(q.Now())
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	b := queue.BatchSpec{ID: "stalled", OnComplete: build(job.Spec{Type: "done", Queue: "cb"})}
	for range 4 {
		b.Jobs = append(b.Jobs, build(job.Spec{Type: "m", Queue: "qa"}))
	}
	if _, _, err := q.CreateBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "qa", 10, "w")
	if err != nil || len(ls) != 4 {
		t.Fatalf("claim %d %v", len(ls), err)
	}
	outs := make([]queue.Outcome, len(ls))
	for i, l := range ls {
		outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, WorkerID: "w"}
	}
	if _, err := q.Complete(ctx, "qa", outs); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, queue.QueueKey("qa", "bends")).Err(); err != nil { // the ends, lost
		t.Fatal(err)
	}

	const after = 2 * time.Second
	p := poller.New(q, poller.Config{BatchRecountAfter: after})
	start := time.Now()
	run(t, p)
	var fired time.Duration
	queuetest.Eventually(t, 30*time.Second, "the batch recounted and its callback fired", func() bool {
		info, err := q.Batch(ctx, "stalled")
		fired = time.Since(start)
		return err == nil && info.OnComplete.State == "fired" && info.Counts == queue.BatchCounts{Succeeded: 4}
	})
	if fired < after {
		t.Errorf("recounted after %s, before the count stood still for %s", fired, after)
	}
	if n := sum(t, p.Collectors()[3]); n != 4 {
		t.Errorf("recounted ends counted %v, want 4", n)
	}

	// Once settled, its slot comes back with less (as before its members
	// ended, no expiry), while the open set kept the removal: the poller
	// finds it among the settled batches and repairs it again, and the
	// callback's second submit is a duplicate.
	queuetest.Eventually(t, 10*time.Second, "the batch settled", func() bool {
		open, err := rdb.SIsMember(ctx, "sundial:batches:open", "stalled").Result()
		return err == nil && !open
	})
	meta := "sundial:{batch.stalled}:meta"
	rdb.HSet(ctx, meta, "done", 0, "n_succeeded", 0, "complete", "pending")
	rdb.HDel(ctx, meta, "complete_job")
	rdb.Del(ctx, "sundial:{batch.stalled}:done")
	rdb.Persist(ctx, meta)
	queuetest.Eventually(t, 30*time.Second, "the rolled-back batch repaired", func() bool {
		info, err := q.Batch(ctx, "stalled")
		return err == nil && info.OnComplete.State == "fired" && info.Counts == queue.BatchCounts{Succeeded: 4} &&
			rdb.PTTL(ctx, meta).Val() > 0
	})
	if ls, err := q.Claim(ctx, "cb", 10, "w"); err != nil || len(ls) != 1 {
		t.Fatalf("the callbacks' queue holds %d jobs (%v), want the one callback", len(ls), err)
	}
}
