package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// queuesMaxAge is how long a scheduler trusts its list of queues holding
// schedules when the version has not changed; a safety net only.
const queuesMaxAge = 30 * time.Second

// putAside is how far an unusable definition (one this version cannot
// compile or build) is pushed back, so it is retried now and then without
// making the scheduler spin.
const putAside = time.Hour

// compiled is a stored definition ready to fire, cached by its raw JSON.
type compiled struct {
	raw string
	rec *record
	tt  *Timetable
	err error // the definition is unusable
}

// due is one schedule whose next run has come.
type due struct {
	queue, id string
	planned   int64 // next run, Unix ms: the compare-and-set's expected value
	def       *compiled
}

// FireDue runs one pass: it fires every schedule whose next run has come,
// once per fire time its misfire policy asks for, and returns when the
// earliest next run will be (the zero Time when no schedule is enabled, or
// now when there is more to do at once). The Scheduler's leader calls it
// in a loop; tests and tools may call it directly. It is safe to call from
// several processes at once: a fire time is only ever fired by one.
func (s *Scheduler) FireDue(ctx context.Context) (time.Time, error) {
	now := s.q.Now()
	queues, heads, err := s.heads(ctx, now)
	if err != nil {
		return time.Time{}, err
	}
	var (
		next  time.Time
		batch []due
		ids   = map[string][]string{}
	)
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for i, q := range queues {
		h := heads[i]
		earliest(h.next)
		for _, z := range h.due {
			id := z.Member.(string)
			batch = append(batch, due{queue: q, id: id, planned: int64(z.Score)})
			ids[q] = append(ids[q], id)
		}
		if len(h.due) == s.cfg.Batch {
			earliest(now) // more are due than one pass reads
		}
	}
	if len(batch) == 0 {
		return next, nil
	}
	if err := s.definitions(ctx, batch, ids); err != nil {
		return time.Time{}, err
	}
	// One schedule's failure must not hold the others back: every fire
	// runs, and the first error is returned.
	var (
		mu    sync.Mutex
		first error
		g     errgroup.Group
	)
	g.SetLimit(s.cfg.Concurrency)
	for _, d := range batch {
		g.Go(func() error {
			n, err := s.fire(ctx, d, now)
			mu.Lock()
			defer mu.Unlock()
			earliest(n)
			if err != nil && first == nil {
				first = err
			}
			return nil
		})
	}
	_ = g.Wait()
	return next, first
}

// heads reads, in one round trip, the version and for every queue the due
// schedules (at most Batch) and the earliest next run after now. When the
// version moved since the queue list was read, it rereads the list first.
func (s *Scheduler) heads(ctx context.Context, now time.Time) ([]string, []head, error) {
	nowMS := strconv.FormatInt(now.UnixMilli(), 10)
	for range 2 {
		s.mu.Lock()
		queues, seen, readAt := s.queues, s.seen, s.readAt
		s.mu.Unlock()
		var version *redis.StringCmd
		cmds := make([][2]*redis.ZSliceCmd, len(queues))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			version = p.Get(ctx, keyVersion)
			for i, q := range queues {
				k := keysFor(q).next
				cmds[i][0] = p.ZRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Min: "-inf", Max: nowMS, Count: int64(s.cfg.Batch)})
				cmds[i][1] = p.ZRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Min: "(" + nowMS, Max: "+inf", Count: 1})
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, err
		}
		v, _ := strconv.ParseInt(version.Val(), 10, 64)
		if v == seen && time.Since(readAt) < queuesMaxAge {
			heads := make([]head, len(cmds))
			for i, c := range cmds {
				heads[i] = head{due: c[0].Val()}
				if after := c[1].Val(); len(after) > 0 {
					heads[i].next = time.UnixMilli(int64(after[0].Score))
				}
			}
			return queues, heads, nil
		}
		// A change (its notice may have been lost): reread the queues and
		// forget compiled definitions, which the change may have replaced.
		qs, err := s.rdb.SMembers(ctx, keyQueues).Result()
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(qs)
		s.mu.Lock()
		s.queues, s.seen, s.readAt = qs, v, time.Now()
		clear(s.cache)
		s.mu.Unlock()
	}
	return nil, nil, errors.New("schedules keep changing; retrying")
}

// head is what one queue has due now, and its earliest later next run.
type head struct {
	due  []redis.Z
	next time.Time
}

