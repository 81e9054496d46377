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

	"github.com/sundialhq/sundial/pkg/job"
)

// Handler runs one attempt of a job. The result, if not nil, is stored as
// JSON on the job. A returned error fails the attempt: the job is retried
// with backoff while attempts remain, unless the error wraps ErrNoRetry.
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
