// Package poller keeps time for Sundial: it moves scheduled jobs into their
// priority lists the moment they are due, puts back jobs whose lease
// expired, and prunes finished jobs after their retention. Several pollers
// may run at once: every move is one atomic script.
package poller

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/sundialhq/sundial/pkg/queue"
)

// Config tunes a Poller. Zero values take the documented defaults.
type Config struct {
	// Retention is how long succeeded and cancelled jobs stay in Redis.
	// Default 24 h.
	Retention time.Duration
	// DeadRetention is how long dead jobs stay in Redis. Default 90 days.
	DeadRetention time.Duration
	// DeadMax is the most dead jobs a queue keeps in Redis, oldest deleted
	// first; 0 means no count bound. Default 10,000 (set -1 for none).
	DeadMax int
	// RecordedBefore, when set, tells for a queue the time before which
	// every event is recorded in the history (ok=false: unknown). Pruning
	// never deletes a job that ended later (minus FloorMargin), so a job
	// hash outlives the writing of its last events; an unknown floor
	// postpones pruning. Nil means no history: no floor.
	RecordedBefore func(queue string) (t time.Time, ok bool)
	// FloorMargin absorbs clock differences between the hosts that stamp
	// a job's end and Redis, which stamps events. Default 1 min.
	FloorMargin time.Duration
	// TrimEvents, when positive, caps each queue's event stream at about
	// that many events, at most once a second per queue. For a deployment
	// without history only: with history the writer trims what it recorded.
	TrimEvents int64
	// MaxSleep bounds one sleep: the poller normally sleeps exactly until
	// the earliest due job or lease expiry, or until a submit of an earlier
	// job wakes it, and also rereads the queue list at least this often.
	// Default 1 s.
	MaxSleep time.Duration
	// Batch is how many jobs one script moves. Default 1000.
	Batch int
	// PruneInterval is how often finished jobs are pruned. Default 1 min.
	PruneInterval time.Duration
	// UnhandledTimeout is how long a job parked for a handler (a typed
	// claim met it and does not handle its type) waits while no live
	// worker of its queue handles the type, before it ends dead with
	// last_error `no handler for type "X"`. Default 24 h.
	UnhandledTimeout time.Duration
	// WorkerMaxAge: a worker whose registry entry is older is not live
	// (for UnhandledTimeout). Default 15 s (three 5 s heartbeats).
	WorkerMaxAge time.Duration
	// BatchRecountAfter is how long a sealed batch's count of ended
	// members may stay still before the poller recounts its members from
	// their jobs (batchwatch.go), and the first wait between recounts.
	// Default 1 min.
	BatchRecountAfter time.Duration
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
	if c.DeadRetention <= 0 {
		c.DeadRetention = 90 * 24 * time.Hour
	}
	if c.DeadMax == 0 {
		c.DeadMax = 10_000
	} else if c.DeadMax < 0 {
		c.DeadMax = 0
	}
	if c.FloorMargin <= 0 {
		c.FloorMargin = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.UnhandledTimeout <= 0 {
		c.UnhandledTimeout = 24 * time.Hour
	}
	if c.WorkerMaxAge <= 0 {
		c.WorkerMaxAge = 15 * time.Second
	}
	if c.BatchRecountAfter <= 0 {
		c.BatchRecountAfter = time.Minute
	}
}

// Poller promotes, reclaims and prunes for every known queue.
type Poller struct {
	q       *queue.Client
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	lastTrim map[string]time.Time // queue → last event stream trim (TrimEvents)
	failing  map[string]bool      // queue → its last step failed (logged once per streak)
	// lastUnhandled: queue → its last look at jobs parked for a handler;
	// unhandledSeen: "queue\x00type" → logged as waiting for a handler.
	lastUnhandled map[string]time.Time
	unhandledSeen map[string]bool
	batches       batchWatch
}

// New returns a Poller over q.
func New(q *queue.Client, cfg Config) *Poller {
	cfg.fill()
	return &Poller{q: q, cfg: cfg, log: cfg.Logger, metrics: newMetrics(),
		lastTrim: map[string]time.Time{}, failing: map[string]bool{},
		lastUnhandled: map[string]time.Time{}, unhandledSeen: map[string]bool{},
		batches: batchWatch{seen: map[string]*batchSeen{}}}
}

// Run works until ctx ends, then returns nil. Redis errors are logged and
// retried with backoff; they never stop the poller. It registers the
// poller as a reader of the storage format while it runs
// (queue.Client.Register), and stops, returning the *queue.FormatError,
// when the Redis holds a format this release does not read.
func (p *Poller) Run(ctx context.Context) (err error) {
	ctx, reg := p.q.Register(ctx, "poller", p.log)
	defer func() {
		if ferr := reg.Close(); ferr != nil {
			err = ferr
		}
	}()
	wake := p.q.SubscribeWake(ctx)
	// Stalled batches are recounted beside the passes, so that reading a
	// big batch's members never delays a promotion (batchwatch.go).
	watching := make(chan struct{})
	go func() { defer close(watching); p.watchBatchesLoop(ctx) }()
	defer func() { <-watching }()
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
	var workers []queue.WorkerInfo // the live workers, read once per pass when needed
	live := func() ([]queue.WorkerInfo, error) {
		if workers != nil {
			return workers, nil
		}
		ws, err := p.q.Workers(ctx, p.cfg.WorkerMaxAge)
		workers = ws
		return ws, err
	}
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	// Each queue's steps fail alone: a queue whose keys are broken (wrong
	// type, a slot moving) is counted and logged, and the others go on.
	for _, name := range queues {
		due, err := p.drain(ctx, name, p.q.Promote)
		p.step(name, "promote", err)
		earliest(due)
		exp, err := p.drain(ctx, name, p.q.Reclaim)
		p.step(name, "reclaim", err)
		earliest(exp)
		if prune {
			p.step(name, "prune", p.prune(ctx, name))
		}
		// Dependencies on jobs of other queues: read where those jobs
		// ended and settle the edges (queue.Client.SettleRemoteDeps).
		_, err = p.q.SettleRemoteDeps(ctx, name, p.cfg.Batch)
		p.step(name, "settle", err)
		// Ends of batch members: relayed to their batches
		// (queue.Client.RelayBatchEnds).
		_, err = p.q.RelayBatchEnds(ctx, name, p.cfg.Batch)
		p.step(name, "batch_relay", err)
		if time.Since(p.lastUnhandled[name]) >= p.unhandledEvery() {
			p.lastUnhandled[name] = time.Now()
			p.step(name, "unhandled", p.unhandled(ctx, name, live))
		}
		if p.cfg.TrimEvents > 0 && time.Since(p.lastTrim[name]) >= time.Second {
			p.lastTrim[name] = time.Now()
			p.step(name, "trim", p.q.Redis().XTrimMaxLenApprox(ctx, queue.EventStreamKey(name), p.cfg.TrimEvents, 0).Err())
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
	// The callbacks of batches whose members all ended; counted under the
	// queue label "" (no one queue's).
	_, err = p.q.FireBatchCallbacks(ctx, p.cfg.Batch)
	p.step("", "batch_callbacks", err)
	if !next.IsZero() {
		// Retry a failing queue soon, but not in a tight loop.
		for _, f := range p.failing {
			if f {
				next = minTime(next, time.Now().Add(time.Second))
			}
		}
	}
	return next, nil
}

// step records the outcome of one step of one queue: a failure is counted
// and logged (once when a queue starts failing, then at debug level).
func (p *Poller) step(name, step string, err error) {
	key := name + "/" + step
	if err == nil {
		if p.failing[key] {
			p.log.Info("queue step recovered", "queue", name, "step", step)
			delete(p.failing, key)
		}
		return
	}
	p.metrics.errors.WithLabelValues(name, step).Inc()
	if !p.failing[key] {
		p.log.Error("queue step failed; other queues go on", "queue", name, "step", step, "err", err)
		p.failing[key] = true
		return
	}
	p.log.Debug("queue step still failing", "queue", name, "step", step, "err", err)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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

// prune deletes finished jobs past their retention and dead jobs past
// theirs or beyond the count bound, never past the history floor, and the
// per-minute counts past their window.
func (p *Poller) prune(ctx context.Context, name string) error {
	var floor time.Time
	if p.cfg.RecordedBefore != nil {
		t, ok := p.cfg.RecordedBefore(name)
		if !ok {
			p.log.Debug("prune postponed: history floor unknown", "queue", name)
			return nil
		}
		floor = t.Add(-p.cfg.FloorMargin)
	}
	now := p.q.Now()
	for _, o := range []queue.PruneOptions{
		{Cutoff: now.Add(-p.cfg.Retention), Floor: floor, Limit: p.cfg.Batch},
		{Dead: true, Cutoff: now.Add(-p.cfg.DeadRetention), Keep: p.cfg.DeadMax, Floor: floor, Limit: p.cfg.Batch},
	} {
		for {
			n, err := p.q.PruneJobs(ctx, name, o)
			if err != nil {
				return err
			}
			p.metrics.pruned.WithLabelValues(name, pruneSet(o.Dead)).Add(float64(n))
			if n < p.cfg.Batch {
				break
			}
		}
	}
	_, err := p.q.TrimThroughput(ctx, name)
	return err
}

func pruneSet(dead bool) string {
	if dead {
		return "dead"
	}
	return "finished"
}

// unhandledEvery is how often a queue's jobs parked for a handler are
// looked at: a quarter of the timeout, at most every 5 s.
func (p *Poller) unhandledEvery() time.Duration { return min(p.cfg.UnhandledTimeout/4, 5*time.Second) }

// unhandled looks at the types of name's jobs parked for a handler: a type
// that no live worker of the queue handles is logged once, and its jobs
// parked longer than UnhandledTimeout end dead. live gives the live
// workers.
func (p *Poller) unhandled(ctx context.Context, name string, live func() ([]queue.WorkerInfo, error)) error {
	types, err := p.q.UnhandledTypes(ctx, name)
	if err != nil || len(types) == 0 {
		return err
	}
	ws, err := live()
	if err != nil {
		return err
	}
	cutoff := p.q.Now().Add(-p.cfg.UnhandledTimeout)
	for _, t := range types {
		seen := name + "\x00" + t
		if slices.ContainsFunc(ws, func(w queue.WorkerInfo) bool { return w.Handles(name, t) }) {
			delete(p.unhandledSeen, seen)
			continue
		}
		if !p.unhandledSeen[seen] {
			p.unhandledSeen[seen] = true
			p.log.Warn("jobs wait for a handler: no live worker of the queue handles their type",
				"queue", name, "type", t, "dead_after", p.cfg.UnhandledTimeout)
		}
		for {
			n, err := p.q.BuryUnhandled(ctx, name, t, cutoff, p.cfg.Batch)
			if err != nil {
				return err
			}
			if n > 0 {
				p.metrics.unhandled.WithLabelValues(name, t).Add(float64(n))
				p.log.Warn("jobs ended dead: no handler for their type", "queue", name, "type", t, "jobs", n,
					"waited", p.cfg.UnhandledTimeout)
			}
			if n < p.cfg.Batch {
				break
			}
		}
	}
	return nil
}
