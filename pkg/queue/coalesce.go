package queue

import (
	"context"
	"sync"

	"github.com/sundialhq/sundial/pkg/job"
)

// maxCoalesce bounds how many concurrent single submits share one script call.
const maxCoalesce = 500

// coalescer groups concurrent single-job submits to one queue into one
// script call ("group commit"): the first caller leads and writes whatever
// is pending; callers arriving meanwhile wait, and the next of them leads the
// following call. Under load this turns N round trips into one without
// delaying a lone caller at all.
type coalescer struct {
	mu      sync.Mutex
	busy    bool
	pending []*submitReq
}

type submitReq struct {
	job  *job.Job
	res  Submitted
	err  error
	lead bool
	done chan struct{}
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

// submitOne submits one job without dependencies, sharing a script call
// with concurrent callers. Such jobs cannot fail validation inside the
// script, so sharing never makes one caller's job fail for another's.
func (c *Client) submitOne(ctx context.Context, j *job.Job) (Submitted, error) {
	b := c.coalescerFor(j.Queue)
	r := &submitReq{job: j, done: make(chan struct{}, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, r)
	if b.busy {
		b.mu.Unlock()
		<-r.done
		if !r.lead {
			return r.res, r.err
		}
	} else {
		b.busy = true
		b.mu.Unlock()
	}
	// Lead: write what is pending (r included), then hand over.
	b.mu.Lock()
	n := min(len(b.pending), maxCoalesce)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	b.mu.Unlock()

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
	if len(b.pending) > 0 {
		next := b.pending[0]
		next.lead = true
		next.done <- struct{}{}
	} else {
		b.busy = false
	}
	b.mu.Unlock()
	return r.res, r.err
}
