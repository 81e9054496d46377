package schedule

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
	"github.com/sundialhq/sundial/pkg/queue"
)

// Store keeps schedules in Redis (see keys.go for the layout) and tells
// running schedulers about every change, so that a change takes effect at
// once. It is safe for concurrent use, also from several processes: changes
// of one schedule are serialised by a short per-schedule lock.
type Store struct {
	q        *queue.Client
	rdb      redis.UniversalClient
	lockTTL  time.Duration
	lockWait time.Duration
	quiet    bool // tests: bump the version but publish no notice
}

// NewStore returns a Store over q's Redis, using q's clock.
func NewStore(q *queue.Client) *Store {
	return &Store{q: q, rdb: q.Redis(), lockTTL: 10 * time.Second, lockWait: 3 * time.Second}
}

// Put creates or replaces the schedule s.ID and returns it as stored, and
// whether it was created. s is validated in full before anything is
// written; the error is then a *FieldError.
//
// A replace that keeps the timing (cron or interval, time zone) keeps the
// planned next run, so it neither skips nor repeats a fire time; a new
// timing, or enabling, plans the first fire time after now. Moving a
// schedule to another queue (job.queue) carries its next run and last run
// over; see docs/schedules.md for what a crash in the middle leaves.
func (st *Store) Put(ctx context.Context, s *Schedule) (*Schedule, bool, error) {
	now := st.q.Now()
	rec, _, err := validate(s, now)
	if err != nil {
		return nil, false, err
	}
	unlock, err := st.lock(ctx, rec.ID)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	return st.put(ctx, rec, now)
}

// Get returns the schedule id, or ErrNotFound.
func (st *Store) Get(ctx context.Context, id string) (*Schedule, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	q, err := st.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	views, err := st.views(ctx, q, []string{id})
	if err != nil {
		return nil, err
	}
	if views[0] == nil {
		return nil, ErrNotFound
	}
	return views[0], nil
}

// List returns every schedule, or those whose jobs go to queue when queue
// is not empty, ordered by id.
func (st *Store) List(ctx context.Context, queueName string) ([]*Schedule, error) {
	index, err := st.rdb.HGetAll(ctx, keyIndex).Result()
	if err != nil {
		return nil, err
	}
	byQueue := map[string][]string{}
	for id, q := range index {
		if queueName == "" || q == queueName {
			byQueue[q] = append(byQueue[q], id)
		}
	}
	out := []*Schedule{}
	for q, ids := range byQueue {
		views, err := st.views(ctx, q, ids)
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			if v != nil {
				out = append(out, v)
			}
		}
	}
	sortByID(out)
	return out, nil
}

// Patch applies a JSON merge patch (RFC 7396) to schedule id and stores the
// result as Put does. Setting one of cron and every_seconds removes the
// other, so that {"every_seconds": 60} turns a cron schedule into an
// interval. Errors are *FieldError, ErrNotFound or ErrBusy.
func (st *Store) Patch(ctx context.Context, id string, patch []byte) (*Schedule, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	unlock, err := st.lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := st.q.Now()
	q, err := st.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	cur, err := st.readRecord(ctx, q, id)
	if err != nil {
		return nil, err
	}
	merged, err := applyPatch(cur, patch)
	if err != nil {
		return nil, err
	}
	rec, _, err := validate(merged, now)
	if err != nil {
		return nil, err
	}
	s, _, err := st.put(ctx, rec, now)
	return s, err
}

// SetEnabled enables or disables schedule id. Enabling plans the first
// fire time after now: the times that passed while it was disabled are not
// misfires.
func (st *Store) SetEnabled(ctx context.Context, id string, enabled bool) (*Schedule, error) {
	return st.Patch(ctx, id, []byte(`{"enabled":`+strconv.FormatBool(enabled)+`}`))
}

