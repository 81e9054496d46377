package history

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
)

// DefaultGroup is the consumer group of the history writers.
const DefaultGroup = "sundial-history"

// QueueBacklog is the part of one queue's event stream not yet recorded.
type QueueBacklog struct {
	Queue string `json:"queue"`
	// Events is how many stream entries wait: delivered to a writer but
	// not yet acknowledged, plus not yet delivered. An entry holds one
	// event, or the same transition of several jobs made by one engine
	// call (a claimed batch, say).
	Events int64 `json:"events"`
	// Lag is the age of the oldest waiting event (0 when none waits).
	Lag time.Duration `json:"lag_ns"`

	trimBefore string // entries below this id are acknowledged by every group
	// floorKnown: our group exists (or the stream does not), so the
	// measurement tells what is recorded.
	floorKnown bool
}

// Backlog is what the history writers have not recorded yet, over every
// queue, as measured at At.
type Backlog struct {
	At     time.Time      `json:"at"`
	Events int64          `json:"events"`
	Lag    time.Duration  `json:"lag_ns"` // the largest queue lag
	Queues []QueueBacklog `json:"queues"`
}

// MonitorConfig tunes a Monitor. Zero values take the defaults.
type MonitorConfig struct {
	// Group is the writers' consumer group. Default DefaultGroup.
	Group string
	// Interval is how often the backlog is measured. Default 1 s.
	Interval time.Duration
	// WarnBacklog: a WARN line is logged when more events than this wait
	// over all queues. Default 100,000 (a tenth of the engine's default
	// stream bound, beyond which unrecorded events are lost).
	WarnBacklog int64
	// WarnEvery limits the WARN line to once per this period. Default 1 min.
	WarnEvery time.Duration
	// Logger receives the warnings. Default slog.Default().
	Logger *slog.Logger
}

