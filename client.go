package sundial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// Record is a job as Sundial stores it: its id, state, attempts, times,
// result and last error. Get, Cancel and Retry return it, and handlers
// receive it.
type Record = job.Job

// Priority orders jobs inside one queue, strictly: no Normal job starts
// while a High one is due, and no Low one while a Normal one is due.
type Priority = job.Priority

// The three priorities.
const (
	High   = job.High
	Normal = job.Normal
	Low    = job.Low
)

// State is where a job is in its lifecycle (Record.State).
type State = job.State

// The job states. Succeeded, Dead and Cancelled are final.
const (
	Waiting   = job.Waiting   // on the jobs it depends on
	Scheduled = job.Scheduled // due later, or waiting for a retry
	Queued    = job.Queued    // due, waiting for a worker
	Active    = job.Active    // running
	Succeeded = job.Succeeded
	Dead      = job.Dead // attempts exhausted or not retryable
	Cancelled = job.Cancelled
)

// Backoff is the retry delay policy: the delay before retry n is random
// between 0 and min(MaxSeconds, BaseSeconds·2^(n-1)).
type Backoff = job.Backoff

// Errors of Get, Cancel and Retry; test them with errors.Is.
var (
	// ErrNotFound: no job with that id is in Redis (it may have been
	// pruned after its retention; the history store still has it).
	ErrNotFound = queue.ErrNotFound
	// ErrConflict: the job's state does not allow the operation, e.g.
	// cancelling a job that already succeeded.
	ErrConflict = queue.ErrConflict
)

// Job is a job to submit. Only Type is required.
type Job struct {
	// Type names the handler that runs the job, e.g. "email.send". Empty
	// with a typed job (Args) as the Payload: its Kind.
	Type string
	// Payload is the job's input: any value encoding/json can marshal (a
	// string becomes a JSON string), or JSON text as json.RawMessage or
	// []byte. Nil means none.
	Payload any
	// Queue is the queue the job goes to; default "default".
	Queue string
	// Priority within the queue; default Normal.
	Priority Priority
	// RunAt is when the job becomes due; Delay is the same counted from
	// now. Set at most one; neither means at once.
	RunAt time.Time
	Delay time.Duration
	// MaxAttempts is how often the job is tried before it goes dead;
	// default 3.
	MaxAttempts int
	// Timeout bounds one attempt, in whole seconds (rounded up); default
	// 30 s. The handler's context ends when it passes.
	Timeout time.Duration
	// Backoff is the retry delay policy; default 5 s doubling up to 1 h.
	Backoff *Backoff
	// IdempotencyKey makes a repeated submit harmless: within 24 hours the
	// same key in the same queue returns the first job and creates nothing.
	IdempotencyKey string
	// DependsOn lists jobs that must succeed first, by id; in SubmitMany
	// also "#n", the n-th job of the same call. The job waits until they
	// have; if one ends dead or cancelled, the job is
	// cancelled (unless OnDependencyFailure is DependencyRun). A
	// dependency may be in another queue.
	DependsOn []string
	// OnDependencyFailure is what happens to the job when a dependency
	// ends dead or cancelled: DependencyCancel (the default: it is
	// cancelled too) or DependencyRun (it runs anyway).
	OnDependencyFailure string
	// Group is the job's fairness group (a tenant): within one priority
	// of a queue, groups take turns (docs/flow-control.md).
	Group string
	// Traceparent is a W3C trace context the job's handler span continues
	// (docs/tracing.md).
	Traceparent string
	// StartBy (or ExpiresIn from now): unless its first attempt started
	// by then, the job ends dead, expired (docs/concepts.md, "Expiry and
	// deadlines"). Set at most one.
	StartBy   time.Time
	ExpiresIn time.Duration
	// Deadline (or DeadlineIn from now): no attempt starts at or after
	// it, a running attempt's context ends at it, no retry is scheduled
	// past it. Set at most one.
	Deadline   time.Time
	DeadlineIn time.Duration
	// Debounce makes a burst of submits with one key one job
	// (docs/concepts.md, "Debounce"); Submitted.Debounced tells a submit
	// that updated the pending job.
	Debounce *Debounce
	// Sequence runs the job after the earlier jobs of its key in its
	// queue, one at a time, in submit order (docs/concepts.md, "Sequences").
	Sequence *Sequence
	// Tags label the job, to find it by (at most 10, [A-Za-z0-9_.:=/-]{1,64}).
	Tags []string
}

