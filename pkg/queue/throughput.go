package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ThroughputWindow is how far back per-minute counts are kept.
const ThroughputWindow = 24 * time.Hour

// MinuteCount is one minute of a queue's finished attempts.
type MinuteCount struct {
	Minute    time.Time `json:"minute"`    // start of the minute, UTC
	Succeeded int64     `json:"succeeded"` // attempts that succeeded
	Failed    int64     `json:"failed"`    // attempts that failed (retried or dead), lease expiries included
	Dead      int64     `json:"dead"`      // jobs that went dead
}

// The per-minute hash holds fields "<unix minute>:<s|f|d>", written by the
// scripts (count_minute in lua/lib.lua).
func (k *queueKeys) minutes() string { return k.tag + "minutes" }

// Throughput returns the per-minute counts of queue from since (at most
// ThroughputWindow back) to now, oldest first, one entry per minute, zeros
// included. It costs one HMGET.
func (c *Client) Throughput(ctx context.Context, queue string, since time.Time) ([]MinuteCount, error) {
	now := c.opts.Now()
	if since.Before(now.Add(-ThroughputWindow)) {
		since = now.Add(-ThroughputWindow)
	}
	first, last := since.Unix()/60, now.Unix()/60
	if first > last {
		first = last
	}
	fields := make([]string, 0, 3*(last-first+1))
	for m := first; m <= last; m++ {
		p := strconv.FormatInt(m, 10)
		fields = append(fields, p+":s", p+":f", p+":d")
	}
	vals, err := c.rdb.HMGet(ctx, c.keysFor(queue).minutes(), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	num := func(i int) int64 {
		s, _ := vals[i].(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	out := make([]MinuteCount, 0, last-first+1)
	for i, m := 0, first; m <= last; i, m = i+3, m+1 {
		out = append(out, MinuteCount{Minute: time.Unix(m*60, 0).UTC(), Succeeded: num(i), Failed: num(i + 1), Dead: num(i + 2)})
	}
	return out, nil
}

// TrimThroughput deletes queue's per-minute counts older than
// ThroughputWindow and returns how many fields it removed. The poller calls
// it with its prune pass.
func (c *Client) TrimThroughput(ctx context.Context, queue string) (int, error) {
	key := c.keysFor(queue).minutes()
	fields, err := c.rdb.HKeys(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("trim throughput: %w", err)
	}
	cutoff := c.opts.Now().Add(-ThroughputWindow).Unix() / 60
	var old []string
	for _, f := range fields {
		m, _, _ := strings.Cut(f, ":")
		if n, err := strconv.ParseInt(m, 10, 64); err != nil || n < cutoff {
			old = append(old, f)
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	if err := c.rdb.HDel(ctx, key, old...).Err(); err != nil {
		return 0, fmt.Errorf("trim throughput: %w", err)
	}
	return len(old), nil
}
