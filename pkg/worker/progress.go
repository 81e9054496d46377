package worker

import (
	"context"
	"errors"

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
	held, _, err := rj.w.q.Progress(ctx, rj.r.queue, rj.r.lease, queue.ProgressReport{Percent: percent, Message: message})
	if err != nil {
		return err
	}
	if !held {
		rj.w.leasesLost.Add(1)
		rj.r.cancel(errLeaseLost)
		return ErrLeaseLost
	}
	return nil
}