// Debounce is a job's debounce: Key, WindowSeconds, Mode (DebounceReplace
// or DebounceExtend) and MaxWaitSeconds.
type Debounce = job.Debounce

// Sequence is a job's sequence: Key and OnFailure (SequenceContinue or
// SequenceCancel).
type Sequence = job.Sequence

// The modes of Debounce and the policies of Sequence.
const (
	DebounceReplace  = job.DebounceReplace  // the pending job takes each submit's payload
	DebounceExtend   = job.DebounceExtend   // each submit moves the pending job a window later
	SequenceContinue = job.SequenceContinue // the next job runs after one that ended dead or cancelled
	SequenceCancel   = job.SequenceCancel   // the jobs behind one that ended dead or cancelled are cancelled
)

// spec turns j into the engine's submit spec.
func (j Job) spec() (job.Spec, error) {
	if a, ok := j.Payload.(Args); ok && j.Type == "" {
		j.Type = a.Kind() // a typed job as a Job's payload, with options beside it
	}
	s := job.Spec{
		Queue: j.Queue, Type: j.Type, Priority: j.Priority, Backoff: j.Backoff,
		IdempotencyKey: j.IdempotencyKey, DependsOn: j.DependsOn, Group: j.Group, Traceparent: j.Traceparent,
		OnDependencyFailure: j.OnDependencyFailure,
	}
	switch p := j.Payload.(type) {
	case nil:
	case json.RawMessage:
		s.Payload = p
	case []byte:
		s.Payload = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return s, fmt.Errorf("sundial: payload: %w", err)
		}
		s.Payload = b
	}
	if !j.RunAt.IsZero() {
		t := j.RunAt
		s.RunAt = &t
	}
	if j.Delay != 0 {
		d := j.Delay.Seconds()
		s.DelaySeconds = &d
	}
	if j.MaxAttempts != 0 {
		n := j.MaxAttempts
		s.MaxAttempts = &n
	}
	if j.Timeout != 0 {
		n := wholeSeconds(j.Timeout)
		s.TimeoutSeconds = &n
	}
	s.StartBy, s.ExpiresInSeconds = timeOrSeconds(j.StartBy, j.ExpiresIn)
	s.Deadline, s.DeadlineInSeconds = timeOrSeconds(j.Deadline, j.DeadlineIn)
	s.Debounce, s.Sequence, s.Tags = j.Debounce, j.Sequence, j.Tags
	return s, nil
}

// timeOrSeconds gives an option set as an instant or a duration from now
// as job.Spec takes it (nil for an unset one).
func timeOrSeconds(at time.Time, in time.Duration) (*time.Time, *float64) {
	var t *time.Time
	var sec *float64
	if !at.IsZero() {
		t = &at
	}
	if in != 0 {
		v := in.Seconds()
		sec = &v
	}
	return t, sec
}

// Submitted is the outcome of submitting one job.
type Submitted struct {
	// Job is the stored job; for a duplicate, the earlier one.
	Job *Record
	// Duplicate is true when the IdempotencyKey named a job submitted
	// earlier; nothing new was created.
	Duplicate bool
	// Debounced is true when the Debounce key named a pending job, which
	// the submit updated; nothing new was created.
	Debounced bool
}

// Client submits and inspects jobs. It is safe for concurrent use; make one
// and share it.
type Client struct {
	q       *queue.Client
	mw      []SubmitMiddleware
	history history.Reader // nil: none (WithHistory)
	keyring *Keyring       // nil: none (WithEncryption)
}

// SubmitMiddleware sees every job a Client submits before it is
// validated: it may change the job (stamp a tenant, a trace, a default)
// or refuse it with an error, which fails the whole Submit or SubmitMany
// call with nothing stored.
type SubmitMiddleware func(ctx context.Context, j *Job) error

