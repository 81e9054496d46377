package sundialtest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/worker"
)

// submitted returns the jobs of type kind submitted to any queue c knows,
// oldest first, as they are now. It reads the queues' event streams:
// for tests, whose streams are short and that run no history writer.
func submitted(ctx context.Context, t testing.TB, c *sundial.Client, kind string) []*sundial.Record {
	t.Helper()
	q := c.Engine()
	queues, err := q.Queues(ctx)
	if err != nil {
		t.Fatalf("sundialtest: %v", err)
	}
	var out []*sundial.Record
	for _, name := range queues {
		xs, err := q.Redis().XRange(ctx, queue.EventStreamKey(name), "-", "+").Result()
		if err != nil {
			t.Fatalf("sundialtest: %v", err)
		}
		for _, x := range xs {
			evs, err := queue.ParseEvents(name, x)
			if err != nil {
				t.Fatalf("sundialtest: %v", err)
			}
			for _, e := range evs {
				if e.Event != job.EventSubmitted || e.Type != kind {
					continue
				}
				j, err := q.Get(ctx, e.JobID)
				if errors.Is(err, queue.ErrNotFound) {
					continue
				}
				if err != nil {
					t.Fatalf("sundialtest: %v", err)
				}
				out = append(out, j)
			}
		}
	}
	return out
}

// RequireSubmitted fails the test unless a job of type kind was submitted
// (to any queue) that match accepts (nil: any), and returns those jobs,
// oldest first.
func RequireSubmitted(ctx context.Context, t testing.TB, c *sundial.Client, kind string, match func(*sundial.Record) bool) []*sundial.Record {
	t.Helper()
	var out []*sundial.Record
	for _, j := range submitted(ctx, t, c, kind) {
		if match == nil || match(j) {
			out = append(out, j)
		}
	}
	if len(out) == 0 {
		t.Fatalf("sundialtest: no job of type %q was submitted (that the match accepts)", kind)
	}
	return out
}

// RequireNotSubmitted fails the test if a job of type kind was submitted
// (to any queue) that match accepts (nil: any).
func RequireNotSubmitted(ctx context.Context, t testing.TB, c *sundial.Client, kind string, match func(*sundial.Record) bool) {
	t.Helper()
	for _, j := range submitted(ctx, t, c, kind) {
		if match == nil || match(j) {
			t.Fatalf("sundialtest: job %s of type %q was submitted (queue %s, state %s)", j.ID, kind, j.Queue, j.State)
		}
	}
}

// Submitted returns the typed payloads of the jobs of T's kind submitted
// so far, oldest first.
func Submitted[T sundial.Args](ctx context.Context, t testing.TB, c *sundial.Client) []T {
	t.Helper()
	var zero T
	var out []T
	for _, j := range submitted(ctx, t, c, zero.Kind()) {
		var v T
		if err := json.Unmarshal(j.Payload, &v); err != nil {
			t.Fatalf("sundialtest: payload of job %s: %v", j.ID, err)
		}
		out = append(out, v)
	}
	return out
}

// Attempt is one attempt Drain ran.
type Attempt struct {
	// Job is the job as its handler saw it (its attempt number, payload).
	Job *sundial.Record
	// Outcome is how the handler ended, and State what the job became.
	Outcome Outcome
	State   sundial.State
	Result  json.RawMessage // the handler's result, for Succeeded
	Error   string          // its error, or a snooze's reason
	Delay   time.Duration   // a snooze's, or the retry delay it chose
}

// DrainOptions tune Drain.
type DrainOptions struct {
	// Now runs only the jobs due now; the default also runs every delayed
	// job (delays, retries' backoff, snoozes) on a clock that jumps to the
	// next one whenever nothing is due.
	Now bool
	// MaxAttempts bounds the attempts; default 10,000 (reaching it fails
	// the test).
	MaxAttempts int
}

// Drain runs the jobs of queueName, one at a time in the test's goroutine,
// with r's handlers and middleware, until none of r's types is left to
// run (see DrainOptions), and returns each attempt. Outcomes are written
// as a running worker writes them, so the jobs' states afterwards are a
// deployment's. It does the poller's part for the queue too: its jobs
// waiting on ended jobs of other queues are released, and a batch's
// callbacks fire once its members ended (a callback into another queue
// runs when that queue is drained). r must not Run at the same time.
func Drain(ctx context.Context, t testing.TB, r *sundial.Runner, queueName string, o ...DrainOptions) []Attempt {
	t.Helper()
	var opts DrainOptions
	if len(o) > 0 {
		opts = o[0]
	}
	ds, err := r.Worker().Drain(ctx, queueName, worker.DrainOptions{Advance: !opts.Now, MaxAttempts: opts.MaxAttempts})
	if err != nil {
		t.Fatalf("sundialtest: drain of %s: %v", queueName, err)
	}
	out := make([]Attempt, len(ds))
	for i, d := range ds {
		out[i] = Attempt{Job: d.Job, Outcome: outcomeOf(d.Outcome), State: sundial.State(d.Status),
			Result: d.Result, Error: d.Error, Delay: d.Delay}
	}
	return out
}
