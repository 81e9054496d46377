package worker

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Drained is one attempt a Drain ran: the job as claimed, how its handler
// ended, and the state it reached.
type Drained struct {
	Job     *job.Job
	Outcome queue.OutcomeKind
	// Status is the state the job reached (queued, scheduled, succeeded,
	// dead, cancelled).
	Status queue.Status
	Result json.RawMessage // for OutcomeSucceeded
	Error  string          // the handler's error, or a snooze's reason
	// Delay is a snooze's, or the retry delay the handler chose.
	Delay time.Duration
}

// DrainOptions tune Drain.
type DrainOptions struct {
	// Advance moves Drain's clock to the next scheduled job (a delay, a
	// retry's backoff, a snooze) whenever nothing is due, instead of
	// stopping: delayed jobs run at once, in the order they are due.
	Advance bool
	// MaxAttempts bounds how many attempts one Drain runs; default 10,000.
	MaxAttempts int
}

// ErrDrainLimit: Drain ran DrainOptions.MaxAttempts attempts and jobs were
// still due (a handler that snoozes forever, say).
var ErrDrainLimit = errors.New("sundial: drain ran its attempt limit and jobs are still due")

// Drain runs the jobs of queueName that are due, one at a time in the
// calling goroutine, with the worker's handlers and middleware, and returns
// each attempt's outcome, until no job of the worker's types is due. Its
// clock starts at the current time; with Advance it jumps to each next
// scheduled job. It also does the poller's part for the queue: jobs waiting
// on ended jobs of other queues are released, and batch callbacks fire
// once their members ended (a callback into another queue runs when that
// queue is drained). Outcomes are written as a running worker writes them
// (retries, dead letters, dependents released), so a test reads the same
// states a deployment would. For tests (package sundialtest): the worker
// must not Run at the same time.
func (w *Worker) Drain(ctx context.Context, queueName string, o DrainOptions) ([]Drained, error) {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10_000
	}
	types := slices.Sorted(maps.Keys(w.handlers))
	now := time.Now()
	opts := w.q.Options()
	q := queue.New(w.q.Redis(), queue.Options{Now: func() time.Time { return now }, LeaseTTL: opts.LeaseTTL, LeaseGrace: opts.LeaseGrace})
	var out []Drained
	for len(out) < o.MaxAttempts {
		if _, _, err := q.Promote(ctx, queueName, 1000); err != nil {
			return out, err
		}
		ls, err := q.Claim(ctx, queueName, 1, w.cfg.ID, types...)
		if err != nil {
			return out, err
		}
		if len(ls) == 0 {
			// What the poller would do next: jobs of this queue released by
			// ended jobs of other queues, batch members' ends relayed and
			// batch callbacks fired (into any queue: this one's run here).
			moved, err := pollerDuties(ctx, q, queueName)
			if err != nil {
				return out, err
			}
			if moved > 0 {
				continue
			}
			next, ok, err := q.NextDue(ctx, queueName)
			if err != nil || !o.Advance || !ok {
				return out, err
			}
			if next.After(now) {
				now = next
			}
			continue
		}
		l := ls[0]
		jctx, cancel := context.WithCancelCause(ctx)
		r := &running{queue: queueName, lease: l, cancel: cancel, heldUntil: time.Now().Add(24 * time.Hour),
			renewUntil: time.Now().Add(l.Job.Timeout() + opts.LeaseGrace)}
		jctx = context.WithValue(jctx, runningKey{}, &runningJob{w: w, r: r})
		oc, _ := w.execute(jctx, l)
		cancel(nil)
		st, err := q.Complete(ctx, queueName, []queue.Outcome{oc})
		if err != nil {
			return out, err
		}
		out = append(out, Drained{Job: l.Job, Outcome: oc.Kind, Status: st[0], Result: oc.Result, Error: oc.Error, Delay: oc.Delay})
	}
	return out, ErrDrainLimit
}

// pollerDuties does for queueName, once, what a poller's pass does beside
// promoting: it settles its jobs' dependencies on other queues, relays its
// batch members' ends to their batches and fires the batch callbacks due.
// It returns how many things it moved.
func pollerDuties(ctx context.Context, q *queue.Client, queueName string) (int, error) {
	settled, err := q.SettleRemoteDeps(ctx, queueName, 1000)
	if err != nil {
		return 0, err
	}
	relayed, err := q.RelayBatchEnds(ctx, queueName, 1000)
	if err != nil {
		return 0, err
	}
	fired, err := q.FireBatchCallbacks(ctx, 1000)
	if err != nil {
		return 0, err
	}
	return settled + relayed + fired, nil
}
