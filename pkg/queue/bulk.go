package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// BulkAction is what Bulk does to each job of a selection.
type BulkAction string

// The bulk actions. Each reuses the script of the one-job action: retry
// (lua/retry.lua), cancel (lua/cancel.lua), delete (lua/purge.lua); move
// submits a copy to another queue (lua/submit.lua) and purges the original.
const (
	BulkRetry  BulkAction = "retry"
	BulkCancel BulkAction = "cancel"
	BulkDelete BulkAction = "delete"
	BulkMove   BulkAction = "move"
)

// BulkChunk bounds the jobs one script call of Bulk handles.
const BulkChunk = 500

// BulkMaxIDs bounds an explicit list of ids.
const BulkMaxIDs = 10000

// MovedFromPrefix starts the idempotency key of a job that a bulk move
// copied into another queue; the rest is the original's id. The key links
// the copy to the original (whose history keeps its id) and makes a
// repeated move of the same job answer the copy instead of a second one.
const MovedFromPrefix = "moved-from:"

// BulkFilter selects jobs of one queue by what they are.
type BulkFilter struct {
	// State is dead (the default) for every action; cancel takes queued,
	// scheduled or waiting instead.
	State job.State `json:"state,omitempty"`
	// Type, when set, keeps jobs of this type only.
	Type string `json:"type,omitempty"`
	// Tag, when set, keeps jobs with this tag only.
	Tag string `json:"tag,omitempty"`
	// ErrorContains, when set, keeps jobs whose last_error contains it
	// (case-sensitive).
	ErrorContains string `json:"error_contains,omitempty"`
	// Since, when set, keeps dead jobs that died at or after it, and jobs
	// of the other states created at or after it.
	Since *time.Time `json:"since,omitempty"`
}

// BulkRequest is one bulk action over a selection of one queue's jobs:
// either IDs or Filter.
type BulkRequest struct {
	Action BulkAction
	IDs    []string
	Filter *BulkFilter
	// ToQueue is the queue a move goes to.
	ToQueue string
}

// BulkResult counts what a bulk action did.
type BulkResult struct {
	// Matched counts the jobs selected: the ids given, or the jobs the
	// filter matched.
	Matched int `json:"matched"`
	// Count counts the jobs the action changed; a selected job that no
	// longer qualifies (retried meanwhile, not dead, not in this queue) is
	// skipped.
	Count int `json:"count"`
	// Scanned counts the entries a filter read.
	Scanned int `json:"scanned"`
}

// Validate checks r for an action on queue, and fills in the filter's
// default state (dead); the error is a *job.FieldError naming the field.
func (r *BulkRequest) Validate(queue string) error {
	bad := func(field, format string, args ...any) error {
		return &job.FieldError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
	}
	switch r.Action {
	case BulkRetry, BulkCancel, BulkDelete, BulkMove:
	default:
		return bad("action", "must be one of retry, cancel, delete, move")
	}
	if (r.IDs == nil) == (r.Filter == nil) {
		return bad("ids", "or filter: give exactly one")
	}
	if r.IDs != nil {
		if len(r.IDs) == 0 || len(r.IDs) > BulkMaxIDs {
			return bad("ids", "must name 1 to %d jobs", BulkMaxIDs)
		}
		for i, id := range r.IDs {
			if !validID(id) {
				return bad(fmt.Sprintf("ids[%d]", i), "is not a job id")
			}
		}
	}
	if f := r.Filter; f != nil {
		if f.State == "" {
			f.State = job.Dead
		}
		ok := f.State == job.Dead
		if r.Action == BulkCancel {
			ok = f.State == job.Queued || f.State == job.Scheduled || f.State == job.Waiting
		}
		if !ok {
			if r.Action == BulkCancel {
				return bad("filter.state", "must be queued, scheduled or waiting to cancel")
			}
			return bad("filter.state", "must be dead to %s", r.Action)
		}
		if f.Type != "" && !job.ValidType(f.Type) {
			return bad("filter.type", "is not a job type")
		}
		if f.Tag != "" && !job.ValidTag(f.Tag) {
			return bad("filter.tag", "is not a tag ([A-Za-z0-9_.:=/-]{1,64})")
		}
	}
	if r.Action == BulkMove {
		if !job.ValidQueue(r.ToQueue) {
			return bad("to_queue", "must name a queue ([a-z0-9_-]{1,64})")
		}
		if r.ToQueue == queue {
			return bad("to_queue", "must be another queue than %q", queue)
		}
	} else if r.ToQueue != "" {
		return bad("to_queue", "is only for move")
	}
	return nil
}

