package schedule

import (
	"context"
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
