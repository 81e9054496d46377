// Package outbox is the relay shared by sundialpg and sundialmongo: it moves
// jobs that a transaction wrote into a database's outbox over to Redis, each
// exactly once, in the outbox's order per queue. A Store reads and deletes
// the rows of one database; the relay does the rest (leader lock, wake-ups,
// submit, metrics).
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// KeyPrefix starts the idempotency key of every job an outbox holds: the
// key is KeyPrefix + the job's id. The id is a ULID made when the row was
// written, unique across tables and databases, so a table dropped and made
// again (whose row ids start over) cannot name an earlier job.
const KeyPrefix = "outbox:"

// Row is one job waiting in an outbox.
type Row struct {
	// ID is the store's id of the row, given back to Store.Delete.
	ID any
	// Job is the job as SubmitTx built it, id and idempotency key included.
	Job *job.Job
}

// Store is one database's outbox.
type Store interface {
	// Name names the store in metrics and logs ("postgres", "mongodb").
	Name() string
	// Read returns up to n committed rows, oldest first: rows of one
	// queue in the order they must reach it.
	Read(ctx context.Context, n int) ([]Row, error)
	// Delete removes relayed rows.
	Delete(ctx context.Context, rows []Row) error
	// Oldest returns when the oldest committed row was written, or the
	// zero time when the outbox is empty.
	Oldest(ctx context.Context) (time.Time, error)
	// Listen returns a channel that receives a value when rows may have
	// been committed, until ctx ends; nil when the store cannot tell (the
	// relay then polls).
	Listen(ctx context.Context) <-chan struct{}
}

// Prepare builds the jobs SubmitTx writes, each with build (which
// validates it and gives it an id: sundial.Build), and gives each the
// idempotency key that makes the relay's submit exactly once. A job may not
// carry its own idempotency key (the transaction is what makes the submit
// happen once) nor depend on other jobs (a dependency that ended or was
// pruned before the row is relayed would leave a row Redis refuses for
// ever). Errors are *job.FieldError, "jobs[i]."-prefixed when there are
// several jobs.
func Prepare[A any](args []A, build func(A) (*job.Job, error)) ([]*job.Job, error) {
	out := make([]*job.Job, len(args))
	for i, a := range args {
		j, err := build(a)
		switch {
		case err != nil:
		case j.IdempotencyKey != "":
			err = &job.FieldError{Field: "idempotency_key", Message: "idempotency_key cannot be set on an outbox job: its id is its key, and the transaction makes it happen once"}
		case len(j.DependsOn) > 0:
			err = &job.FieldError{Field: "depends_on", Message: "depends_on cannot be set on an outbox job"}
		}
		if err != nil {
			if fe, ok := err.(*job.FieldError); ok && len(args) > 1 {
				return nil, fe.Prefix(fmt.Sprintf("jobs[%d]", i))
			}
			return nil, err
		}
		j.IdempotencyKey = KeyPrefix + j.ID
		out[i] = j
	}
	return out, nil
}

// Encode returns j as an outbox row stores it (JSON).
func Encode(j *job.Job) ([]byte, error) { return json.Marshal(j) }

// Decode reads a job that Encode wrote.
func Decode(b []byte) (*job.Job, error) {
	j := &job.Job{}
	if err := json.Unmarshal(b, j); err != nil {
		return nil, fmt.Errorf("outbox: a row does not hold a job: %w", err)
	}
	return j, nil
}

