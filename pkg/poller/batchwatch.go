package poller

import (
	"context"
	"time"
)

// batchWatch finds sealed batches whose count of ended members stopped
// moving, and settled batches whose slot lost that they settled
// (queue.Client.CheckSettledBatches), and has them recounted from their
// members' jobs (queue.Client.RecountBatch): the repair for ends the relay
// never brought. A batch is recounted once its count has not moved for
// BatchRecountAfter, then again after twice as long each time it still
// does not move (up to an hour): a batch whose members simply run long
// costs a read of its members now and then, not every pass.
type batchWatch struct {
	seen map[string]*batchSeen // open batch → its last count
}

type batchSeen struct {
	done  int
	since time.Time     // when done took its value
	wait  time.Duration // how long done must stay still before the next recount
}

// maxRecountWait bounds the wait between two recounts of one batch.
const maxRecountWait = time.Hour

// watchBatchesLoop runs watchBatches every BatchRecountAfter/4 (at least
// every 5 s) until ctx ends, in a goroutine of its own: only it touches
// p.batches. A failure is counted (step batch_recount, queue "") and
// logged once per streak.
func (p *Poller) watchBatchesLoop(ctx context.Context) {
	tick := time.NewTicker(max(min(p.cfg.BatchRecountAfter/4, 5*time.Second), 10*time.Millisecond))
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := p.watchBatches(ctx)
		switch {
		case err == nil:
			if failing {
				p.log.Info("batch recount recovered")
			}
			failing = false
		case ctx.Err() != nil:
			return
		default:
			p.metrics.errors.WithLabelValues("", "batch_recount").Inc()
			if !failing {
				p.log.Error("batch recount failed; retrying", "err", err)
			}
			failing = true
		}
	}
}

// watchBatches looks at up to cfg.Batch open batches and recounts the
// stalled, then checks a sample of the settled ones.
func (p *Poller) watchBatches(ctx context.Context) error {
	open, err := p.q.OpenBatches(ctx, p.cfg.Batch)
	if err != nil {
		return err
	}
	now := time.Now()
	live := map[string]bool{}
	var firstErr error
	for _, b := range open {
		live[b.ID] = true
		if !b.Sealed || b.Done >= b.Total {
			delete(p.batches.seen, b.ID)
			continue
		}
		s := p.batches.seen[b.ID]
		if s == nil || s.done != b.Done {
			p.batches.seen[b.ID] = &batchSeen{done: b.Done, since: now, wait: p.cfg.BatchRecountAfter}
			continue
		}
		if now.Sub(s.since) < s.wait {
			continue
		}
		n, err := p.q.RecountBatch(ctx, b.ID)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		s.since, s.wait = now, min(2*s.wait, maxRecountWait)
		if n > 0 {
			p.metrics.batchRecounted.Add(float64(n))
			p.log.Warn("a batch's count had stopped; recounted its members from their jobs", "batch", b.ID,
				"counted", n, "ended_before", b.Done, "total", b.Total)
			s.done += n
		}
	}
	// Batches that settled, but whose slot came back with less: back to
	// the open set, where the looks above recount them.
	back, err := p.q.CheckSettledBatches(ctx, min(p.cfg.Batch, 100))
	if err != nil && firstErr == nil {
		firstErr = err
	}
	for _, id := range back {
		p.log.Warn("a batch that had settled has something left to fire after all (its Redis came back with less); watching it again", "batch", id)
	}
	// Forget batches no longer open (OpenBatches samples when there are
	// more than cfg.Batch: forget only what was not looked at twice).
	if len(open) < p.cfg.Batch {
		for id := range p.batches.seen {
			if !live[id] {
				delete(p.batches.seen, id)
			}
		}
	}
	return firstErr
}
