package history

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
)

// loop is the writer's main loop: take over newly owned streams, read a
// batch, write it until MongoDB accepts it, acknowledge, repeat.
func (w *Writer) loop(ctx context.Context) error {
	reading := map[string]bool{} // owned queues whose stream is being read
	var held []*streamEvent      // events of jobs held back for their end (see Hold)
	var holdUntil time.Time      // when the first held job must be written
	var unacked []*streamEvent   // recorded, acknowledgement failed
	tails := map[string]*tail{}  // stream key → what the last reads saw of it
	var lastRead time.Time
	lastSweep := time.Now()
	readFailed := false // a read failed: its entries may be delivered but never seen
	bo := w.newBackoff()
	for ctx.Err() == nil {
		// Follow ownership: drop lost queues, take over gained ones.
		owned := w.own.owned()
		var claimed []*streamEvent
		takenOver := map[string]bool{}
		ownedSet := make(map[string]bool, len(owned))
		for _, q := range owned {
			ownedSet[q] = true
			if reading[q] {
				continue
			}
			evs, err := w.takeOver(ctx, q)
			if err != nil {
				w.log.Warn("history: take-over failed; retrying", "queue", q, "err", err)
				continue
			}
			reading[q] = true
			takenOver[q] = true
			claimed = append(claimed, evs...)
		}
		for q := range reading {
			if !ownedSet[q] {
				delete(reading, q)
			}
		}
		if readFailed || time.Since(lastSweep) >= w.cfg.StaleAfter/2 {
			minIdle := w.cfg.StaleAfter
			if readFailed {
				// Redis may have delivered what the failed read asked for
				// (the reply was lost): take back everything not in hand.
				minIdle = 0
			}
			sweepQs := map[string]bool{}
			for q := range reading {
				if !takenOver[q] {
					sweepQs[q] = true
				}
			}
			evs, ok := w.sweep(ctx, sweepQs, held, minIdle)
			lastSweep, readFailed = time.Now(), readFailed && !ok
			claimed = append(claimed, evs...)
		}
		held = w.keepOwned(held, reading)
		unacked = w.keepOwned(unacked, reading)
		if len(unacked) > 0 {
			if err := w.ack(ctx, unacked); err != nil {
				w.log.Warn("history: acknowledge failed; retrying", "err", err)
				bo.wait(ctx)
				continue
			}
			unacked = nil
		}
		if len(reading) == 0 && len(claimed) == 0 {
			w.waitForQueues(ctx)
			continue
		}
		block := w.cfg.Block
		if len(claimed) > 0 {
			block = -1 // claimed events are waiting: do not wait for more
		} else if len(held) > 0 {
			block = max(time.Until(holdUntil), time.Millisecond)
		}
		if len(claimed) == 0 && !behind(tails) {
			// Caught up: let events gather for a bigger batch.
			w.linger(ctx, lastRead)
		}
		lastRead = time.Now()
		read, err := w.read(ctx, keys(reading), block)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if strings.Contains(err.Error(), "NOGROUP") { // a stream was deleted: set it up again
				clear(reading)
			}
			readFailed = true
			w.log.Warn("history: read failed; retrying", "err", err, "in", bo.delay)
			bo.wait(ctx)
			continue
		}
		bo = w.newBackoff()
		observe(tails, claimed, true, w.cfg.BatchSize)
		observe(tails, read, false, w.cfg.BatchSize)
		batch := append(append(held, claimed...), read...)
		if len(batch) == 0 {
			continue
		}
		var written []*streamEvent
		held, written, holdUntil = w.writeBatch(ctx, batch, reading, tails)
		if err := w.ack(ctx, written); err != nil && ctx.Err() == nil {
			w.log.Warn("history: acknowledge failed; retrying", "err", err)
			unacked = written
		}
	}
	return nil
}

// tail is what the writer last read of one stream.
type tail struct {
	newest time.Time // time of the newest event read
	more   bool      // the last read was full: more events wait
}

