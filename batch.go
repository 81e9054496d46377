package sundial

import (
	"context"
	"fmt"
	"iter"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Batch is a set of jobs in any queues, submitted together, with
// callbacks: jobs submitted once, when every member succeeded (OnSuccess)
// or when every member ended whatever the outcome (OnComplete)
// (docs/workflows.md, "Batches"):
//
//	info, err := client.SubmitBatch(ctx, sundial.Batch{
//		ID:         "import-42",
//		Jobs:       []sundial.Args{sundial.Job{Type: "row", Queue: "import", Payload: row1}, RowArgs{N: 2}},
//		OnComplete: sundial.Job{Type: "import.report", Queue: "reports"},
//	})
//
// The callbacks' handlers find the batch's id in their payload's member
// "batch" (Get also shows it as the job's Batch field; the job a handler
// receives leaves that field out), then read the members' results with
// Client.BatchResults.
type Batch struct {
	// ID names the batch: [A-Za-z0-9_.:@-]{1,128}; empty, a new ULID.
	ID string
	// Jobs are the members: Jobs or typed jobs (Args), as Submit takes
	// them, in any queues, without DependsOn or IdempotencyKey. Any
	// number: they are stored in calls of at most 1,000 per queue.
	Jobs []Args
	// OnSuccess and OnComplete are the callbacks (nil: none). Their
	// payload must be a JSON object or none: the member "batch" is added.
	OnSuccess, OnComplete Args
	// Open leaves the batch unsealed: add members with AddToBatch, and
	// seal it there; the callbacks wait until it is sealed.
	Open bool
}

// BatchInfo is a batch's state: members by how they ended, and its
// callbacks.
type BatchInfo = queue.BatchInfo

// BatchResult is what one member of a batch produced.
type BatchResult = queue.BatchResult

// Errors of batches; test them with errors.Is.
var (
	// ErrBatchNotFound: no batch with that id is in Redis.
	ErrBatchNotFound = queue.ErrBatchNotFound
	// ErrBatchExists: SubmitBatch of an id that exists.
	ErrBatchExists = queue.ErrBatchExists
	// ErrBatchSealed: AddToBatch of a sealed batch.
	ErrBatchSealed = queue.ErrBatchSealed
)

// SubmitBatch validates every member and callback (a *job.FieldError
// naming "jobs[i].x", "on_success.x" or "on_complete.x"; nothing is
// stored then), creates the batch, stores its members, and seals it
// unless b.Open. When Redis fails midway the batch stays unsealed, its
// callbacks waiting: add what is missing with AddToBatch and seal it, or
// CancelBatch it.
func (c *Client) SubmitBatch(ctx context.Context, b Batch) (*BatchInfo, error) {
	now := c.q.Now()
	if b.ID == "" {
		b.ID = job.NewID(now)
	}
	members, err := c.buildAll(ctx, b.Jobs, "jobs")
	if err != nil {
		return nil, err
	}
	spec := queue.BatchSpec{ID: b.ID, Jobs: members, Open: b.Open}
	for _, cb := range []struct {
		a     Args
		field string
		into  **job.Job
	}{{b.OnSuccess, "on_success", &spec.OnSuccess}, {b.OnComplete, "on_complete", &spec.OnComplete}} {
		if cb.a == nil {
			continue
		}
		j := asJob(cb.a)
		built, err := c.build(ctx, &j, now)
		if err != nil {
			if fe, ok := err.(*job.FieldError); ok {
				return nil, fe.Prefix(cb.field)
			}
			return nil, err
		}
		*cb.into = built
	}
	info, _, err := c.q.CreateBatch(ctx, spec)
	return info, err
}

// AddToBatch adds members to batch id, which must be open (not sealed),
// and seals it after them when seal is true (jobs may be empty then).
func (c *Client) AddToBatch(ctx context.Context, id string, jobs []Args, seal bool) (*BatchInfo, error) {
	members, err := c.buildAll(ctx, jobs, "jobs")
	if err != nil {
		return nil, err
	}
	info, _, err := c.q.AddToBatch(ctx, id, members, seal)
	return info, err
}

// buildAll builds jobs as Submit would, naming a bad one "<field>[i]".
func (c *Client) buildAll(ctx context.Context, jobs []Args, field string) ([]*job.Job, error) {
	now := c.q.Now()
	out := make([]*job.Job, len(jobs))
	for i, a := range jobs {
		if a == nil {
			return nil, &job.FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Message: fmt.Sprintf("%s[%d] is required", field, i)}
		}
		j := asJob(a)
		built, err := c.build(ctx, &j, now)
		if err != nil {
			if fe, ok := err.(*job.FieldError); ok {
				return nil, fe.Prefix(fmt.Sprintf("%s[%d]", field, i))
			}
			return nil, err
		}
		out[i] = built
	}
	return out, nil
}

// GetBatch returns batch id's state.
func (c *Client) GetBatch(ctx context.Context, id string) (*BatchInfo, error) {
	return c.q.Batch(ctx, id)
}

// CancelBatch seals batch id and cancels every member that has not
// ended; OnComplete then fires. It returns how many it cancelled.
func (c *Client) CancelBatch(ctx context.Context, id string) (int, error) {
	return c.q.CancelBatch(ctx, id)
}

// RetryBatch retries batch id's dead and cancelled members; OnSuccess
// fires once every member succeeded. It returns how many it requeued.
func (c *Client) RetryBatch(ctx context.Context, id string) (int, error) {
	return c.q.RetryBatch(ctx, id)
}

// BatchResults yields the results of batch id's members in the order
// they were added, read a page at a time: each member's state, its
// result when it succeeded, its last error otherwise. An error (the
// batch not found: ErrBatchNotFound) ends the sequence.
func (c *Client) BatchResults(ctx context.Context, id string) iter.Seq2[BatchResult, error] {
	return func(yield func(BatchResult, error) bool) {
		cursor := ""
		for {
			page, next, err := c.q.BatchResults(ctx, id, cursor, 500)
			if err != nil {
				yield(BatchResult{}, err)
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}
