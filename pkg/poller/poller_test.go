package poller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func run(t *testing.T, p *poller.Poller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func submit(t *testing.T, q *queue.Client, s job.Spec) *job.Job {
	t.Helper()
	j, err := s.Build(q.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(context.Background(), []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	return j
}

// A queue whose keys are broken fails alone: the queues after it are
// still served, and the failure is counted.
func TestABrokenQueueFailsAlone(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	// Queue "a" sorts first; its scheduled set is a string, so every
	// promote of it fails with WRONGTYPE.
	submit(t, q, job.Spec{Type: "t", Queue: "a"})
	rdb.Set(ctx, queue.QueueKey("a", "scheduled"), "oops", 0)
	j := submit(t, q, job.Spec{Type: "t", Queue: "b", DelaySeconds: ptr(0.2)})
	p := poller.New(q, poller.Config{})
	run(t, p)
	queuetest.Eventually(t, 10*time.Second, "queue b's job to be promoted", func() bool {
		got, err := q.Get(ctx, j.ID)
		return err == nil && got.State == job.Queued
	})
	if n := sum(t, p.Collectors()[0]); n < 1 {
		t.Fatalf("queue errors counted: %v", n)
	}
}

// sum adds up the values of every counter c collects.
func sum(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		total += d.GetCounter().GetValue()
	}
	return total
}

// Pruning never deletes a job whose events the history has not recorded:
// with the floor unknown nothing is pruned; with a floor, only jobs that
// ended before it (minus the margin).
func TestPruneWaitsForTheHistory(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	j := submit(t, q, job.Spec{Type: "t"})
	ls, err := q.Claim(ctx, "default", 1, "w")
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	if _, err := q.Complete(ctx, "default", []queue.Outcome{{ID: j.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var floor time.Time // zero: unknown
	calls := 0
	recorded := func(string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return floor, !floor.IsZero()
	}
	setFloor := func(t time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		floor = t
		return calls
	}
	passes := func(after, n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return calls >= after+n
		}
	}
	// Retention 1 ms: only the floor can keep the job.
	p := poller.New(q, poller.Config{Retention: time.Millisecond, PruneInterval: 10 * time.Millisecond, MaxSleep: 10 * time.Millisecond,
		RecordedBefore: recorded, FloorMargin: time.Millisecond})
	run(t, p)
	queuetest.Eventually(t, 5*time.Second, "three prune passes with the floor unknown", passes(0, 3))
	if _, err := q.Get(ctx, j.ID); err != nil {
		t.Fatalf("pruned with an unknown history floor: %v", err)
	}
	// A floor before the job ended protects it.
	n := setFloor(time.Now().Add(-time.Hour))
	queuetest.Eventually(t, 5*time.Second, "three prune passes under an old floor", passes(n, 3))
	if _, err := q.Get(ctx, j.ID); err != nil {
		t.Fatalf("pruned a job whose events are not recorded: %v", err)
	}
	setFloor(time.Now())
	queuetest.Eventually(t, 5*time.Second, "the job to be pruned once its events are recorded", func() bool {
		_, err := q.Get(ctx, j.ID)
		return err == queue.ErrNotFound
	})
	// The poller counts the prune once its call returns, which can be just
	// after the job is seen gone.
	queuetest.Eventually(t, 5*time.Second, "the prune counted", func() bool { return sum(t, p.Collectors()[1]) >= 1 })
	if n := sum(t, p.Collectors()[1]); n != 1 {
		t.Fatalf("pruned counted %v, want 1", n)
	}
}

func ptr[T any](v T) *T { return &v }
