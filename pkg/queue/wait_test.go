package queue_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// roundTrips counts the calls a go-redis client sends: single commands
// and pipelines.
type roundTrips struct{ single, pipelines atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.single.Add(1)
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// blocked reports whether a client of the Redis rdb talks to is blocked
// (in a BLPOP).
func blocked(rdb redis.Cmdable) bool {
	info, _ := rdb.Info(context.Background(), "clients").Result()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			return v != "0"
		}
	}
	return false
}

type claimResult struct {
	leases []queue.Lease
	err    error
}

// TestWaitAndClaimClaimsInTheWakeUpsRoundTrip: an idle worker's wait and
// its claim are one round trip (one pipeline, no other call), the job a
// submit woke it for is claimed, and the claim's start time is when it ran
// (Redis' clock), not when the wait began. On a server without the
// function library the claim still happens (the library gets loaded).
func TestWaitAndClaimClaimsInTheWakeUpsRoundTrip(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	ctx := context.Background()
	// A read timeout well beyond the waits, which must stay a second
	// inside it to be pipelined.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Client().Options().Addr, ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	trips := &roundTrips{}
	rdb.AddHook(trips)
	q := queue.New(rdb, queue.Options{})
	producer := queue.New(srv.Client(), queue.Options{})

	wait := func(timeout time.Duration) <-chan claimResult {
		out := make(chan claimResult, 1)
		go func() {
			ls, err := q.WaitAndClaim(ctx, "default", 5, "w1", timeout)
			out <- claimResult{ls, err}
		}()
		return out
	}
	submit := func() *job.Job {
		j, err := (&job.Spec{Type: "noop"}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := producer.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	take := func(res <-chan claimResult, want *job.Job) queue.Lease {
		t.Helper()
		select {
		case r := <-res:
			if r.err != nil {
				t.Fatalf("WaitAndClaim: %v", r.err)
			}
			if len(r.leases) != 1 || r.leases[0].Job.ID != want.ID || r.leases[0].Token == "" {
				t.Fatalf("claimed %+v, want job %s with a token", r.leases, want.ID)
			}
			return r.leases[0]
		case <-time.After(10 * time.Second):
			t.Fatal("WaitAndClaim did not return after the submit")
		}
		return queue.Lease{}
	}

	// A fresh server has no function library: the pipelined claim fails
	// and the ordinary one loads the library and claims.
	res := wait(10 * time.Second)
	queuetest.Eventually(t, 5*time.Second, "the wait is blocked", func() bool { return blocked(srv.Client()) })
	take(res, submit())

	single0, pipes0 := trips.single.Load(), trips.pipelines.Load()
	res = wait(10 * time.Second)
	began := time.Now()
	queuetest.Eventually(t, 5*time.Second, "the wait is blocked", func() bool { return blocked(srv.Client()) })
	// The submit comes at least 5 ms after the wait began, so a claim
	// that took its time from the caller would start before it.
	queuetest.Eventually(t, time.Second, "5 ms pass", func() bool { return time.Since(began) >= 5*time.Millisecond })
	j := submit()
	l := take(res, j)
	if s, p := trips.single.Load()-single0, trips.pipelines.Load()-pipes0; s != 0 || p != 1 {
		t.Fatalf("the wait and claim took %d single calls and %d pipelines, want one pipeline", s, p)
	}
	got, err := q.Get(ctx, l.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != job.Active || got.StartedAt == nil || got.StartedAt.Before(j.CreatedAt.Truncate(time.Millisecond)) {
		t.Fatalf("claimed job: state %s, started_at %v, created_at %v: want active, started no earlier than created", got.State, got.StartedAt, j.CreatedAt)
	}

	// Nothing comes: the wait times out and claims nothing.
	res = wait(time.Second)
	select {
	case r := <-res:
		if r.err != nil || len(r.leases) != 0 {
			t.Fatalf("after a timeout: %d leases, err %v; want none", len(r.leases), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a 1 s wait did not end")
	}
}

// TestWaitAndClaimKeepsTheCallersClock: a client with a clock of its own
// (tests, the lease-clock override) claims with that clock, in two calls.
func TestWaitAndClaimKeepsTheCallersClock(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "noop"})[0]
	ls, err := e.q.WaitAndClaim(e.ctx, "default", 5, "w1", 5*time.Second)
	if err != nil || len(ls) != 1 || ls[0].Job.ID != j.ID {
		t.Fatalf("WaitAndClaim: %d leases, err %v; want job %s", len(ls), err, j.ID)
	}
	got, err := e.q.Get(e.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.StartedAt == nil || !got.StartedAt.Equal(e.clock.Now()) {
		t.Fatalf("started_at %v, want the client's clock %v", got.StartedAt, e.clock.Now())
	}
}
