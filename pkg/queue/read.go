package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// Queues returns the names of all queues that ever had a job submitted or
// were paused, sorted.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	qs, err := c.rdb.SMembers(ctx, keyQueues).Result()
	if err != nil {
		return nil, err
	}
	slices.Sort(qs)
	return qs, nil
}

// Get returns the job with id from whichever queue holds it, or ErrNotFound
// when no queue does (it may have been pruned: ask the history store).
func (c *Client) Get(ctx context.Context, id string) (*job.Job, error) {
	k, err := c.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.getIn(ctx, k, id)
}

// QueueOf returns the queue that holds job id, or ErrNotFound.
func (c *Client) QueueOf(ctx context.Context, id string) (string, error) {
	k, err := c.locate(ctx, id)
	if err != nil {
		return "", err
	}
	return k.name, nil
}

// DependentsReader finds the jobs that still wait for other jobs: those of
// the job's own queue (its dependents set; an edge leaves it once settled)
// and those of other queues (settle.go: their queue's remote waiters, up to
// maxRemoteScan of each queue, whose dependencies name "<queue>|<id>").
// It reads every queue's remote waiters once, on first use, so walking a
// graph of n jobs costs one read of them, not n. Make one per request: it
// does not see waiters added after that read. Once an edge is settled only
// the history store knows it.
type DependentsReader struct {
	c      *Client
	remote map[string][]string // "<queue>|<id>" → the remote waiters' ids
}

// NewDependentsReader returns a reader that has read nothing yet.
func (c *Client) NewDependentsReader() *DependentsReader { return &DependentsReader{c: c} }

// Dependents returns the ids of the jobs that still wait for job id of queue.
func (r *DependentsReader) Dependents(ctx context.Context, queue, id string) ([]string, error) {
	k := r.c.keysFor(queue)
	out, err := r.c.rdb.SMembers(ctx, k.tag+"dependents:"+id).Result()
	if err != nil {
		return nil, err
	}
	if r.remote == nil {
		if r.remote, err = r.c.remoteWaiters(ctx); err != nil {
			return nil, err
		}
	}
	return append(out, r.remote[k.name+"|"+id]...), nil
}

