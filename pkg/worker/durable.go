package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Durable execution (docs/durable.md): a handler's steps run once per job,
// not once per attempt. Each Step, Sleep and WaitSignal call takes the next
// place in the handler's order; what it did is recorded with the job under
// the attempt's fencing token (queue.RecordStep), and a later attempt (after
// a crash, a deploy, a sleep, a wait) gets it back instead of doing it
// again. The handler must make the same calls in the same order on every
// attempt; a call whose name differs from the one recorded in its place
// fails the attempt with a *NondeterminismError.

// ErrSignalTimeout is what WaitSignal returns when its timeout passed
// before the signal arrived. It is recorded: a later attempt gets it too.
var ErrSignalTimeout = errors.New("sundial: the wait for the signal timed out")

// errNotDurable: a durable call with a context no handler received.
var errNotDurable = errors.New("sundial: Step, Sleep and WaitSignal need the context of a running handler")

// NondeterminismError says that the handler's steps no longer match what
// the job recorded: the code changed under a running job. The attempt
// fails (and is retried, so that rolling the code back lets the job go
// on); see docs/durable.md, "Versioning".
type NondeterminismError struct {
	Seq              int
	Recorded, InCode string
}

func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("sundial: step %d is %q in the handler but the job recorded %q there: the handler's steps changed under a running job (docs/durable.md, \"Versioning\")",
		e.Seq, e.InCode, e.Recorded)
}

// StepError is a step's final error as recorded: returned by the attempt
// that ran the step and by every later one, without running it again.
type StepError struct {
	Step, Message string
}

func (e *StepError) Error() string { return fmt.Sprintf("step %q failed: %s", e.Step, e.Message) }

// durableRun is what one attempt knows of its job's records: loaded at the
// first durable call, kept up to date by the calls that record.
type durableRun struct {
	mu      sync.Mutex
	loaded  bool
	seq     int
	steps   map[int]string
	signals map[string]string
}

// durableOf returns the attempt's records, loading them at first use.
func durableOf(ctx context.Context) (*runningJob, *durableRun, error) {
	rj, ok := ctx.Value(runningKey{}).(*runningJob)
	if !ok {
		return nil, nil, errNotDurable
	}
	d := &rj.durable
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loaded {
		return rj, d, nil
	}
	if rj.fake != nil {
		d.steps, d.signals = map[int]string{}, map[string]string{}
		for name, v := range rj.fake.Signals {
			d.signals[name] = "\t0\t" + string(v)
		}
	} else {
		l := rj.r.lease
		steps, signals, err := rj.w.q.Recorded(ctx, rj.r.queue, l.Job.ID)
		if err != nil {
			return nil, nil, err
		}
		d.steps, d.signals = steps, signals
	}
	d.loaded = true
	return rj, d, nil
}

// next takes the next place in the handler's order and returns it with
// what is recorded there ("" for nothing), after checking that what is
// recorded there has the name the handler gives it.
func (d *durableRun) next(name string) (int, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	rec := d.steps[d.seq]
	if rec != "" {
		if s, _ := job.ParseStep(d.seq, rec); s.Name != name {
			return d.seq, "", &NondeterminismError{Seq: d.seq, Recorded: s.Name, InCode: name}
		}
	}
	return d.seq, rec, nil
}

// record writes a step's record at seq and returns the record that holds
// there now (the given one, or one recorded before), and for a wait, the
// signal's record when one arrived.
func (rj *runningJob) record(ctx context.Context, d *durableRun, seq int, rec, signal, key string) (string, error) {
	if rj.fake != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		if have := d.steps[seq]; have != "" && !strings.HasPrefix(have, job.StepWait+"\t") {
			return have, nil
		}
		d.steps[seq] = rec
		return rec, nil
	}
	now, sig, err := rj.w.q.RecordStep(ctx, rj.r.queue, rj.r.lease, queue.StepWrite{Seq: seq, Record: rec, Signal: signal, Key: key})
	if errors.Is(err, queue.ErrLeaseLost) {
		rj.w.leasesLost.Add(1)
		rj.r.cancel(errLeaseLost)
		return "", ErrLeaseLost
	}
	if errors.Is(err, queue.ErrTooManySteps) || errors.Is(err, queue.ErrStepsTooLarge) {
		return "", NoRetry(fmt.Errorf("sundial: step %d: %w", seq, err)) // no attempt gets further
	}
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.steps[seq] = now
	if sig != "" {
		d.signals[signal] = sig
	}
	return now, nil
}