// UseSubmit adds submit middleware, run in the order added. Call it before
// the Client is shared.
func (c *Client) UseSubmit(mw ...SubmitMiddleware) { c.mw = append(c.mw, mw...) }

// NewClient returns a Client over rdb, which may be any go-redis client:
// *redis.Client, a Sentinel failover client or *redis.ClusterClient.
func NewClient(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	c := &Client{q: queue.New(rdb, queue.Options{})}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ClientOption configures a Client (NewClient).
type ClientOption func(*Client)

// WithHistory makes Get fall back to the history store (MongoDB, written
// by services/poller) for a job Redis no longer holds — pruned after its
// retention — as GET /v1/jobs/{id} does: history.NewStore(db, …) is one.
func WithHistory(h history.Reader) ClientOption { return func(c *Client) { c.history = h } }

// Engine returns the pkg/queue client underneath, for what this package
// does not cover (pausing queues, dead letters, throughput).
func (c *Client) Engine() *queue.Client { return c.q }

// Submit validates a job and stores it: a Job, or a typed job (Args) as
// it is, its Kind the type and the value its payload. A validation error
// is a *job.FieldError naming the field at fault; nothing is stored then.
// Fields the job leaves out take its type's declared defaults (Defaults),
// then the engine's.
func (c *Client) Submit(ctx context.Context, a Args) (*Submitted, error) {
	out, err := c.SubmitMany(ctx, []Job{asJob(a)})
	if err != nil {
		return nil, err
	}
	return &out[0], nil
}

// SubmitMany validates and stores jobs, all or nothing, in one script call.
// They must all be in the same queue. A job may depend on an earlier job of
// the same call as "#n" (its index). A validation error names the job as
// "jobs[i].field".
func (c *Client) SubmitMany(ctx context.Context, jobs []Job) ([]Submitted, error) {
	now := c.q.Now()
	built := make([]*job.Job, len(jobs))
	for i, j := range jobs {
		var err error
		if built[i], err = c.build(ctx, &j, now); err != nil {
			if fe, ok := err.(*job.FieldError); ok && len(jobs) > 1 {
				return nil, fe.Prefix(fmt.Sprintf("jobs[%d]", i))
			}
			return nil, err
		}
	}
	res, err := c.q.Submit(ctx, built)
	if err != nil {
		return nil, err
	}
	out := make([]Submitted, len(res))
	for i, r := range res {
		out[i] = Submitted{Job: r.Job, Duplicate: r.Duplicate, Debounced: r.Debounced}
	}
	return out, nil
}

// build runs the submit middleware on *j, then validates it with its
// type's declared defaults applied, as of now.
func (c *Client) build(ctx context.Context, j *Job, now time.Time) (*job.Job, error) {
	for _, mw := range c.mw {
		if err := mw(ctx, j); err != nil {
			return nil, err
		}
	}
	s, err := j.spec()
	if err == nil {
		err = c.seal(&s)
	}
	if err == nil {
		err = c.q.ApplyTypeDefaults(ctx, &s)
	}
	if err != nil {
		return nil, err
	}
	return s.Build(now)
}

// The policies of Job.OnDependencyFailure.
const (
	DependencyCancel = job.DependencyCancel // the job is cancelled with its failed dependency
	DependencyRun    = job.DependencyRun    // the job runs anyway
)

// Get returns the job with id, from Redis, or from the history store when
// the Client has one (WithHistory) and Redis no longer holds the job; else
// ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Record, error) {
	j, err := c.q.Get(ctx, id)
	if !errors.Is(err, ErrNotFound) || c.history == nil {
		return j, err
	}
	j, err = c.history.Job(ctx, id)
	if errors.Is(err, history.ErrNotFound) {
		return nil, ErrNotFound
	}
	return j, err
}

// Cancel cancels the job with id and returns it as it is afterwards: a
// waiting, scheduled or queued job ends cancelled at once; a running job's
// handler sees its context cancelled. A job already in a final state is
// ErrConflict.
func (c *Client) Cancel(ctx context.Context, id string) (*Record, error) {
	return c.q.Cancel(ctx, id)
}

