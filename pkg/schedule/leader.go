package schedule

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lease is the leader lock the Scheduler elects its leader with, for other
// parts that must run once at a time (the outbox relays of sundialpg and
// sundialmongo): a key in Redis with a time to live, taken with SET NX PX
// and renewed or released only by the holder named by its token.
type Lease struct{ l lease }

// NewLease returns a Lease on key for the holder token, with time to live
// ttl: a holder that dies blocks the others at most that long.
func NewLease(rdb redis.UniversalClient, key, token string, ttl time.Duration) *Lease {
	return &Lease{lease{rdb: rdb, key: key, token: token, ttl: ttl}}
}

// Acquire takes the lease if no one holds it and reports whether it did;
// taking a lease this holder holds already renews it.
func (l *Lease) Acquire(ctx context.Context) (bool, error) { return l.l.acquire(ctx) }

// Renew extends the lease by its ttl and reports whether this holder still
// held it.
func (l *Lease) Renew(ctx context.Context) (bool, error) { return l.l.renew(ctx) }

// Release gives the lease up if this holder holds it.
func (l *Lease) Release(ctx context.Context) error { return l.l.release(ctx) }

// NewLeaseToken returns a random token naming one holder.
func NewLeaseToken() string { return newToken() }

// Election runs work on one process at a time: the holder of a Lease. The
// Scheduler fires schedules with it, and the outbox relays relay with it.
type Election struct {
	Lease *Lease
	// TTL is the lease's time to live; RenewInterval how often the leader
	// renews it; AcquireInterval how often a follower tries to take it.
	TTL, RenewInterval, AcquireInterval time.Duration
	// Log receives the election's logs; What names the work in them
	// ("firing schedules").
	Log  *slog.Logger
	What string
	// Leader, when set, tells whether this process leads right now.
	Leader *atomic.Bool
}

// Run takes part in the election until ctx ends, then gives the lease up
// and returns. While it leads it runs lead with a context that ends when
// the lease is lost (another holds it, or it could not be renewed within
// TTL) or ctx ends. Redis errors are logged and retried.
func (e *Election) Run(ctx context.Context, lead func(ctx context.Context)) {
	for {
		ok, err := e.Lease.Acquire(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			e.Log.Warn("leader election failed; retrying", "err", err)
		case ok:
			e.lead(ctx, lead)
			continue
		}
		if !Sleep(ctx, e.AcquireInterval, nil) {
			return
		}
	}
}

// lead runs work while the lease is held, renewing it, and gives it up
// when ctx ends.
func (e *Election) lead(ctx context.Context, work func(ctx context.Context)) {
	if e.Leader != nil {
		e.Leader.Store(true)
		defer e.Leader.Store(false)
	}
	e.Log.Info("leading: " + e.What)
	leadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer stop()
		e.heartbeat(leadCtx)
	})
	work(leadCtx)
	stop()
	wg.Wait()
	if ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := e.Lease.Release(rctx); err != nil {
			e.Log.Warn("could not release the leader lock; it expires by itself", "err", err)
		}
		return
	}
	e.Log.Warn("lost the leader lock: no longer " + e.What)
}

// heartbeat renews the lease every RenewInterval and returns when it is
// lost (another holds it, or it could not be renewed for TTL) or ctx ends.
func (e *Election) heartbeat(ctx context.Context) {
	lastOK := time.Now()
	t := time.NewTicker(e.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := e.Lease.Renew(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			e.Log.Warn("could not renew the leader lock", "err", err)
			if time.Since(lastOK) >= e.TTL-e.RenewInterval/2 {
				return
			}
		case !ok:
			return
		default:
			lastOK = time.Now()
		}
	}
}

// Sleep waits d, or until wake has a value; false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}