// checkName refuses a name a record cannot hold.
func checkName(what, name string) error {
	if !job.ValidDurableName(name) {
		return NoRetry(fmt.Errorf("sundial: %s name %q: want 1 to 200 characters without tabs or line breaks", what, name))
	}
	return nil
}

// StepOption changes how Step runs its function.
type StepOption func(*stepOptions)

type stepOptions struct {
	retries int
	backoff time.Duration
}

// StepRetries has Step run its function up to n more times after it fails,
// waiting backoff, then twice as long each time (at most a minute), before
// the step fails for good. These retries are the step's own, within one
// attempt of the job; the job's attempts are separate.
func StepRetries(n int, backoff time.Duration) StepOption {
	return func(o *stepOptions) { o.retries, o.backoff = max(n, 0), max(backoff, 0) }
}

// Step runs fn once per job, not once per attempt (docs/durable.md): its
// result, or its final error, is recorded with the job under the attempt's
// fencing token, and a later attempt gets the recorded result (or a
// *StepError) back without running fn. name identifies the step with its
// place in the handler's order. A result must encode to JSON of at most
// queue.MaxStepBytes. fn ends early when the attempt's context does; that
// is no final error and is not recorded. A step whose record is refused
// because the attempt lost its lease returns ErrLeaseLost (another
// attempt may run): return it, the attempt's outcome would be refused too.
// A side effect fn makes outside Sundial is done at least once; pass
// LeaseOf(ctx).Token (or an idempotency key made of the job's id and the
// step's name) to the system it writes, so that a second run is refused.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	var zero T
	if err := checkName("step", name); err != nil {
		return zero, err
	}
	rj, d, err := durableOf(ctx)
	if err != nil {
		return zero, err
	}
	seq, rec, err := d.next(name)
	if err != nil {
		return zero, err
	}
	if rec == "" {
		var o stepOptions
		for _, opt := range opts {
			opt(&o)
		}
		start := time.Now()
		v, ferr := runStep(ctx, fn, o)
		if ferr != nil && (ctx.Err() != nil || isOutcome(ferr)) {
			return zero, ferr // the attempt ends; the step did not
		}
		if ferr == nil {
			b, merr := json.Marshal(v)
			switch {
			case merr != nil:
				return zero, NoRetry(fmt.Errorf("sundial: step %q: the result does not encode to JSON: %v", name, merr))
			case len(b) > queue.MaxStepBytes:
				return zero, NoRetry(fmt.Errorf("sundial: step %q: the result is %d bytes; at most %d are kept", name, len(b), queue.MaxStepBytes))
			}
			rec = job.StepRecord(job.StepOK, name, start, time.Now(), string(b))
		} else {
			msg := ferr.Error()
			if len(msg) > queue.MaxStepBytes {
				msg = msg[:queue.MaxStepBytes]
			}
			rec = job.StepRecord(job.StepErr, name, start, time.Now(), msg)
		}
		if rec, err = rj.record(ctx, d, seq, rec, "", ""); err != nil {
			return zero, err
		}
	}
	s, _ := job.ParseStep(seq, rec)
	if s.Status == job.StepErr {
		return zero, &StepError{Step: name, Message: s.Error}
	}
	var v T
	if len(s.Result) > 0 {
		if err := json.Unmarshal(s.Result, &v); err != nil {
			return zero, fmt.Errorf("sundial: step %q: the recorded result does not decode: %w", name, err)
		}
	}
	return v, nil
}

