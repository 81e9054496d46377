package queue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// ListOptions select the live jobs List returns: one state of one queue,
// optionally one type and one priority, a page at a time.
type ListOptions struct {
	// State is queued, scheduled, waiting, active or dead.
	State job.State
	// Type, when set, keeps only jobs of this type.
	Type string
	// Priority, when set, keeps only jobs of this priority.
	Priority job.Priority
	// Tag, when set, keeps only jobs with this tag.
	Tag string
	// Limit is the page size (at least 1).
	Limit int
	// Cursor is the next cursor of the previous page, "" for the first.
	Cursor string
}

// ListScanMax bounds the entries one List call reads: a filter by type or
// priority that matches few jobs returns a short page (even an empty one)
// with a cursor to continue from, instead of reading the whole backlog in
// one request.
const ListScanMax = 2000

// ListStates are the states List serves: the ones Redis keeps an index of.
var ListStates = []job.State{job.Queued, job.Scheduled, job.Waiting, job.Active, job.Dead}

// listCursor is where a List page ended, sent to callers base64-encoded.
type listCursor struct {
	State string `json:"s"`
	// Sorted sets: the last member returned and its score.
	Score float64 `json:"sc,omitempty"`
	ID    string  `json:"id,omitempty"`
	// Queued jobs: Seg is the priority list (0 high, 1 normal, 2 low) or
	// 3 for the jobs limits and missing handlers hold back; Off counts the
	// entries of the list passed, from the tail (the next claimed);
	// GOff the jobs passed in the group list whose marker is at Off.
	// Slot is the parked slot in progress (its zset position in Score/ID).
	Seg  int    `json:"g,omitempty"`
	Off  int64  `json:"o,omitempty"`
	GOff int64  `json:"go,omitempty"`
	Slot string `json:"sl,omitempty"`
}

func (lc listCursor) encode() string {
	b, _ := json.Marshal(lc)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeListCursor(s string, state job.State) (listCursor, error) {
	var lc listCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &lc)
	}
	if err != nil || lc.State != string(state) || lc.Seg < 0 || lc.Seg > 3 || lc.Off < 0 || lc.GOff < 0 || (lc.ID != "" && !validID(lc.ID)) {
		return listCursor{}, fmt.Errorf("%w: not a cursor of this list", ErrInvalidCursor)
	}
	return lc, nil
}

// candidate is an entry a source read: a job id and the cursor that
// continues right after it.
type candidate struct {
	id    string
	after listCursor
}

// source reads the entries of one state's index in order, from a cursor.
type source interface {
	// next reads up to n entries; done tells that the index has no more.
	next(ctx context.Context, n int) (batch []candidate, done bool, err error)
}

// List returns a page of queue's jobs in one live state, read from Redis
// (no history store), and the cursor of the next page ("" when there is
// none). It reads O(page) entries whatever the backlog: at most
// ListScanMax entries when a filter leaves some out, so a page may hold
// fewer jobs than o.Limit, even none, while the cursor is not empty.
//
// The order is that of the state's index: queued jobs in about the order
// they would be claimed (high, normal, low; a fairness group's jobs where
// its turn is; then the jobs limits and missing handlers hold back, by
// slot), scheduled jobs by due time, waiting jobs by creation, active
// jobs by lease expiry, dead jobs newest first. The lists move while they
// are read: a job claimed, promoted or retried between two pages may be
// missed or shown twice, never shown in a state it has left.
func (c *Client) List(ctx context.Context, queue string, o ListOptions) ([]*job.Job, string, error) {
	jobs, next, _, err := c.list(ctx, queue, o)
	return jobs, next, err
}

