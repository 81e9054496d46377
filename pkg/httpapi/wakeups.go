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
// wake-up Go workers use — and wakes waiters of that queue. Two hundred
// idle HTTP workers on a queue cost one blocked Redis connection.
//
// A signal stands for one ready job, so it wakes one waiter, not all of
// them: every woken waiter makes a claim, and two hundred claims for one
// job cost Redis two hundred script calls. A waiter that leaves holding a
// wake-up it did not act on, or whose last claim was full (more jobs may
// be ready, when it claims more than one at a time), passes one on (see
// subscribe). While any waiter of a queue
// takes only some job types, a signal wakes every waiter of that queue:
// a waiter of the wrong types would spend it. Waiters also claim at least
// every registryBeat, which bounds what a lost wake-up could cost.
//
// A blocked watcher holds a pooled Redis connection, so at most MaxWatchers
// queues are watched at once, whatever clients ask (one claim may name 32
// queues): the waiters of the other queues are woken every PollInterval
// instead, to claim, until a watcher is free for their queue.
type wakeups struct {
	q   *queue.Client
	log *slog.Logger

	mu      sync.Mutex
	ctx     context.Context // set by start; watchers stop when it ends
	closing chan struct{}   // closed at shutdown: waiters return at once
	rooms   map[string]*room
	// watchers is how many queues have a watcher; polling, whether the
	// goroutine that wakes the waiters of unwatched queues runs.
	watchers int
	polling  bool
}

// MaxWatchers bounds how many queues one API process watches with a
// blocked Redis connection each for its long-polling claims.
const MaxWatchers = 8

// PollInterval is how often the waiters of a queue beyond MaxWatchers are
// woken to claim.
const PollInterval = 250 * time.Millisecond

// room is the waiters of one queue.
type room struct {
	subs     map[chan struct{}]bool // waiter → it takes only some job types
	typed    int                    // waiters that take only some job types
	watching bool                   // a watcher blocks on the queue's signals
}

// wakeOne hands a wake-up to one waiter of r that holds none yet (map
// order spreads them); false when every waiter holds one.
func (r *room) wakeOne() bool {
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
			return true
		default:
		}
	}
	return false
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

// subscribe registers a waiter on queues; typed says it takes only some
// job types. Register before claiming: a signal that arrives between an
// empty claim and the wait is then not missed. The channel receives a
// value when one of the queues may have a job. leave must be called when
// done, with more set when the waiter's last claim was full: then, or when
// the waiter holds a wake-up it did not act on, one is passed on to
// another waiter of each of its queues.
func (w *wakeups) subscribe(queues []string, typed bool) (ch chan struct{}, leave func(more bool)) {
	ch = make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range queues {
		r := w.rooms[q]
		if r == nil {
			r = &room{subs: map[chan struct{}]bool{}}
			w.rooms[q] = r
		}
		if _, ok := r.subs[ch]; ok {
			continue // a queue named twice
		}
		r.subs[ch] = typed
		if typed {
			r.typed++
		}
		w.cover(q, r)
	}
	return ch, func(more bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		select {
		case <-ch:
			more = true // a wake-up it did not act on
		default:
		}
		for _, q := range queues {
			r := w.rooms[q]
			if r == nil {
				continue
			}
			if typed, ok := r.subs[ch]; ok {
				delete(r.subs, ch)
				if typed {
					r.typed--
				}
			}
			if more {
				r.wakeOne()
			}
		}
	}
}

// cover gives queue q (room r) a watcher while fewer than MaxWatchers
// run, or else has the poller wake its waiters. Called with w.mu held.
func (w *wakeups) cover(q string, r *room) {
	if r.watching || w.ctx == nil {
		return
	}
	if w.watchers < MaxWatchers {
		r.watching = true
		w.watchers++
		go w.watch(w.ctx, q)
		return
	}
	if !w.polling {
		w.polling = true
		go w.poll(w.ctx)
	}
}

// poll wakes the waiters of every queue without a watcher each
// PollInterval, and hands a freed watcher to such a queue, until there is
// none.
func (w *wakeups) poll(ctx context.Context) {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		w.mu.Lock()
		unwatched := 0
		for q, r := range w.rooms {
			if r.watching {
				continue
			}
			if len(r.subs) == 0 {
				delete(w.rooms, q) // its waiters left
				continue
			}
			if w.watchers < MaxWatchers && ctx.Err() == nil {
				w.cover(q, r)
				continue
			}
			unwatched++
			for ch := range r.subs {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		if unwatched == 0 || ctx.Err() != nil {
			w.polling = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
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
			w.watchers--
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

// notify passes on one signal of queue name: to one waiter, or to every
// waiter while one of them takes only some job types.
func (w *wakeups) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.rooms[name]
	if r == nil {
		return
	}
	if r.typed == 0 {
		r.wakeOne()
		return
	}
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
