package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
)

// readBatch is the most entries one XREAD returns per stream.
const readBatch = 1000

// readPace is the shortest time between two reads that return events. A
// read returns as soon as one event is there; pacing lets the next read
// collect what arrives meanwhile, so a steady flow of events costs a few
// round trips and client wake-ups a second instead of one per event, for
// at most readPace of added delivery delay.
const readPace = 10 * time.Millisecond

// cursors are the streams a reader follows and the last entry id read
// from each.
type cursors struct {
	keys, ids []string
	index     map[string]int
}

func (c *cursors) add(key, id string) {
	if c.index == nil {
		c.index = map[string]int{}
	}
	c.index[key] = len(c.keys)
	c.keys = append(c.keys, key)
	c.ids = append(c.ids, id)
}

func (c *cursors) has(key string) bool { _, ok := c.index[key]; return ok }

func (c *cursors) advance(key, id string) { c.ids[c.index[key]] = id }

// args returns XREAD's STREAMS arguments: the keys, then the ids.
func (c *cursors) args() []string {
	out := make([]string, 0, 2*len(c.keys))
	return append(append(out, c.keys...), c.ids...)
}

// readEvents follows the event stream of every known queue. On a single
// Redis (or Sentinel) one XREAD BLOCK covers all streams; new queues are
// discovered every DiscoverInterval. In Redis Cluster the streams live in
// different slots, so each queue gets its own reader goroutine.
func (h *hub) readEvents(ctx context.Context) {
	_, cluster := h.rdb.(*redis.ClusterClient)
	var (
		all     cursors // every stream followed, in standalone mode the reader's own
		wg      sync.WaitGroup
		first   = true
		next    time.Time
		backoff time.Duration
	)
	defer wg.Wait()
	block := min(h.opts.DiscoverInterval, time.Second)
	for ctx.Err() == nil {
		if !time.Now().Before(next) {
			added, err := h.discover(ctx, &all, first)
			if err != nil {
				h.readFailed(ctx, "stream: queue discovery failed", err, &backoff)
				continue
			}
			first = false
			h.discoveredOnce.Do(func() { close(h.discovered) })
			next = time.Now().Add(h.opts.DiscoverInterval)
			if cluster {
				for _, k := range added {
					var one cursors
					one.add(k, all.ids[all.index[k]])
					wg.Go(func() { h.follow(ctx, &one) })
				}
			}
		}
		if cluster || len(all.keys) == 0 {
			sleep(ctx, time.Until(next))
			continue
		}
		h.readOnce(ctx, &all, block, &backoff)
	}
}

// follow reads one queue's stream until ctx ends (cluster mode).
func (h *hub) follow(ctx context.Context, cur *cursors) {
	var backoff time.Duration
	for ctx.Err() == nil {
		h.readOnce(ctx, cur, time.Second, &backoff)
	}
}

// readOnce runs one XREAD and publishes what it returns.
func (h *hub) readOnce(ctx context.Context, cur *cursors, block time.Duration, backoff *time.Duration) {
	begin := time.Now()
	res, err := h.rdb.XRead(ctx, &redis.XReadArgs{Streams: cur.args(), Count: readBatch, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		*backoff = 0
		return
	}
	if err != nil {
		h.readFailed(ctx, "stream: reading job events failed", err, backoff)
		return
	}
	*backoff = 0
	full := false
	for _, st := range res {
		for _, msg := range st.Messages {
			// Entries carry their queue; the engine writes no other kind.
			evs, _ := parseEvents("", msg)
			for _, e := range evs {
				h.publish(e)
			}
		}
		if n := len(st.Messages); n > 0 {
			cur.advance(st.Stream, st.Messages[n-1].ID)
		}
		full = full || len(st.Messages) == readBatch
	}
	if !full {
		sleep(ctx, readPace-time.Since(begin))
	}
}

// discover adds the event streams of queues not followed yet and returns
// their keys. At the first discovery a stream is followed from its last
// entry (events from now on); a queue that appears later is followed from
// the start of its stream, which begins after the queue was registered.
func (h *hub) discover(ctx context.Context, all *cursors, first bool) ([]string, error) {
	qs, err := h.q.Queues(ctx)
	if err != nil {
		return nil, err
	}
	var added []string
	for _, q := range qs {
		if k := queue.EventStreamKey(q); !all.has(k) {
			added = append(added, k)
		}
	}
	if len(added) == 0 {
		return nil, nil
	}
	ids := make([]string, len(added))
	for i := range ids {
		ids[i] = "0-0"
	}
	if first {
		pipe := h.rdb.Pipeline()
		cmds := make([]*redis.XMessageSliceCmd, len(added))
		for i, k := range added {
			cmds[i] = pipe.XRevRangeN(ctx, k, "+", "-", 1)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		for i, cmd := range cmds {
			if msgs := cmd.Val(); len(msgs) > 0 {
				ids[i] = msgs[0].ID
			}
		}
	}
	for i, k := range added {
		all.add(k, ids[i])
	}
	return added, nil
}

// readFailed counts and logs a failed read and waits before the next try,
// 100 ms doubling to 2 s.
func (h *hub) readFailed(ctx context.Context, msg string, err error, backoff *time.Duration) {
	if ctx.Err() != nil {
		return
	}
	h.m.streamErrors.Inc()
	h.warn(ctx, msg, err)
	*backoff = min(max(2**backoff, 100*time.Millisecond), 2*time.Second)
	sleep(ctx, *backoff)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