// Config tunes a Relay. Zero values take the documented defaults.
type Config struct {
	// ID names this relay in the leader lock and the logs. Default
	// "<hostname>-<pid>-<random>".
	ID string
	// LockKey is the Redis key of the leader lock: one relay of each
	// outbox runs at a time. Default "sundial:outbox:<store name>:leader".
	LockKey string
	// LockTTL is the leader lock's time to live: how long a dead relay
	// blocks the others at most. Default 3 s.
	LockTTL time.Duration
	// RenewInterval is how often the leader renews the lock. Default 1 s,
	// or LockTTL/3 when that is shorter.
	RenewInterval time.Duration
	// AcquireInterval is how often a follower tries to take the lock.
	// Default 1 s, or LockTTL/3 when that is shorter.
	AcquireInterval time.Duration
	// PollInterval is the safety net under the store's notifications: the
	// longest the relay sleeps between two reads. Default 1 s.
	PollInterval time.Duration
	// Batch is how many rows one pass reads. Default 1000.
	Batch int
	// Logger receives the relay's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) fill(store string) {
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), schedule.NewLeaseToken()[:6])
	}
	if c.LockKey == "" {
		c.LockKey = "sundial:outbox:" + store + ":leader"
	}
	if c.LockTTL <= 0 {
		c.LockTTL = 3 * time.Second
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = min(time.Second, c.LockTTL/3)
	}
	if c.AcquireInterval <= 0 {
		c.AcquireInterval = min(time.Second, c.LockTTL/3)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Relay moves committed rows of a Store into Redis. Several may run (one
// per poller); a leader lock in Redis lets one relay at a time. Each row's
// job carries its idempotency key, so two relays that both believe they
// lead, or a relay that died after Redis took the jobs but before the rows
// were deleted, still make one job per row.
type Relay struct {
	store  Store
	q      *queue.Client
	cfg    Config
	log    *slog.Logger
	lock   *schedule.Lease
	leader atomic.Bool

	relayed prometheus.Counter
	lag     prometheus.GaugeFunc
}

// New returns a Relay of store's rows into q.
func New(store Store, q *queue.Client, cfg Config) *Relay {
	cfg.fill(store.Name())
	r := &Relay{
		store: store, q: q, cfg: cfg,
		log:  cfg.Logger.With("relay_id", cfg.ID, "outbox", store.Name()),
		lock: schedule.NewLease(q.Redis(), cfg.LockKey, cfg.ID, cfg.LockTTL),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "sundial_outbox_relayed_rows_total",
			Help:        "Outbox rows this process relayed to Redis (each became a job, or was found to be one already).",
			ConstLabels: prometheus.Labels{"store": store.Name()},
		}),
	}
	r.lag = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sundial_outbox_lag_seconds",
		Help:        "Age of the oldest committed outbox row not yet relayed (0 when none, -1 when the outbox cannot be read).",
		ConstLabels: prometheus.Labels{"store": store.Name()},
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		d, err := r.Lag(ctx)
		if err != nil {
			return -1
		}
		return d.Seconds()
	})
	return r
}

// Collectors returns the relay's metrics: rows relayed and the lag.
func (r *Relay) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.relayed, r.lag}
}

// Leader reports whether this relay holds the leader lock right now.
func (r *Relay) Leader() bool { return r.leader.Load() }

// Lag returns the age of the oldest committed row not yet relayed; 0 when
// the outbox is empty.
func (r *Relay) Lag(ctx context.Context) (time.Duration, error) {
	t, err := r.store.Oldest(ctx)
	if err != nil || t.IsZero() {
		return 0, err
	}
	return max(time.Since(t), 0), nil
}

// Run takes part in the leader election and, while leading, relays rows
// until ctx ends; it then gives the lock up and returns nil. Database and
// Redis errors are logged and retried; they never stop it.
func (r *Relay) Run(ctx context.Context) error {
	wake := r.store.Listen(ctx)
	r.log.Info("outbox relay started", "lock_ttl", r.cfg.LockTTL.String())
	e := &schedule.Election{Lease: r.lock, TTL: r.cfg.LockTTL, RenewInterval: r.cfg.RenewInterval,
		AcquireInterval: r.cfg.AcquireInterval, Log: r.log, What: "relaying the outbox", Leader: &r.leader}
	e.Run(ctx, func(ctx context.Context) { r.relayLoop(ctx, wake) })
	r.log.Info("outbox relay stopped")
	return nil
}

