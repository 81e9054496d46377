package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// hub reads the queues' event streams once per process and fans each event
// out to the websocket clients whose filter matches, and sends every client
// a stats message each tick. Sending never blocks: a client whose buffer is
// full is dropped.
type hub struct {
	q            *queue.Client
	rdb          redis.UniversalClient
	opts         StreamOptions
	workerMaxAge time.Duration
	m            *metrics
	log          *slog.Logger

	mu        sync.Mutex                   // serializes changes of clients
	clients   atomic.Pointer[[]*client]    // copy-on-write: publishing takes no lock
	running   atomic.Bool                  // true while run runs and no shutdown began
	leaving   chan struct{}                // closed when clients must go (shutdown)
	wg        sync.WaitGroup               // client connections being served
	lastStats atomic.Pointer[statsMessage] // the latest stats, for new clients
	lastWarn  atomic.Int64                 // unix ns of the last read warning

	discovered     chan struct{} // closed after the first discovery of streams
	discoveredOnce sync.Once
}

func newHub(q *queue.Client, opts StreamOptions, workerMaxAge time.Duration, m *metrics, log *slog.Logger) *hub {
	h := &hub{q: q, rdb: q.Redis(), opts: opts, workerMaxAge: workerMaxAge, m: m, log: log, leaving: make(chan struct{}), discovered: make(chan struct{})}
	h.clients.Store(&[]*client{})
	return h
}

// start reads events and ticks stats until ctx ends; the returned channel
// closes when both have stopped. The hub counts as running from the call
// on, before its goroutines are scheduled, so that a client connecting as
// soon as the server serves is not refused.
func (h *hub) start(ctx context.Context) <-chan struct{} {
	h.running.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer h.running.Store(false)
		var wg sync.WaitGroup
		wg.Go(func() { h.readEvents(ctx) })
		wg.Go(func() { h.tickStats(ctx) })
		wg.Wait()
	}()
	return done
}

// snapshot returns the connected clients; callers must not modify it.
func (h *hub) snapshot() []*client { return *h.clients.Load() }

func (h *hub) add(c *client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.leaving:
		return false
	default:
	}
	old := h.snapshot()
	next := make([]*client, len(old), len(old)+1)
	copy(next, old)
	next = append(next, c)
	h.clients.Store(&next)
	h.wg.Add(1)
	h.m.wsClients.Inc()
	return true
}

func (h *hub) remove(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.snapshot()
	next := make([]*client, 0, len(old))
	for _, o := range old {
		if o != c {
			next = append(next, o)
		}
	}
	if len(next) != len(old) {
		h.clients.Store(&next)
		h.m.wsClients.Dec()
	}
}

// offer queues msg for c, or drops c when its buffer is full.
func (h *hub) offer(c *client, msg []byte) {
	select {
	case c.send <- msg:
	default:
		h.drop(c)
	}
}

// drop disconnects a client that fell behind: its writer closes the
// connection with 1013 (try again later); a writer stuck on a full socket
// is cut off a second later.
func (h *hub) drop(c *client) {
	c.dropOnce.Do(func() {
		h.remove(c)
		h.m.wsDropped.Inc()
		close(c.dropped)
		c.abortAfter(time.Second)
	})
}

