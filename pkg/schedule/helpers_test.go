package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // a scheduler process for the failover test; never returns
	}
	goleak.VerifyTestMain(m, queuetest.IgnorePoolRedial)
}

// testClock is a settable clock, safe for concurrent use.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *testClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// env is a private Redis with a queue client and a store over it.
type env struct {
	srv   *queuetest.Server
	q     *queue.Client
	st    *Store
	clock *testClock // nil when the env runs on the real clock
	opts  queue.Options
	ctx   context.Context
}

// newEnv starts a private Redis for t (in parallel). With a fake clock the
// store and schedulers read the time from env.clock, starting at
// 2026-11-23T10:00:00Z.
func newEnv(t *testing.T, fake bool) *env {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	e := &env{srv: srv, ctx: context.Background()}
	opts := queue.Options{}
	if fake {
		e.clock = &testClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
		opts.Now = e.clock.Now
	}
	e.q, e.opts = queue.New(srv.Client(), opts), opts
	e.st = NewStore(e.q)
	return e
}

// put stores the schedule given as JSON and fails the test on error.
func (e *env) put(t *testing.T, doc string) *Schedule {
	t.Helper()
	s, err := Decode([]byte(doc))
	if err != nil {
		t.Fatalf("decode %s: %v", doc, err)
	}
	out, _, err := e.st.Put(e.ctx, s)
	if err != nil {
		t.Fatalf("put %s: %v", doc, err)
	}
	return out
}

func (e *env) get(t *testing.T, id string) *Schedule {
	t.Helper()
	s, err := e.st.Get(e.ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return s
}

// setNext rewrites a schedule's planned next run, as downtime would leave it.
func (e *env) setNext(t *testing.T, q, id string, at time.Time) {
	t.Helper()
	if err := e.q.Redis().ZAdd(e.ctx, keysFor(q).next, redisZ(at, id)).Err(); err != nil {
		t.Fatal(err)
	}
}

// jobs returns every job in queue q, read from the job hashes themselves
// with the engine's decoder: a queue becomes known to the engine only
// after its first submit returns.
func (e *env) jobs(t *testing.T, q string) []*job.Job {
	t.Helper()
	rdb := e.q.Redis()
	var out []*job.Job
	prefix := queue.JobKey(q, "")
	iter := rdb.Scan(e.ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(e.ctx) {
		h, err := rdb.HGetAll(e.ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		j := queue.DecodeJob(q, strings.TrimPrefix(iter.Val(), prefix), h)
		if j == nil || j.RunAt.IsZero() {
			t.Fatalf("job %s: %v", iter.Val(), h)
		}
		out = append(out, j)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fireTimes counts q's jobs by the fire time they stand for (run_at).
func (e *env) fireTimes(t *testing.T, q string) map[time.Time]int {
	t.Helper()
	n := map[time.Time]int{}
	for _, j := range e.jobs(t, q) {
		n[j.RunAt.UTC()]++
	}
	return n
}

// scheduler returns a scheduler over e for tests that call FireDue.
func (e *env) scheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Fire == nil {
		cfg.Fire = FireClient(e.q.Redis(), e.opts)
	}
	return NewScheduler(e.q, cfg)
}

// run starts s.Run until the test ends.
func run(t *testing.T, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler Run: %v", err)
		}
	})
}

// fieldOf returns the field of a *FieldError, or fails.
func fieldOf(t *testing.T, err error) string {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FieldError", err, err)
	}
	return fe.Field
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func redisZ(at time.Time, id string) redis.Z {
	return redis.Z{Score: float64(at.UnixMilli()), Member: id}
}
