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
)

// The Redis steps of the Store: each reads or writes one queue's slot, or
// the global keys, in one round trip (see keys.go for the layout).

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
