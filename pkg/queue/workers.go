package queue

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// HTTPWorkerHost prefixes the hostname of an HTTP worker's entry in the
// registry (then the client's IP): the API registers those workers for them.
const HTTPWorkerHost = "http:"

// WorkerInfo is a worker process's entry in the registry, as GET /v1/workers
// reports it.
type WorkerInfo struct {
	ID          string    `json:"id"`
	Hostname    string    `json:"hostname"`
	PID         int       `json:"pid"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	ActiveJobs  []string  `json:"active_jobs"`
	StartedAt   time.Time `json:"started_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
	Processed   int64     `json:"processed"`
	Failed      int64     `json:"failed"`
	// MetricsURL is where the worker serves its /metrics, when it does.
	MetricsURL string `json:"metrics_url,omitempty"`
	// Types are the job types the worker handles, sorted; absent (nil) for
	// an HTTP worker that claims any type.
	Types []string `json:"types,omitempty"`
}

// Handles tells whether w claims jobs of type jtype from queue.
func (w WorkerInfo) Handles(queue, jtype string) bool {
	return slices.Contains(w.Queues, queue) && (w.Types == nil || slices.Contains(w.Types, jtype))
}

// Heartbeat records w in the worker registry; the entry expires after ttl
// unless renewed.
func (c *Client) Heartbeat(ctx context.Context, w WorkerInfo, ttl time.Duration) error {
	now := c.opts.Now()
	w.LastSeenAt = now.UTC()
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	pipe := c.rdb.Pipeline()
	pipe.Set(ctx, workerKey(w.ID), b, ttl)
	pipe.ZAdd(ctx, keyWorkers, redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
	_, err = pipe.Exec(ctx)
	return err
}

// Unregister removes a worker from the registry.
func (c *Client) Unregister(ctx context.Context, id string) error {
	pipe := c.rdb.Pipeline()
	pipe.Del(ctx, workerKey(id))
	pipe.ZRem(ctx, keyWorkers, id)
	_, err := pipe.Exec(ctx)
	return err
}

// Workers lists workers seen within maxAge, and forgets older ones.
func (c *Client) Workers(ctx context.Context, maxAge time.Duration) ([]WorkerInfo, error) {
	cutoff := c.opts.Now().Add(-maxAge).UnixMilli()
	if err := c.rdb.ZRemRangeByScore(ctx, keyWorkers, "-inf", "("+strconv.FormatInt(cutoff, 10)).Err(); err != nil {
		return nil, err
	}
	ids, err := c.rdb.ZRange(ctx, keyWorkers, 0, -1).Result()
	if err != nil || len(ids) == 0 {
		return []WorkerInfo{}, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = workerKey(id)
	}
	out := make([]WorkerInfo, 0, len(ids))
	for _, key := range keys {
		// One GET per key: MGET would cross slots in Redis Cluster.
		s, err := c.rdb.Get(ctx, key).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, err
		}
		var w WorkerInfo
		if json.Unmarshal([]byte(s), &w) == nil {
			out = append(out, w)
		}
	}
	return out, nil
}

// SubscribeCancels delivers the ids of active jobs that get cancelled, until
// ctx ends. The channel is closed then.
func (c *Client) SubscribeCancels(ctx context.Context) <-chan string {
	return c.subscribe(ctx, chanCancel)
}

// SubscribeWake delivers a value whenever a job was scheduled earlier than
// every job scheduled before it in its queue, so pollers can wake up early.
func (c *Client) SubscribeWake(ctx context.Context) <-chan string {
	return c.subscribe(ctx, chanWake)
}

func (c *Client) subscribe(ctx context.Context, channel string) <-chan string {
	out := make(chan string, 64)
	sub := c.rdb.Subscribe(ctx, channel)
	go func() {
		defer close(out)
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- m.Payload:
				default: // a slow reader loses notices, never blocks Redis
				}
			}
		}
	}()
	return out
}
