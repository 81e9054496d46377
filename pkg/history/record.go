package history

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// writeBatch records batch, retrying with backoff until MongoDB accepts it,
// ctx ends, or the writer loses the batch's queues (see keepOwned). It
// returns the events of held jobs (to be written with the next batch), the
// events it recorded (to acknowledge), and when the first held job's hold
// ends.
//
// A job whose submitted event is in the batch but which has not finished
// is held while its next events are likely just behind in the stream: it
// was submitted less than Hold before the newest event read from its
// stream, and either that read was full (more events wait: the writer is
// behind) or less than Hold ago. Most jobs then get their document with a
// single insert, which matters on FerretDB, where an update scans the whole
// collection.
func (w *Writer) writeBatch(ctx context.Context, batch []*streamEvent, reading map[string]bool, tails map[string]*tail) (held, written []*streamEvent, holdUntil time.Time) {
	bo := w.newBackoff()
	var failingSince time.Time
	for {
		batch = w.keepOwned(batch, reading)
		held, written, holdUntil = nil, nil, time.Time{}
		var write []*jobGroup
		now := time.Now()
		for _, g := range groupByJob(batch) {
			until := g.firstAt.Add(w.cfg.Hold)
			t := tails[g.events[0].stream]
			if g.first && !g.final() && t != nil && t.newest.Before(until) && (t.more || now.Before(until)) {
				held = append(held, g.events...)
				if holdUntil.IsZero() || until.Before(holdUntil) {
					holdUntil = until
				}
				continue
			}
			write = append(write, g)
			written = append(written, g.events...)
		}
		if len(write) == 0 {
			return held, nil, holdUntil
		}
		err := w.record(ctx, written, write)
		if err == nil {
			if !failingSince.IsZero() {
				w.log.Info("history writer recovered", "failing_for", time.Since(failingSince).Round(time.Millisecond))
			}
			return held, written, holdUntil
		}
		if ctx.Err() != nil {
			return nil, nil, time.Time{}
		}
		w.metrics.errors.Inc()
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		w.log.Warn("history: write to MongoDB failed; events wait in Redis, retrying",
			"err", err, "events", len(written), "in", bo.delay, "failing_for", time.Since(failingSince).Round(time.Millisecond))
		if !bo.wait(ctx) {
			return nil, nil, time.Time{}
		}
	}
}

// record writes the events and job groups of one batch: it first reads the
// Redis hash of each job that is new or finished (payload, result, …),
// then writes to MongoDB.
func (w *Writer) record(ctx context.Context, events []*streamEvent, groups []*jobGroup) error {
	start := time.Now()
	var need []*jobGroup
	for _, g := range groups {
		g.hash = nil
		if g.first || g.final() {
			need = append(need, g)
		}
	}
	if err := readJobHashes(ctx, w.rdb, need); err != nil {
		return err
	}
	if err := readLogLines(ctx, w.rdb, groups); err != nil {
		return err
	}
	read := time.Now()
	st, err := w.store.write(ctx, events, groups)
	if err != nil {
		return err
	}
	done := time.Now()
	w.log.Debug("history: batch written", "events", st.events, "duplicates", st.duplicateEvents,
		"jobs_inserted", st.jobsInserted, "jobs_updated", st.jobsUpdated, "stale", st.staleUpdates,
		"redis", read.Sub(start).Round(time.Millisecond), "mongo", done.Sub(read).Round(time.Millisecond))
	w.metrics.batch.Observe(done.Sub(start).Seconds())
	w.metrics.events.Add(float64(st.events))
	w.metrics.duplicates.Add(float64(st.duplicateEvents))
	w.metrics.jobs.WithLabelValues("insert").Add(float64(st.jobsInserted))
	w.metrics.jobs.WithLabelValues("update").Add(float64(st.jobsUpdated))
	for _, e := range events {
		w.metrics.delay.Observe(done.Sub(e.At).Seconds())
	}
	return nil
}

// ack acknowledges the stream entries whose events are all recorded, one
// pipelined XACK per stream. An entry holding several jobs' events (a
// batch entry) stays pending until the last of them is recorded — some may
// be held back (see Hold) — so a writer that dies in between leaves it to
// the next one, which records the rest (and skips the duplicates).
func (w *Writer) ack(ctx context.Context, events []*streamEvent) error {
	if len(events) == 0 {
		return nil
	}
	ids := map[string][]string{}
	var complete []string
	for _, e := range events {
		if e.parts > 1 {
			k := e.stream + "\x00" + e.entry
			p := w.partial[k]
			if p == nil {
				p = &partialEntry{queue: e.Queue, recorded: map[int]bool{}}
				w.partial[k] = p
			}
			p.recorded[e.index] = true
			if len(p.recorded) < e.parts || p.acking {
				continue
			}
			p.acking = true
			complete = append(complete, k)
		}
		ids[e.stream] = append(ids[e.stream], e.entry)
	}
	pipe := w.rdb.Pipeline()
	for key, list := range ids {
		pipe.XAck(ctx, key, w.cfg.Group, list...)
	}
	_, err := pipe.Exec(ctx)
	if err == redis.Nil {
		err = nil
	}
	for _, k := range complete {
		if err == nil {
			delete(w.partial, k)
		} else {
			w.partial[k].acking = false // the retry acknowledges it
		}
	}
	return err
}

// partialEntry is a batch entry some of whose events are recorded.
type partialEntry struct {
	queue    string
	recorded map[int]bool // indexes of the recorded events
	acking   bool         // complete: in the XACK under way
}

// forgetPartial drops what ack knows of the entries of queues the writer
// no longer owns: their next owner records and acknowledges them.
func (w *Writer) forgetPartial(owns func(queue string) bool) {
	for k, p := range w.partial {
		if !owns(p.queue) {
			delete(w.partial, k)
		}
	}
}
