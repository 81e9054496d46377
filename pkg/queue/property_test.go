package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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

type model struct {
	ids    []string
	gone   map[string]bool // purged or pruned: in no place, hash deleted
	leases []queue.Lease
}

func runProperty(t *testing.T, e *env, q string, r *rand.Rand, steps int) {
	m := &model{gone: map[string]bool{}}
	ctx := context.Background()
	pick := func() string { return m.ids[r.IntN(len(m.ids))] }
	for step := 0; step < steps; step++ {
		var op string
		switch n := r.IntN(100); {
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
		for _, id := range ids {
			if _, ok := tombs[id]; ok {
				seenTomb[id]++
				continue
			}
			places[id] = append(places[id], p)
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
			places[id] = append(places[id], z)
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
		if ps[0] != want {
			t.Fatalf("step %d (%s): job %s in state %s is in %s, want %s", step, op, id, j.State, ps[0], want)
		}
		if tok, _ := rdb.HGet(ctx, queue.JobKey(q, id), "token").Result(); (tok != "") != (j.State == job.Active) {
			t.Fatalf("step %d (%s): job %s in state %s has fencing token %q", step, op, id, j.State, tok)
		} else if a, _ := rdb.HGet(ctx, queue.QueueKey(q, "active"), id).Result(); (a != "") != (j.State == job.Active) ||
			(a != "" && a != fmt.Sprintf("%s %d %s", tok, j.Attempt, j.Type)) {
			t.Fatalf("step %d (%s): job %s in state %s (token %q) has active-lease entry %q", step, op, id, j.State, tok, a)
		}
	}
	for id := range places {
		if !known[id] {
			t.Fatalf("step %d (%s): unknown id %s in %v", step, op, id, places[id])
		}
	}
}