func (c *MonitorConfig) fill() {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.WarnBacklog <= 0 {
		c.WarnBacklog = 100_000
	}
	if c.WarnEvery <= 0 {
		c.WarnEvery = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Monitor measures the history backlog of every queue: how many events
// wait in Redis and how old the oldest is. A Writer runs one; a process
// that does not write history (the API) can run its own for /readyz and
// /metrics. It only reads Redis.
type Monitor struct {
	q   *queue.Client
	rdb redis.UniversalClient
	cfg MonitorConfig

	mu       sync.Mutex
	last     Backlog
	lastWarn time.Time
}

// NewMonitor returns a Monitor of q's queues.
func NewMonitor(q *queue.Client, cfg MonitorConfig) *Monitor {
	cfg.fill()
	return &Monitor{q: q, rdb: q.Redis(), cfg: cfg}
}

// Backlog returns the last measurement (the zero Backlog before the first).
func (m *Monitor) Backlog() Backlog {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// RecordedBefore returns the time before which every event of queue is
// recorded, as of the last measurement: the time of its oldest waiting
// event, or the measurement's time when none waits. ok is false when that
// is unknown (no measurement yet, or the writers' group does not exist).
func (m *Monitor) RecordedBefore(queue string) (t time.Time, ok bool) {
	b := m.Backlog()
	for _, qb := range b.Queues {
		if qb.Queue == queue {
			if !qb.floorKnown {
				return time.Time{}, false
			}
			return b.At.Add(-qb.Lag), true
		}
	}
	return time.Time{}, false
}

// Lag returns the age of the oldest unrecorded event at the last
// measurement, over all queues.
func (m *Monitor) Lag() time.Duration { return m.Backlog().Lag }

// Run measures every Interval until ctx ends, then returns nil. Redis
// errors are logged at debug level and retried at the next interval.
func (m *Monitor) Run(ctx context.Context) error {
	return m.run(ctx, nil)
}

// run measures every Interval and hands each measurement to after.
func (m *Monitor) run(ctx context.Context, after func(Backlog)) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		b, err := m.Measure(ctx)
		if err == nil && after != nil {
			after(b)
		} else if err != nil && ctx.Err() == nil {
			m.cfg.Logger.Debug("history backlog: measure failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Measure reads the backlog of every known queue now (two pipelined round
// trips), records it for Backlog and the metrics, and warns when it is
// large.
func (m *Monitor) Measure(ctx context.Context) (Backlog, error) {
	queues, err := m.q.Queues(ctx)
	if err != nil {
		return Backlog{}, err
	}
	now := time.Now()
	pipe := m.rdb.Pipeline()
	infos := make([]*redis.XInfoGroupsCmd, len(queues))
	lens := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		key := queue.EventStreamKey(q)
		infos[i] = pipe.XInfoGroups(ctx, key)
		lens[i] = pipe.XLen(ctx, key)
	}
	if len(queues) > 0 {
		// Per-command errors (a stream that does not exist yet) are read below.
		if _, err := pipe.Exec(ctx); err != nil && !streamMissing(err) {
			if _, ok := err.(redis.Error); !ok {
				return Backlog{}, err
			}
		}
	}
	// Second round trip: the oldest pending entry of each group that has
	// some, and the oldest undelivered entry where our group has none.
	type probe struct {
		pending map[string]*redis.XPendingCmd // group → summary
		next    *redis.XMessageSliceCmd       // first entry our group has not read
	}
	probes := make([]probe, len(queues))
	pipe = m.rdb.Pipeline()
	n := 0
	for i, q := range queues {
		key := queue.EventStreamKey(q)
		groups, err := infos[i].Result()
		if err != nil {
			continue
		}
		p := probe{pending: map[string]*redis.XPendingCmd{}}
		ours := false
		for _, g := range groups {
			if g.Pending > 0 {
				p.pending[g.Name] = pipe.XPending(ctx, key, g.Name)
				n++
			}
			if g.Name == m.cfg.Group {
				ours = true
				// The first undelivered entry: its absence proves that
				// nothing waits undelivered, whatever the group's lag says
				// (Redis' entries-read, and so its lag, can be off after a
				// restart from the AOF or a take-over with XAUTOCLAIM).
				p.next = pipe.XRangeN(ctx, key, "("+g.LastDeliveredID, "+", 1)
				n++
			}
		}
		if !ours && lens[i].Val() > 0 {
			p.next = pipe.XRangeN(ctx, key, "-", "+", 1)
			n++
		}
		probes[i] = p
	}
	if n > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			if _, ok := err.(redis.Error); !ok {
				return Backlog{}, err
			}
		}
	}
	b := Backlog{At: now, Queues: make([]QueueBacklog, 0, len(queues))}
	for i, q := range queues {
		qb := QueueBacklog{Queue: q}
		groups, err := infos[i].Result()
		if err != nil { // no stream yet: nothing waits
			qb.floorKnown = true
			b.Queues = append(b.Queues, qb)
			continue
		}
		p := probes[i]
		oldest := ""
		ours := false
		for _, g := range groups {
			bound := nextEntryID(g.LastDeliveredID)
			if pc := p.pending[g.Name]; pc != nil && pc.Err() == nil && pc.Val().Lower != "" {
				bound = pc.Val().Lower
			}
			if qb.trimBefore == "" || compareIDs(bound, qb.trimBefore) < 0 {
				qb.trimBefore = bound
			}
			if g.Name != m.cfg.Group {
				continue
			}
			ours = true
			qb.floorKnown = true
			undelivered := g.Lag
			if undelivered < 0 { // Redis cannot tell: bound it by the length
				undelivered = max(lens[i].Val()-g.Pending, 0)
			}
			undelivered = min(undelivered, lens[i].Val())
			if p.next != nil {
				if msgs, err := p.next.Result(); err == nil && len(msgs) == 0 {
					undelivered = 0
				}
			}
			qb.Events = g.Pending + undelivered
			if pc := p.pending[g.Name]; pc != nil && pc.Err() == nil {
				oldest = pc.Val().Lower
			}
		}
		if !ours {
			qb.Events = lens[i].Val()
		}
		if oldest == "" && p.next != nil {
			if msgs, err := p.next.Result(); err == nil && len(msgs) > 0 {
				oldest = msgs[0].ID
			}
		}
		if oldest != "" && qb.Events > 0 {
			qb.Lag = max(now.Sub(time.UnixMilli(entryMillis(oldest))), 0)
		} else if qb.Events > 0 {
			qb.floorKnown = false // events wait but their age is unknown
		}
		b.Events += qb.Events
		b.Lag = max(b.Lag, qb.Lag)
		b.Queues = append(b.Queues, qb)
	}
	m.mu.Lock()
	m.last = b
	warn := b.Events > m.cfg.WarnBacklog && now.Sub(m.lastWarn) >= m.cfg.WarnEvery
	if warn {
		m.lastWarn = now
	}
	m.mu.Unlock()
	if warn {
		m.cfg.Logger.Warn("history backlog is growing: events wait in Redis for MongoDB",
			"backlog", b.Events, "lag", b.Lag.Round(time.Millisecond), "threshold", m.cfg.WarnBacklog)
	}
	return b, nil
}

// streamMissing reports whether err says a stream key does not exist.
func streamMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such key")
}
