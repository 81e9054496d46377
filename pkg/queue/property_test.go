package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"slices"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestPropertyEachJobInExactlyOnePlace drives random interleavings of every
// transition (submit, claim, complete, fail, dead, stale completes, cancel,
// promote, reclaim, release, retry, purge, prune) and checks after each step
// that every job is in exactly one place, and that the place matches its state.
func TestPropertyEachJobInExactlyOnePlace(t *testing.T) {
	e := newEnv(t)
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			queueName := fmt.Sprint("prop", seed)
			runProperty(t, e, queueName, rand.New(rand.NewPCG(seed, seed*7919)), 300)
		})
	}
}

// TestPropertyWithLimitsAndGroups is the same walk with flow control
// (docs/flow-control.md): jobs in fairness groups, a concurrency limit per
// payload key and a rate limit, both changed and deleted at random. Besides
// every job being in one place (a held-back job's place is its slot's
// parked set), it checks the group markers, that every limit counter
// matches the jobs that hold it, and that no held-back job is stranded.
func TestPropertyWithLimitsAndGroups(t *testing.T) {
	e := newEnv(t)
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			queueName := fmt.Sprint("flow", seed)
			r := rand.New(rand.NewPCG(seed, seed*104729))
			setFlowLimits(t, e, queueName, r)
			runPropertyFlow(t, e, queueName, r, 300, true)
		})
	}
}