// Delete removes schedule id; it fires no more. ErrNotFound if unknown.
func (st *Store) Delete(ctx context.Context, id string) error {
	if !ValidID(id) {
		return ErrNotFound
	}
	unlock, err := st.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	q, err := st.locate(ctx, id)
	if err != nil {
		return err
	}
	if _, _, err := st.unplan(ctx, q, id); err != nil {
		return err
	}
	if err := st.rdb.HDel(ctx, keyIndex, id).Err(); err != nil {
		return err
	}
	return st.notify(ctx)
}

// Trigger submits schedule id's job now, without moving the schedule: its
// next run, last run and last job stay as they are.
func (st *Store) Trigger(ctx context.Context, id string) (*job.Job, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	q, err := st.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, err := st.readRecord(ctx, q, id)
	if err != nil {
		return nil, err
	}
	now := st.q.Now()
	j, err := rec.Job.Build(now, now)
	if err != nil {
		return nil, err
	}
	res, err := st.q.Submit(ctx, []*job.Job{j})
	if err != nil {
		return nil, err
	}
	return res[0].Job, nil
}

// put stores rec (validated) while holding its lock.
func (st *Store) put(ctx context.Context, rec *record, now time.Time) (*Schedule, bool, error) {
	oldQ, err := st.rdb.HGet(ctx, keyIndex, rec.ID).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, err
	}
	var old *record
	if oldQ != "" {
		if old, err = st.readRecord(ctx, oldQ, rec.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
	}
	rec.CreatedAt, rec.AnchorMS = now.UTC(), now.UnixMilli()
	if old != nil {
		rec.CreatedAt, rec.AnchorMS = old.CreatedAt, old.AnchorMS
	}
	rec.UpdatedAt = now.UTC()
	tt, err := rec.spec().Compile()
	if err != nil {
		return nil, false, err
	}
	def, err := json.Marshal(rec)
	if err != nil {
		return nil, false, err
	}
	newQ := rec.Job.Queue
	mode, proposed, carried := "set", tt.Next(now).UnixMilli(), ""
	switch {
	case !rec.Enabled:
		mode = "off"
	case old != nil && old.Enabled && sameTiming(old, rec):
		mode = "keep"
	}

	if oldQ != "" && oldQ != newQ {
		// A move: stage the definition in the new queue (not planned, so
		// it cannot fire), make the new queue the truth, then take the
		// schedule out of the old queue, reading its run state in the same
		// step so that a fire racing the move is seen, and plan it in the
		// new queue from there.
		if err := st.rdb.HSet(ctx, keysFor(newQ).defs, rec.ID, def).Err(); err != nil {
			return nil, false, err
		}
		if err := st.index(ctx, rec.ID, newQ); err != nil {
			return nil, false, err
		}
		next, runs, err := st.unplan(ctx, oldQ, rec.ID)
		if err != nil {
			return nil, false, err
		}
		carried = runs
		if mode == "keep" {
			mode = "set"
			if next > 0 {
				proposed = next
			}
		}
	} else if err := st.index(ctx, rec.ID, newQ); err != nil {
		return nil, false, err
	}

	next, runs, err := st.plan(ctx, newQ, rec.ID, def, mode, proposed, carried, tt, now)
	if err != nil {
		return nil, false, err
	}
	if err := st.notify(ctx); err != nil {
		return nil, false, err
	}
	lastRun, lastJob := parseRuns(runs)
	return rec.view(tt, next, lastRun, lastJob), old == nil, nil
}

// plan runs lua/plan.lua, planning again after the last fire time when
// the proposed next run is stale. It returns the next run (0 when none)
// and the runs value.
func (st *Store) plan(ctx context.Context, q, id string, def []byte, mode string, proposed int64, carried string, tt *Timetable, now time.Time) (int64, string, error) {
	k := keysFor(q)
	for range 3 {
		res, err := scriptPlan.Run(ctx, st.rdb, k.all(), id, def, mode, proposed, carried).StringSlice()
		if err != nil {
			return 0, "", fmt.Errorf("plan schedule: %w", err)
		}
		if res[0] == "ok" {
			next, _ := strconv.ParseInt(res[1], 10, 64)
			return next, res[2], nil
		}
		last, _ := strconv.ParseInt(res[1], 10, 64)
		proposed = tt.Next(time.UnixMilli(max(last, now.UnixMilli()))).UnixMilli()
		mode = "set"
	}
	return 0, "", fmt.Errorf("plan schedule %s: still stale after 3 tries", id)
}

