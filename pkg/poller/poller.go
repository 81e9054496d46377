// Package poller keeps time for Sundial: it moves scheduled jobs into their
// priority lists the moment they are due, puts back jobs whose lease
// expired, and prunes finished jobs after their retention. Several pollers
// may run at once: every move is one atomic script.
package poller

import (
	"context"
	"log/slog"
	"time"

	"github.com/sundialhq/sundial/pkg/queue"
)

// Config tunes a Poller. Zero values take the documented defaults.
type Config struct {
	// Retention is how long succeeded and cancelled jobs stay in Redis.
	// Default 24 h.
	Retention time.Duration
	// MaxSleep bounds one sleep: the poller normally sleeps exactly until
	// the earliest due job or lease expiry, or until a submit of an earlier
	// job wakes it, and also rereads the queue list at least this often.
	// Default 1 s.
	MaxSleep time.Duration
	// Batch is how many jobs one script moves. Default 1000.
	Batch int
	// PruneInterval is how often finished jobs are pruned. Default 1 min.
	PruneInterval time.Duration
	// Logger receives the poller's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) fill() {
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	if c.MaxSleep <= 0 {
		c.MaxSleep = time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.PruneInterval <= 0 {
		c.PruneInterval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Poller promotes, reclaims and prunes for every known queue.
type Poller struct {
	q   *queue.Client
	cfg Config
	log *slog.Logger
}

// New returns a Poller over q.
func New(q *queue.Client, cfg Config) *Poller {
	cfg.fill()
	return &Poller{q: q, cfg: cfg, log: cfg.Logger}
}

// Run works until ctx ends, then returns nil. Redis errors are logged and
// retried with backoff; they never stop the poller.
func (p *Poller) Run(ctx context.Context) error {
	wake := p.q.SubscribeWake(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	lastPrune := time.Time{}
	errDelay := 10 * time.Millisecond
	p.log.Info("poller started")
	for {
		next, err := p.pass(ctx, time.Since(lastPrune) >= p.cfg.PruneInterval)
		if err == nil && time.Since(lastPrune) >= p.cfg.PruneInterval {
			lastPrune = time.Now()
		}
		sleep := p.cfg.MaxSleep
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("poller pass failed; retrying", "err", err, "in", errDelay)
			sleep = errDelay
			errDelay = min(2*errDelay, 2*time.Second)
		} else {
			errDelay = 10 * time.Millisecond
			if !next.IsZero() {
				sleep = min(sleep, max(time.Until(next), 0))
			}
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			p.log.Info("poller stopped")
			return nil
		case <-timer.C:
		case <-wake:
			// An earlier job arrived somewhere: recompute now. Drain any
			// further notices that came with it.
			for len(wake) > 0 {
				<-wake
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// pass runs one round over every queue and returns the earliest time
// something will need doing (zero when nothing is scheduled or leased).
func (p *Poller) pass(ctx context.Context, prune bool) (time.Time, error) {
	queues, err := p.q.Queues(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, name := range queues {
		due, err := p.drain(ctx, name, p.q.Promote)
		if err != nil {
			return time.Time{}, err
		}
		earliest(due)
		exp, err := p.drain(ctx, name, p.q.Reclaim)
		if err != nil {
			return time.Time{}, err
		}
		earliest(exp)
		if prune {
			if err := p.prune(ctx, name); err != nil {
				return time.Time{}, err
			}
		}
	}
	return next, nil
}

// drain calls step until it moves less than a full batch, and returns the
// next due time it reported.
func (p *Poller) drain(ctx context.Context, name string, step func(context.Context, string, int) (int, time.Time, error)) (time.Time, error) {
	for {
		n, next, err := step(ctx, name, p.cfg.Batch)
		if err != nil {
			return time.Time{}, err
		}
		if n < p.cfg.Batch {
			return next, nil
		}
	}
}

func (p *Poller) prune(ctx context.Context, name string) error {
	cutoff := p.q.Now().Add(-p.cfg.Retention)
	for {
		n, err := p.q.Prune(ctx, name, cutoff, p.cfg.Batch)
		if err != nil {
			return err
		}
		if n > 0 {
			p.log.Debug("pruned finished jobs", "queue", name, "count", n)
		}
		if n < p.cfg.Batch {
			return nil
		}
	}
}
