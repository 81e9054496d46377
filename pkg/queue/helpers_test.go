package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) Advance(d time.Duration) { c.t = c.t.Add(d) }

type env struct {
	srv   *queuetest.Server
	q     *queue.Client
	clock *clock
	ctx   context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	clk := &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	q := queue.New(srv.Client(), queue.Options{Now: clk.Now, LeaseClock: clk.Now, LeaseTTL: 11 * time.Second, LeaseGrace: time.Second})
	// The format a deployment writes once the gate opened (format.go);
	// format 1 is TestFormatsMixInOneQueue's.
	queue.SetWriteFormat(q, queue.WriteFormat)
	return &env{srv: srv, q: q, clock: clk, ctx: context.Background()}
}

func (e *env) build(t *testing.T, s job.Spec) *job.Job {
	t.Helper()
	j, err := s.Build(e.clock.Now())
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return j
}

func (e *env) submit(t *testing.T, specs ...job.Spec) []*job.Job {
	t.Helper()
	jobs := make([]*job.Job, len(specs))
	for i, s := range specs {
		jobs[i] = e.build(t, s)
	}
	res, err := e.q.Submit(e.ctx, jobs)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	out := make([]*job.Job, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	return out
}

func (e *env) get(t *testing.T, id string) *job.Job {
	t.Helper()
	j, err := e.q.Get(e.ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func (e *env) claim(t *testing.T, queue string, n int) []queue.Lease {
	t.Helper()
	l, err := e.q.Claim(e.ctx, queue, n, "w1")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return l
}

func (e *env) complete(t *testing.T, queueName string, o ...queue.Outcome) []queue.Status {
	t.Helper()
	st, err := e.q.Complete(e.ctx, queueName, o)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	return st
}

// events returns the events of queueName's stream, in order, decoded as
// every reader decodes them (queue.ParseEvents).
func (e *env) events(t *testing.T, queueName string) []job.Event {
	t.Helper()
	xs, err := e.q.Redis().XRange(e.ctx, queue.EventStreamKey(queueName), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []job.Event
	for _, x := range xs {
		evs, err := queue.ParseEvents(queueName, x)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func wantState(t *testing.T, j *job.Job, s job.State) {
	t.Helper()
	if j.State != s {
		t.Fatalf("job %s: state %s, want %s", j.ID, j.State, s)
	}
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  float64
}

// serverStats reads the server's CPU seconds (user + sys) and its
// commandstats by command name ("hset", "config|resetstat", …): the one
// parser of INFO for the tests and benchmarks of this package.
func serverStats(tb testing.TB, rdb redis.UniversalClient) (cpu float64, cmds map[string]cmdStat) {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	cmds = map[string]cmdStat{}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		case strings.HasPrefix(k, "cmdstat_"):
			var st cmdStat
			for _, kv := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(kv, "=")
				switch name {
				case "calls":
					st.calls, _ = strconv.ParseInt(val, 10, 64)
				case "usec":
					st.usec, _ = strconv.ParseFloat(val, 64)
				}
			}
			cmds[strings.TrimPrefix(k, "cmdstat_")] = st
		}
	}
	return cpu, cmds
}

// snapshot copies the keys matching pattern (DUMP) and returns the
// rollback: every key matching pattern deleted, the copies restored, as a
// Redis restarted from an older snapshot holds them (the library's own
// state is the caller's to reset, FUNCTION FLUSH).
func snapshot(t *testing.T, rdb redis.UniversalClient, pattern string) (rollback func()) {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	saved := map[string]string{}
	for _, k := range keys {
		saved[k] = rdb.Dump(ctx, k).Val()
	}
	return func() {
		t.Helper()
		now, err := rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(now) > 0 {
			if err := rdb.Del(ctx, now...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for k, v := range saved {
			if err := rdb.Restore(ctx, k, 0, v).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
