package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/queue"
)

// SchedulerConfig tunes a Scheduler. Zero values take the documented
// defaults.
type SchedulerConfig struct {
	// ID names this scheduler in the leader lock and the logs. Default
	// "<hostname>-<pid>-<random>".
	ID string
	// LockTTL is the leader lock's time to live: how long a dead leader
	// blocks the others at most. Default 3 s.
	LockTTL time.Duration
	// RenewInterval is how often the leader renews the lock. Default 1 s.
	RenewInterval time.Duration
	// AcquireInterval is how often a follower tries to take the lock.
	// Default 1 s.
	AcquireInterval time.Duration
	// MaxSleep bounds one sleep of the leader, which otherwise sleeps
	// until the earliest next run or a change notice. Default 1 s.
	MaxSleep time.Duration
	// Batch is how many due schedules of one queue one pass reads.
	// Default 1000.
	Batch int
	// Concurrency is how many fires may be in flight at once; through
	// FireClient's auto-pipeliner they share round trips, so this is the
	// depth of the pipelines more than a number of connections. Default 256.
	Concurrency int
	// Fire is the queue client that fire submits through. Default: the
	// one given to NewScheduler. The poller passes FireClient's, over an
	// auto-pipelining view of Redis, so that concurrent fires share round
	// trips instead of paying one each.
	Fire *queue.Client
	// Logger receives the scheduler's logs. Default slog.Default().
	Logger *slog.Logger
	// OnFire, when set, is called after each successful fire, from the
	// goroutine that fired it; for metrics, benchmarks and tests.
	OnFire func(Fire)
}

func (c *SchedulerConfig) fill() {
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), newToken()[:6])
	}
	if c.LockTTL <= 0 {
		c.LockTTL = 3 * time.Second
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = time.Second
	}
	if c.AcquireInterval <= 0 {
		c.AcquireInterval = time.Second
	}
	if c.MaxSleep <= 0 {
		c.MaxSleep = time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Fire describes one fire time that was submitted.
type Fire struct {
	Schedule string    // schedule id
	Queue    string    // the job's queue
	At       time.Time // the fire time the job stands for
	JobID    string
	Done     time.Time // when the submit returned; Done - At is the lateness
}

// Scheduler fires due schedules. Several may run (one per poller); they
// elect one leader with a lock in Redis, and only the leader fires. Each
// fire is a compare-and-set of the schedule's next run in the same script
// as the submit of its job, so even two schedulers that both believe they
// lead never fire one time twice.
type Scheduler struct {
	q      *queue.Client
	rdb    redis.UniversalClient
	cfg    SchedulerConfig
	log    *slog.Logger
	lock   *lease
	leader atomic.Bool

	mu     sync.Mutex
	cache  map[string]*defCache // queue → its compiled definitions
	queues []string             // queues holding schedules, as of version
	seen   int64                // the version queues was read at
	readAt time.Time            // when queues was read
}

// NewScheduler returns a Scheduler that reads schedules through q's Redis
// and submits through q (or cfg.Fire).
func NewScheduler(q *queue.Client, cfg SchedulerConfig) *Scheduler {
	cfg.fill()
	if cfg.Fire == nil {
		cfg.Fire = q
	}
	return &Scheduler{
		q: q, rdb: q.Redis(), cfg: cfg, log: cfg.Logger.With("scheduler_id", cfg.ID),
		lock:  &lease{rdb: q.Redis(), key: keyLeader, token: cfg.ID, ttl: cfg.LockTTL},
		cache: map[string]*defCache{},
		seen:  -1,
	}
}

// ID returns the scheduler's id, as written in the leader lock.
func (s *Scheduler) ID() string { return s.cfg.ID }

// Leader reports whether the scheduler holds the leader lock right now.
func (s *Scheduler) Leader() bool { return s.leader.Load() }

// Run takes part in the leader election and, while leading, fires due
// schedules, until ctx ends; it then gives the lock up and returns nil.
// Redis errors are logged and retried; they never stop it.
func (s *Scheduler) Run(ctx context.Context) error {
	notices := s.subscribe(ctx)
	s.log.Info("scheduler started", "lock_ttl", s.cfg.LockTTL.String())
	e := &Election{Lease: &Lease{*s.lock}, TTL: s.cfg.LockTTL, RenewInterval: s.cfg.RenewInterval,
		AcquireInterval: s.cfg.AcquireInterval, Log: s.log, What: "firing schedules", Leader: &s.leader}
	e.Run(ctx, func(ctx context.Context) { s.fireLoop(ctx, notices) })
	s.log.Info("scheduler stopped")
	return nil
}

// fireLoop fires due schedules until ctx ends: it sleeps until the earliest
// next run (at most MaxSleep), or until a change notice arrives.
func (s *Scheduler) fireLoop(ctx context.Context, notices <-chan struct{}) {
	errDelay := 10 * time.Millisecond
	for ctx.Err() == nil {
		next, err := s.FireDue(ctx)
		wait := s.cfg.MaxSleep
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("firing schedules failed; retrying", "err", err, "in", errDelay.String())
			wait, errDelay = errDelay, min(2*errDelay, 2*time.Second)
		default:
			errDelay = 10 * time.Millisecond
			if !next.IsZero() {
				wait = min(wait, max(next.Sub(s.q.Now()), 0))
			}
		}
		if wait > 0 && !Sleep(ctx, wait, notices) {
			return
		}
	}
}

// subscribe returns a channel that receives a value when the store
// publishes a change. Notices may be lost (a reconnect, a slow reader); the
// version check of every pass catches those.
func (s *Scheduler) subscribe(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	ps := s.rdb.Subscribe(ctx, chanChanged)
	go func() {
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// FireClient returns a queue client for SchedulerConfig.Fire: with the
// engine options opts, over rdb's auto-pipeliner, which sends the guarded
// submits of concurrent fires down one connection in batches. If rdb
// cannot auto-pipeline, or submits wait for replicas (opts.WaitReplicas:
// WAIT runs on the connection that wrote), the client is over rdb itself.
func FireClient(rdb redis.UniversalClient, opts queue.Options) *queue.Client {
	if opts.WaitReplicas == 0 {
		if ap, err := rdb.AutoPipeline(); err == nil {
			return queue.New(ap, opts)
		}
	}
	return queue.New(rdb, opts)
}