// remoteWaiters maps each "<queue>|<id>" that a remote waiter (≤
// maxRemoteScan of each queue) depends on to the waiters' ids: two
// pipelined round trips, whatever the number of jobs asked about later.
func (c *Client) remoteWaiters(ctx context.Context) (map[string][]string, error) {
	qs, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	waiters := make([]*redis.StringSliceCmd, len(qs))
	for i, q := range qs {
		waiters[i] = pipe.SRandMemberN(ctx, c.keysFor(q).tag+"rwait", maxRemoteScan)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	type waiter struct {
		id   string
		deps *redis.StringSliceCmd
	}
	var ws []waiter
	for i, q := range qs {
		for _, w := range waiters[i].Val() {
			ws = append(ws, waiter{w, pipe.SMembers(ctx, c.keysFor(q).tag+"deps:"+w)})
		}
	}
	out := map[string][]string{}
	if len(ws) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for _, w := range ws {
		for _, d := range w.deps.Val() {
			out[d] = append(out[d], w.id)
		}
	}
	return out, nil
}

// maxRemoteScan bounds how many remote waiters of each queue Dependents looks at.
const maxRemoteScan = 1000

// locate finds the queue whose keys hold job id, with one pipelined round
// trip over the known queues.
func (c *Client) locate(ctx context.Context, id string) (*queueKeys, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	qs, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(qs))
	for i, q := range qs {
		cmds[i] = pipe.Exists(ctx, c.keysFor(q).job(id))
	}
	// On Redis Cluster one shard may be down (failing over) while the job
	// is on another: a hit counts whatever the other shards answered.
	_, err = pipe.Exec(ctx)
	for i, cmd := range cmds {
		if cmd.Err() == nil && cmd.Val() == 1 {
			return c.keysFor(qs[i]), nil
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, ErrNotFound
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return !strings.ContainsAny(id, "{}:, \t\r\n")
}

func (c *Client) getIn(ctx context.Context, k *queueKeys, id string) (*job.Job, error) {
	pipe := c.rdb.Pipeline()
	hash := pipe.HGetAll(ctx, k.job(id))
	rec := pipe.HGet(ctx, k.active(), id)
	paused := pipe.Exists(ctx, k.key(kPaused))
	deps := pipe.SMembers(ctx, k.tag+"deps:"+id)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	h := hash.Val()
	if r := rec.Val(); r != "" {
		overlayActive(h, r)
	}
	j := DecodeJob(k.name, id, h)
	if j == nil {
		return nil, ErrNotFound
	}
	j.HeldBack = heldBack(j, h["parked"], paused.Val() == 1, deps.Val())
	if j.State == job.Active && j.WorkerID != "" {
		// A running job whose worker left the registry (killed, paused,
		// cut off): its lease expires and it runs again elsewhere.
		if n, err := c.rdb.Exists(ctx, workerKey(j.WorkerID)).Result(); err == nil && n == 0 {
			j.HeldBack = &job.HeldBack{Reason: job.HeldWorkerGone, Message: fmt.Sprintf(
				"leased by worker %q, which stopped heartbeating: the job runs again elsewhere once its lease expires (SUNDIAL_LEASE_TTL)", j.WorkerID)}
		}
	}
	return j, nil
}

// NoHandlerLimit is the name under which a claim parks a queued job whose
// type the claiming worker does not handle (lua/lib.lua, NOHANDLER): its
// slot is "@handler|<type>". No limit can be named so.
const NoHandlerLimit = "@handler"

// heldBack says what keeps job j from running (nil: nothing does): parked
// is its hash's parked slot, paused tells that its queue is paused, and
// pending are the dependencies it still waits for.
func heldBack(j *job.Job, parked string, paused bool, pending []string) *job.HeldBack {
	switch j.State {
	case job.Waiting:
		for i, d := range pending {
			if q, id, remote := strings.Cut(d, "|"); remote {
				pending[i] = id + " (queue " + q + ")"
			}
		}
		slices.Sort(pending)
		return &job.HeldBack{Reason: job.HeldDependencies,
			Message: fmt.Sprintf("waiting for %d dependencies to succeed: %s", len(pending), strings.Join(pending, ", "))}
	case job.Scheduled:
		if h := awaitingHeld(j); h != nil {
			return h
		}
		return &job.HeldBack{Reason: job.HeldScheduled, Message: "scheduled to run at " + j.RunAt.UTC().Format(job.TimeLayout)}
	case job.Queued:
	default:
		return nil
	}
	switch limit, key, _ := strings.Cut(parked, "|"); {
	case parked != "" && limit == NoHandlerLimit:
		return &job.HeldBack{Reason: job.HeldNoHandler, Message: fmt.Sprintf(
			"no worker that claimed from queue %q handles type %q; it waits for one, and ends dead after the unhandled timeout (SUNDIAL_UNHANDLED_TIMEOUT) while no live worker of the queue handles it", j.Queue, j.Type)}
	case parked != "" && key != "":
		return &job.HeldBack{Reason: job.HeldLimit, Message: fmt.Sprintf("throttled by limit %q (its slot for %q is full)", limit, key)}
	case parked != "":
		return &job.HeldBack{Reason: job.HeldLimit, Message: fmt.Sprintf("throttled by limit %q", limit)}
	case paused:
		return &job.HeldBack{Reason: job.HeldPaused, Message: fmt.Sprintf("queue %q is paused", j.Queue)}
	}
	return nil
}

// QueueStats is a queue's counts, as GET /v1/queues reports them.
type QueueStats struct {
	Name   string           `json:"name"`
	Paused bool             `json:"paused"`
	Queued map[string]int64 `json:"queued"`
	// Throttled counts queued jobs a limit holds back (not in Queued).
	Throttled int64 `json:"throttled"`
	// Unhandled counts queued jobs parked because the workers that claimed
	// them do not handle their type (not in Queued nor Throttled).
	Unhandled int64 `json:"unhandled"`
	Scheduled int64 `json:"scheduled"`
	// Sleeping and Awaiting count the parked durable jobs (in Scheduled):
	// asleep, and waiting for a signal (docs/durable.md).
	Sleeping           int64   `json:"sleeping"`
	Awaiting           int64   `json:"awaiting"`
	Active             int64   `json:"active"`
	Waiting            int64   `json:"waiting"`
	Dead               int64   `json:"dead"`
	SubmittedTotal     int64   `json:"submitted_total"`
	SucceededTotal     int64   `json:"succeeded_total"`
	FailedTotal        int64   `json:"failed_total"`
	ProcessedPerSecond float64 `json:"processed_per_second"`
	// Limits are the queue's limits (docs/flow-control.md).
	Limits []LimitStatus `json:"limits"`
}

// rateWindow is how many whole seconds processed_per_second averages over.
const rateWindow = 10

// Stats returns the counts of the given queues (all known queues when none
// is named) in one pipelined round trip.
func (c *Client) Stats(ctx context.Context, queues ...string) ([]QueueStats, error) {
	if len(queues) == 0 {
		var err error
		if queues, err = c.Queues(ctx); err != nil {
			return nil, err
		}
	}
	return c.stats(ctx, queues, rateWindow)
}

// stats reads the counts of queues in one pipeline, with the processed rate
// over the last window seconds (none when window is 0).
func (c *Client) stats(ctx context.Context, queues []string, window int64) ([]QueueStats, error) {
	nowSec := c.opts.Now().Unix()
	pipe := c.rdb.Pipeline()
	type cmds struct {
		high, normal, low, sched, active, waiting, dead, paused *redis.IntCmd
		sleeping, awaiting                                      *redis.IntCmd
		totals                                                  *redis.SliceCmd
		limits, limstat                                         *redis.MapStringStringCmd
		rate                                                    []*redis.StringCmd
	}
	all := make([]cmds, len(queues))
	for i, q := range queues {
		k := c.keysFor(q)
		cm := cmds{
			high:    pipe.LLen(ctx, k.key(kHigh)),
			normal:  pipe.LLen(ctx, k.key(kNormal)),
			low:     pipe.LLen(ctx, k.key(kLow)),
			sched:   pipe.ZCard(ctx, k.key(kScheduled)),
			active:  pipe.ZCount(ctx, k.key(kLeases), "-inf", "("+padScore), // not the padding
			waiting: pipe.ZCard(ctx, k.key(kWaiting)),
			dead:    pipe.ZCard(ctx, k.key(kDead)),
			paused:  pipe.Exists(ctx, k.key(kPaused)),
			// The parked durable jobs (lua/lib.lua, park_waiting).
			sleeping: pipe.SCard(ctx, k.tag+"sleeping"),
			awaiting: pipe.SCard(ctx, k.tag+"awaiting"),
			totals: pipe.HMGet(ctx, k.key(kStats), "submitted_total", "succeeded_total", "failed_total", "tomb_high", "tomb_normal", "tomb_low",
				"grouped_high", "grouped_normal", "grouped_low", "markers_high", "markers_normal", "markers_low"),
			limits:  pipe.HGetAll(ctx, k.tag+"limits"),
			limstat: pipe.HGetAll(ctx, k.tag+"limstat"),
		}
		for s := int64(1); s <= window; s++ {
			cm.rate = append(cm.rate, pipe.Get(ctx, k.tput(nowSec-s)))
		}
		all[i] = cm
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	out := make([]QueueStats, len(queues))
	for i, q := range queues {
		cm := all[i]
		tot := cm.totals.Val()
		num := func(i int) int64 {
			if i >= len(tot) {
				return 0
			}
			s, _ := tot[i].(string)
			n, _ := strconv.ParseInt(s, 10, 64)
			return n
		}
		var processed int64
		for _, r := range cm.rate {
			n, _ := strconv.ParseInt(r.Val(), 10, 64)
			processed += n
		}
		out[i] = QueueStats{
			Name:   q,
			Paused: cm.paused.Val() == 1,
			// Cancelled ids wait in the lists as tombstones until a claim
			// drops them; a group's jobs wait in its own list, and the
			// priority list holds one marker for it (see lua/lib.lua).
			Queued: map[string]int64{
				"high":   max(cm.high.Val()-num(3)+num(6)-num(9), 0),
				"normal": max(cm.normal.Val()-num(4)+num(7)-num(10), 0),
				"low":    max(cm.low.Val()-num(5)+num(8)-num(11), 0),
			},
			Throttled:          throttledTotal(cm.limstat.Val()),
			Unhandled:          unhandledCount(cm.limstat.Val()),
			Limits:             limitStatuses(cm.limits.Val(), cm.limstat.Val()),
			Scheduled:          cm.sched.Val(),
			Sleeping:           cm.sleeping.Val(),
			Awaiting:           cm.awaiting.Val(),
			Active:             cm.active.Val(),
			Waiting:            cm.waiting.Val(),
			Dead:               cm.dead.Val(),
			SubmittedTotal:     num(0),
			SucceededTotal:     num(1),
			FailedTotal:        num(2),
			ProcessedPerSecond: float64(processed) / float64(max(window, 1)),
		}
	}
	return out, nil
}

// Dead returns up to limit dead jobs of queue, newest first, starting after
// cursor ("" for the first page), and the cursor of the next page ("" when
// there is none). The cursor is opaque to callers.
func (c *Client) Dead(ctx context.Context, queue string, limit int, cursor string) ([]*job.Job, string, error) {
	k := c.keysFor(queue)
	maxScore := "+inf"
	var afterID string
	if cursor != "" {
		score, id, ok := strings.Cut(cursor, "_")
		if _, err := strconv.ParseInt(score, 10, 64); !ok || err != nil || !validID(id) {
			return nil, "", fmt.Errorf("%w: bad cursor", ErrInvalidCursor)
		}
		maxScore, afterID = score, id
	}
	// Fetch one page plus the entries that share the cursor's score.
	zs, err := c.rdb.ZRevRangeByScoreWithScores(ctx, k.key(kDead), &redis.ZRangeBy{Max: maxScore, Min: "-inf", Count: int64(limit) + 100}).Result()
	if err != nil {
		return nil, "", err
	}
	if afterID != "" {
		for i, z := range zs {
			if z.Member.(string) == afterID {
				zs = zs[i+1:]
				break
			}
		}
	}
	next := ""
	if len(zs) > limit {
		zs = zs[:limit]
		last := zs[len(zs)-1]
		next = strconv.FormatInt(int64(last.Score), 10) + "_" + last.Member.(string)
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(zs))
	for i, z := range zs {
		cmds[i] = pipe.HGetAll(ctx, k.job(z.Member.(string)))
	}
	if len(cmds) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, "", err
		}
	}
	out := make([]*job.Job, 0, len(cmds))
	for i, cmd := range cmds {
		if j := DecodeJob(queue, zs[i].Member.(string), cmd.Val()); j != nil {
			out = append(out, j)
		}
	}
	return out, next, nil
}

// NextDue returns when queue's earliest scheduled job is due (false when
// none is scheduled).
func (c *Client) NextDue(ctx context.Context, queue string) (time.Time, bool, error) {
	zs, err := c.rdb.ZRangeWithScores(ctx, c.keysFor(queue).key(kScheduled), 0, 0).Result()
	if err != nil || len(zs) == 0 {
		return time.Time{}, false, err
	}
	return time.UnixMilli(int64(zs[0].Score)), true, nil
}
