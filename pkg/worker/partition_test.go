package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/netfault"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/worker"
)

// partitioned is a worker whose Redis connections go through a proxy the
// test can stall, beside a client of its own that reaches Redis directly.
type partitioned struct {
	direct *redis.Client
	proxy  *netfault.Proxy
	worker *redis.Client
}

func newPartitioned(t *testing.T) *partitioned {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	p := &partitioned{direct: srv.Client(), proxy: netfault.Start(t, srv.Addr())}
	p.worker = redis.NewClient(&redis.Options{Addr: p.proxy.Addr(), ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = p.worker.Close() })
	return p
}

// A worker cut off from Redis (a partition: its connections stall, its
// process lives on) stops the handler before the lease can have expired on
// Redis, judged from when its last accepted renewal was sent, and reports
// nothing: the job runs again only after the lease expired (issue 32,
// finding 1). Before, renewals failed with an error and the handler ran
// on, while the poller gave the job to another worker.
func TestPartitionedWorkerStopsItsHandlerBeforeTheLeaseExpires(t *testing.T) {
	p := newPartitioned(t)
	const ttl = time.Second
	engine := queue.Options{LeaseTTL: ttl}
	w := worker.New(p.worker, worker.Config{ID: queuetest.Name("w"), Concurrency: 1, ShutdownTimeout: 200 * time.Millisecond, Engine: engine})
	started := make(chan worker.Lease, 1)
	type stop struct {
		at    time.Time
		cause error
		held  bool
	}
	stopped := make(chan stop, 1)
	w.HandleFunc("hold", func(ctx context.Context, j *job.Job) (any, error) {
		l, _ := worker.LeaseOf(ctx)
		started <- l
		<-ctx.Done()
		l, _ = worker.LeaseOf(ctx)
		stopped <- stop{at: time.Now(), cause: context.Cause(ctx), held: l.Held(time.Now())}
		return "done anyway", nil // must not be reported
	})
	q := queue.New(p.direct, engine)
	j, err := (&job.Spec{Type: "hold", TimeoutSeconds: ptr(60)}).Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(context.Background(), []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	start(t, w)
	var lease worker.Lease
	select {
	case lease = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	if lease.Token == "" || !lease.Held(time.Now()) {
		t.Fatalf("LeaseOf in the handler = %+v; want a token, held", lease)
	}
	// Once a renewal was accepted (the lease's expiry moved), partition.
	leases := queue.QueueKey("default", "leases")
	first := p.direct.ZScore(context.Background(), leases, j.ID).Val()
	queuetest.Eventually(t, 10*time.Second, "a renewal", func() bool {
		return p.direct.ZScore(context.Background(), leases, j.ID).Val() > first
	})
	partitionedAt := time.Now()
	p.proxy.Stall()
	var s stop
	select {
	case s = <-stopped:
	case <-time.After(3 * ttl):
		t.Fatal("the partitioned worker's handler is still running three lease TTLs later")
	}
	if !errors.Is(s.cause, worker.ErrLeaseLost) {
		t.Errorf("the handler's context ended with %v; want ErrLeaseLost", s.cause)
	}
	if s.held {
		t.Error("LeaseOf still says held once the handler was stopped")
	}
	// Every renewal the worker sent before the partition was accepted at
	// the latest just before it: the handler must stop within a TTL.
	if d := s.at.Sub(partitionedAt); d >= ttl {
		t.Errorf("the handler stopped %v after the partition; want under the lease TTL %v", d, ttl)
	}
	// Redis meanwhile: the lease expires and the poller's reclaim takes
	// the job back, which it can only do while no outcome ended the lease.
	queuetest.Eventually(t, 10*time.Second, "the lease to expire and be reclaimed", func() bool {
		n, _, _ := q.Reclaim(context.Background(), "default", 10)
		return n == 1
	})
	p.proxy.Heal()
	got, err := q.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State == job.Succeeded || got.LastError != "lease expired" {
		t.Fatalf("job after the partition = %s %q; want retried after its lease expired", got.State, got.LastError)
	}
}

// An attempt that lost its lease and ignores its context may return while
// the job's next attempt runs on the same worker: it must not take the
// newer attempt's place, which would then no longer be renewed, cancelled
// or given back (issue 32, finding 2).
func TestAStaleAttemptDoesNotEraseTheNextOne(t *testing.T) {
	e := newEnv(t)
	const ttl = time.Second
	engine := queue.Options{LeaseTTL: ttl}
	w := newWorker(e, worker.Config{Concurrency: 2, ShutdownTimeout: 200 * time.Millisecond, Engine: engine})
	release1 := make(chan struct{})
	started := make(chan int, 2)
	secondStopped := make(chan error, 1)
	w.HandleFunc("twice", func(ctx context.Context, j *job.Job) (any, error) {
		started <- j.Attempt
		if j.Attempt == 1 {
			<-release1 // ignores its context
			return nil, nil
		}
		select {
		case <-ctx.Done():
			secondStopped <- context.Cause(ctx)
			return nil, ctx.Err()
		case <-time.After(4 * ttl):
			return "second", nil
		}
	})
	j := e.submit(t, job.Spec{Type: "twice", TimeoutSeconds: ptr(60)})[0]
	start(t, w)
	if a := <-started; a != 1 {
		t.Fatalf("first attempt %d", a)
	}
	// The first attempt's lease runs out (as seen by a poller an hour
	// ahead) and the job is due again at once.
	future := func() time.Time { return time.Now().Add(time.Hour) }
	ahead := queue.New(e.rdb, queue.Options{LeaseTTL: ttl, Now: future, LeaseClock: future})
	if n, _, err := ahead.Reclaim(context.Background(), "default", 10); err != nil || n != 1 {
		t.Fatalf("reclaim = %d, %v", n, err)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) } // past the backoff
	if n, _, err := queue.New(e.rdb, queue.Options{Now: later, LeaseClock: later}).Promote(context.Background(), "default", 10); err != nil || n != 1 {
		t.Fatalf("promote = %d, %v", n, err)
	}
	select {
	case a := <-started:
		if a != 2 {
			t.Fatalf("second attempt numbered %d", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job's second attempt did not start")
	}
	close(release1) // the stale attempt returns while the second runs
	// A poller meanwhile: the second attempt's lease must stay renewed.
	q := queue.New(e.rdb, engine)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); {
		select {
		case cause := <-secondStopped:
			t.Fatalf("the second attempt was stopped (%v): the stale one erased it", cause)
		case <-tick.C:
		}
		if n, _, err := q.Reclaim(context.Background(), "default", 10); err != nil || n != 0 {
			t.Fatalf("reclaim = %d, %v: the second attempt's lease expired while it ran", n, err)
		}
	}
	got := e.waitState(t, j.ID, job.Succeeded)
	if got.Attempt != 2 || string(got.Result) != `"second"` {
		t.Fatalf("job = attempt %d result %s", got.Attempt, got.Result)
	}
}
