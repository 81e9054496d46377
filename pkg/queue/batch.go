package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// Batches (docs/workflows.md, "Batches"; docs/engine.md, "Batches"). A
// batch is a set of member jobs in any queues, and callback jobs submitted
// once the batch is sealed and every member ended (on_complete), or every
// member succeeded (on_success). A batch lives in its own slot
// (batchKeys); its members in their queues' slots. A member carries the
// field batch, written by the submit script; when it ends, the script that
// ends it appends the end to a list of its queue (lib.lua, batch_ended),
// which the poller relays to the batch (RelayBatchEnds, batchsettle.lua:
// idempotent per member and end) and trims. The poller then submits the
// callbacks due (FireBatchCallbacks) with the idempotency key
// "batch:<id>:on_success" (or on_complete) before it marks them fired, so
// a crash in between submits none twice.

// Batch limits.
const (
	// BatchChunk is how many members one script call registers or
	// submits: a batch of any size goes in calls of at most this many.
	BatchChunk = 1000
	// BatchRetention is how long a batch stays in Redis once every member
	// ended and its callbacks fired.
	BatchRetention = 7 * 24 * time.Hour
)

// Errors of batches.
var (
	// ErrBatchNotFound: no batch with that id.
	ErrBatchNotFound = errors.New("batch not found")
	// ErrBatchExists: a batch with that id was created before.
	ErrBatchExists = errors.New("a batch with this id exists already")
	// ErrBatchSealed: the batch is sealed; no member can be added.
	ErrBatchSealed = errors.New("the batch is sealed: no member can be added")
)

// BatchSpec is a batch to create (CreateBatch): its members, built jobs of
// any queues, and its callbacks, built jobs or nil.
type BatchSpec struct {
	ID         string
	Jobs       []*job.Job
	OnSuccess  *job.Job
	OnComplete *job.Job
	// Open leaves the batch unsealed: members may be added (AddToBatch)
	// until one seals it, and the callbacks wait for that.
	Open bool
	// NotifyComplete, instead of an OnComplete job, sends a signal to a
	// durable job once every member ended: how a parent awaits its
	// children (docs/durable.md).
	NotifyComplete *SignalTarget
}

// SignalTarget names a signal to send to a job (BatchSpec.NotifyComplete).
type SignalTarget struct {
	Queue string `json:"queue"`
	Job   string `json:"job"`
	Name  string `json:"name"`
	// First sends it when the first member ends, not the last. It must
	// stay the last field: batchadd.lua finds it at the spec's end.
	First bool `json:"first,omitempty"`
}

// signalCallback is a callback spec that sends a signal (fireCallback).
type signalCallback struct {
	Signal *SignalTarget `json:"signal"`
}

// BatchCallback is the state of one callback of a batch.
type BatchCallback struct {
	// State is "pending" (members still to end, or the batch not sealed),
	// "due" (being submitted) or "fired".
	State string `json:"state"`
	// JobID is the callback's job once fired.
	JobID string `json:"job_id,omitempty"`
}

// BatchInfo is a batch as GET /v1/batches/{id} shows it.
type BatchInfo struct {
	ID        string     `json:"id"`
	CreatedAt time.Time  `json:"created_at"`
	Total     int        `json:"total"`
	Sealed    bool       `json:"sealed"`
	Cancelled *time.Time `json:"cancelled_at,omitempty"`
	// Counts are the members by how they last ended, and pending: those
	// that have not ended yet (queued, scheduled, waiting or active). A
	// retried member counts as it last ended until it ends again.
	Counts     BatchCounts    `json:"counts"`
	OnSuccess  *BatchCallback `json:"on_success,omitempty"`
	OnComplete *BatchCallback `json:"on_complete,omitempty"`
}

// BatchCounts are a batch's members by state.
type BatchCounts struct {
	Pending   int `json:"pending"`
	Succeeded int `json:"succeeded"`
	Dead      int `json:"dead"`
	Cancelled int `json:"cancelled"`
}

// BatchResult is what a member of a batch produced (fan-in).
type BatchResult struct {
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	State     job.State       `json:"state"`
	Result    json.RawMessage `json:"result,omitempty"`
	LastError string          `json:"last_error,omitempty"`
}