// list is List, and also says how many entries it read.
func (c *Client) list(ctx context.Context, queue string, o ListOptions) ([]*job.Job, string, int, error) {
	if !slices.Contains(ListStates, o.State) {
		return nil, "", 0, &job.FieldError{Field: "state", Message: "state must be one of queued, scheduled, waiting, active, dead"}
	}
	lc := listCursor{State: string(o.State)}
	if o.Cursor != "" {
		var err error
		if lc, err = decodeListCursor(o.Cursor, o.State); err != nil {
			return nil, "", 0, err
		}
	}
	k := c.keysFor(queue)
	limit := max(o.Limit, 1)
	src := c.sourceFor(k, o, lc)
	filtered := o.Type != "" || o.Priority != "" || o.Tag != ""
	var out []*job.Job
	scanned, read := 0, 0
	last := lc
	for len(out) < limit && scanned < ListScanMax {
		n := limit - len(out)
		if filtered {
			n = max(n, 200)
		}
		n = min(n, ListScanMax-scanned)
		batch, done, err := src.next(ctx, n)
		if err != nil {
			return nil, "", 0, err
		}
		read += len(batch)
		scanned += max(len(batch), 1)
		end := last // the cursor after the whole batch
		if len(batch) > 0 {
			end = batch[len(batch)-1].after
		}
		if filtered && len(batch) > 0 {
			if batch, err = c.preFilter(ctx, k, o, batch); err != nil {
				return nil, "", 0, err
			}
		}
		jobs, err := c.readJobs(ctx, k, batch, o.State)
		if err != nil {
			return nil, "", 0, err
		}
		last = end
		for i, j := range jobs {
			if j == nil || j.State != o.State || (o.Type != "" && j.Type != o.Type) || (o.Priority != "" && j.Priority != o.Priority) ||
				(o.Tag != "" && !slices.Contains(j.Tags, o.Tag)) {
				continue
			}
			out = append(out, j)
			if len(out) == limit {
				last = batch[i].after // the page is full: the next starts after this job
				break
			}
		}
		if done && last == end {
			return out, "", read, nil
		}
	}
	return out, last.encode(), read, nil
}

// preFilter keeps the entries of batch whose type, priority and tags
// match o, reading only those fields of each job (a filter that matches
// few jobs then reads few whole hashes).
func (c *Client) preFilter(ctx context.Context, k *queueKeys, o ListOptions, batch []candidate) ([]candidate, error) {
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(batch))
	for i, cd := range batch {
		cmds[i] = pipe.HMGet(ctx, k.job(cd.id), "type", "priority", "tags")
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	keep := batch[:0:0]
	for i, cd := range batch {
		v := cmds[i].Val()
		typ, _ := v[0].(string)
		prio, _ := v[1].(string)
		if prio == "" {
			prio = string(job.Normal) // storage format 4 leaves the default out
		}
		tags, _ := v[2].(string)
		if (o.Type == "" || typ == o.Type) && (o.Priority == "" || prio == string(o.Priority)) &&
			(o.Tag == "" || slices.Contains(strings.Split(tags, ","), o.Tag)) {
			keep = append(keep, cd)
		}
	}
	return keep, nil
}

