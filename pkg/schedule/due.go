package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
)

// queuesMaxAge is how long a scheduler trusts its list of queues holding
// schedules when the version has not changed; a safety net only.
const queuesMaxAge = 30 * time.Second

// compiled is a stored definition ready to fire.
type compiled struct {
	raw   string
	rec   *record
	tt    *Timetable
	proto *job.Job // the template built and validated once; fires copy it
	err   error    // the definition is unusable
}

// compileDefinition decodes and compiles a stored definition.
func compileDefinition(raw string) *compiled {
	c := &compiled{raw: raw, rec: &record{}}
	if c.err = json.Unmarshal([]byte(raw), c.rec); c.err != nil {
		return c
	}
	if c.tt, c.err = c.rec.spec().Compile(); c.err != nil {
		return c
	}
	now := time.Now()
	c.proto, c.err = c.rec.Job.Build(now, now)
	return c
}

// newJob returns a new job of the template standing for fire time at.
func (c *compiled) newJob(at, now time.Time) *job.Job {
	j := *c.proto
	j.ID = job.NewID(now)
	j.RunAt = at.UTC().Truncate(time.Millisecond)
	j.CreatedAt = now.UTC()
	return &j
}

// defCache holds compiled definitions of one queue as of its revision;
// every change of a definition bumps the revision, which empties the cache.
type defCache struct {
	rev  string
	defs map[string]*compiled
}

// due is one schedule whose next run has come.
type due struct {
	queue, id string
	planned   int64 // next run, Unix ms: the compare-and-set's expected value
	def       *compiled
}

// collect returns the due schedules of every queue with their definitions,
// and the earliest next run after now. One round trip reads the version
// and, per queue, a consistent snapshot (lua/due.lua) that carries
// definitions only when the cached ones are stale; a second is needed only
// for definitions not cached yet.
func (s *Scheduler) collect(ctx context.Context, now time.Time) ([]due, time.Time, error) {
	for attempt := 0; ; attempt++ {
		batch, next, retry, err := s.snapshot(ctx, now)
		switch {
		case err != nil && attempt < 2 && strings.HasPrefix(err.Error(), "NOSCRIPT"):
			if err := scriptDue.Load(ctx, s.rdb).Err(); err != nil {
				return nil, time.Time{}, err
			}
		case err != nil:
			return nil, time.Time{}, err
		case !retry:
			return batch, next, s.fetchMissing(ctx, batch)
		case attempt >= 2:
			return nil, time.Time{}, errors.New("schedules keep changing; retrying")
		}
	}
}

// snapshot runs one pipelined read. retry is true when the version moved
// since the queue list was read: the list has been reread, call again.
func (s *Scheduler) snapshot(ctx context.Context, now time.Time) (batch []due, next time.Time, retry bool, err error) {
	s.mu.Lock()
	queues, seen, readAt := s.queues, s.seen, s.readAt
	revs := make([]string, len(queues))
	for i, q := range queues {
		if c := s.cache[q]; c != nil {
			revs[i] = c.rev
		}
	}
	s.mu.Unlock()

	nowMS := strconv.FormatInt(now.UnixMilli(), 10)
	var version *redis.StringCmd
	cmds := make([]*redis.Cmd, len(queues))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		version = p.Get(ctx, keyVersion)
		for i, q := range queues {
			k := keysFor(q)
			cmds[i] = scriptDue.EvalSha(ctx, p, []string{k.defs, k.next, k.rev}, nowMS, s.cfg.Batch, revs[i])
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, time.Time{}, false, err
	}
	v, _ := strconv.ParseInt(version.Val(), 10, 64)
	if v != seen || time.Since(readAt) >= queuesMaxAge {
		// A change (its notice may have been lost): reread the queues.
		qs, err := s.rdb.SMembers(ctx, keyQueues).Result()
		if err != nil {
			return nil, time.Time{}, false, err
		}
		slices.Sort(qs)
		s.mu.Lock()
		s.queues, s.seen, s.readAt = qs, v, time.Now()
		s.mu.Unlock()
		return nil, time.Time{}, true, nil
	}

	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range queues {
		res, err := cmds[i].Slice()
		if err != nil || len(res) < 3 {
			return nil, time.Time{}, false, fmt.Errorf("read due schedules of %s: %v", q, err)
		}
		rev, _ := res[0].(string)
		if later, _ := res[1].(string); later != "" {
			ms, _ := strconv.ParseInt(later, 10, 64)
			earliest(time.UnixMilli(ms))
		}
		c := s.cache[q]
		if c == nil || c.rev != rev {
			c = &defCache{rev: rev, defs: map[string]*compiled{}}
			s.cache[q] = c
		}
		n, _ := res[2].(int64)
		if int(n) == s.cfg.Batch {
			earliest(now) // more are due than one pass reads
		}
		for e := res[3:]; len(e) >= 3; e = e[3:] {
			id, _ := e[0].(string)
			score, _ := e[1].(string)
			raw, _ := e[2].(string)
			planned, _ := strconv.ParseInt(score, 10, 64)
			d := due{queue: q, id: id, planned: planned, def: c.defs[id]}
			if raw != "" && (d.def == nil || d.def.raw != raw) {
				d.def = compileDefinition(raw)
				c.defs[id] = d.def
			}
			batch = append(batch, d)
		}
	}
	return batch, next, false, nil
}

// fetchMissing reads the definitions the cache lacked, one HMGET per queue
// in one round trip. A due schedule left without one has no definition in
// its queue: fire removes it.
func (s *Scheduler) fetchMissing(ctx context.Context, batch []due) error {
	ids := map[string][]string{}
	for _, d := range batch {
		if d.def == nil {
			ids[d.queue] = append(ids[d.queue], d.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	got := map[string]*compiled{}
	for q, list := range ids {
		for i, raw := range cmds[q].Val() {
			if r, ok := raw.(string); ok {
				c := compileDefinition(r)
				got[q+"\x00"+list[i]] = c
				if dc := s.cache[q]; dc != nil {
					dc.defs[list[i]] = c
				}
			}
		}
	}
	for i := range batch {
		if batch[i].def == nil {
			batch[i].def = got[batch[i].queue+"\x00"+batch[i].id]
		}
	}
	return nil
}
