package queue_test

import (
	"context"
	"testing"
	"time"

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