// Retry queues a dead or cancelled job again with its attempts reset;
// another state is ErrConflict.
func (c *Client) Retry(ctx context.Context, id string) (*Record, error) {
	return c.q.Retry(ctx, id)
}

// QueueInfo is how a queue is doing: its jobs by state and its totals.
type QueueInfo struct {
	Name   string
	Paused bool
	// Queued counts the due jobs, by priority, but for those a limit
	// holds back: Throttled counts them.
	Queued                       map[Priority]int64
	Throttled                    int64
	Scheduled, Active, Waiting   int64
	Dead                         int64
	Submitted, Succeeded, Failed int64 // since the queue began; Failed counts failed attempts
}

// QueueInfo returns the counts of queue in one pipelined round trip. A
// queue that never had a job reports zeros.
func (c *Client) QueueInfo(ctx context.Context, queue string) (*QueueInfo, error) {
	st, err := c.q.Counts(ctx, queue)
	if err != nil {
		return nil, err
	}
	info := &QueueInfo{
		Name: st.Name, Paused: st.Paused, Queued: make(map[Priority]int64, len(st.Queued)),
		Throttled: st.Throttled, Scheduled: st.Scheduled, Active: st.Active, Waiting: st.Waiting, Dead: st.Dead,
		Submitted: st.SubmittedTotal, Succeeded: st.SucceededTotal, Failed: st.FailedTotal,
	}
	for p, n := range st.Queued {
		info.Queued[Priority(p)] = n
	}
	return info, nil
}

// Limit caps the jobs of a queue it covers: how many run at once and how
// many start per period, per value of a payload key when it has one
// (docs/flow-control.md).
type Limit = queue.Limit

// Rate is a Limit's cap on starts per period.
type Rate = queue.Rate

// LimitStatus is a Limit with the jobs it holds now.
type LimitStatus = queue.LimitStatus

// ErrLimitNotFound: the queue has no limit of that name.
var ErrLimitNotFound = queue.ErrLimitNotFound

// SetLimit creates or replaces a limit of queue; it applies from the next
// claim, on every worker.
func (c *Client) SetLimit(ctx context.Context, queue string, l Limit) (LimitStatus, error) {
	st, _, err := c.q.SetLimit(ctx, queue, l)
	return st, err
}

// Limits returns the limits of queue.
func (c *Client) Limits(ctx context.Context, queue string) ([]LimitStatus, error) {
	return c.q.Limits(ctx, queue)
}

// DeleteLimit removes a limit of queue; the jobs it held back are queued
// again at once.
func (c *Client) DeleteLimit(ctx context.Context, queue, name string) error {
	return c.q.DeleteLimit(ctx, queue, name)
}

// Schedules returns the store of recurring schedules: Put one (a cron
// expression or an interval, in a time zone, and the job to submit), and a
// Runner (or services/poller) fires it.
func (c *Client) Schedules() *schedule.Store { return schedule.NewStore(c.q) }

// Wait blocks until the job with id reaches a final state (Succeeded, Dead
// or Cancelled) or ctx ends, and returns it. It sleeps on the queue's event
// stream, not on a timer, so it returns as soon as the job ends.
func (c *Client) Wait(ctx context.Context, id string) (*Record, error) {
	j, err := c.q.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	last := c.streamTail(ctx, queue.EventStreamKey(j.Queue))
	for {
		// Read the job after noting the stream's position: an event that
		// comes between the two is still read below.
		if j, err = c.q.Get(ctx, id); err != nil || j.State.Final() {
			return j, err
		}
		if _, last, err = c.readEvents(ctx, j.Queue, last, time.Second); err != nil {
			return nil, err
		}
	}
}

// Uniqueness is how a queue's idempotency keys make submits unique: for a
// window after the first submit (24 h by default), or only while the first
// job has not ended (UntilFinished).
type Uniqueness = queue.Uniqueness

// SetUniqueness sets queue's uniqueness rules, from the next submit on, in
// every process (a zero value restores the defaults).
func (c *Client) SetUniqueness(ctx context.Context, queue string, u Uniqueness) error {
	return c.q.SetUniqueness(ctx, queue, u)
}