// relayLoop relays until ctx ends: at once again after a full batch, else
// after a notification or PollInterval. Every StatusInterval it writes the
// outbox's Status (status.go).
func (r *Relay) relayLoop(ctx context.Context, wake <-chan struct{}) {
	errDelay := 10 * time.Millisecond
	var wrote time.Time
	for ctx.Err() == nil {
		if time.Since(wrote) >= StatusInterval {
			r.writeStatus(ctx)
			wrote = time.Now()
		}
		n, err := r.RelayOnce(ctx)
		wait := r.cfg.PollInterval
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Warn("relaying the outbox failed; retrying", "err", err, "in", errDelay.String())
			wait, errDelay = errDelay, min(2*errDelay, 2*time.Second)
		case n == r.cfg.Batch:
			errDelay = 10 * time.Millisecond
			continue
		default:
			errDelay = 10 * time.Millisecond
		}
		if !schedule.Sleep(ctx, wait, wake) {
			return
		}
	}
}

// RelayOnce relays one batch: it reads up to Batch committed rows,
// submits each queue's jobs in one call (in the rows' order), then deletes
// the rows, and returns how many it relayed. It takes no lock: Run calls
// it under the leader lock, and tests call it directly.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	rows, err := r.store.Read(ctx, r.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	crashPoint("read")
	var order []string
	byQueue := map[string][]*job.Job{}
	for _, row := range rows {
		q := row.Job.Queue
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], row.Job)
	}
	for _, q := range order {
		jobs, err := r.unrelayed(ctx, q, byQueue[q])
		if err != nil {
			return 0, fmt.Errorf("queue %q: %w", q, err)
		}
		if len(jobs) == 0 {
			continue
		}
		res, err := r.q.Submit(ctx, jobs)
		if err != nil {
			return 0, fmt.Errorf("submit to queue %q: %w", q, err)
		}
		for i, s := range res {
			if s.Job.ID != jobs[i].ID {
				// Only another job with the same key could answer; keys
				// are made of the job's own id, so this is a bug.
				return 0, fmt.Errorf("submit to queue %q: row of job %s answered by job %s", q, jobs[i].ID, s.Job.ID)
			}
		}
	}
	crashPoint("submitted")
	if err := r.store.Delete(ctx, rows); err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	r.relayed.Add(float64(len(rows)))
	r.countRelayed(ctx, len(rows))
	crashPoint("deleted")
	return len(rows), nil
}

// unrelayed returns the jobs of queue q that Redis does not hold yet. A
// row is read again when a relay died after its submit and before its
// delete; its job's idempotency key would find the job, but a queue's
// uniqueness rules may have freed the key already (until_finished once the
// job ended, or a window shorter than the relay's restart), and a submit
// of the same id would then make the job again. Checking for the job
// itself closes that; the key still covers two relays submitting at once.
func (r *Relay) unrelayed(ctx context.Context, q string, jobs []*job.Job) ([]*job.Job, error) {
	pipe := r.q.Redis().Pipeline()
	exists := make([]*redis.IntCmd, len(jobs))
	for i, j := range jobs {
		exists[i] = pipe.Exists(ctx, queue.JobKey(q, j.ID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("look for relayed jobs: %w", err)
	}
	out := jobs[:0:0]
	for i, j := range jobs {
		if exists[i].Val() == 0 {
			out = append(out, j)
		}
	}
	return out, nil
}

// crashTestEnv names the test-only crash point (docs/outbox.md): the relay
// kills its own process with SIGKILL right after that step.
const crashTestEnv = "SUNDIAL_OUTBOX_TEST_CRASH"

var crashAt = os.Getenv(crashTestEnv)

// crashPoint kills the process with SIGKILL when step is the test-only
// crash point: a crash at an exact place, which kill -9 from outside only
// hits by chance.
func crashPoint(step string) {
	if crashAt == step {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