// observe records in tails what a read (or, claimed, a take-over) returned.
// Streams absent from a read have nothing more waiting.
func observe(tails map[string]*tail, evs []*streamEvent, claimed bool, batchSize int) {
	counts := map[string]int{}
	for _, e := range evs {
		t := tails[e.stream]
		if t == nil {
			t = &tail{}
			tails[e.stream] = t
		}
		if e.At.After(t.newest) {
			t.newest = e.At
		}
		if e.index == 0 {
			counts[e.stream]++ // entries, as a read's Count
		}
	}
	if claimed {
		for key := range counts {
			tails[key].more = true
		}
		return
	}
	for key, t := range tails {
		t.more = counts[key] >= batchSize
	}
}

// behind reports whether the last read of some stream was full.
func behind(tails map[string]*tail) bool {
	for _, t := range tails {
		if t.more {
			return true
		}
	}
	return false
}

// linger waits until Linger has passed since the last read.
func (w *Writer) linger(ctx context.Context, last time.Time) {
	d := time.Until(last.Add(w.cfg.Linger))
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

// waitForQueues waits until the owned queues change or a discovery
// interval passes.
func (w *Writer) waitForQueues(ctx context.Context) {
	t := time.NewTimer(w.cfg.DiscoverInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.changed:
	case <-t.C:
	}
}

// keepOwned drops the events of queues this writer no longer owns: they
// stay pending in the group, and whoever owns the queue next (this writer
// again, perhaps) claims them when it takes the queue over. Such queues
// leave reading, so that a take-over happens.
func (w *Writer) keepOwned(evs []*streamEvent, reading map[string]bool) []*streamEvent {
	out := evs[:0]
	lost := false
	for _, e := range evs {
		if w.own.owns(e.Queue) {
			out = append(out, e)
		} else {
			delete(reading, e.Queue)
			lost = true
		}
	}
	if lost {
		w.forgetPartial(w.own.owns)
	}
	return out
}

// takeOver prepares a newly owned queue: it creates the consumer group
// (from the stream's start, so events written before any writer ran are
// recorded) and claims every pending entry of the group — those of a
// writer that died or gave the queue up — returning them oldest first.
// Owning the queue makes claiming at once (no idle time) safe.
func (w *Writer) takeOver(ctx context.Context, q string) ([]*streamEvent, error) {
	key := queue.EventStreamKey(q)
	if err := w.rdb.XGroupCreateMkStream(ctx, key, w.cfg.Group, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return nil, err
	}
	out, err := w.claimPending(ctx, q, 0)
	if err != nil {
		return nil, err
	}
	w.forgetIdleConsumers(ctx, key)
	if len(out) > 0 {
		w.log.Info("history: took over pending events", "queue", q, "events", len(out))
	}
	return out, nil
}

// claimPending claims the group's pending entries of q idle at least
// minIdle, whoever holds them, oldest first.
func (w *Writer) claimPending(ctx context.Context, q string, minIdle time.Duration) ([]*streamEvent, error) {
	key := queue.EventStreamKey(q)
	var out []*streamEvent
	start := "0-0"
	for {
		msgs, next, err := w.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: key, Group: w.cfg.Group, Consumer: w.cfg.Consumer,
			MinIdle: minIdle, Start: start, Count: int64(w.cfg.BatchSize),
		}).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, w.parse(ctx, key, q, msgs)...)
		if next == "0-0" || next == "" {
			break
		}
		start = next
	}
	return out, nil
}