// unplan removes schedule id from queue q in one transaction and returns
// the next run it had (0 when none) and its runs value.
func (st *Store) unplan(ctx context.Context, q, id string) (int64, string, error) {
	k := keysFor(q)
	var score *redis.FloatCmd
	var runs *redis.StringCmd
	_, err := st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		score = p.ZScore(ctx, k.next, id)
		runs = p.HGet(ctx, k.runs, id)
		p.ZRem(ctx, k.next, id)
		p.HDel(ctx, k.defs, id)
		p.HDel(ctx, k.runs, id)
		p.Incr(ctx, k.rev)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, "", err
	}
	return int64(score.Val()), runs.Val(), nil
}

// index records that schedule id lives in queue q.
func (st *Store) index(ctx context.Context, id, q string) error {
	_, err := st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, keyIndex, id, q)
		p.SAdd(ctx, keyQueues, q)
		return nil
	})
	return err
}

// notify bumps the version and tells running schedulers.
func (st *Store) notify(ctx context.Context) error {
	v, err := st.rdb.Incr(ctx, keyVersion).Result()
	if err != nil || st.quiet {
		return err
	}
	return st.rdb.Publish(ctx, chanChanged, v).Err()
}

// locate returns the queue that holds schedule id, or ErrNotFound.
func (st *Store) locate(ctx context.Context, id string) (string, error) {
	q, err := st.rdb.HGet(ctx, keyIndex, id).Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	return q, err
}

// readRecord reads the stored definition of id in queue q.
func (st *Store) readRecord(ctx context.Context, q, id string) (*record, error) {
	raw, err := st.rdb.HGet(ctx, keysFor(q).defs, id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("schedule %s: stored definition: %w", id, err)
	}
	return &r, nil
}

// views reads schedules ids of queue q with their run state; a nil entry
// means that id has no definition there.
func (st *Store) views(ctx context.Context, q string, ids []string) ([]*Schedule, error) {
	k := keysFor(q)
	var defs, runs *redis.SliceCmd
	var next *redis.FloatSliceCmd
	_, err := st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		defs = p.HMGet(ctx, k.defs, ids...)
		next = p.ZMScore(ctx, k.next, ids...)
		runs = p.HMGet(ctx, k.runs, ids...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, len(ids))
	for i, id := range ids {
		raw, ok := defs.Val()[i].(string)
		if !ok {
			continue
		}
		var r record
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return nil, fmt.Errorf("schedule %s: stored definition: %w", id, err)
		}
		tt, _ := r.spec().Compile() // nil for a definition this version cannot read: shown without upcoming times
		rv, _ := runs.Val()[i].(string)
		lastRun, lastJob := parseRuns(rv)
		out[i] = r.view(tt, int64(next.Val()[i]), lastRun, lastJob)
	}
	return out, nil
}

// lock takes schedule id's change lock, waiting up to lockWait, and
// returns the function that releases it.
func (st *Store) lock(ctx context.Context, id string) (func(), error) {
	l := &lease{rdb: st.rdb, key: lockKey(id), token: newToken(), ttl: st.lockTTL}
	deadline := time.Now().Add(st.lockWait)
	for {
		ok, err := l.acquire(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return func() { _ = l.release(context.WithoutCancel(ctx)) }, nil
		}
		if time.Now().After(deadline) {
			return nil, ErrBusy
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// runsValue and parseRuns encode a schedule's last fire: "<ms> <job id>".
func runsValue(at time.Time, jobID string) string {
	return strconv.FormatInt(at.UnixMilli(), 10) + " " + jobID
}

func parseRuns(v string) (int64, string) {
	ms, id, _ := strings.Cut(v, " ")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n, id
}