// ValidBatchID reports whether id may name a batch: [A-Za-z0-9_.:@-]{1,128}.
func ValidBatchID(id string) bool { return batchIDChars.Match(id, 128) }

var batchIDChars = job.NewCharset("A-Za-z0-9_.:@-")

// BatchIdempotencyKey is the idempotency key of callback which
// ("on_success" or "on_complete") of batch id.
func BatchIdempotencyKey(id, which string) string { return "batch:" + id + ":" + which }

// CreateBatch creates batch b.ID, then submits its members in calls of at
// most BatchChunk per queue, then seals it unless b.Open. Each member gets
// Batch = b.ID. The jobs must be built (job.Spec.Build); a member may not
// have DependsOn or an IdempotencyKey, a callback's payload must be a JSON
// object or none (a *job.FieldError, before anything is written). Then
// what fails is Redis or an existing id (ErrBatchExists). When a call fails midway the members stored stay
// and the batch stays unsealed: its callbacks never fire until it is
// sealed (add the rest with AddToBatch and seal, or CancelBatch).
func (c *Client) CreateBatch(ctx context.Context, b BatchSpec) (*BatchInfo, []Submitted, error) {
	if !ValidBatchID(b.ID) {
		return nil, nil, &job.FieldError{Field: "id", Message: "id must match [A-Za-z0-9_.:@-]{1,128}"}
	}
	if len(b.Jobs) == 0 && !b.Open {
		return nil, nil, &job.FieldError{Field: "jobs", Message: "jobs must hold at least one job (or the batch be open)"}
	}
	if err := checkMembers(b.Jobs); err != nil {
		return nil, nil, err
	}
	var cb [2]string
	for i, j := range []*job.Job{b.OnSuccess, b.OnComplete} {
		if j != nil {
			if _, err := withBatch(j.Payload, b.ID); err != nil {
				f := [2]string{"on_success", "on_complete"}[i] + ".payload"
				return nil, nil, &job.FieldError{Field: f, Message: f + " must be a JSON object (the callback's payload gets the member \"batch\")"}
			}
			data, err := json.Marshal(j)
			if err != nil {
				return nil, nil, err
			}
			cb[i] = string(data)
		}
	}
	if b.NotifyComplete != nil {
		data, err := json.Marshal(signalCallback{Signal: b.NotifyComplete})
		if err != nil {
			return nil, nil, err
		}
		cb[1] = string(data)
	}
	if _, err := c.batchCall(ctx, b.ID, "create", cb, nil); err != nil {
		return nil, nil, err
	}
	return c.addMembers(ctx, b.ID, b.Jobs, !b.Open)
}

