package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/worker"
)

// At the shutdown deadline the worker writes the outcomes it has, gives
// back only the leases of handlers still running, and returns even when a
// handler ignores its context.
func TestShutdownDeadlineWritesKnownOutcomesAndExits(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{}) // the stubborn handler's only way out
	t.Cleanup(func() { close(release) })
	returned := make(chan struct{})
	quickRelease := make(chan struct{})
	w := newWorker(e, worker.Config{Concurrency: 2, ShutdownTimeout: 500 * time.Millisecond})
	w.HandleFunc("stubborn", func(ctx context.Context, j *job.Job) (any, error) {
		<-release // ignores ctx
		return nil, nil
	})
	w.HandleFunc("quick", func(ctx context.Context, j *job.Job) (any, error) {
		<-quickRelease
		close(returned)
		return "done", nil
	})
	js := e.submit(t, job.Spec{Type: "stubborn"}, job.Spec{Type: "quick"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e.waitState(t, js[0].ID, job.Active)
	e.waitState(t, js[1].ID, job.Active)

	cancel() // shutdown starts; the deadline is 500 ms away
	// Redis holds writes for 1.5 s: the quick job's outcome is known but
	// cannot be written before the deadline.
	if err := e.rdb.Do(context.Background(), "CLIENT", "PAUSE", "1500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	close(quickRelease)
	<-returned
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(500*time.Millisecond + worker.OutcomeFlushTimeout + 5*time.Second):
		t.Fatal("Run did not return: a handler that ignores its context kept the worker alive")
	}
	quick := e.state(t, js[1].ID)
	if quick.State != job.Succeeded || string(quick.Result) != `"done"` {
		t.Fatalf("quick job = %s %s: a known outcome was lost at shutdown", quick.State, quick.Result)
	}
	stubborn := e.state(t, js[0].ID)
	if stubborn.State != job.Queued || stubborn.Attempt != 0 {
		t.Fatalf("stubborn job = %s attempt %d; want queued again with the attempt not counted", stubborn.State, stubborn.Attempt)
	}
}

// A job that runs far longer than the lease TTL keeps its lease (the worker
// renews it) and runs once, while a poller reclaims expired leases.
func TestLongJobKeepsItsRenewedLease(t *testing.T) {
	e := newEnv(t)
	q := queue.New(e.rdb, queue.Options{LeaseTTL: time.Second})
	var runs atomic.Int32
	w := newWorker(e, worker.Config{Concurrency: 1, Engine: queue.Options{LeaseTTL: time.Second}})
	w.HandleFunc("long", func(ctx context.Context, j *job.Job) (any, error) {
		runs.Add(1)
		select {
		case <-time.After(3500 * time.Millisecond): // 3.5 lease TTLs
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	j := e.submit(t, job.Spec{Type: "long", TimeoutSeconds: ptr(60)})[0]
	start(t, w)
	stopReclaim := make(chan struct{})
	reclaimed := make(chan int, 1)
	go func() {
		total := 0
		defer func() { reclaimed <- total }()
		for {
			select {
			case <-stopReclaim:
				return
			case <-time.After(50 * time.Millisecond):
			}
			n, _, _ := q.Reclaim(context.Background(), "default", 10)
			total += n
		}
	}()
	got := e.waitState(t, j.ID, job.Succeeded)
	close(stopReclaim)
	if n := <-reclaimed; n != 0 {
		t.Fatalf("reclaimed %d times a lease its worker renewed", n)
	}
	if got.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("attempt %d, runs %d; want 1 and 1", got.Attempt, runs.Load())
	}
}

// A handler that outlives its timeout plus the lease grace stops being
// renewed: its lease runs out and the job is retried by the poller, so a
// stuck handler cannot hold a job forever.
func TestStuckHandlerLosesItsLease(t *testing.T) {
	e := newEnv(t)
	q := queue.New(e.rdb, queue.Options{LeaseTTL: time.Second})
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	w := newWorker(e, worker.Config{Concurrency: 1, ShutdownTimeout: 200 * time.Millisecond, Engine: queue.Options{LeaseTTL: time.Second, LeaseGrace: 100 * time.Millisecond}})
	w.HandleFunc("stuck", func(ctx context.Context, j *job.Job) (any, error) {
		<-stuck // ignores its 1 s timeout
		return nil, nil
	})
	j := e.submit(t, job.Spec{Type: "stuck", TimeoutSeconds: ptr(1), MaxAttempts: ptr(1)})[0]
	start(t, w)
	e.waitState(t, j.ID, job.Active)
	queuetest.Eventually(t, 10*time.Second, "the stuck job's lease to expire", func() bool {
		n, _, _ := q.Reclaim(context.Background(), "default", 10)
		return n == 1
	})
	got := e.state(t, j.ID)
	if got.State != job.Dead || got.LastError != "lease expired" {
		t.Fatalf("stuck job = %s %q", got.State, got.LastError)
	}
}

func TestProgressShowsOnTheJob(t *testing.T) {
	e := newEnv(t)
	reported := make(chan error, 1)
	release := make(chan struct{})
	w := newWorker(e, worker.Config{Concurrency: 1})
	w.HandleFunc("report", func(ctx context.Context, j *job.Job) (any, error) {
		reported <- worker.Progress(ctx, 42, "halfway-ish")
		<-release
		return nil, nil
	})
	j := e.submit(t, job.Spec{Type: "report"})[0]
	start(t, w)
	if err := <-reported; err != nil {
		t.Fatalf("Progress: %v", err)
	}
	got := e.state(t, j.ID)
	if got.Progress == nil || got.Progress.Percent != 42 || got.Progress.Message != "halfway-ish" {
		t.Fatalf("progress = %+v", got.Progress)
	}
	close(release)
	done := e.waitState(t, j.ID, job.Succeeded)
	if done.Progress != nil {
		t.Fatalf("a finished job shows progress %+v", done.Progress)
	}
	if err := worker.Progress(context.Background(), 1, ""); err == nil {
		t.Fatal("Progress outside a handler succeeded")
	}
}