// Bulk applies r to a selection of queue's jobs, BulkChunk jobs per
// script call, and returns the counts; progress, when not nil, is called
// after each chunk with the counts so far. A filter is read page by page
// (List's order: dead jobs newest first), so no call reads the whole
// queue. Each chunk is atomic and each action idempotent: a job that no
// longer qualifies is skipped, so a request cut short (a crash, a
// timeout) leaves whole chunks done and the rest untouched, and sending
// it again finishes it. A move submits the copies with the idempotency
// key MovedFromPrefix+id before it purges the originals: a repeat finds
// the copies instead of making new ones.
func (c *Client) Bulk(ctx context.Context, queue string, r BulkRequest, progress func(BulkResult)) (BulkResult, error) {
	if err := r.Validate(queue); err != nil {
		return BulkResult{}, err
	}
	var res BulkResult
	apply := func(ids []string) error {
		n, err := c.bulkChunk(ctx, queue, r, ids)
		res.Count += n
		if progress != nil {
			progress(res)
		}
		return err
	}
	if r.IDs != nil {
		ids := distinct(r.IDs)
		res.Matched = len(ids)
		for len(ids) > 0 {
			chunk := ids[:min(BulkChunk, len(ids))]
			ids = ids[len(chunk):]
			if err := apply(chunk); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	f := r.Filter
	o := ListOptions{State: f.State, Type: f.Type, Tag: f.Tag, Limit: BulkChunk}
	for {
		jobs, next, read, err := c.list(ctx, queue, o)
		if err != nil {
			return res, err
		}
		var ids []string
		stop := false
		for _, j := range jobs {
			if f.Since != nil && f.State == job.Dead && j.FinishedAt != nil && j.FinishedAt.Before(*f.Since) {
				stop = true // newest first: the rest died before Since
				break
			}
			if f.Since != nil && f.State != job.Dead && j.CreatedAt.Before(*f.Since) {
				continue
			}
			if f.ErrorContains != "" && !strings.Contains(j.LastError, f.ErrorContains) {
				continue
			}
			ids = append(ids, j.ID)
		}
		res.Scanned += read
		res.Matched += len(ids)
		if len(ids) > 0 {
			if err := apply(ids); err != nil {
				return res, err
			}
		}
		if stop || next == "" {
			return res, nil
		}
		o.Cursor = next
	}
}

// bulkChunk applies r's action to ids, in one script call (a move: one
// submit to the other queue, then one purge), and returns how many jobs
// it changed.
func (c *Client) bulkChunk(ctx context.Context, queue string, r BulkRequest, ids []string) (int, error) {
	k := c.keysFor(queue)
	now := c.opts.Now()
	switch r.Action {
	case BulkRetry:
		// Dead or cancelled, as one job's retry.
		res, err := c.run(ctx, c.scripts.retry, k, now, append([]any{"any", len(ids)}, toAny(ids)...)...).StringSlice()
		if err != nil {
			return 0, fmt.Errorf("bulk retry: %w", err)
		}
		if len(ids) == 1 {
			return okCount(res), nil
		}
		n, _ := strconv.Atoi(res[1])
		return n, nil
	case BulkCancel:
		res, err := c.run(ctx, c.scripts.cancel, k, now, toAny(ids)...).StringSlice()
		if err != nil {
			return 0, fmt.Errorf("bulk cancel: %w", err)
		}
		if len(ids) == 1 {
			return okCount(res), nil
		}
		n, _ := strconv.Atoi(res[1])
		return n, nil
	case BulkDelete:
		return c.purge(ctx, k, ids)
	default:
		return c.move(ctx, k, r.ToQueue, ids)
	}
}

// okCount is 1 for a one-job script answer {'ok', …}, else 0.
func okCount(res []string) int {
	if len(res) > 0 && res[0] == "ok" {
		return 1
	}
	return 0
}

func (c *Client) purge(ctx context.Context, k *queueKeys, ids []string) (int, error) {
	n, err := c.run(ctx, c.scripts.purge, k, c.opts.Now(), append([]any{len(ids)}, toAny(ids)...)...).Int()
	if err != nil {
		return 0, fmt.Errorf("bulk delete: %w", err)
	}
	return n, nil
}

// move copies the dead jobs among ids into queue to, queued with their
// type, payload, priority, attempts, timeout, backoff and group, then
// purges the originals. The two queues may live in different Redis
// Cluster slots, so the copy is a submit (idempotency key
// MovedFromPrefix+id) and the purge another call: a crash between them
// leaves the originals dead, and a repeat finds the copies.
func (c *Client) move(ctx context.Context, k *queueKeys, to string, ids []string) (int, error) {
	batch := make([]candidate, len(ids))
	for i, id := range ids {
		batch[i] = candidate{id: id}
	}
	found, err := c.readJobs(ctx, k, batch, "")
	if err != nil {
		return 0, err
	}
	var copies []*job.Job
	var moved []string
	now := c.opts.Now()
	for _, j := range found {
		if j == nil || j.State != job.Dead {
			continue
		}
		spec := job.Spec{Queue: to, Type: j.Type, Payload: j.Payload, Priority: j.Priority,
			MaxAttempts: &j.MaxAttempts, TimeoutSeconds: &j.TimeoutSeconds, Backoff: &j.Backoff,
			IdempotencyKey: MovedFromPrefix + j.ID, Group: j.Group}
		cp, err := spec.Build(now)
		if err != nil {
			return 0, fmt.Errorf("bulk move of %s: %w", j.ID, err)
		}
		copies = append(copies, cp)
		moved = append(moved, j.ID)
	}
	if len(copies) == 0 {
		return 0, nil
	}
	if _, err := c.Submit(ctx, copies); err != nil {
		return 0, fmt.Errorf("bulk move: %w", err)
	}
	return c.purge(ctx, k, moved)
}

// distinct returns ids without repeats, in their first order.
func distinct(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
