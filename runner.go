package sundial

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
	"github.com/sundialhq/sundial/pkg/worker"
	"golang.org/x/sync/errgroup"
)

// Handler runs one attempt of a job and returns its result (stored as JSON
// on the job; nil for none) or an error, which fails the attempt: the job is
// retried with backoff while attempts remain, unless the error is NoRetry.
type Handler = worker.Handler

// HandlerFunc adapts a function to Handler.
type HandlerFunc = worker.HandlerFunc

// NoRetry marks err so that the job goes dead at once instead of being
// retried.
func NoRetry(err error) error { return worker.NoRetry(err) }

// Snooze returns the error a handler returns to run its job again after d
// without spending an attempt (max_attempts grows by one to give it back);
// a snoozed event records it. For "not yet", not for failures.
func Snooze(d time.Duration) error { return worker.Snooze(d) }

// Cancel returns the error a handler returns to end its job cancelled, not
// dead, with reason as its last error; its dependents are cancelled.
func Cancel(reason error) error { return worker.Cancel(reason) }

// RetryAfter marks err so that the retry comes after d instead of the
// job's backoff (e.g. a 429's Retry-After); the attempt counts.
func RetryAfter(err error, d time.Duration) error { return worker.RetryAfter(err, d) }

// Progress reports how far the running job whose handler received ctx got:
// percent (0..100) and a short message, shown on the job and streamed as an
// event. It also renews the job's lease. It returns worker.ErrLeaseLost when
// the job was cancelled or taken back; the handler should then stop.
func Progress(ctx context.Context, percent int, message string) error {
	return worker.Progress(ctx, percent, message)
}

// Logger returns a logger whose lines are kept with the job whose handler
// received ctx: shown live on its page, read with GET /v1/jobs/{id}/logs
// and `sundial jobs logs`, up to a cap per job (docs/concepts.md, "Job
// logs"). Attributes become the line's fields. Outside a handler it
// discards.
func Logger(ctx context.Context) *slog.Logger { return worker.Logger(ctx) }

// Lease is what a handler knows of its attempt's lease: its fencing token
// and until when this worker trusts it.
type Lease = worker.Lease

// LeaseOf returns the lease of the attempt whose handler received ctx (false
// outside a handler). Check LeaseOf(ctx).Held(time.Now()) just before a side
// effect that must not be made by two attempts at once, and hand the token to
// a system that can refuse a stale writer (docs/operations.md, "Leases").
func LeaseOf(ctx context.Context) (Lease, bool) { return worker.LeaseOf(ctx) }

// RunnerConfig configures a Runner. The zero value serves the "default"
// queue with ten jobs at a time and does the poller's duties.
type RunnerConfig struct {
	// Queues to serve, in priority order (a job of the first is claimed
	// before one of the second). Default "default".
	Queues []string
	// Concurrency is how many jobs run at once. Default 10.
	Concurrency int
	// ShutdownTimeout is how long Run waits for running jobs once its
	// context ends; the jobs still running then are given back and run
	// again elsewhere. Default 30 s.
	ShutdownTimeout time.Duration
	// ExternalPoller leaves the poller's duties to other processes
	// (services/poller, which also writes the history to MongoDB): the
	// Runner then only runs jobs. When false the Runner also makes delayed
	// and retried jobs due, brings back the jobs of dead workers, prunes
	// ended jobs after a day, caps each queue's event stream at EventsMax
	// (no history store reads it) and fires recurring schedules. Several
	// Runners may do so at once.
	ExternalPoller bool
	// EventsMax caps each queue's event stream when the Runner polls.
	// Default 100,000.
	EventsMax int64
	// QueueSettings tune queues of Queues, by name: a weight (any weight
	// above 1 turns the strict order into a random order in proportion to
	// the weights) and a cap on how many of the Concurrency slots the
	// queue's jobs may hold.
	QueueSettings map[string]QueueSettings
	// WorkerID names the worker in GET /v1/workers and in job events.
	// Default <hostname>-<pid>.
	WorkerID string
	// LeaseTTL is how long a job's lease lasts unrenewed (the worker
	// renews it every third of this): a dead worker's jobs come back
	// within it. Default 15 s; every process of a deployment should agree.
	LeaseTTL time.Duration
	// LeaseGrace is how long past a job's timeout its lease is still
	// renewed, so its handler can report. Default 5 s.
	LeaseGrace time.Duration
	// AfterAttempt, when set, is called after each attempt's outcome was
	// stored (a hook for metrics, audit logs, alerts): keep it quick, it
	// runs in the goroutine that writes outcomes.
	AfterAttempt func(AttemptEnd)
	// Relays run beside the Runner's workers for as long as Run runs:
	// the relays of transactional outboxes (sundialpg.NewRelay,
	// sundialmongo.NewRelay; docs/outbox.md), so that one process both
	// relays committed jobs and runs them. Several Runners may each run
	// one: a leader lock in Redis lets one relay at a time.
	Relays []Relay
	// Encryption decrypts the payloads clients encrypted (WithEncryption)
	// before handlers see them, and encrypts those jobs' results and error
	// text under its keyring's primary key. Without a keyring such jobs go
	// dead, as do jobs sealed under a key it lacks (docs/payloads.md,
	// "Encryption").
	Encryption Encryption
	// Logger receives the logs. Default slog.Default().
	Logger *slog.Logger
}

