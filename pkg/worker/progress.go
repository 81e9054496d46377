package worker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// ErrLeaseLost is returned by Progress when the job's lease is gone: it was
// reclaimed after expiring, or cancelled. The handler should stop; its
// outcome would be refused.
var ErrLeaseLost = errors.New("sundial: the job's lease was lost")

// errNotInHandler: Progress was called with a context no handler received.
var errNotInHandler = errors.New("sundial: Progress needs the context of a running handler")

type runningKey struct{}

// runningJob is what Progress needs of the job a context belongs to.
type runningJob struct {
	w *Worker
	r *running
	// fake is set for a context made by HandlerContext (a handler run in a
	// unit test, without Redis): Progress and LeaseOf answer from it.
	fake *FakeRun
	// durable is what the attempt knows of its job's records (durable.go).
	durable durableRun
	// logs buffers the lines the handler logs (logs.go).
	logs jobLog
}

// FakeRun is what a handler run by HandlerContext sees of its attempt,
// for tests (sundialtest): its lease, and what its Progress calls do.
type FakeRun struct {
	// Lease is what LeaseOf returns.
	Lease Lease
	// Progress is called by Progress; nil accepts every report.
	Progress func(percent int, message string) error
	// Signals are the signals the job has (WaitSignal reads them; a wait
	// for one not here times out). Steps run their functions, and sleeps
	// end at once.
	Signals map[string]json.RawMessage
}

// HandlerContext returns ctx as a handler of job j sees it when run by
// f (a test's fake attempt, no Redis): JobFrom gives j, Progress calls
// f.Progress, LeaseOf gives f.Lease. For tests of handlers; see package
// sundialtest.
func HandlerContext(ctx context.Context, j *job.Job, f *FakeRun) context.Context {
	return context.WithValue(ctx, runningKey{}, &runningJob{r: &running{lease: queue.Lease{Job: j, Token: f.Lease.Token}}, fake: f})
}

// JobFrom returns the job whose handler received ctx (its id, attempt,
// queue, payload…), or nil for a context no handler received.
func JobFrom(ctx context.Context) *job.Job {
	rj, ok := ctx.Value(runningKey{}).(*runningJob)
	if !ok {
		return nil
	}
	return rj.r.lease.Job
}

// Progress reports the progress of the job whose handler received ctx:
// percent (0..100, clamped) and a short message. It shows on the job (GET
// /v1/jobs/{id}, the dashboard) and as a progress event on the stream, at
// most one a second per job, and it renews the job's lease. It returns
// ErrLeaseLost when the lease is gone; the job's context is then cancelled.
func Progress(ctx context.Context, percent int, message string) error {
	rj, ok := ctx.Value(runningKey{}).(*runningJob)
	if !ok {
		return errNotInHandler
	}
	if rj.fake != nil {
		if rj.fake.Progress == nil {
			return nil
		}
		return rj.fake.Progress(min(max(percent, 0), 100), message)
	}
	sent := time.Now()
	held, _, err := rj.w.q.Progress(ctx, rj.r.queue, rj.r.lease, queue.ProgressReport{Percent: percent, Message: message})
	if err != nil {
		return err
	}
	rj.w.renewed([]*running{rj.r}, []bool{held}, sent)
	if !held {
		rj.w.leasesLost.Add(1)
		rj.r.cancel(errLeaseLost)
		return ErrLeaseLost
	}
	return nil
}

// Lease is what a handler knows of its attempt's lease.
type Lease struct {
	// Token is the attempt's fencing token: opaque, never handed out twice
	// (not even by a Redis restored from an older snapshot), and larger
	// for a later claim of the same queue as long as Redis' clock moves
	// forward. Pass it to a downstream system that should refuse a stale
	// writer (docs/operations.md, "Leases").
	Token string
	// HeldUntil is when this worker stops trusting the lease, on its own
	// monotonic clock: until then no other attempt of the job can have
	// started. It moves forward with every renewal; once it passes, the
	// handler's context is cancelled (cause ErrLeaseLost) and the outcome
	// is not reported.
	HeldUntil time.Time
}

// Held tells whether the lease is still trusted at now.
func (l Lease) Held(now time.Time) bool { return now.Before(l.HeldUntil) }

// LeaseOf returns the lease of the attempt whose handler received ctx, or
// false when ctx is no handler's. A handler about to make a side effect
// that must not happen twice at once checks LeaseOf(ctx).Held(time.Now())
// first: unlike ctx.Err(), it is right even in the instant after a pause
// of the whole process, before the worker's guard has run.
func LeaseOf(ctx context.Context) (Lease, bool) {
	rj, ok := ctx.Value(runningKey{}).(*runningJob)
	if !ok {
		return Lease{}, false
	}
	if rj.fake != nil {
		return rj.fake.Lease, true
	}
	rj.w.mu.Lock()
	defer rj.w.mu.Unlock()
	until := rj.r.heldUntil
	if rj.r.expired || rj.r.givenBack || rj.r.cancelled {
		until = time.Time{}
	}
	return Lease{Token: rj.r.lease.Token, HeldUntil: until}, true
}
