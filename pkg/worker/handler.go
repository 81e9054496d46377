// Package worker runs Sundial jobs: it claims jobs from Redis in priority
// order, runs the handler registered for each job's type under the job's
// timeout, and reports the outcome, with a heartbeat in the worker registry
// and a graceful shutdown that gives unfinished jobs back at once.
//
//	w := worker.New(rdb, worker.Config{Queues: []worker.Queue{{Name: "default"}}})
//	w.Handle("email.send", worker.HandlerFunc(sendEmail))
//	err := w.Run(ctx) // until ctx is cancelled
package worker

import (
	"context"
	"errors"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Handler runs one attempt of a job. The result, if not nil, is stored as
// JSON on the job. A returned error fails the attempt: the job is retried
// with backoff while attempts remain, unless the error wraps ErrNoRetry, or
// is one of the outcomes a handler may choose: Snooze, Cancel, RetryAfter.
// ctx ends when the job's timeout passes, when the job is cancelled, or when
// the worker shuts down past its deadline.
type Handler interface {
	Work(ctx context.Context, j *job.Job) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, j *job.Job) (any, error)

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, j *job.Job) (any, error) { return f(ctx, j) }

// Middleware wraps a Handler, e.g. for logging, metrics or tracing.
type Middleware func(Handler) Handler

// ErrNoRetry marks an error that must not be retried: the job goes to the
// dead set at once. Wrap it with NoRetry or fmt.Errorf("…: %w", ErrNoRetry).
var ErrNoRetry = errors.New("do not retry")

// NoRetry returns err marked so that the job is not retried.
func NoRetry(err error) error {
	if err == nil {
		err = errors.New("failed")
	}
	return &noRetryError{err}
}

type noRetryError struct{ err error }

func (e *noRetryError) Error() string        { return e.err.Error() }
func (e *noRetryError) Unwrap() error        { return e.err }
func (e *noRetryError) Is(target error) bool { return target == ErrNoRetry }

// MaxSnooze is the longest a handler may snooze its job or delay its retry
// (Snooze, RetryAfter): a longer delay is cut to it.
const MaxSnooze = 365 * 24 * time.Hour

// Snooze returns the error a handler returns to have its job run again
// after d (0: at once, behind the jobs already queued) without spending an
// attempt: the attempt ends, and max_attempts grows by one to give it
// back, so attempt numbers stay unique. The job's history records a
// snoozed event. Use it for "not yet" (a resource not ready, a rate limit
// of your own), not for failures.
func Snooze(d time.Duration) error {
	return &outcomeError{kind: queue.OutcomeSnoozed, delay: clampDelay(d)}
}

// Cancel returns the error a handler returns to end its job cancelled, not
// dead: no retry, and its dependents are cancelled. reason is recorded as
// the job's last_error (nil: "cancelled by its handler").
func Cancel(reason error) error {
	if reason == nil {
		reason = errors.New("cancelled by its handler")
	}
	return &outcomeError{kind: queue.OutcomeCancelled, err: reason}
}

// RetryAfter returns err marked so that the retry comes after d instead of
// after the job's backoff, e.g. a 429 answer's Retry-After. The attempt is
// spent as with any failure: the job goes dead when none is left.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("failed")
	}
	return &outcomeError{kind: queue.OutcomeFailed, err: err, delay: max(clampDelay(d), time.Millisecond)}
}

func clampDelay(d time.Duration) time.Duration { return min(max(d, 0), MaxSnooze) }

// outcomeError carries the outcome a handler chose (Snooze, Cancel,
// RetryAfter) to the worker, which reports it.
type outcomeError struct {
	kind  queue.OutcomeKind
	err   error
	delay time.Duration
}

func (e *outcomeError) Error() string {
	switch {
	case e.kind == queue.OutcomeSnoozed:
		return "snoozed for " + e.delay.String()
	case e.kind == queue.OutcomeParked:
		return "parked for " + e.delay.String() + ": " + e.err.Error()
	case e.err != nil:
		return e.err.Error()
	}
	return string(e.kind)
}

func (e *outcomeError) Unwrap() error { return e.err }

// OutcomeOf tells what a worker reports for the error a handler returned
// (not nil): the outcome's kind and, for a snooze or a chosen retry delay,
// the delay.
func OutcomeOf(err error) (queue.OutcomeKind, time.Duration) {
	var o queue.Outcome
	outcomeOf(&o, err)
	return o.Kind, o.Delay
}

// OutcomeName names an outcome kind as people read it: "succeeded",
// "failed", "dead", "snoozed" or "cancelled".
func OutcomeName(k queue.OutcomeKind) string {
	switch k {
	case queue.OutcomeSucceeded:
		return "succeeded"
	case queue.OutcomeDead:
		return "dead"
	case queue.OutcomeSnoozed:
		return "snoozed"
	case queue.OutcomeCancelled:
		return "cancelled"
	case queue.OutcomeParked:
		return "parked"
	}
	return "failed"
}

// outcomeOf fills o from the error a handler returned.
func outcomeOf(o *queue.Outcome, err error) {
	o.Kind, o.Error = queue.OutcomeFailed, err.Error()
	var oe *outcomeError
	switch {
	case errors.Is(err, ErrNoRetry):
		o.Kind = queue.OutcomeDead
	case errors.As(err, &oe):
		o.Kind, o.Delay = oe.kind, oe.delay
		switch oe.kind {
		case queue.OutcomeSnoozed:
			o.Error = ""
		case queue.OutcomeParked:
			o.Error = oe.err.Error() // what it waits for
		}
	}
}
