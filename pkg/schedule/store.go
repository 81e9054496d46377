package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
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
