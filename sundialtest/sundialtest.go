// Package sundialtest helps test code built on Sundial:
//
//   - Work and WorkArgs run one handler on a job in a unit test, with no
//     Redis: the handler's context works as in a worker (JobFrom, Progress,
//     LeaseOf), and the result says which outcome the handler chose
//     (succeeded, failed, dead, snoozed, cancelled);
//   - RequireSubmitted and RequireNotSubmitted check what a piece of code
//     submitted, and Submitted decodes those jobs' typed payloads;
//   - Drain runs a Runner's due jobs synchronously, delayed ones on a clock
//     that jumps ahead, and returns each attempt's outcome.
//
// The last two use a real Redis: give the test a private redis-server
// (pkg/queue/queuetest starts one per test).
package sundialtest

import (
	"context"
	"testing"
	"time"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/worker"
)

// Outcome names how a handler's attempt ended.
type Outcome string

// The outcomes of an attempt.
const (
	Succeeded Outcome = "succeeded" // returned a result
	Failed    Outcome = "failed"    // an error: retried while attempts remain
	Dead      Outcome = "dead"      // NoRetry: dead at once
	Snoozed   Outcome = "snoozed"   // Snooze: runs again later, attempt given back
	Cancelled Outcome = "cancelled" // Cancel: ends cancelled
)

// outcomeOf names an engine outcome kind.
func outcomeOf(k queue.OutcomeKind) Outcome { return Outcome(worker.OutcomeName(k)) }

// ProgressReport is one Progress call a handler made.
type ProgressReport struct {
	Percent int
	Message string
}

// Result is what one handler run gave.
type Result struct {
	// Value is what the handler returned, and Err its error.
	Value any
	Err   error
	// Outcome is what a worker would report for it.
	Outcome Outcome
	// Delay is a snooze's, or the retry delay the handler chose
	// (RetryAfter); 0 otherwise.
	Delay time.Duration
	// Progress lists the handler's Progress calls, in order.
	Progress []ProgressReport
	// Job is the job the handler saw (JobFrom).
	Job *sundial.Record
}

// WorkOptions set what the handler's attempt looks like; the zero value
// is attempt 1 of 3 with a fresh job id and lease token.
type WorkOptions struct {
	// Attempt is the attempt number the handler sees; default 1.
	Attempt int
	// Token is the lease's fencing token (LeaseOf); default a fixed
	// "test-token".
	Token string
	// ProgressErr, when set, is what every Progress call returns (e.g.
	// worker.ErrLeaseLost, to test a handler that must stop).
	ProgressErr error
}

// Work runs handler h once on job a (a sundial.Job or a typed job) as a
// worker would run it, with no Redis, and returns what happened. The job
// is built as a submit would build it (defaults, validation), so a job
// that would be refused fails the test.
func Work(ctx context.Context, t testing.TB, h sundial.Handler, a sundial.Args, o ...WorkOptions) *Result {
	t.Helper()
	var opts WorkOptions
	if len(o) > 0 {
		opts = o[0]
	}
	if opts.Token == "" {
		opts.Token = "test-token"
	}
	rec, err := sundial.Build(a)
	if err != nil {
		t.Fatalf("sundialtest: the job would be refused: %v", err)
	}
	rec.Attempt = max(opts.Attempt, 1)
	rec.State = job.Active
	started := time.Now().UTC()
	rec.StartedAt = &started
	res := &Result{Job: rec}
	ctx = worker.HandlerContext(ctx, rec, &worker.FakeRun{
		Lease: worker.Lease{Token: opts.Token, HeldUntil: time.Now().Add(time.Duration(rec.TimeoutSeconds) * time.Second)},
		Progress: func(percent int, message string) error {
			res.Progress = append(res.Progress, ProgressReport{percent, message})
			return opts.ProgressErr
		},
	})
	ctx, cancel := context.WithTimeout(ctx, rec.Timeout())
	defer cancel()
	res.Value, res.Err = h.Work(ctx, rec)
	res.Outcome = Succeeded
	if res.Err != nil {
		kind, delay := worker.OutcomeOf(res.Err)
		res.Outcome, res.Delay = outcomeOf(kind), delay
	}
	return res
}

// WorkArgs runs a typed handler (as Handle registers it) once on args,
// which go through JSON as they would through Redis; see Work.
func WorkArgs[T sundial.Args](ctx context.Context, t testing.TB, f func(ctx context.Context, args T) (any, error), args T, o ...WorkOptions) *Result {
	t.Helper()
	return Work(ctx, t, sundial.JSONHandler(f), args, o...)
}
