package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
	"golang.org/x/sync/errgroup"
)

// WriterConfig tunes a Writer. Zero values take the documented defaults.
type WriterConfig struct {
	// Group is the consumer group of the event streams. Default DefaultGroup.
	Group string
	// Consumer names this writer in the group. Default <hostname>-<pid>
	// (with a -<n> suffix for further writers in one process).
	Consumer string
	// BatchSize is the most events read from one stream at once. Default 2000.
	BatchSize int
	// Block is how long one read waits for new events. Default 1 s.
	Block time.Duration
	// Hold is how long the events of a job that was just submitted may wait
	// for the job to finish, so that its document is written with one
	// insert instead of an insert and updates. Default 500 ms; it adds at
	// most that much to the recording delay of jobs that run longer.
	Hold time.Duration
	// Linger is the least time between two reads while the writer is caught
	// up, so that events gather into fewer, bigger batches: it trades up to
	// this much recording delay for less work per event in MongoDB (and in
	// FerretDB, much less CPU). Default 100 ms; negative disables it.
	Linger time.Duration
	// OwnerTTL is how long a queue's ownership lasts without renewal: the
	// time another writer needs to take over from one that died. Default 10 s.
	OwnerTTL time.Duration
	// StaleAfter is how long a delivered event may stay unacknowledged
	// before its queue's owner claims it again, whoever it was delivered
	// to (a safety net: see Writer.sweep). Default 30 s.
	StaleAfter time.Duration
	// DiscoverInterval is how often the list of queues is reread (a new
	// queue's first events wait up to this long). Default 1 s.
	DiscoverInterval time.Duration
	// MaxBackoff caps the delay between retries while MongoDB or Redis
	// fails. Default 10 s.
	MaxBackoff time.Duration
	// MaxEvents, when positive, is a hard cap on each owned queue's event
	// stream (SUNDIAL_EVENTS_MAXLEN): beyond it the oldest events are
	// dropped even if unrecorded, and each dropped range is counted
	// (sundial_events_dropped_total) and logged. Default 0: no event leaves
	// Redis before it is recorded, and a growing backlog is an alarm
	// (metrics, log, /readyz), not a loss.
	MaxEvents int64
	// Monitor tunes the backlog measurement and its warning; its Group and
	// Logger are the writer's.
	Monitor MonitorConfig
	// Logger receives the writer's logs. Default slog.Default().
	Logger *slog.Logger
}

var writerSeq atomic.Int64

func (c *WriterConfig) fill() {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Consumer == "" {
		host, _ := os.Hostname()
		c.Consumer = fmt.Sprintf("%s-%d", host, os.Getpid())
		if n := writerSeq.Add(1); n > 1 {
			c.Consumer = fmt.Sprintf("%s-%d", c.Consumer, n)
		}
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 2000
	}
	if c.Block <= 0 {
		c.Block = time.Second
	}
	if c.Hold < 0 {
		c.Hold = 0
	} else if c.Hold == 0 {
		c.Hold = 500 * time.Millisecond
	}
	if c.Linger < 0 {
		c.Linger = 0
	} else if c.Linger == 0 {
		c.Linger = 100 * time.Millisecond
	}
	if c.OwnerTTL <= 0 {
		c.OwnerTTL = 10 * time.Second
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 30 * time.Second
	}
	if c.DiscoverInterval <= 0 {
		c.DiscoverInterval = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Monitor.Group, c.Monitor.Logger = c.Group, c.Logger
}

// Writer copies every queue's event stream into the history Store. It reads
// with a consumer group, writes in bulk, acknowledges what MongoDB holds,
// and trims what every group acknowledged. It is never on the queue's hot
// path: while MongoDB is down events wait in Redis and the writer retries
// with backoff, then catches up. Several writers may run at once (see
// ownership): they split the queues and take over from one that dies.
type Writer struct {
	q       *queue.Client
	rdb     redis.UniversalClient
	store   *Store
	cfg     WriterConfig
	log     *slog.Logger
	own     *ownership
	mon     *Monitor
	metrics *writerMetrics
	changed chan struct{}            // the owned queues changed
	partial map[string]*partialEntry // batch entries not yet wholly recorded (see ack)
}

// NewWriter returns a Writer from q's queues into store.
func NewWriter(q *queue.Client, store *Store, cfg WriterConfig) *Writer {
	cfg.fill()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	w := &Writer{
		q: q, rdb: q.Redis(), store: store, cfg: cfg, partial: map[string]*partialEntry{},
		log:     cfg.Logger.With("consumer", cfg.Consumer),
		own:     newOwnership(q.Redis(), cfg.Consumer+"/"+hex.EncodeToString(suffix[:]), cfg.OwnerTTL),
		mon:     NewMonitor(q, cfg.Monitor),
		metrics: newWriterMetrics(),
		changed: make(chan struct{}, 1),
	}
	return w
}

// Backlog returns the last measurement of what waits to be recorded.
func (w *Writer) Backlog() Backlog { return w.mon.Backlog() }

// RecordedBefore is Monitor.RecordedBefore of the writer's monitor: the
// poller's pruning floor.
func (w *Writer) RecordedBefore(queue string) (time.Time, bool) { return w.mon.RecordedBefore(queue) }

// Lag returns the age of the oldest unrecorded event at the last
// measurement (at most Monitor.Interval old), for /readyz details.
func (w *Writer) Lag() time.Duration { return w.mon.Lag() }

// Run writes history until ctx ends, then gives up its queues so another
// writer takes over at once, and returns nil. MongoDB and Redis errors are
// logged and retried with backoff; they never stop Run.
func (w *Writer) Run(ctx context.Context) error {
	w.log.Info("history writer started", "group", w.cfg.Group, "batch", w.cfg.BatchSize, "hold", w.cfg.Hold, "owner_ttl", w.cfg.OwnerTTL)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.ownLoop(gctx) })
	g.Go(func() error { return w.mon.run(gctx, func(b Backlog) { w.trim(gctx, b) }) })
	g.Go(func() error {
		if !w.setup(gctx) {
			return nil
		}
		if w.store.FerretDB() {
			g.Go(func() error { w.runJanitor(gctx); return nil })
		}
		return w.loop(gctx)
	})
	err := g.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	w.own.release(rctx)
	cancel()
	w.log.Info("history writer stopped")
	return err
}

