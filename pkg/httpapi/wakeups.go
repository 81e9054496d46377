package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sundialhq/sundial/pkg/queue"
)

// wakeups lets long-polling claims (the HTTP worker protocol) sleep until
// a submit signals one of their queues, with no polling: per queue with
// waiters, one goroutine blocks on the queue's signal list — the same
// wake-up Go workers use — and notifies every waiter of that queue. Two
// hundred idle HTTP workers on a queue cost one blocked Redis connection.
type wakeups struct {
	q   *queue.Client
	log *slog.Logger

	mu      sync.Mutex
	ctx     context.Context // set by start; watchers stop when it ends
	closing chan struct{}   // closed at shutdown: waiters return at once
	rooms   map[string]*room
}

// room is the waiters of one queue.
type room struct {
	subs     map[chan struct{}]struct{}
	watching bool
}

func newWakeups(q *queue.Client, log *slog.Logger) *wakeups {
	return &wakeups{q: q, log: log, closing: make(chan struct{}), rooms: map[string]*room{}}
}

// start sets the context the watchers run under (the server's lifetime).
func (w *wakeups) start(ctx context.Context) {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
}

// close ends every wait at once (shutdown: long polls must not hold the
// drain).
func (w *wakeups) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.closing:
	default:
		close(w.closing)
	}
}

// subscribe registers a waiter on queues. Register before claiming: a
// signal that arrives between an empty claim and the wait is then not
// missed. The channel receives a value when one of the queues may have a
// job; cancel must be called when done.
func (w *wakeups) subscribe(queues []string) (ch chan struct{}, cancel func()) {
	ch = make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range queues {
		r := w.rooms[q]
		if r == nil {
			r = &room{subs: map[chan struct{}]struct{}{}}
			w.rooms[q] = r
		}
		r.subs[ch] = struct{}{}
		if !r.watching && w.ctx != nil {
			r.watching = true
			go w.watch(w.ctx, q)
		}
	}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, q := range queues {
			if r := w.rooms[q]; r != nil {
				delete(r.subs, ch)
			}
		}
	}
}

// watch waits on queue's signal list while the queue has waiters.
func (w *wakeups) watch(ctx context.Context, name string) {
	backoff := 10 * time.Millisecond
	for {
		w.mu.Lock()
		r := w.rooms[name]
		if len(r.subs) == 0 || ctx.Err() != nil {
			r.watching = false
			delete(w.rooms, name)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		woke, err := w.q.WaitForWork(ctx, []string{name}, time.Second)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Debug("long poll: waiting for work failed", "queue", name, "err", err)
				sleep(ctx, backoff)
				backoff = min(2*backoff, 2*time.Second)
			}
			continue
		}
		backoff = 10 * time.Millisecond
		if woke {
			w.notify(name)
		}
	}
}

func (w *wakeups) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.rooms[name]; r != nil {
		for ch := range r.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