// closeClients makes every client leave with 1001 (going away) and waits
// for them until ctx ends, then cuts off the rest.
func (h *hub) closeClients(ctx context.Context) {
	h.mu.Lock()
	h.running.Store(false)
	select {
	case <-h.leaving:
	default:
		close(h.leaving)
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	for _, c := range h.snapshot() {
		c.abortAfter(0)
	}
	<-done
}

// publish fans one event out. It encodes the message once, and only when a
// client wants it.
func (h *hub) publish(e *streamEvent) {
	h.m.observeEvent(e)
	var msg []byte
	for _, c := range h.snapshot() {
		if !c.filter.match(e) {
			continue
		}
		if msg == nil {
			msg = e.message()
		}
		h.offer(c, msg)
	}
}

// statsMessage is the stream's once-a-tick summary.
type statsMessage struct {
	Kind    string             `json:"kind"`
	Queues  []queue.QueueStats `json:"queues"`
	Workers int                `json:"workers"`
	At      msTime             `json:"at"`
	encoded []byte             // the message as every unlimited client gets it
	// workerQueues are each live worker's queues, to count the workers a
	// limited client sees.
	workerQueues [][]string
}

// tickStats computes the stats once per tick for every client and
// refreshes the queue depth gauges.
func (h *hub) tickStats(ctx context.Context) {
	t := time.NewTicker(h.opts.StatsInterval)
	defer t.Stop()
	for {
		h.broadcastStats(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *hub) broadcastStats(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stats, err := h.q.Stats(ctx)
	if err != nil {
		h.warn(ctx, "stream: queue stats unavailable", err)
		return
	}
	if stats == nil {
		stats = []queue.QueueStats{}
	}
	h.m.observeStats(stats)
	workers, err := h.q.Workers(ctx, h.workerMaxAge)
	if err != nil {
		h.warn(ctx, "stream: worker list unavailable", err)
		return
	}
	st := &statsMessage{Kind: "stats", Queues: stats, Workers: len(workers), At: msTime(h.q.Now())}
	for _, w := range workers {
		st.workerQueues = append(st.workerQueues, w.Queues)
	}
	msg, err := json.Marshal(st)
	if err != nil {
		h.log.Error("stream: encode stats", "err", err)
		return
	}
	st.encoded = msg
	h.lastStats.Store(st)
	limited := map[string][]byte{} // one encoding per set of patterns this tick
	for _, c := range h.snapshot() {
		if !c.filter.allow.Limited() {
			h.offer(c, msg)
			continue
		}
		key := c.filter.allow.String()
		if _, ok := limited[key]; !ok {
			limited[key] = h.statsFor(c, st)
		}
		h.offer(c, limited[key])
	}
}

// statsFor is the stats message as client c may see it: the queues its
// patterns allow (fence.go).
func (h *hub) statsFor(c *client, st *statsMessage) []byte {
	if !c.filter.allow.Limited() {
		return st.encoded
	}
	own := *st
	own.Queues = make([]queue.QueueStats, 0, len(st.Queues))
	for _, q := range st.Queues {
		if c.filter.allow.Allows(q.Name) {
			own.Queues = append(own.Queues, q)
		}
	}
	own.Workers = 0
	for _, qs := range st.workerQueues {
		if len(c.filter.allow.Filter(qs)) > 0 {
			own.Workers++
		}
	}
	msg, _ := json.Marshal(own)
	return msg
}

// warn logs a Redis failure of the hub at most once every 10 seconds.
func (h *hub) warn(ctx context.Context, msg string, err error) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now().UnixNano()
	last := h.lastWarn.Load()
	if now-last < int64(10*time.Second) || !h.lastWarn.CompareAndSwap(last, now) {
		return
	}
	h.log.Warn(msg, "err", err)
}

// streamEvent is one entry of a queue's event stream.
type streamEvent struct {
	ID       string        `json:"id"` // stream entry id, unique per queue
	JobID    string        `json:"job_id"`
	Queue    string        `json:"queue"`
	Type     string        `json:"type"`
	Event    job.EventType `json:"event"`
	State    job.State     `json:"state"`
	At       msTime        `json:"at"`
	Attempt  int           `json:"attempt"`
	Error    string        `json:"error"`
	WorkerID string        `json:"worker_id"`
	// Progress and Message: progress events only.
	Progress *int   `json:"progress,omitempty"`
	Message  string `json:"message,omitempty"`
}

// eventMessage is how the stream sends an event.
type eventMessage struct {
	Kind  string       `json:"kind"`
	Event *streamEvent `json:"event"`
}

func (e *streamEvent) message() []byte {
	b, _ := json.Marshal(eventMessage{Kind: "event", Event: e})
	return b
}

// parseEvents reads a stream entry of queue with the engine's decoder.
func parseEvents(queueName string, msg redis.XMessage) ([]*streamEvent, error) {
	evs, err := queue.ParseEvents(queueName, msg)
	if err != nil {
		return nil, err
	}
	out := make([]*streamEvent, len(evs))
	for i, e := range evs {
		out[i] = &streamEvent{
			ID: e.ID, JobID: e.JobID, Queue: e.Queue, Type: e.Type, Event: e.Event, State: e.State,
			At: msTime(e.At), Attempt: e.Attempt, Error: e.Error, WorkerID: e.WorkerID,
			Progress: e.Progress, Message: e.Message,
		}
	}
	return out, nil
}

// msTime is a time shown in RFC 3339 with milliseconds, in UTC: the one
// time format of the API (job.TimeLayout).
type msTime = job.Time