// setup prepares the store, retrying with backoff; false when ctx ended.
func (w *Writer) setup(ctx context.Context) bool {
	bo := w.newBackoff()
	for {
		err := w.store.Setup(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.log.Warn("history store not ready; retrying", "err", err, "in", bo.delay)
		if !bo.wait(ctx) {
			return false
		}
	}
}

// ownLoop rereads the queue list and claims or renews the queues'
// ownership every DiscoverInterval, and at least every third of OwnerTTL.
func (w *Writer) ownLoop(ctx context.Context) error {
	var queues []string
	var held []string
	t := time.NewTicker(min(w.cfg.OwnerTTL/3, w.cfg.DiscoverInterval))
	defer t.Stop()
	for {
		if qs, err := w.q.Queues(ctx); err == nil {
			queues = qs
		} else if ctx.Err() == nil {
			w.log.Debug("history: queue discovery failed", "err", err)
		}
		owned, err := w.own.claim(ctx, queues)
		if err != nil && ctx.Err() == nil {
			w.log.Debug("history: ownership renewal failed", "err", err)
		}
		if !slices.Equal(owned, held) {
			held = owned
			w.metrics.ownedQueues.Set(float64(len(owned)))
			w.log.Info("history: owned queues changed", "queues", owned)
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// trim removes from each owned stream the entries every consumer group has
// acknowledged, as measured in b. Trimming is approximate (whole radix
// nodes), so it never removes an entry at or above the bound. With a hard
// cap (MaxEvents) it trims exactly, then applies the cap.
func (w *Writer) trim(ctx context.Context, b Backlog) {
	pipe := w.rdb.Pipeline()
	var owned []string
	for _, qb := range b.Queues {
		if !w.own.owns(qb.Queue) {
			continue
		}
		owned = append(owned, qb.Queue)
		if qb.trimBefore == "" {
			continue
		}
		if w.cfg.MaxEvents > 0 {
			pipe.XTrimMinID(ctx, queue.EventStreamKey(qb.Queue), qb.trimBefore)
		} else {
			pipe.XTrimMinIDApprox(ctx, queue.EventStreamKey(qb.Queue), qb.trimBefore, 0)
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil && ctx.Err() == nil {
			w.log.Debug("history: trim failed", "err", err)
			return
		}
	}
	if w.cfg.MaxEvents > 0 {
		for _, q := range owned {
			w.cap(ctx, q)
		}
	}
}

// cap enforces MaxEvents on queue's stream, whose recorded entries were
// just trimmed: whatever it removes was never recorded.
func (w *Writer) cap(ctx context.Context, q string) {
	key := queue.EventStreamKey(q)
	n, err := w.rdb.XLen(ctx, key).Result()
	if err != nil || n <= w.cfg.MaxEvents {
		return
	}
	first, _ := w.rdb.XRangeN(ctx, key, "-", "+", 1).Result()
	dropped, err := w.rdb.XTrimMaxLen(ctx, key, w.cfg.MaxEvents).Result()
	if err != nil || dropped == 0 {
		return
	}
	next, _ := w.rdb.XRangeN(ctx, key, "-", "+", 1).Result()
	from, to := "", ""
	if len(first) > 0 {
		from = first[0].ID
	}
	if len(next) > 0 {
		to = next[0].ID
	}
	w.metrics.dropped.WithLabelValues(q).Add(float64(dropped))
	w.log.Error("history: events dropped unrecorded by the SUNDIAL_EVENTS_MAXLEN cap",
		"queue", q, "dropped", dropped, "from_id", from, "before_id", to, "cap", w.cfg.MaxEvents)
}

// backoff is an exponential retry delay from 50 ms up to a cap.
type backoff struct {
	delay, max time.Duration
}

func (w *Writer) newBackoff() *backoff {
	return &backoff{delay: 50 * time.Millisecond, max: w.cfg.MaxBackoff}
}

// wait sleeps for the current delay and doubles it; false when ctx ended.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.delay)
	defer t.Stop()
	b.delay = min(2*b.delay, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