// AddToBatch adds jobs to batch id, which must not be sealed
// (ErrBatchSealed), and seals it after them when seal is true (jobs may
// then be empty).
func (c *Client) AddToBatch(ctx context.Context, id string, jobs []*job.Job, seal bool) (*BatchInfo, []Submitted, error) {
	if err := checkMembers(jobs); err != nil {
		return nil, nil, err
	}
	info, err := c.Batch(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if info.Sealed {
		return nil, nil, ErrBatchSealed
	}
	return c.addMembers(ctx, id, jobs, seal)
}

// checkMembers refuses members with dependencies or an idempotency key:
// a member must be stored as the job the batch counts (a duplicate would
// be another job), and one that waits for another is ordered by a
// workflow, not a batch.
func checkMembers(jobs []*job.Job) error {
	for i, j := range jobs {
		if len(j.DependsOn) > 0 {
			f := fmt.Sprintf("jobs[%d].depends_on", i)
			return &job.FieldError{Field: f, Message: f + " is not allowed in a batch member (use a workflow for an order)"}
		}
		if j.IdempotencyKey != "" {
			f := fmt.Sprintf("jobs[%d].idempotency_key", i)
			return &job.FieldError{Field: f, Message: f + " is not allowed in a batch member (each member is stored as sent, once)"}
		}
	}
	return nil
}

// addMembers registers jobs as members of batch id (so that an end is
// never reported for a member the batch does not count), submits them,
// and seals the batch when seal is true.
func (c *Client) addMembers(ctx context.Context, id string, jobs []*job.Job, seal bool) (*BatchInfo, []Submitted, error) {
	for i := 0; i < len(jobs); i += BatchChunk {
		chunk := jobs[i:min(i+BatchChunk, len(jobs))]
		pairs := make([]string, 0, 2*len(chunk))
		for _, j := range chunk {
			j.Batch = id
			pairs = append(pairs, j.ID, j.Queue)
		}
		if _, err := c.batchCall(ctx, id, "add", [2]string{}, pairs); err != nil {
			return nil, nil, err
		}
	}
	out := make([]Submitted, len(jobs))
	byQueue := map[string][]int{}
	var order []string
	for i, j := range jobs {
		if _, ok := byQueue[j.Queue]; !ok {
			order = append(order, j.Queue)
		}
		byQueue[j.Queue] = append(byQueue[j.Queue], i)
	}
	for _, q := range order {
		idx := byQueue[q]
		for s := 0; s < len(idx); s += BatchChunk {
			part := idx[s:min(s+BatchChunk, len(idx))]
			chunk := make([]*job.Job, len(part))
			for n, i := range part {
				chunk[n] = jobs[i]
			}
			subs, err := c.Submit(ctx, chunk)
			if err != nil {
				return nil, nil, err
			}
			for n, i := range part {
				out[i] = subs[n]
			}
		}
	}
	if seal {
		if err := c.openBatch(ctx, id); err != nil {
			return nil, nil, err
		}
		if _, err := c.batchCall(ctx, id, "seal", [2]string{}, nil); err != nil {
			return nil, nil, err
		}
	}
	info, err := c.Batch(ctx, id)
	return info, out, err
}

// openBatch lists batch id among the open batches, where the poller
// looks for callbacks due. Done before every call that may make one due
// (a seal, a cancel), so that a crash right after it leaves none unseen.
func (c *Client) openBatch(ctx context.Context, id string) error {
	err := c.replicated(ctx, keyBatchesOpen, "", func(conn *redis.Conn) error {
		if conn == nil {
			return c.rdb.SAdd(ctx, keyBatchesOpen, id).Err()
		}
		return conn.SAdd(ctx, keyBatchesOpen, id).Err()
	})
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	return nil
}

// batchCall runs batchadd.lua over batch id and returns whether a
// callback became due.
func (c *Client) batchCall(ctx context.Context, id, what string, cb [2]string, pairs []string) (bool, error) {
	args := make([]any, 0, 6+len(pairs))
	args = append(args, c.opts.Now().UnixMilli(), what, cb[0], cb[1], len(pairs)/2)
	for _, p := range pairs {
		args = append(args, p)
	}
	if what == "create" {
		// The call's nonce: the same call sent again (a lost reply) is
		// answered as the first (batchadd.lua).
		args = append(args, string(tokenTags(2)))
	}
	keys := batchKeys(id)
	var res []string
	err := c.replicated(ctx, keys[0], "", func(conn *redis.Conn) error {
		var r scripter = c.rdb
		if conn != nil {
			r = conn
		}
		var err error
		res, err = c.call(ctx, r, c.scripts.batchAdd, keys, args).StringSlice()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("batch: %w", err)
	}
	switch res[0] {
	case "exists":
		return false, ErrBatchExists
	case "not_found":
		return false, ErrBatchNotFound
	case "sealed":
		return false, ErrBatchSealed
	}
	return len(res) > 2 && res[2] == "1", nil
}

// Batch returns batch id's state.
func (c *Client) Batch(ctx context.Context, id string) (*BatchInfo, error) {
	if !ValidBatchID(id) {
		return nil, ErrBatchNotFound
	}
	h, err := c.rdb.HGetAll(ctx, batchKeys(id)[0]).Result()
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	if len(h) == 0 {
		return nil, ErrBatchNotFound
	}
	n := func(f string) int { v, _ := strconv.Atoi(h[f]); return v }
	info := &BatchInfo{ID: id, Total: n("total"), Sealed: h["sealed"] == "1",
		CreatedAt: msString(h["created_at"])}
	if v := h["cancelled"]; v != "" {
		t := msString(v)
		info.Cancelled = &t
	}
	info.Counts = BatchCounts{Succeeded: n("n_succeeded"), Dead: n("n_dead"), Cancelled: n("n_cancelled")}
	info.Counts.Pending = info.Total - n("done")
	if st := h["success"]; st != "" {
		info.OnSuccess = &BatchCallback{State: st, JobID: h["success_job"]}
	}
	if st := h["complete"]; st != "" {
		info.OnComplete = &BatchCallback{State: st, JobID: h["complete_job"]}
	}
	return info, nil
}

// msString is a time in unix ms as Redis holds it.
func msString(s string) time.Time {
	ms, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(ms).UTC()
}

// batchPage returns up to limit member ids of batch id from position
// cursor ("" = the first), with their queues, and the next cursor ("" at
// the end).
func (c *Client) batchPage(ctx context.Context, id, cursor string, limit int) (ids, queues []string, next string, err error) {
	if !ValidBatchID(id) {
		return nil, nil, "", ErrBatchNotFound
	}
	from := int64(0)
	if cursor != "" {
		from, err = strconv.ParseInt(cursor, 10, 64)
		if err != nil || from < 0 {
			return nil, nil, "", ErrInvalidCursor
		}
	}
	keys := batchKeys(id)
	pipe := c.rdb.Pipeline()
	exists := pipe.Exists(ctx, keys[0])
	page := pipe.ZRangeByScoreWithScores(ctx, keys[1], &redis.ZRangeBy{Min: strconv.FormatInt(from, 10), Max: "+inf", Count: int64(limit) + 1})
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, "", fmt.Errorf("batch: %w", err)
	}
	if exists.Val() == 0 {
		return nil, nil, "", ErrBatchNotFound
	}
	zs := page.Val()
	if len(zs) > limit {
		next = strconv.FormatInt(int64(zs[limit].Score), 10)
		zs = zs[:limit]
	}
	for _, z := range zs {
		ids = append(ids, z.Member.(string))
	}
	if len(ids) > 0 {
		v, err := c.rdb.HMGet(ctx, keys[2], ids...).Result()
		if err != nil {
			return nil, nil, "", fmt.Errorf("batch: %w", err)
		}
		queues = strs(v)
	}
	return ids, queues, next, nil
}

// HMGet's values as strings.
func strs(v []any) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i], _ = x.(string)
	}
	return out
}