// setFlowLimits sets (or changes) the property walk's two limits.
func setFlowLimits(t *testing.T, e *env, q string, r *rand.Rand) {
	t.Helper()
	key := []string{"k", "k", ""}[r.IntN(3)]
	if _, _, err := e.q.SetLimit(e.ctx, q, queue.Limit{Name: "c", Types: []string{"t"}, Key: key, Concurrency: 1 + r.IntN(3)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.q.SetLimit(e.ctx, q, queue.Limit{Name: "r", Types: []string{"r"}, Rate: &queue.Rate{Limit: 1 + r.IntN(3), PeriodSeconds: 1 + r.IntN(5)}}); err != nil {
		t.Fatal(err)
	}
}

type model struct {
	ids    []string
	gone   map[string]bool // purged or pruned: in no place, hash deleted
	leases []queue.Lease
}

func runProperty(t *testing.T, e *env, q string, r *rand.Rand, steps int) {
	runPropertyFlow(t, e, q, r, steps, false)
}

func runPropertyFlow(t *testing.T, e *env, q string, r *rand.Rand, steps int, flow bool) {
	m := &model{gone: map[string]bool{}}
	ctx := context.Background()
	pick := func() string { return m.ids[r.IntN(len(m.ids))] }
	for step := 0; step < steps; step++ {
		var op string
		switch n := r.IntN(100); {
		case flow && n >= 97:
			op = "limits"
			if r.IntN(3) == 0 {
				if err := e.q.DeleteLimit(ctx, q, []string{"c", "r"}[r.IntN(2)]); err != nil && err != queue.ErrLimitNotFound {
					t.Fatal(err)
				}
			} else {
				setFlowLimits(t, e, q, r)
			}
		case n < 25 || len(m.ids) == 0:
			op = "submit"
			count := 1 + r.IntN(4)
			jobs := make([]*job.Job, count)
			for i := range jobs {
				s := job.Spec{Queue: q, Type: "t", Priority: job.Priorities[r.IntN(3)],
					// Long timeouts: the lock's PX runs on Redis' real clock,
					// the lease on the test clock, which jumps by up to 150 s.
					MaxAttempts: ptr(1 + r.IntN(3)), TimeoutSeconds: ptr(100 + r.IntN(200)),
					Backoff: &job.Backoff{BaseSeconds: float64(r.IntN(3)), MaxSeconds: 5}}
				if r.IntN(3) == 0 {
					s.DelaySeconds = ptr(float64(r.IntN(4)))
				}
				if flow {
					s.Type = []string{"t", "t", "r", "u"}[r.IntN(4)]
					s.Group = []string{"", "g1", "g2"}[r.IntN(3)]
					s.Payload = []byte(fmt.Sprintf(`{"k":%d}`, r.IntN(3)))
				}
				if r.IntN(4) == 0 && i > 0 {
					s.DependsOn = []string{fmt.Sprint("#", r.IntN(i))}
				} else if r.IntN(6) == 0 && len(m.ids) > 0 {
					s.DependsOn = []string{pick()}
				}
				jobs[i] = e.build(t, s)
			}
			res, err := e.q.Submit(ctx, jobs)
			if err == nil {
				for _, s := range res {
					m.ids = append(m.ids, s.Job.ID)
				}
			}
		case n < 45:
			op = "claim"
			// Any storage format: a queue holds attempts of several while
			// a rollout opens the gate (format.go).
			queue.SetWriteFormat(e.q, 1+r.IntN(queue.WriteFormat))
			ls, err := e.q.Claim(ctx, q, 1+r.IntN(5), "w")
			if err != nil {
				t.Fatal(err)
			}
			m.leases = append(m.leases, ls...)
		case n < 65 && len(m.leases) > 0:
			op = "complete"
			i := r.IntN(len(m.leases))
			l := m.leases[i]
			m.leases = append(m.leases[:i], m.leases[i+1:]...)
			kind := []queue.OutcomeKind{queue.OutcomeSucceeded, queue.OutcomeFailed, queue.OutcomeDead}[r.IntN(3)]
			tok := l.Token
			if r.IntN(8) == 0 {
				tok = "1" + tok // a stale token
			}
			if _, err := e.q.Complete(ctx, q, []queue.Outcome{{ID: l.Job.ID, Token: tok, Kind: kind, Error: "e"}}); err != nil {
				t.Fatal(err)
			}
		case n < 72:
			op = "cancel"
			_, _ = e.q.Cancel(ctx, pick())
		case n < 80:
			op = "advance+promote+reclaim"
			e.clock.Advance(time.Duration(r.IntN(150_000)) * time.Millisecond)
			if _, _, err := e.q.Promote(ctx, q, 1+r.IntN(10)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.q.Reclaim(ctx, q, 1+r.IntN(10)); err != nil {
				t.Fatal(err)
			}
		case n < 85 && len(m.leases) > 0:
			op = "release"
			k := 1 + r.IntN(len(m.leases))
			if _, err := e.q.Release(ctx, q, m.leases[:k]); err != nil {
				t.Fatal(err)
			}
			m.leases = m.leases[k:]
		case n < 90:
			op = "retry"
			_, _ = e.q.Retry(ctx, pick())
		case n < 94:
			op = "purge"
			id := pick()
			if n, _ := e.q.PurgeDead(ctx, q, []string{id}); n == 1 {
				m.gone[id] = true
			}
		default:
			op = "prune"
			cutoff := e.clock.Now().Add(-time.Duration(r.IntN(2000)) * time.Millisecond)
			// Record what is finished before the cutoff so we know what vanishes.
			before, _ := e.q.Redis().ZRangeByScore(ctx, queue.QueueKey(q, "finished"),
				&redis.ZRangeBy{Min: "-inf", Max: fmt.Sprint(cutoff.UnixMilli())}).Result()
			if _, err := e.q.Prune(ctx, q, cutoff, 1000); err != nil {
				t.Fatal(err)
			}
			for _, id := range before {
				m.gone[id] = true
			}
		}
		checkPlaces(t, e, q, m, step, op)
		if flow {
			checkFlow(t, e, q, m, step, op)
		}
	}
}

// checkPlaces asserts the invariant over every structure of queue q.
func checkPlaces(t *testing.T, e *env, q string, m *model, step int, op string) {
	t.Helper()
	ctx := context.Background()
	rdb := e.q.Redis()
	places := map[string][]string{}
	// A cancelled job's id may stay in its list as a tombstone (claims drop
	// it): that is not a place, but it must be in a list exactly once.
	tombs, err := rdb.HGetAll(ctx, queue.QueueKey(q, "tomb")).Result()
	if err != nil {
		t.Fatal(err)
	}
	seenTomb := map[string]int{}
	for _, p := range []string{"high", "normal", "low"} {
		ids, err := rdb.LRange(ctx, queue.QueueKey(q, p), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		markers := map[string]int{}
		// A group's jobs wait in its own list, behind one marker "~<group>"
		// in the priority list while that list is not empty.
		groups, err := rdb.Keys(ctx, queue.QueueKey(q, "grp:"+p+":*")).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			gids, _ := rdb.LRange(ctx, g, 0, -1).Result()
			ids = append(ids, gids...)
			markers["~"+g[len(queue.QueueKey(q, "grp:"+p+":")):]] += 0
		}
		for _, id := range ids {
			if id[0] == '~' {
				markers[id]++
				continue
			}
			if _, ok := tombs[id]; ok {
				seenTomb[id]++
				continue
			}
			places[id] = append(places[id], p)
		}
		for mk, n := range markers {
			glen, _ := rdb.LLen(ctx, queue.QueueKey(q, "grp:"+p+":"+mk[1:])).Result()
			if (glen > 0 && n != 1) || (glen == 0 && n != 0) {
				t.Fatalf("step %d (%s): group %s of %s has %d jobs and %d markers", step, op, mk[1:], p, glen, n)
			}
		}
	}
	parked, err := rdb.Keys(ctx, queue.QueueKey(q, "parked:*")).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range parked {
		ids, _ := rdb.ZRange(ctx, k, 0, -1).Result()
		for _, id := range ids {
			places[id] = append(places[id], "parked")
		}
	}
	for id := range tombs {
		if seenTomb[id] != 1 {
			t.Fatalf("step %d (%s): tombstone %s is in %d lists", step, op, id, seenTomb[id])
		}
	}
	for _, z := range []string{"scheduled", "waiting", "leases", "dead", "finished"} {
		ids, err := rdb.ZRange(ctx, queue.QueueKey(q, z), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if !queue.IsPadding(id) {
				places[id] = append(places[id], z)
			}
		}
	}
	known := map[string]bool{}
	for _, id := range m.ids {
		known[id] = true
		ps := places[id]
		if m.gone[id] {
			if len(ps) != 0 {
				t.Fatalf("step %d (%s): deleted job %s still in %v", step, op, id, ps)
			}
			continue
		}
		if len(ps) != 1 {
			t.Fatalf("step %d (%s): job %s is in %d places: %v", step, op, id, len(ps), ps)
		}
		j, err := e.q.Get(ctx, id)
		if err != nil {
			t.Fatalf("step %d (%s): job %s: %v", step, op, id, err)
		}
		want := map[job.State]string{job.Scheduled: "scheduled", job.Waiting: "waiting", job.Active: "leases",
			job.Dead: "dead", job.Succeeded: "finished", job.Cancelled: "finished", job.Queued: string(j.Priority)}[j.State]
		if j.ThrottledBy != "" {
			want = "parked"
		}
		if ps[0] != want {
			t.Fatalf("step %d (%s): job %s in state %s is in %s, want %s", step, op, id, j.State, ps[0], want)
		}
		// The fencing token: in the active record while the job runs, and
		// also on the job hash when the claim wrote format 1.
		tok, _ := rdb.HGet(ctx, queue.JobKey(q, id), "token").Result()
		a, _ := rdb.HGet(ctx, queue.QueueKey(q, "active"), id).Result()
		r := parseActive(a)
		if (a != "") != (j.State == job.Active) || (a != "" && (r.Token == "" || r.Attempt != fmt.Sprint(j.Attempt) || r.Type != j.Type)) {
			t.Fatalf("step %d (%s): job %s in state %s (attempt %d) has active-lease entry %q", step, op, id, j.State, j.Attempt, a)
		}
		if wantTok := map[bool]string{true: r.Token}[a != "" && !r.Format2]; tok != wantTok {
			t.Fatalf("step %d (%s): job %s in state %s (active entry %q) has fencing token %q on its hash", step, op, id, j.State, a, tok)
		}
	}
	running := int64(0)
	for id := range places {
		if !known[id] {
			t.Fatalf("step %d (%s): unknown id %s in %v", step, op, id, places[id])
		}
		if places[id][0] == "leases" {
			running++
		}
	}
	// Every job a dependents set names is waiting (complete.lua settles
	// dependents only while the queue has a waiting job).
	sets, err := rdb.Keys(ctx, queue.QueueKey(q, "dependents:*")).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets {
		for _, d := range rdb.SMembers(ctx, set).Val() {
			if _, err := rdb.ZScore(ctx, queue.QueueKey(q, "waiting"), d).Result(); err != nil {
				t.Fatalf("step %d (%s): %s names %s, which is not waiting", step, op, set, d)
			}
		}
	}
	// The queue's count of active jobs leaves storage format 3's padding out.
	st, err := e.q.Stats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Active != running {
		t.Fatalf("step %d (%s): stats count %d active jobs, the lease set holds %d", step, op, st[0].Active, running)
	}
}

// activeSlots returns the concurrency slots of an active-lease entry.
func activeSlots(rec string) string { return parseActive(rec).Slots }

// parseActive reads an active-lease entry with the engine's reader (the
// zero record for none).
func parseActive(rec string) queue.ActiveRecord {
	r, _ := queue.ParseActive(rec)
	return r
}

// checkFlow asserts the counters of limits against the jobs: each slot's
// active count is the number of active jobs holding it, each limit's
// counters are the sums, a slot held back by a rate has a timer, and a
// slot held back by concurrency is not stranded (something holds it or a
// queued job will be claimed), and the queue's counts add up.
func checkFlow(t *testing.T, e *env, q string, m *model, step int, op string) {
	t.Helper()
	ctx := context.Background()
	rdb := e.q.Redis()
	recs, _ := rdb.HGetAll(ctx, queue.QueueKey(q, "active")).Result()
	use := map[string]int64{}
	activeBy := map[string]int64{}
	for id, rec := range recs {
		if queue.IsPadding(id) {
			continue
		}
		if s := activeSlots(rec); s != "" {
			for _, slot := range strings.Split(s, ",") {
				use[slot]++
				name, _, _ := strings.Cut(slot, "|")
				activeBy[name]++
			}
		}
	}
	got, _ := rdb.HGetAll(ctx, queue.QueueKey(q, "limuse")).Result()
	for slot, n := range use {
		if got[slot] != strconv.FormatInt(n, 10) {
			t.Fatalf("step %d (%s): slot %s counts %q active, %d jobs hold it", step, op, slot, got[slot], n)
		}
	}
	for slot, v := range got {
		if use[slot] == 0 {
			t.Fatalf("step %d (%s): slot %s counts %s active, no job holds it", step, op, slot, v)
		}
	}
	stat, _ := rdb.HGetAll(ctx, queue.QueueKey(q, "limstat")).Result()
	parkedBy := map[string]int64{}
	keys, _ := rdb.Keys(ctx, queue.QueueKey(q, "parked:*")).Result()
	timers, _ := rdb.ZRange(ctx, queue.QueueKey(q, "timers"), 0, -1).Result()
	var queuedFree int64 // queued jobs in lists, not held back
	counts, err := e.q.Counts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var queued, held int64
	pipe := rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for _, id := range m.ids {
		cmds = append(cmds, pipe.HMGet(ctx, queue.JobKey(q, id), "state", "parked"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		// A job with an active record runs, whatever its hash says (a
		// format-2 claim leaves it saying queued).
		if v := c.Val(); v[0] == "queued" && recs[m.ids[i]] == "" {
			queued++
			if v[1] != nil {
				held++
			} else {
				queuedFree++
			}
		}
	}
	for _, k := range keys {
		slot := k[len(queue.QueueKey(q, "parked:")):]
		n, _ := rdb.ZCard(ctx, k).Result()
		name, _, _ := strings.Cut(slot, "|")
		parkedBy[name] += n
		if n == 0 {
			continue
		}
		def, _ := rdb.HGet(ctx, queue.QueueKey(q, "limits"), name).Result()
		if strings.Contains(def, "\t0\t0") || def == "" { // concurrency only, or gone
			if use[slot] == 0 && queuedFree == 0 && len(m.leases) == 0 {
				t.Fatalf("step %d (%s): slot %s holds back %d jobs and nothing will free it", step, op, slot, n)
			}
		} else if name == "r" && !slices.Contains(timers, slot) && queuedFree == 0 {
			t.Fatalf("step %d (%s): rate slot %s holds back %d jobs without a timer", step, op, slot, n)
		}
	}
	for _, name := range []string{"c", "r"} {
		a, _ := strconv.ParseInt(stat["a:"+name], 10, 64)
		p, _ := strconv.ParseInt(stat["p:"+name], 10, 64)
		if a != activeBy[name] || p != parkedBy[name] {
			t.Fatalf("step %d (%s): limit %s counts %d active and %d held back, want %d and %d", step, op, name, a, p, activeBy[name], parkedBy[name])
		}
	}
	if counts.Throttled != held || counts.Queued["high"]+counts.Queued["normal"]+counts.Queued["low"] != queued-held {
		st, _ := rdb.HGetAll(ctx, queue.QueueKey(q, "stats")).Result()
		for _, p := range []string{"high", "normal", "low"} {
			l, _ := rdb.LRange(ctx, queue.QueueKey(q, p), 0, -1).Result()
			gk, _ := rdb.Keys(ctx, queue.QueueKey(q, "grp:"+p+":*")).Result()
			t.Logf("list %s: %v, group lists %v", p, l, gk)
			for _, g := range gk {
				gl, _ := rdb.LRange(ctx, g, 0, -1).Result()
				t.Logf("  %s: %v", g, gl)
			}
		}
		tb, _ := rdb.HGetAll(ctx, queue.QueueKey(q, "tomb")).Result()
		t.Logf("stats %v, tombstones %v", st, tb)
		t.Fatalf("step %d (%s): counts say %v queued and %d throttled, jobs say %d and %d", step, op, counts.Queued, counts.Throttled, queued-held, held)
	}
}