// Relay is a background duty a Runner runs beside its workers (an outbox
// relay). Run must return once ctx ends; an error it returns stops the
// Runner.
type Relay interface {
	Run(ctx context.Context) error
}

// AttemptEnd is what RunnerConfig.AfterAttempt hears of an attempt.
type AttemptEnd struct {
	// Job is the job as its handler saw it (type, attempt, payload).
	Job *Record
	// Outcome is how the handler ended: "succeeded", "failed", "dead"
	// (NoRetry), "snoozed", "cancelled", or "stale" when the outcome was
	// refused because the lease was lost (another attempt owns the job).
	Outcome string
	// State is what the job became: Succeeded, Scheduled or Queued (a
	// retry or a snooze), Dead, Cancelled; empty for a stale outcome.
	State State
	// Error is the handler's error, or a snooze's reason.
	Error string
}

// QueueSettings tune one queue a Runner serves.
type QueueSettings struct {
	// Weight orders the queues at random in proportion to their weights
	// (≤ 1 means 1; all 1: the strict order of RunnerConfig.Queues).
	Weight int
	// MaxConcurrency caps how many of the Runner's running jobs come from
	// the queue (0: no cap but Concurrency).
	MaxConcurrency int
}

// engine is the engine's options for cfg's lease settings.
func (cfg RunnerConfig) engine() queue.Options {
	return queue.Options{LeaseTTL: cfg.LeaseTTL, LeaseGrace: cfg.LeaseGrace}
}

// ConfigFromEnv reads a RunnerConfig, and opens the Redis to use, from the
// SUNDIAL_* variables the services read (docs/configuration.md), with the
// same parser and checks: SUNDIAL_REDIS_URL (one Redis, Sentinel or
// Cluster), SUNDIAL_QUEUES (q:3 gives a weight), SUNDIAL_CONCURRENCY,
// SUNDIAL_WORKER_ID, SUNDIAL_SHUTDOWN_TIMEOUT, SUNDIAL_LEASE_TTL,
// SUNDIAL_LEASE_GRACE, SUNDIAL_EVENTS_MAXLEN and the keyring
// (SUNDIAL_KEYRING, SUNDIAL_KEYRING_FILE, SUNDIAL_KEYRING_PRIMARY). An invalid value is an
// error naming the variable.
func ConfigFromEnv() (RunnerConfig, redis.UniversalClient, error) {
	c, err := config.Load(os.Getenv)
	if err != nil {
		return RunnerConfig{}, nil, err
	}
	cfg := RunnerConfig{Concurrency: c.Concurrency, ShutdownTimeout: c.ShutdownTimeout, WorkerID: c.WorkerID,
		LeaseTTL: c.LeaseTTL, LeaseGrace: c.LeaseGrace, EventsMax: c.EventsMaxLen, QueueSettings: map[string]QueueSettings{},
		Encryption: Encryption{Keyring: c.Keyring}}
	for _, q := range c.Queues {
		cfg.Queues = append(cfg.Queues, q.Name)
		cfg.QueueSettings[q.Name] = QueueSettings{Weight: q.Weight}
	}
	rdb, err := config.NewRedis(c.RedisURL)
	if err != nil {
		return RunnerConfig{}, nil, fmt.Errorf("SUNDIAL_REDIS_URL: %w", err)
	}
	return cfg, rdb, nil
}

// Runner runs jobs: a worker and, unless ExternalPoller is set, the
// poller's duties, in one process. Register handlers before Run.
type Runner struct {
	rdb      redis.UniversalClient
	cfg      RunnerConfig
	w        *worker.Worker
	defaults map[string]Defaults // type → submit defaults (SetDefaults)
}