// BatchMembers returns a page of up to limit members of batch id, in the
// order they were added, from cursor ("" = the first), and the cursor of
// the next page ("" at the end). A member whose job is gone (pruned after
// its retention) is listed with its id, queue and the state it ended in.
func (c *Client) BatchMembers(ctx context.Context, id, cursor string, limit int) ([]*job.Job, string, error) {
	ids, queues, next, err := c.batchPage(ctx, id, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	ended, err := c.batchEnded(ctx, id, ids)
	if err != nil {
		return nil, "", err
	}
	out := make([]*job.Job, len(ids))
	for i, mid := range ids {
		j, err := c.getIn(ctx, c.keysFor(queues[i]), mid)
		switch {
		case errors.Is(err, ErrNotFound):
			j = &job.Job{ID: mid, Queue: queues[i], State: job.State(ended[i]), Batch: id}
		case err != nil:
			return nil, "", err
		}
		out[i] = j
	}
	return out, next, nil
}

// batchEnded returns how each of ids last ended as batch id counted it
// ("" for none yet).
func (c *Client) batchEnded(ctx context.Context, id string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	v, err := c.rdb.HMGet(ctx, batchKeys(id)[3], ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	out := strs(v)
	for i, s := range out {
		_, out[i], _ = strings.Cut(s, "\t")
	}
	return out, nil
}

// BatchResults returns a page of the results of batch id's members (see
// BatchMembers for the paging): each member's state, result (when it
// succeeded) and last error.
func (c *Client) BatchResults(ctx context.Context, id, cursor string, limit int) ([]BatchResult, string, error) {
	jobs, next, err := c.BatchMembers(ctx, id, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]BatchResult, len(jobs))
	for i, j := range jobs {
		out[i] = BatchResult{ID: j.ID, Queue: j.Queue, State: j.State, Result: j.Result, LastError: j.LastError}
	}
	return out, next, nil
}

// CancelBatch cancels batch id whole: it is sealed, and every member that
// has not ended is cancelled (with its dependents, as Cancel does); a
// member whose job is not in Redis counts as cancelled. The on_complete
// callback then fires once the cancels are counted. It returns how many
// members it cancelled.
func (c *Client) CancelBatch(ctx context.Context, id string) (int, error) {
	if _, err := c.Batch(ctx, id); err != nil {
		return 0, err
	}
	if err := c.openBatch(ctx, id); err != nil {
		return 0, err
	}
	if _, err := c.batchCall(ctx, id, "cancel", [2]string{}, nil); err != nil {
		return 0, err
	}
	return c.overBatch(ctx, id, func(k *queueKeys, ids []string) (int, error) {
		args := make([]any, len(ids))
		for i, x := range ids {
			args[i] = x
		}
		res, err := c.run(ctx, c.scripts.cancel, k, c.opts.Now(), args...).StringSlice()
		if err != nil || len(res) < 2 {
			return 0, err
		}
		if len(ids) == 1 {
			if res[0] == "ok" {
				return 1, nil
			}
			return 0, nil
		}
		n, _ := strconv.Atoi(res[1])
		return n, nil
	}, true)
}

// RetryBatch retries batch id's dead and cancelled members (as Retry
// does: attempts reset, dependencies waited for again). Each counts as it
// ended until it ends again; on_success fires once every member succeeded.
// It returns how many members it requeued.
func (c *Client) RetryBatch(ctx context.Context, id string) (int, error) {
	if _, err := c.Batch(ctx, id); err != nil {
		return 0, err
	}
	// Open again, and kept: its callbacks may fire once more members end.
	pipe := c.rdb.Pipeline()
	for _, k := range batchKeys(id) {
		pipe.Persist(ctx, k)
	}
	pipe.SAdd(ctx, keyBatchesOpen, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("batch: %w", err)
	}
	return c.overBatch(ctx, id, func(k *queueKeys, ids []string) (int, error) {
		args := make([]any, 0, 2+len(ids))
		args = append(args, "any", len(ids))
		for _, x := range ids {
			args = append(args, x)
		}
		res, err := c.run(ctx, c.scripts.retry, k, c.opts.Now(), args...).StringSlice()
		if err != nil || len(res) < 2 || res[0] != "ok" {
			return 0, err
		}
		n, _ := strconv.Atoi(res[1])
		return n, nil
	}, false)
}

// overBatch runs fn over every member of batch id, per queue in chunks of
// at most BatchChunk. With missing, members whose job is gone and that
// ended in no state the batch counted are counted as cancelled.
func (c *Client) overBatch(ctx context.Context, id string, fn func(*queueKeys, []string) (int, error), missing bool) (int, error) {
	total, cursor := 0, ""
	for {
		ids, queues, next, err := c.batchPage(ctx, id, cursor, BatchChunk)
		if err != nil {
			return total, err
		}
		byQueue := map[string][]string{}
		for i, mid := range ids {
			byQueue[queues[i]] = append(byQueue[queues[i]], mid)
		}
		for q, qids := range byQueue {
			n, err := fn(c.keysFor(q), qids)
			if err != nil {
				return total, fmt.Errorf("batch: %w", err)
			}
			total += n
		}
		if missing && len(ids) > 0 {
			if err := c.settleMissing(ctx, id, ids, queues); err != nil {
				return total, err
			}
		}
		if next == "" {
			return total, nil
		}
		cursor = next
	}
}

// settleMissing counts the members of ids (of batch id, in queues) whose
// job is not in Redis and that the batch did not count as ended: as
// cancelled, end 0, which any real end of theirs replaces.
func (c *Client) settleMissing(ctx context.Context, id string, ids, queues []string) error {
	ended, err := c.batchEnded(ctx, id, ids)
	if err != nil {
		return err
	}
	pipe := c.rdb.Pipeline()
	ex := make([]*redis.IntCmd, len(ids))
	for i, mid := range ids {
		if ended[i] == "" {
			ex[i] = pipe.Exists(ctx, c.keysFor(queues[i]).job(mid))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("batch: %w", err)
	}
	var triples []string
	for i, mid := range ids {
		if ex[i] != nil && ex[i].Val() == 0 {
			triples = append(triples, mid, string(job.Cancelled), "0")
		}
	}
	if len(triples) == 0 {
		return nil
	}
	_, err = c.settleBatch(ctx, id, triples)
	return err
}

// settleBatch runs batchsettle.lua over batch id with triples (member id,
// state, end count) and returns how many ends it counted. A batch no
// longer in Redis takes nothing: its ends are dropped.
func (c *Client) settleBatch(ctx context.Context, id string, triples []string) (int, error) {
	args := make([]any, 0, 1+len(triples))
	args = append(args, len(triples)/3)
	for _, t := range triples {
		args = append(args, t)
	}
	res, err := c.call(ctx, c.rdb, c.scripts.batchSettle, batchKeys(id), args).StringSlice()
	if err != nil {
		return 0, fmt.Errorf("batch: %w", err)
	}
	n := 0
	if len(res) > 1 {
		n, _ = strconv.Atoi(res[1])
	}
	return n, nil
}

// BatchProgress is how far an open batch is: what the poller watches to
// find a batch whose count stopped moving (RecountBatch).
type BatchProgress struct {
	ID          string
	Sealed      bool
	Total, Done int
}

// OpenBatches returns the progress of up to limit open batches (those
// with a callback left to fire), in no order.
func (c *Client) OpenBatches(ctx context.Context, limit int) ([]BatchProgress, error) {
	ids, err := c.rdb.SRandMemberN(ctx, keyBatchesOpen, int64(limit)).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	metas := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		metas[i] = pipe.HMGet(ctx, batchKeys(id)[0], "sealed", "total", "done")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("batch: %w", err)
	}
	out := make([]BatchProgress, 0, len(ids))
	for i, id := range ids {
		m := strs(metas[i].Val())
		total, _ := strconv.Atoi(m[1])
		done, _ := strconv.Atoi(m[2])
		out = append(out, BatchProgress{ID: id, Sealed: m[0] == "1", Total: total, Done: done})
	}
	return out, nil
}

// RecountBatch counts the ends of batch id's members again from their
// jobs, for ends the relay never brought (RelayBatchEnds): a Redis that
// came back with less than it acknowledged (a failover that lost the
// batch's slot's last writes after the ends left their queue's list), or
// a member ended by a worker of a release without batches. A member whose
// job is final counts with the job's count of ends, which counts nothing
// twice (batchsettle.lua); one whose job is gone and that was never
// counted counts as cancelled, as CancelBatch does. Members still running
// are left. It reads every member (in pages of BatchChunk) and returns how
// many ends it counted anew; the poller runs it for a batch whose count
// stopped moving.
func (c *Client) RecountBatch(ctx context.Context, id string) (int, error) {
	total, cursor := 0, ""
	for {
		ids, queues, next, err := c.batchPage(ctx, id, cursor, BatchChunk)
		if err != nil {
			return total, err
		}
		if len(ids) > 0 {
			ended, err := c.batchEnded(ctx, id, ids)
			if err != nil {
				return total, err
			}
			pipe := c.rdb.Pipeline()
			jobs := make([]*redis.SliceCmd, len(ids))
			for i, mid := range ids {
				jobs[i] = pipe.HMGet(ctx, c.keysFor(queues[i]).job(mid), "state", "batch_ends")
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return total, fmt.Errorf("batch: %w", err)
			}
			var triples []string
			for i, mid := range ids {
				f := strs(jobs[i].Val())
				state, ends := job.State(f[0]), f[1]
				switch {
				case state == "" && ended[i] == "":
					triples = append(triples, mid, string(job.Cancelled), "0")
				case state.Final():
					if ends == "" {
						ends = "0" // ended without reporting: any reported end replaces it
					}
					triples = append(triples, mid, string(state), ends)
				}
			}
			if len(triples) > 0 {
				n, err := c.settleBatch(ctx, id, triples)
				if err != nil {
					return total, err
				}
				total += n
			}
		}
		if next == "" {
			return total, nil
		}
		cursor = next
	}
}

// RelayBatchEnds relays up to limit ends of queue's batch members (lib.lua,
// batch_ended) to their batches, then takes them off the queue's list. A
// crash between the two relays them again, which counts nothing twice
// (batchsettle.lua). The ends of a batch whose slot cannot be reached stay
// for the next pass. It returns how many ends it relayed; the poller calls
// it every pass, then FireBatchCallbacks.
func (c *Client) RelayBatchEnds(ctx context.Context, queue string, limit int) (int, error) {
	key := c.keysFor(queue).tag + "bends"
	entries, err := c.rdb.LRange(ctx, key, 0, int64(limit)-1).Result()
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	byBatch := map[string][]string{}
	var order []string
	for _, e := range entries {
		parts := strings.Split(e, "\t")
		if len(parts) != 4 {
			continue // not ours: dropped below
		}
		if _, ok := byBatch[parts[0]]; !ok {
			order = append(order, parts[0])
		}
		byBatch[parts[0]] = append(byBatch[parts[0]], parts[1], parts[2], parts[3])
	}
	failed := map[string]bool{}
	var firstErr error
	for _, b := range order {
		// Listed first: a settled batch left the open set, and these ends
		// may make a callback due again (a member retried alone); the
		// poller's next look takes it off again when nothing is due.
		err := c.openBatch(ctx, b)
		if err == nil {
			_, err = c.settleBatch(ctx, b, byBatch[b])
		}
		if err != nil {
			failed[b] = true
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	// One transaction in the queue's slot. LREM of each entry itself, not
	// LTRIM of a count: two pollers may relay the same entries at once,
	// and an end is unique (its count). The entries of a batch that failed
	// go to the tail, so that a failing batch never holds up the others.
	pipe := c.rdb.TxPipeline()
	n := 0
	for _, e := range entries {
		b, _, _ := strings.Cut(e, "\t")
		if failed[b] {
			pipe.LRem(ctx, key, 1, e)
			pipe.RPush(ctx, key, e)
			continue
		}
		pipe.LRem(ctx, key, 1, e)
		n++
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("batch relay: %w", err)
	}
	return n, firstErr
}

// FireBatchCallbacks submits the callbacks due of up to limit open
// batches, each with the idempotency key BatchIdempotencyKey and the
// field batch, then marks them fired: a crash in between submits the same
// job again, which the key answers as a duplicate. A batch whose
// callbacks all fired leaves the open set and expires after
// BatchRetention. It returns how many callbacks it fired.
func (c *Client) FireBatchCallbacks(ctx context.Context, limit int) (int, error) {
	ids, err := c.rdb.SRandMemberN(ctx, keyBatchesOpen, int64(limit)).Result()
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	pipe := c.rdb.Pipeline()
	metas := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		metas[i] = pipe.HMGet(ctx, batchKeys(id)[0], "created_at", "sealed", "total", "done", "success", "complete", "on_success", "on_complete")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("batch callbacks: %w", err)
	}
	fired := 0
	var firstErr error
	for i, id := range ids {
		m := strs(metas[i].Val())
		if m[0] == "" {
			// Gone (expired): a batch is listed only once it exists.
			if err := c.rdb.SRem(ctx, keyBatchesOpen, id).Err(); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("batch callbacks: %w", err)
			}
			continue
		}
		for _, cb := range []struct{ state, spec, which, field string }{
			{m[4], m[6], "on_success", "success"}, {m[5], m[7], "on_complete", "complete"},
		} {
			if cb.state != "due" {
				continue
			}
			if err := c.fireCallback(ctx, id, cb.spec, cb.which, cb.field); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			fired++
			if cb.field == "success" {
				m[4] = "fired"
			} else {
				m[5] = "fired"
			}
		}
		if batchSettled(m) {
			now := c.opts.Now()
			pipe := c.rdb.Pipeline()
			for _, k := range batchKeys(id) {
				pipe.PExpire(ctx, k, BatchRetention)
			}
			pipe.ZAdd(ctx, keyBatchesSettled, redis.Z{Score: float64(now.UnixMilli()), Member: id})
			pipe.ZRemRangeByScore(ctx, keyBatchesSettled, "-inf", strconv.FormatInt(now.Add(-BatchRetention).UnixMilli(), 10))
			pipe.SRem(ctx, keyBatchesOpen, id)
			if _, err := pipe.Exec(ctx); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("batch callbacks: %w", err)
			}
		}
	}
	return fired, firstErr
}