// sweep claims again the entries of the reading queues pending for at
// least minIdle that the writer does not have in hand (held holds them):
// StaleAfter as a periodic safety net, 0 after a failed read, whose
// entries Redis may have delivered with a reply that never arrived. A take-over claims what its queue's pending list holds at that
// moment; an entry that a writer which lost the queue still had, delivered
// to it in a moment when both believed they owned the queue (a Redis
// restart that rolled ownership back, say), would otherwise stay pending
// and unrecorded for good.
// It reports whether every queue answered. Queues just taken over (their
// events are in claimed) are left out.
func (w *Writer) sweep(ctx context.Context, reading map[string]bool, held []*streamEvent, minIdle time.Duration) (out []*streamEvent, ok bool) {
	inHand := map[string]bool{}
	for _, e := range held {
		inHand[e.stream+"\x00"+e.entry] = true
	}
	ok = true
	for q := range reading {
		evs, err := w.claimPending(ctx, q, minIdle)
		if err != nil {
			w.log.Warn("history: claiming stale pending events failed", "queue", q, "err", err)
			ok = false
			continue
		}
		n := 0
		for _, e := range evs {
			if !inHand[e.stream+"\x00"+e.entry] {
				out = append(out, e)
				n++
			}
		}
		if n > 0 {
			w.log.Warn("history: claimed events left pending", "queue", q, "events", n)
		}
	}
	return out, ok
}

// forgetIdleConsumers removes the group's other consumers that hold no
// pending entry (writers that stopped), so the group does not grow with
// every restart.
func (w *Writer) forgetIdleConsumers(ctx context.Context, key string) {
	cs, err := w.rdb.XInfoConsumers(ctx, key, w.cfg.Group).Result()
	if err != nil {
		return
	}
	for _, c := range cs {
		if c.Name != w.cfg.Consumer && c.Pending == 0 {
			w.rdb.XGroupDelConsumer(ctx, key, w.cfg.Group, c.Name)
		}
	}
}

// read returns the next new events of the given queues' streams, waiting
// up to block for some (not at all when block < 0). On one Redis server a
// single XREADGROUP covers every stream; in Redis Cluster the streams live
// in different slots, so each is read without blocking in one pipeline.
func (w *Writer) read(ctx context.Context, queues []string, block time.Duration) ([]*streamEvent, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	if _, cluster := w.rdb.(*redis.ClusterClient); cluster {
		return w.readCluster(ctx, queues, block)
	}
	args := make([]string, 0, 2*len(queues))
	for _, q := range queues {
		args = append(args, queue.EventStreamKey(q))
	}
	for range queues {
		args = append(args, ">")
	}
	streams, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: w.cfg.Group, Consumer: w.cfg.Consumer, Streams: args,
		Count: int64(w.cfg.BatchSize), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]string, len(queues))
	for _, q := range queues {
		byKey[queue.EventStreamKey(q)] = q
	}
	var out []*streamEvent
	for _, s := range streams {
		out = append(out, w.parse(ctx, s.Stream, byKey[s.Stream], s.Messages)...)
	}
	return out, nil
}

// clusterIdle is how long a cluster read waits when every stream was empty.
const clusterIdle = 100 * time.Millisecond

func (w *Writer) readCluster(ctx context.Context, queues []string, block time.Duration) ([]*streamEvent, error) {
	pipe := w.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: w.cfg.Group, Consumer: w.cfg.Consumer,
			Streams: []string{queue.EventStreamKey(q), ">"}, Count: int64(w.cfg.BatchSize), Block: -1,
		})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []*streamEvent
	for i, c := range cmds {
		for _, s := range c.Val() {
			out = append(out, w.parse(ctx, s.Stream, queues[i], s.Messages)...)
		}
	}
	if len(out) == 0 && block > 0 {
		t := time.NewTimer(min(block, clusterIdle))
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return out, nil
}

// parse decodes stream entries. An entry that is not an event (the engine
// never writes one) is logged, acknowledged and left out.
func (w *Writer) parse(ctx context.Context, key, q string, msgs []redis.XMessage) []*streamEvent {
	out := make([]*streamEvent, 0, len(msgs))
	for _, m := range msgs {
		evs, err := parseEntry(key, q, m)
		if err != nil {
			w.log.Error("history: skipping malformed stream entry", "queue", q, "entry", m.ID, "err", err)
			w.rdb.XAck(ctx, key, w.cfg.Group, m.ID)
			continue
		}
		out = append(out, evs...)
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