// NewRunner returns a Runner over rdb.
func NewRunner(rdb redis.UniversalClient, cfg RunnerConfig) *Runner {
	if cfg.EventsMax <= 0 {
		cfg.EventsMax = 100_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	wc := worker.Config{Concurrency: cfg.Concurrency, ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
		ID: cfg.WorkerID, Engine: cfg.engine(), Encryption: cfg.Encryption}
	if f := cfg.AfterAttempt; f != nil {
		wc.AfterAttempt = func(j *job.Job, o queue.Outcome, s queue.Status) {
			end := AttemptEnd{Job: j, Outcome: worker.OutcomeName(o.Kind), State: State(s), Error: o.Error}
			if s == queue.StatusStale {
				end.Outcome, end.State = "stale", ""
			}
			f(end)
		}
	}
	for _, q := range cfg.Queues {
		st := cfg.QueueSettings[q]
		wc.Queues = append(wc.Queues, worker.Queue{Name: q, Weight: st.Weight, MaxConcurrency: st.MaxConcurrency})
	}
	return &Runner{rdb: rdb, cfg: cfg, w: worker.New(rdb, wc)}
}

// SetDefaults declares job type typ's submit defaults (see Defaults); Run
// writes them to Redis when it starts (DeclareDefaults). Call it before
// Run.
func (r *Runner) SetDefaults(typ string, d Defaults) {
	if r.defaults == nil {
		r.defaults = map[string]Defaults{}
	}
	r.defaults[typ] = d
}

// DeclareDefaults writes the submit defaults of the Runner's types to
// Redis now (Run does it when it starts), so that submits that follow, in
// any process, take them.
func (r *Runner) DeclareDefaults(ctx context.Context) error {
	q := queue.New(r.rdb, queue.Options{})
	for typ, d := range r.defaults {
		if err := q.SetTypeDefaults(ctx, typ, d.engine()); err != nil {
			return err
		}
	}
	return nil
}

// Worker returns the pkg/worker Worker inside, e.g. to add middleware.
func (r *Runner) Worker() *worker.Worker { return r.w }

// Handle registers h for jobs of type typ, replacing any earlier handler.
// The Runner claims only jobs of the types it has handlers for; a job of
// another type waits for a worker that handles it (docs/workers.md,
// "Types").
func (r *Runner) Handle(typ string, h Handler) { r.w.Handle(typ, h) }

// HandleFunc registers f for jobs of type typ.
func (r *Runner) HandleFunc(typ string, f func(ctx context.Context, j *Record) (any, error)) {
	r.w.HandleFunc(typ, f)
}

// HandleJSON registers f for jobs of type typ, decoding each job's payload
// into a T first. A payload that does not decode fails the job at once
// (NoRetry). JobFrom(ctx) gives f the rest of the job.
func HandleJSON[T any](r *Runner, typ string, f func(ctx context.Context, payload T) (any, error)) {
	r.w.Handle(typ, JSONHandler(f))
}

// JSONHandler adapts f to a Handler that decodes each job's payload into a
// T first, as HandleJSON registers it; a payload that does not decode
// fails the job at once (NoRetry). sundialtest.WorkArgs runs the same.
func JSONHandler[T any](f func(ctx context.Context, payload T) (any, error)) Handler {
	return HandlerFunc(func(ctx context.Context, j *Record) (any, error) {
		var v T
		if len(j.Payload) > 0 {
			if err := json.Unmarshal(j.Payload, &v); err != nil {
				return nil, NoRetry(fmt.Errorf("payload of %s: %w", j.Type, err))
			}
		}
		return f(ctx, v)
	})
}

// JobFrom returns the job whose handler received ctx (its id, attempt,
// queue, payload…), or nil for another context.
func JobFrom(ctx context.Context) *Record { return worker.JobFrom(ctx) }

// Run runs jobs until ctx ends, then shuts down gracefully (see
// RunnerConfig.ShutdownTimeout) and returns nil; an error means it could
// not run, such as a *queue.FormatError when the Redis holds a storage
// format this release does not read (docs/engine.md, "Storage format").
func (r *Runner) Run(ctx context.Context) error {
	if err := r.DeclareDefaults(ctx); err != nil {
		return err
	}
	q := queue.New(r.rdb, r.cfg.engine())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.w.Run(gctx) })
	if !r.cfg.ExternalPoller {
		p := poller.New(q, poller.Config{TrimEvents: r.cfg.EventsMax, Logger: r.cfg.Logger})
		s := schedule.NewScheduler(q, schedule.SchedulerConfig{Logger: r.cfg.Logger})
		g.Go(func() error { return p.Run(gctx) })
		g.Go(func() error { return s.Run(gctx) })
	}
	for _, rl := range r.cfg.Relays {
		g.Go(func() error { return rl.Run(gctx) })
	}
	return g.Wait()
}