// CheckSettledBatches looks at up to limit batches (at random) of those
// that left the open set in the last BatchRetention, and puts back in it
// each whose meta says something is left to fire after all: its slot came
// back with less than it had when it settled (a Cluster master restarted
// from an older AOF, while the open set's master kept the removal). Back
// in the open set, the poller recounts it (RecountBatch) and fires what
// is due again, which the callbacks' idempotency keys answer as
// duplicates. It returns the ids it put back.
func (c *Client) CheckSettledBatches(ctx context.Context, limit int) ([]string, error) {
	ids, err := c.rdb.ZRandMember(ctx, keyBatchesSettled, limit).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	metas := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		metas[i] = pipe.HMGet(ctx, batchKeys(id)[0], "created_at", "sealed", "total", "done", "success", "complete")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("batch: %w", err)
	}
	var back []string
	for i, id := range ids {
		m := strs(metas[i].Val())
		switch {
		case m[0] == "": // expired
			err = c.rdb.ZRem(ctx, keyBatchesSettled, id).Err()
		case !batchSettled(m):
			if err = c.openBatch(ctx, id); err == nil {
				err = c.rdb.ZRem(ctx, keyBatchesSettled, id).Err()
				back = append(back, id)
			}
		}
		if err != nil {
			return back, fmt.Errorf("batch: %w", err)
		}
	}
	return back, nil
}

