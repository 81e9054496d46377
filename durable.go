package sundial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/worker"
)

// Durable jobs (docs/durable.md): a handler's steps run once per job, not
// once per attempt; a sleep or a wait for a signal parks the job without
// holding a worker, and it resumes where it stopped.
//
//	func order(ctx context.Context, j *sundial.Job) (any, error) {
//		charge, err := sundial.RunStep(ctx, "charge", func(ctx context.Context) (string, error) {
//			return payments.Charge(ctx, orderID, sundial.IdempotencyKey(ctx, "charge"))
//		})
//		if err != nil {
//			return nil, err
//		}
//		carrier, err := sundial.WaitSignal[string](ctx, "shipped", 7*24*time.Hour)
//		if err != nil {
//			return nil, err // parked until "shipped" arrives (or its timeout)
//		}
//		if err := sundial.Sleep(ctx, time.Hour); err != nil {
//			return nil, err
//		}
//		return sundial.RunStep(ctx, "email", func(ctx context.Context) (bool, error) { return mail.Send(ctx, carrier) })
//	}

// RunStep runs fn once per job: its result (or final error) is recorded
// with the job under the attempt's fencing token, and later attempts get
// it back without running fn. See worker.Step. (It is not named Step:
// sundial.Step is a workflow's step, since 0.1.)
func RunStep[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error), opts ...RunOption) (T, error) {
	return worker.Step(ctx, name, fn, opts...)
}

// RunOption changes how RunStep runs its function (StepRetries).
type RunOption = worker.StepOption

// StepRetries has RunStep run its function up to n more times after a
// failure, with backoff doubling from backoff, before it fails for good.
func StepRetries(n int, backoff time.Duration) RunOption { return worker.StepRetries(n, backoff) }

// Sleep parks the job for d without holding a worker or a lease; return
// its error as it is. See worker.Sleep.
func Sleep(ctx context.Context, d time.Duration) error { return worker.Sleep(ctx, d) }

// SleepUntil parks the job until t. See worker.SleepUntil.
func SleepUntil(ctx context.Context, t time.Time) error { return worker.SleepUntil(ctx, t) }

// WaitSignal parks the job until the signal name arrives (or timeout
// passes: ErrSignalTimeout) and returns its value. See worker.WaitSignal.
func WaitSignal[T any](ctx context.Context, name string, timeout time.Duration, opts ...WaitOption) (T, error) {
	return worker.WaitSignal[T](ctx, name, timeout, opts...)
}

// WaitOption changes how WaitSignal waits (SignalKey).
type WaitOption = worker.WaitOption

// SignalKey lets senders name the job by key (Client.SignalKey) instead of
// by its id.
func SignalKey(key string) WaitOption { return worker.SignalKey(key) }

// ErrSignalTimeout is WaitSignal's error when its timeout passed first.
var ErrSignalTimeout = worker.ErrSignalTimeout

// IdempotencyKey is a key for a side effect of the step name of the job
// whose handler received ctx, the same in every attempt: hand it to a
// system that refuses a second request with the same key (a payment
// API's Idempotency-Key), so that a step run twice (its attempt crashed
// after the side effect, before its record) charges once.
func IdempotencyKey(ctx context.Context, name string) string {
	j := worker.JobFrom(ctx)
	if j == nil {
		return ""
	}
	return j.Queue + "/" + j.ID + "/" + name
}

// Signal statuses (Client.Signal, Client.SignalKey).
const (
	SignalDelivered = queue.SignalDelivered // kept on the job; a job parked for it runs now
	SignalDuplicate = queue.SignalDuplicate // sent before with the same idempotency key
	SignalPending   = queue.SignalPending   // by key: kept for the job that will wait with it
)

// ErrSignalRefused is Client.Signal's error when the job takes no such
// signal: it has one of that name already (from another sender), or it
// ended.
var ErrSignalRefused = errors.New("sundial: the job takes no such signal")

// Signal sends the signal name with value (any JSON-encodable value; nil
// for none) to job id. idempotencyKey, when not empty, makes the same call
// sent again answer SignalDuplicate instead of ErrSignalRefused.
func (c *Client) Signal(ctx context.Context, id, name string, value any, idempotencyKey string) (queue.SignalStatus, error) {
	q, err := c.q.QueueOf(ctx, id)
	if err != nil {
		return "", err
	}
	return c.signal(ctx, queue.Signal{Queue: q, ID: id, Name: name, IdempotencyKey: idempotencyKey}, value)
}

// SignalKey sends the signal to the job of queue that waits (or waited)
// with key (SignalKey); kept for it (SignalPending) when none did yet.
func (c *Client) SignalKey(ctx context.Context, queueName, key, name string, value any, idempotencyKey string) (queue.SignalStatus, error) {
	return c.signal(ctx, queue.Signal{Queue: queueName, Key: key, Name: name, IdempotencyKey: idempotencyKey}, value)
}

func (c *Client) signal(ctx context.Context, s queue.Signal, value any) (queue.SignalStatus, error) {
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return "", fmt.Errorf("sundial: signal value: %w", err)
		}
		if len(b) > queue.MaxStepBytes {
			return "", fmt.Errorf("sundial: signal value: %d bytes, at most %d", len(b), queue.MaxStepBytes)
		}
		s.Value = b
	}
	st, _, err := c.q.SendSignal(ctx, s)
	if err != nil {
		return "", err
	}
	switch st {
	case queue.SignalMissing:
		return st, ErrNotFound
	case queue.SignalConflict, queue.SignalFinished, queue.SignalFull:
		return st, fmt.Errorf("%w: %s", ErrSignalRefused, st)
	}
	return st, nil
}

// ChildResult is how a child job ended (RunChildren): its id, queue,
// state, result or last error.
type ChildResult = queue.BatchResult

// RunChildren submits jobs as the children of the running job, once per
// job, parks the job until every child ended (in any queues, on any
// Cluster shard), and returns how each ended, in order. See
// worker.RunChildren. By default it awaits all of them; AwaitFirst, the
// first to end.
func RunChildren(ctx context.Context, name string, jobs []Job, opts ...ChildrenOption) ([]ChildResult, error) {
	built := make([]*job.Job, len(jobs))
	now := time.Now()
	for i, j := range jobs {
		s, err := j.spec()
		if err != nil {
			return nil, worker.NoRetry(fmt.Errorf("sundial: children %q: jobs[%d]: %w", name, i, err))
		}
		if built[i], err = s.Build(now); err != nil {
			return nil, worker.NoRetry(fmt.Errorf("sundial: children %q: jobs[%d]: %w", name, i, err))
		}
	}
	return worker.RunChildren(ctx, name, built, opts...)
}

// ChildrenOption changes how RunChildren awaits the children (AwaitFirst).
type ChildrenOption = worker.ChildrenOption

// AwaitFirst has RunChildren return once the first child ended: the
// children as they stood then; the others go on.
func AwaitFirst() ChildrenOption { return worker.AwaitFirst() }
