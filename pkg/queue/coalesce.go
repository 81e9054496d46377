package queue

import (
	"context"
	"sync"

	"github.com/sundialhq/sundial/pkg/job"
)

// maxCoalesce bounds how many concurrent single submits share one script call.
const maxCoalesce = 500

// maxInFlight is how many shared script calls one queue's submits keep in
// flight at once. With one, Redis idles while the client reads an answer
// and wakes its callers, and the client idles while Redis runs the call;
// with two, each side works while the other does. More than two splits the
// waiting callers into smaller calls that cost Redis more per job
// (docs/benchmarks/2026-11.md, "Single submits: two calls in flight").
const maxInFlight = 2

// coalescer groups concurrent single-job submits to one queue into shared
// script calls ("group commit"). A caller that finds fewer than
// maxInFlight calls in flight leads a call of its own job at once; callers
// arriving while maxInFlight calls are in flight wait, and a leader that
// finishes hands the next batch of them to its first caller, who leads
// that call. Callers wait only while maxInFlight calls are in flight, so a
// caller that leads at once finds none waiting; a lone caller is never
// delayed, and under load N round trips become a few.
type coalescer struct {
	mu       sync.Mutex
	inflight int
	pending  []*submitReq
}

type submitReq struct {
	job   *job.Job
	res   Submitted
	err   error
	batch []*submitReq // the batch to write, when handed the lead
	done  chan struct{}
}

func (c *Client) coalescerFor(queue string) *coalescer {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.coalescers[queue]
	if !ok {
		b = &coalescer{}
		c.coalescers[queue] = b
	}
	return b
}

// cut takes the next batch off the pending callers; b.mu is held.
func (b *coalescer) cut() []*submitReq {
	n := min(len(b.pending), maxCoalesce)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	return batch
}

// submitOne submits one job without dependencies, sharing a script call
// with concurrent callers. Such jobs cannot fail validation inside the
// script, so sharing never makes one caller's job fail for another's.
func (c *Client) submitOne(ctx context.Context, j *job.Job) (Submitted, error) {
	b := c.coalescerFor(j.Queue)
	r := &submitReq{job: j, done: make(chan struct{}, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, r)
	var batch []*submitReq
	if b.inflight < maxInFlight {
		b.inflight++
		batch = b.cut()
		b.mu.Unlock()
	} else {
		b.mu.Unlock()
		<-r.done
		if r.batch == nil {
			return r.res, r.err // written by another caller's call
		}
		batch = r.batch
	}
	// Lead: write the batch (r is in it), answer its callers, then hand
	// the call's place to the next pending caller, or give it up.
	jobs := make([]*job.Job, len(batch))
	idx := make([]int, len(batch))
	for i, br := range batch {
		jobs[i], idx[i] = br.job, i
	}
	res, err := c.submitQueue(context.WithoutCancel(ctx), j.Queue, jobs, idx, false)
	for i, br := range batch {
		if err != nil {
			br.err = err
		} else {
			br.res = res[i]
		}
		if br != r {
			br.done <- struct{}{}
		}
	}
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.inflight--
		b.mu.Unlock()
		return r.res, r.err
	}
	next := b.cut()
	b.mu.Unlock()
	next[0].batch = next
	next[0].done <- struct{}{}
	return r.res, r.err
}
