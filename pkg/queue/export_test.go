package queue

import "time"

// SetRegistrationTiming replaces the registration's lifetime and renewal
// intervals (format.go) until the returned function restores them. Tests
// that call it must not run in parallel with others that register.
func SetRegistrationTiming(ttl, renew, retry time.Duration) (restore func()) {
	oldTTL, oldRenew, oldRetry := readerTTL, renewEvery, retryEvery
	readerTTL, renewEvery, retryEvery = ttl, renew, retry
	return func() { readerTTL, renewEvery, retryEvery = oldTTL, oldRenew, oldRetry }
}

// SetWriteFormat makes c's claims write storage format f (1 or 2), as a
// registration does once the gate opened.
func SetWriteFormat(c *Client, f int) { c.fence.writes.Store(int32(f)) }

// ActiveRecord and ParseActive read an entry of a queue's active hash.
type ActiveRecord = activeRecord

// ParseActive reads an entry of a queue's active hash.
func ParseActive(rec string) (ActiveRecord, bool) { return parseActive(rec) }