// runStep runs fn with the step's own retries.
func runStep[T any](ctx context.Context, fn func(context.Context) (T, error), o stepOptions) (T, error) {
	wait := o.backoff
	for try := 0; ; try++ {
		v, err := fn(ctx)
		if err == nil || try >= o.retries || ctx.Err() != nil || errors.Is(err, ErrNoRetry) || isOutcome(err) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

// isOutcome tells an outcome a handler chose (Snooze, Cancel, a park)
// from a failure.
func isOutcome(err error) bool {
	var oe *outcomeError
	return errors.As(err, &oe)
}

// Sleep parks the job for d (docs/durable.md): the attempt ends, holding
// neither a worker nor a lease, and the job runs again once d passed,
// skipping its recorded steps. It returns an error the handler returns as
// it is (its outcome); on the attempt after the sleep it returns nil.
//
//	if err := worker.Sleep(ctx, 24*time.Hour); err != nil {
//		return nil, err
//	}
func Sleep(ctx context.Context, d time.Duration) error {
	return SleepUntil(ctx, time.Now().Add(d))
}

// SleepUntil is Sleep until t.
func SleepUntil(ctx context.Context, t time.Time) error {
	rj, d, err := durableOf(ctx)
	if err != nil {
		return err
	}
	seq, rec, err := d.next("sleep")
	if err != nil {
		return err
	}
	now := time.Now()
	if rec == "" {
		wake := t.Truncate(time.Millisecond)
		if rec, err = rj.record(ctx, d, seq, job.StepRecord(job.StepWait, "sleep", now, time.Time{}, strconv.FormatInt(wake.UnixMilli(), 10)), "", ""); err != nil {
			return err
		}
	}
	s, _ := job.ParseStep(seq, rec)
	if s.Status != job.StepWait {
		return nil // over
	}
	wake := time.Time(*s.Deadline)
	if now.Before(wake) && rj.fake == nil {
		return park(wake.Sub(now), "sleep")
	}
	// Over: recorded as done, so that the job's page shows it ended.
	_, err = rj.record(ctx, d, seq, job.StepRecord(job.StepOK, "sleep", time.Time(s.StartedAt), now, ""), "", "")
	return err
}

// park returns the outcome that parks the job for delay, waiting for what.
func park(delay time.Duration, what string) error {
	return &outcomeError{kind: queue.OutcomeParked, err: errors.New(what), delay: clampDelay(delay)}
}

// WaitOption changes how WaitSignal waits.
type WaitOption func(*waitOptions)

type waitOptions struct{ key string }

// SignalKey lets callers send the signal to key (POST /v1/signals with the
// job's queue), instead of to the job's id: an order number, say. A key
// names one job of the queue at a time, the last one that waited with it.
// A signal sent to a key before a job waits with it is kept for that job.
func SignalKey(key string) WaitOption { return func(o *waitOptions) { o.key = key } }

// WaitSignal waits for the signal name sent to the job (POST
// /v1/jobs/{id}/signals/{signal}, or to the job's key, see SignalKey) and
// returns its value decoded into T. While it waits the job is parked, as
// in Sleep: WaitSignal then returns an error that the handler returns as
// it is, and the job runs again when the signal arrives, or when timeout
// passed (0: no timeout), in which case WaitSignal returns
// ErrSignalTimeout. A signal sent before the wait began is kept and read
// at once. A job takes one signal of each name.
func WaitSignal[T any](ctx context.Context, name string, timeout time.Duration, opts ...WaitOption) (T, error) {
	var zero T
	if err := checkName("signal", name); err != nil {
		return zero, err
	}
	var o waitOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.key != "" {
		if err := checkName("signal key", o.key); err != nil {
			return zero, err
		}
	}
	rj, d, err := durableOf(ctx)
	if err != nil {
		return zero, err
	}
	stepName := "signal:" + name
	seq, rec, err := d.next(stepName)
	if err != nil {
		return zero, err
	}
	now := time.Now()
	if rec == "" {
		deadline := ""
		if timeout > 0 {
			deadline = strconv.FormatInt(now.Add(timeout).UnixMilli(), 10)
		}
		if rec, err = rj.record(ctx, d, seq, job.StepRecord(job.StepWait, stepName, now, time.Time{}, deadline), name, o.key); err != nil {
			return zero, err
		}
	}
	s, _ := job.ParseStep(seq, rec)
	switch s.Status {
	case job.StepTimeout:
		return zero, ErrSignalTimeout
	case job.StepOK:
		return decodeSignal[T](name, s.Result)
	}
	d.mu.Lock()
	sig := d.signals[name]
	d.mu.Unlock()
	if sig != "" {
		got, _ := job.ParseSignal(name, sig)
		if _, err := rj.record(ctx, d, seq, job.StepRecord(job.StepOK, stepName, time.Time(s.StartedAt), now, string(got.Value)), "", ""); err != nil {
			return zero, err
		}
		return decodeSignal[T](name, got.Value)
	}
	if s.Deadline != nil && !now.Before(time.Time(*s.Deadline)) {
		if _, err := rj.record(ctx, d, seq, job.StepRecord(job.StepTimeout, stepName, time.Time(s.StartedAt), now, strconv.FormatInt(time.Time(*s.Deadline).UnixMilli(), 10)), "", ""); err != nil {
			return zero, err
		}
		return zero, ErrSignalTimeout
	}
	if rj.fake != nil {
		return zero, ErrSignalTimeout // a test's fake run has no later attempt
	}
	delay := MaxSnooze
	if s.Deadline != nil {
		delay = time.Time(*s.Deadline).Sub(now)
	}
	return zero, park(delay, "signal:"+name)
}

func decodeSignal[T any](name string, raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, NoRetry(fmt.Errorf("sundial: signal %q: its value does not decode: %w", name, err))
	}
	return v, nil
}

// RunChildren submits jobs as the children of the running job, once per
// job (a step named "children:"+name), parks the job until every child
// ended, and returns how each ended, in the order given (recorded as the
// step "children:"+name+":results"). Children may be in any queues — on a
// Redis Cluster, on any shards: they are a batch (docs/workflows.md,
// "Batches") whose end sends the parent a signal. Their ids are made from
// the parent's, so an attempt that died half-way through submitting them
// is completed by the next, without a child twice. At most
// queue.BatchChunk children; their results together are one step's
// record (at most queue.MaxStepBytes).
//
// With AwaitFirst, the parent runs again as soon as the first child ended,
// and the results are the children as they stood then: the others go on
// (cancel them with the batch, queue.Client.CancelBatch, if they are no
// longer wanted).
func RunChildren(ctx context.Context, name string, jobs []*job.Job, opts ...ChildrenOption) ([]queue.BatchResult, error) {
	var o childrenOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkName("children", name); err != nil {
		return nil, err
	}
	if len(jobs) == 0 || len(jobs) > queue.BatchChunk {
		return nil, NoRetry(fmt.Errorf("sundial: children %q: 1 to %d jobs, not %d", name, queue.BatchChunk, len(jobs)))
	}
	rj, d, err := durableOf(ctx)
	if err != nil {
		return nil, err
	}
	if rj.fake != nil {
		return nil, NoRetry(errors.New("sundial: RunChildren needs a worker and Redis; a test's fake run has neither"))
	}
	parent := rj.r.lease.Job
	d.mu.Lock()
	batchID := parent.ID + ".c" + strconv.Itoa(d.seq+1)
	d.mu.Unlock()
	done := "sundial.children:" + batchID
	if _, err := Step(ctx, "children:"+name, func(ctx context.Context) (string, error) {
		for i, j := range jobs {
			j.ID = batchID + "." + strconv.Itoa(i)
		}
		_, _, err := rj.w.q.CreateBatch(ctx, queue.BatchSpec{ID: batchID, Jobs: jobs,
			NotifyComplete: &queue.SignalTarget{Queue: rj.r.queue, Job: parent.ID, Name: done, First: o.first}})
		if errors.Is(err, queue.ErrBatchExists) {
			// An earlier attempt made the batch and died before its
			// record: add what it may have left out (the same ids: a
			// child that exists is not submitted again) and seal it.
			if _, _, err = rj.w.q.AddToBatch(ctx, batchID, jobs, true); errors.Is(err, queue.ErrBatchSealed) {
				err = nil
			}
		}
		return batchID, err
	}); err != nil {
		return nil, err
	}
	if _, err := WaitSignal[string](ctx, done, 0); err != nil {
		return nil, err
	}
	return Step(ctx, "children:"+name+":results", func(ctx context.Context) ([]queue.BatchResult, error) {
		out := make([]queue.BatchResult, len(jobs))
		cursor := ""
		for {
			page, next, err := rj.w.q.BatchResults(ctx, batchID, cursor, 1000)
			if err != nil {
				return nil, err
			}
			for _, r := range page {
				if i, err := strconv.Atoi(r.ID[strings.LastIndexByte(r.ID, '.')+1:]); err == nil && i >= 0 && i < len(out) {
					out[i] = r
				}
			}
			if next == "" {
				return out, nil
			}
			cursor = next
		}
	})
}

// ChildrenOption changes how RunChildren awaits the children.
type ChildrenOption func(*childrenOptions)

type childrenOptions struct{ first bool }

// AwaitFirst has RunChildren return once the first child ended, not the
// last.
func AwaitFirst() ChildrenOption { return func(o *childrenOptions) { o.first = true } }
