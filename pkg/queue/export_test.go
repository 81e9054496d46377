package queue

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// SetRegistrationTiming replaces the registration's lifetime and renewal
// intervals (format.go) until the returned function restores them. Tests
// that call it must not run in parallel with others that register.
func SetRegistrationTiming(ttl, renew, retry time.Duration) (restore func()) {
	oldTTL, oldRenew, oldRetry := readerTTL, renewEvery, retryEvery
	readerTTL, renewEvery, retryEvery = ttl, renew, retry
	return func() { readerTTL, renewEvery, retryEvery = oldTTL, oldRenew, oldRetry }
}

// Leases counts the lease entries of queue, storage format 3's padding
// entry left out.
func Leases(ctx context.Context, rdb redis.Cmdable, queue string) (int64, error) {
	return rdb.ZCount(ctx, keysFor(queue).key(kLeases), "-inf", "("+padScore).Result()
}

// ActiveRecords counts the records of queue's active hash, storage format
// 3's padding entry left out.
func ActiveRecords(ctx context.Context, rdb redis.Cmdable, queue string) (int64, error) {
	fields, err := rdb.HKeys(ctx, keysFor(queue).active()).Result()
	n := int64(0)
	for _, f := range fields {
		if !IsPadding(f) {
			n++
		}
	}
	return n, err
}

// SetWriteFormat makes c's claims and submits write storage format f (1 to
// 4) from now on, as a registration does once the gate opened; c no longer
// follows the marker (followMarker).
func SetWriteFormat(c *Client, f int) {
	c.follow.pinned.Store(true)
	c.fence.writes.Store(int32(f))
}

// ActiveRecord and ParseActive read an entry of a queue's active hash.
type ActiveRecord = activeRecord

// ParseActive reads an entry of a queue's active hash.
func ParseActive(rec string) (ActiveRecord, bool) { return parseActive(rec) }

// PaddingScore is the lease-set score of storage format 3's padding entry.
const PaddingScore = padScore

// NormalListKey is queue's normal-priority list.
func NormalListKey(queue string) string { return keysFor(queue).key(kNormal) }

// ActiveKey is queue's active hash.
func ActiveKey(queue string) string { return keysFor(queue).active() }

// SetAfterForgetScript makes c's Forget call f between its script and the
// removal of the queue's listing.
func SetAfterForgetScript(c *Client, f func()) { c.afterForgetScript = f }

// LoadLibrary loads c's function library on rdb as a call that found it
// missing does (exec), for tests of processes that start together.
func LoadLibrary(ctx context.Context, c *Client, rdb *redis.Client) error {
	return c.loadLibrary(ctx, rdb, "")
}