// definitions reads the definitions of the due schedules, one HMGET per
// queue in one round trip, and compiles those not in the cache.
func (s *Scheduler) definitions(ctx context.Context, batch []due, ids map[string][]string) error {
	cmds := map[string]*redis.SliceCmd{}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for q, list := range ids {
			cmds[q] = p.HMGet(ctx, keysFor(q).defs, list...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	pos := map[string]int{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range batch {
		d := &batch[i]
		raw, _ := cmds[d.queue].Val()[pos[d.queue]].(string)
		pos[d.queue]++
		if raw == "" {
			continue // no definition: an orphan, removed by fire
		}
		c, ok := s.cache[d.id]
		if !ok || c.raw != raw {
			c = compileDefinition(raw)
			s.cache[d.id] = c
		}
		d.def = c
	}
	return nil
}

// compileDefinition decodes and compiles a stored definition.
func compileDefinition(raw string) *compiled {
	c := &compiled{raw: raw, rec: &record{}}
	if c.err = json.Unmarshal([]byte(raw), c.rec); c.err == nil {
		c.tt, c.err = c.rec.spec().Compile()
	}
	return c
}

// fire fires one due schedule and returns its new next run (zero when
// there is none, or when another scheduler or a change moved it first).
func (s *Scheduler) fire(ctx context.Context, d due, now time.Time) (time.Time, error) {
	k := keysFor(d.queue)
	log := func() *slog.Logger { return s.log.With("schedule_id", d.id, "queue", d.queue) }
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	switch {
	case d.def == nil || d.def.err == nil && d.def.rec.Job.Queue != d.queue:
		log().Warn("removing a planned run without a definition in its queue")
		return time.Time{}, s.advance(ctx, k, d, "")
	case d.def.err != nil:
		log().Error("schedule definition unusable; retrying in an hour", "err", d.def.err)
		return time.Time{}, s.advance(ctx, k, d, strconv.FormatInt(now.Add(putAside).UnixMilli(), 10))
	}
	times, nextT := d.def.tt.Due(time.UnixMilli(d.planned), now)
	nextMS := strconv.FormatInt(nextT.UnixMilli(), 10)
	if nextT.IsZero() {
		nextMS = ""
	}
	if len(times) == 0 {
		if debug {
			log().Debug("misfires skipped", "planned", time.UnixMilli(d.planned))
		}
		return nextT, s.advance(ctx, k, d, nextMS)
	}
	jobs := make([]*job.Job, len(times))
	for i, at := range times {
		j, err := d.def.rec.Job.Build(at, now)
		if err != nil {
			log().Error("schedule's job template unusable; retrying in an hour", "err", err)
			return time.Time{}, s.advance(ctx, k, d, strconv.FormatInt(now.Add(putAside).UnixMilli(), 10))
		}
		jobs[i] = j
	}
	last := len(jobs) - 1
	g := queue.Guard{
		Key: k.next, Member: d.id, Expect: d.planned, Next: nextT.UnixMilli(), Remove: nextT.IsZero(),
		Record: k.runs, Fields: []string{d.id, runsValue(times[last], jobs[last].ID)},
	}
	if _, err := s.q.SubmitGuarded(ctx, g, jobs); err != nil {
		if errors.Is(err, queue.ErrGuardMismatch) {
			if debug {
				log().Debug("fire time already moved by another scheduler or a change")
			}
			return now, nil
		}
		return time.Time{}, fmt.Errorf("fire schedule %s: %w", d.id, err)
	}
	done := time.Now()
	if len(times) > 1 || now.Sub(times[0]) > MisfireTolerance {
		log().Info("fired missed times", "count", len(times), "first", times[0], "last", times[last])
	}
	for i, j := range jobs {
		if debug {
			log().Debug("fired", "fire_at", times[i], "job_id", j.ID)
		}
		if s.cfg.OnFire != nil {
			s.cfg.OnFire(Fire{Schedule: d.id, Queue: d.queue, At: times[i], JobID: j.ID, Done: done})
		}
	}
	return nextT, nil
}

// advance moves d's next run to next ("" removes it) if it is still the
// planned one.
func (s *Scheduler) advance(ctx context.Context, k queueKeys, d due, next string) error {
	if err := scriptAdvance.Run(ctx, s.rdb, []string{k.next}, d.id, d.planned, next).Err(); err != nil {
		return fmt.Errorf("advance schedule %s: %w", d.id, err)
	}
	return nil
}