// batchSettled tells from a batch's meta (as FireBatchCallbacks reads it)
// whether nothing is left to fire: sealed, every member ended, no callback
// due, and on_complete fired (or none). An on_success still pending then
// waits for a retry of the members that did not succeed: the relay that
// makes it due puts the batch back in the open set.
func batchSettled(m []string) bool {
	return m[1] == "1" && m[2] == m[3] && m[4] != "due" && m[5] != "due" && m[5] != "pending"
}

// fireCallback submits callback which (JSON spec) of batch id and marks it
// fired in the batch's field (success or complete).
func (c *Client) fireCallback(ctx context.Context, id, spec, which, field string) error {
	var sc signalCallback
	if strings.HasPrefix(spec, `{"signal":`) && json.Unmarshal([]byte(spec), &sc) == nil && sc.Signal != nil {
		// A parent awaiting its children: the signal is idempotent by the
		// callback's key, so a crash before the mark sends it once.
		t := sc.Signal
		if _, _, err := c.SendSignal(ctx, Signal{Queue: t.Queue, ID: t.Job, Name: t.Name, Value: json.RawMessage(`"` + id + `"`),
			IdempotencyKey: BatchIdempotencyKey(id, which)}); err != nil {
			return fmt.Errorf("batch %s: %s: %w", id, which, err)
		}
		if err := c.rdb.HSet(ctx, batchKeys(id)[0], field, "fired", field+"_job", t.Job).Err(); err != nil {
			return fmt.Errorf("batch %s: %s: %w", id, which, err)
		}
		return nil
	}
	var j job.Job
	err := json.Unmarshal([]byte(spec), &j)
	if err != nil {
		return fmt.Errorf("batch %s: %s: %w", id, which, err)
	}
	now := c.opts.Now()
	j.ID = job.NewID(now)
	j.CreatedAt, j.RunAt = now, now
	j.IdempotencyKey = BatchIdempotencyKey(id, which)
	j.Batch = id
	if j.Payload, err = withBatch(j.Payload, id); err != nil {
		return fmt.Errorf("batch %s: %s: %w", id, which, err)
	}
	subs, err := c.Submit(ctx, []*job.Job{&j})
	if err != nil {
		return fmt.Errorf("batch %s: %s: %w", id, which, err)
	}
	if err := c.rdb.HSet(ctx, batchKeys(id)[0], field, "fired", field+"_job", subs[0].Job.ID).Err(); err != nil {
		return fmt.Errorf("batch %s: %s: %w", id, which, err)
	}
	return nil
}

// withBatch returns payload, a JSON object (or empty), with its member
// "batch" set to id: how a callback's handler learns its batch.
func withBatch(payload json.RawMessage, id string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(payload) > 0 && string(payload) != "null" {
		if err := json.Unmarshal(payload, &m); err != nil || m == nil {
			return nil, errors.New("the payload is not a JSON object")
		}
	}
	b, _ := json.Marshal(id)
	m["batch"] = b
	return json.Marshal(m)
}