// readJobs reads the hashes of the batch's jobs in one round trip (nil
// for one that is gone). state is the state listed ("" for none): for
// active, each job's active record is read too; for queued, scheduled
// and waiting, what holds each job back (held_back, as Get says it: its
// parked slot, the queue's pause, the dependencies still pending).
func (c *Client) readJobs(ctx context.Context, k *queueKeys, batch []candidate, state job.State) ([]*job.Job, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	active := state == job.Active
	why := state == job.Queued || state == job.Scheduled || state == job.Waiting
	pipe := c.rdb.Pipeline()
	hashes := make([]*redis.MapStringStringCmd, len(batch))
	recs := make([]*redis.StringCmd, len(batch))
	deps := make([]*redis.StringSliceCmd, len(batch))
	var paused *redis.IntCmd
	if why {
		paused = pipe.Exists(ctx, k.key(kPaused))
	}
	for i, cd := range batch {
		hashes[i] = pipe.HGetAll(ctx, k.job(cd.id))
		if active {
			recs[i] = pipe.HGet(ctx, k.active(), cd.id)
		}
		if state == job.Waiting {
			deps[i] = pipe.SMembers(ctx, k.tag+"deps:"+cd.id)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	out := make([]*job.Job, len(batch))
	for i, cd := range batch {
		h := hashes[i].Val()
		if active {
			if r := recs[i].Val(); r != "" {
				overlayActive(h, r)
			}
		}
		j := DecodeJob(k.name, cd.id, h)
		if j != nil && why {
			var pending []string
			if deps[i] != nil {
				pending = deps[i].Val()
			}
			j.HeldBack = heldBack(j, h["parked"], paused.Val() == 1, pending)
		}
		out[i] = j
	}
	return out, nil
}

func (c *Client) sourceFor(k *queueKeys, o ListOptions, lc listCursor) source {
	switch o.State {
	case job.Queued:
		return &queuedSource{c: c, k: k, prio: o.Priority, at: lc}
	case job.Scheduled:
		return &zsetSource{c: c, key: k.key(kScheduled), at: lc}
	case job.Waiting:
		return &zsetSource{c: c, key: k.key(kWaiting), at: lc}
	case job.Active:
		return &zsetSource{c: c, key: k.key(kLeases), at: lc}
	default:
		return &zsetSource{c: c, key: k.key(kDead), desc: true, at: lc}
	}
}

// zsetSource reads a sorted set by score (ties by member, as Redis orders
// them), ascending or, when desc, descending, after the member at.ID
// scored at.Score. It starts at the rank after that member, found with
// ZRANK (O(log n)); when the member has left the set meanwhile, at the
// first member of its score, skipping those of equal score that came
// before it.
type zsetSource struct {
	c       *Client
	key     string
	desc    bool
	at      listCursor
	rank    int64 // the next rank to read
	located bool
	skip    bool // skip the members of at.Score at or before at.ID
	done    bool
}

func (s *zsetSource) next(ctx context.Context, n int) ([]candidate, bool, error) {
	if s.done {
		return nil, true, nil
	}
	if !s.located {
		if err := s.locate(ctx); err != nil {
			return nil, false, err
		}
		s.located = true
	}
	var zs []redis.Z
	var err error
	if s.desc {
		zs, err = s.c.rdb.ZRevRangeWithScores(ctx, s.key, s.rank, s.rank+int64(n)-1).Result()
	} else {
		zs, err = s.c.rdb.ZRangeWithScores(ctx, s.key, s.rank, s.rank+int64(n)-1).Result()
	}
	if err != nil {
		return nil, false, err
	}
	s.rank += int64(len(zs))
	s.done = len(zs) < n
	out := make([]candidate, 0, len(zs))
	for _, z := range zs {
		id, _ := z.Member.(string)
		if IsPadding(id) || s.skip && z.Score == s.at.Score && (id == s.at.ID || (id < s.at.ID) != s.desc) {
			continue
		}
		out = append(out, candidate{id: id, after: listCursor{State: s.at.State, Score: z.Score, ID: id}})
	}
	return out, s.done, nil
}

// locate sets the rank to read from: 0 without a cursor, else the rank
// after the cursor's member.
func (s *zsetSource) locate(ctx context.Context) error {
	if s.at.ID == "" {
		return nil
	}
	pipe := s.c.rdb.Pipeline()
	score := pipe.ZScore(ctx, s.key, s.at.ID)
	var rank *redis.IntCmd
	if s.desc {
		rank = pipe.ZRevRank(ctx, s.key, s.at.ID)
	} else {
		rank = pipe.ZRank(ctx, s.key, s.at.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	if score.Err() == nil && rank.Err() == nil && score.Val() == s.at.Score {
		s.rank = rank.Val() + 1
		return nil
	}
	f := strconv.FormatFloat(s.at.Score, 'f', -1, 64)
	var cnt *redis.IntCmd
	if s.desc {
		cnt = s.c.rdb.ZCount(ctx, s.key, "("+f, "+inf")
	} else {
		cnt = s.c.rdb.ZCount(ctx, s.key, "-inf", "("+f)
	}
	if err := cnt.Err(); err != nil {
		return err
	}
	s.rank, s.skip = cnt.Val(), true
	return nil
}

// queuedSource reads the queued jobs: the priority lists from their
// tails (the next claimed first), each fairness group's jobs where its
// marker stands, then the jobs held back in the parked sets of limits'
// and missing handlers' slots, slot by slot in name order. Cancelled ids
// still in a list (tombstones) are read like the others and left out by
// their state.
type queuedSource struct {
	c     *Client
	k     *queueKeys
	prio  job.Priority
	at    listCursor
	slots []string // the parked slots, sorted; read once
	zs    *zsetSource
	done  bool
}

var listPriorities = []job.Priority{job.High, job.Normal, job.Low}

func (s *queuedSource) next(ctx context.Context, n int) ([]candidate, bool, error) {
	var out []candidate
	for len(out) < n && !s.done {
		if s.at.Seg == 3 {
			got, err := s.parked(ctx, n-len(out))
			if err != nil {
				return nil, false, err
			}
			out = append(out, got...)
			continue
		}
		if s.prio != "" && listPriorities[s.at.Seg] != s.prio {
			s.at = listCursor{State: s.at.State, Seg: s.at.Seg + 1}
			continue
		}
		got, err := s.list(ctx, n-len(out))
		if err != nil {
			return nil, false, err
		}
		out = append(out, got...)
	}
	return out, s.done, nil
}

// list reads up to n jobs of the current priority list.
func (s *queuedSource) list(ctx context.Context, n int) ([]candidate, error) {
	prio := listPriorities[s.at.Seg]
	key := s.k.key(kHigh + s.at.Seg)
	entries, err := s.c.rdb.LRange(ctx, key, -(s.at.Off + int64(n)), -(s.at.Off + 1)).Result()
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		s.at = listCursor{State: s.at.State, Seg: s.at.Seg + 1}
		return nil, nil
	}
	var out []candidate
	for i := len(entries) - 1; i >= 0 && len(out) < n; i-- {
		e := entries[i]
		if len(e) == 0 || e[0] != '~' {
			s.at.Off, s.at.GOff = s.at.Off+1, 0
			out = append(out, candidate{id: e, after: s.at})
			continue
		}
		// A group's marker: its jobs, from the tail of its list.
		want := int64(n - len(out))
		glist := s.k.tag + "grp:" + string(prio) + ":" + e[1:]
		ids, err := s.c.rdb.LRange(ctx, glist, -(s.at.GOff + want), -(s.at.GOff + 1)).Result()
		if err != nil {
			return nil, err
		}
		for j := len(ids) - 1; j >= 0; j-- {
			s.at.GOff++
			out = append(out, candidate{id: ids[j], after: s.at})
		}
		if int64(len(ids)) < want {
			s.at.Off, s.at.GOff = s.at.Off+1, 0
			continue
		}
		return out, nil // the page is full inside the group
	}
	return out, nil
}

// parked reads up to n jobs of the parked sets, from the cursor's slot.
func (s *queuedSource) parked(ctx context.Context, n int) ([]candidate, error) {
	if s.slots == nil {
		slots, err := s.parkedSlots(ctx)
		if err != nil {
			return nil, err
		}
		i, _ := slices.BinarySearch(slots, s.at.Slot)
		s.slots = slots[i:]
	}
	if len(s.slots) == 0 {
		s.done = true
		return nil, nil
	}
	slot := s.slots[0]
	if s.zs == nil {
		at := listCursor{State: s.at.State}
		if slot == s.at.Slot {
			at.Score, at.ID = s.at.Score, s.at.ID
		}
		s.zs = &zsetSource{c: s.c, key: s.k.tag + "parked:" + slot, at: at}
	}
	got, done, err := s.zs.next(ctx, n)
	if err != nil {
		return nil, err
	}
	for i := range got {
		got[i].after.Seg, got[i].after.Slot = 3, slot
	}
	if done {
		s.slots, s.zs = s.slots[1:], nil
		if len(s.slots) == 0 {
			s.done = true
		}
	}
	return got, nil
}

// parkedSlots returns the slots that hold jobs back, sorted: those of
// each limit of the queue and of missing handlers. Their number is that
// of the slots holding jobs back, not of the jobs.
func (s *queuedSource) parkedSlots(ctx context.Context) ([]string, error) {
	names, err := s.c.rdb.HKeys(ctx, s.k.tag+"limits").Result()
	if err != nil {
		return nil, err
	}
	names = append(names, NoHandlerLimit)
	pipe := s.c.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.SMembers(ctx, s.k.tag+"pslots:"+name)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	slots := []string{}
	for _, cmd := range cmds {
		slots = append(slots, cmd.Val()...)
	}
	slices.Sort(slots)
	return slices.Compact(slots), nil
}
