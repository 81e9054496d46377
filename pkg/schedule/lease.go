package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// lease is a lock in Redis with a time to live: SET key token NX PX ttl to
// take it, and scripts that renew or release it only for the holder (so a
// holder whose lease expired and was taken by another cannot extend or
// delete the new holder's).
type lease struct {
	rdb   redis.UniversalClient
	key   string
	token string
	ttl   time.Duration
}

// acquire takes the lease if no one holds it and reports whether it did.
// Taking a lease this holder already holds succeeds and renews it.
func (l *lease) acquire(ctx context.Context) (bool, error) {
	ok, err := l.rdb.SetNX(ctx, l.key, l.token, l.ttl).Result()
	if err != nil || ok {
		return ok, err
	}
	return l.renew(ctx)
}

// renew extends the lease by its ttl and reports whether l still held it.
func (l *lease) renew(ctx context.Context) (bool, error) {
	n, err := scriptRenew.Run(ctx, l.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	return n == 1, err
}

// release gives the lease up if l holds it.
func (l *lease) release(ctx context.Context) error {
	return scriptRelease.Run(ctx, l.rdb, []string{l.key}, l.token).Err()
}

// newToken returns a random token naming one holder.
func newToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
