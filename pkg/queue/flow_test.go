package queue_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Tests of flow control (docs/flow-control.md): limits and fairness groups.

func (e *env) setLimit(t *testing.T, q string, l queue.Limit) queue.LimitStatus {
	t.Helper()
	st, _, err := e.q.SetLimit(e.ctx, q, l)
	if err != nil {
		t.Fatalf("set limit: %v", err)
	}
	return st
}

func (e *env) stats(t *testing.T, q string) queue.QueueStats {
	t.Helper()
	st, err := e.q.Counts(e.ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func types(ls []queue.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Job.Type
	}
	return out
}

func wantThrottled(t *testing.T, e *env, q string, total int64, limit string, active, held int64) {
	t.Helper()
	st := e.stats(t, q)
	if st.Throttled != total {
		t.Fatalf("throttled %d, want %d", st.Throttled, total)
	}
	for _, l := range st.Limits {
		if l.Name == limit {
			if l.Active != active || l.Throttled != held {
				t.Fatalf("limit %s: active %d throttled %d, want %d and %d", limit, l.Active, l.Throttled, active, held)
			}
			return
		}
	}
	t.Fatalf("limit %s not in the queue's stats %+v", limit, st.Limits)
}

// TestConcurrencyLimitFreesOnEveryEnd holds a type to two running jobs
// and checks that every way an attempt ends — success, failure, cancel,
// lease expiry, shutdown release — gives its slot back and lets exactly
// one held-back job go, while other types are never held.
func TestConcurrencyLimitFreesOnEveryEnd(t *testing.T) {
	e := newEnv(t)
	e.setLimit(t, "default", queue.Limit{Name: "two-a", Types: []string{"a"}, Concurrency: 2})
	var specs []job.Spec
	for range 7 {
		specs = append(specs, job.Spec{Type: "a", Backoff: &job.Backoff{}, MaxAttempts: ptr(5)})
	}
	specs = append(specs, job.Spec{Type: "b"}, job.Spec{Type: "b"})
	e.submit(t, specs...)

	ls := e.claim(t, "default", 10)
	if got := strings.Join(types(ls), ","); got != "a,a,b,b" {
		t.Fatalf("claimed %s, want a,a,b,b (two a, then the b behind the held-back a)", got)
	}
	wantThrottled(t, e, "default", 5, "two-a", 2, 5)
	e.complete(t, "default", queue.Outcome{ID: ls[2].Job.ID, Token: ls[2].Token, Kind: queue.OutcomeSucceeded},
		queue.Outcome{ID: ls[3].Job.ID, Token: ls[3].Token, Kind: queue.OutcomeSucceeded})
	if st := e.stats(t, "default"); st.Queued["normal"] != 0 {
		t.Fatalf("queued %v: held-back jobs are counted as throttled, not queued", st.Queued)
	}
	parked, err := e.q.Redis().ZRange(e.ctx, queue.QueueKey("default", "parked:two-a|"), 0, 0).Result()
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked set: %v %v", parked, err)
	}
	held := parked[0]
	if j := e.get(t, held); j.State != job.Queued || j.ThrottledBy != "two-a" {
		t.Fatalf("held-back job: state %s throttled_by %q, want queued and two-a", j.State, j.ThrottledBy)
	}
	if more := e.claim(t, "default", 10); len(more) != 0 {
		t.Fatalf("claimed %v while both slots are taken", types(more))
	}

	a1, a2 := ls[0], ls[1]
	// Success frees a slot: one job goes, the other stays.
	e.complete(t, "default", queue.Outcome{ID: a1.Job.ID, Token: a1.Token, Kind: queue.OutcomeSucceeded})
	a3 := e.claim(t, "default", 10)
	if len(a3) != 1 || a3[0].Job.ID != held {
		t.Fatalf("after a success claimed %v, want the oldest held-back job %s", a3, held)
	}
	// Failure (retried at once: no backoff) frees a slot; the retry queues
	// behind the held-back jobs and is held back itself.
	e.complete(t, "default", queue.Outcome{ID: a2.Job.ID, Token: a2.Token, Kind: queue.OutcomeFailed, Error: "x"})
	a4 := e.claim(t, "default", 10)
	if len(a4) != 1 || a4[0].Job.ID == a2.Job.ID {
		t.Fatalf("after a failure claimed %v, want one held-back job", a4)
	}
	// Cancel of an active job frees its slot.
	if _, err := e.q.Cancel(e.ctx, a3[0].Job.ID); err != nil {
		t.Fatal(err)
	}
	a5 := e.claim(t, "default", 10)
	if len(a5) != 1 {
		t.Fatalf("after a cancel claimed %d jobs, want 1", len(a5))
	}
	// Lease expiry (a dead worker) frees its slot: a4's lease runs out
	// while a5's holder renews it (within a5's timeout: a renewal past it
	// is refused).
	e.clock.Advance(12 * time.Second)
	if _, err := e.q.Extend(e.ctx, "default", a5); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.q.Reclaim(e.ctx, "default", 100); err != nil || n != 1 {
		t.Fatalf("reclaim: %d %v, want a4's lease expired", n, err)
	}
	a6 := e.claim(t, "default", 10)
	if len(a6) != 1 {
		t.Fatalf("after a lease expiry claimed %d jobs, want 1", len(a6))
	}
	// A shutdown release gives the slot back and the job goes first again.
	if n, err := e.q.Release(e.ctx, "default", a6); err != nil || n != 1 {
		t.Fatalf("release: %d %v", n, err)
	}
	a7 := e.claim(t, "default", 10)
	if len(a7) != 1 || a7[0].Job.ID != a6[0].Job.ID {
		t.Fatalf("after a release claimed %v, want the released job %s again", a7, a6[0].Job.ID)
	}
	// Cancel of a held-back job takes it out of the parked set.
	parked, _ = e.q.Redis().ZRange(e.ctx, queue.QueueKey("default", "parked:two-a|"), 0, -1).Result()
	before := e.stats(t, "default").Throttled
	if _, err := e.q.Cancel(e.ctx, parked[0]); err != nil {
		t.Fatal(err)
	}
	if after := e.stats(t, "default").Throttled; after != before-1 {
		t.Fatalf("throttled %d after cancelling a held-back job, want %d", after, before-1)
	}
	if j := e.get(t, parked[0]); j.State != job.Cancelled || j.ThrottledBy != "" {
		t.Fatalf("cancelled held-back job: %s %q", j.State, j.ThrottledBy)
	}
	// Drain everything: never more than two a at once, every a runs.
	done := map[string]bool{}
	active := map[string]queue.Lease{a5[0].Job.ID: a5[0], a7[0].Job.ID: a7[0]}
	for round := 0; len(active) > 0; round++ {
		if round > 50 {
			t.Fatal("did not drain")
		}
		var out []queue.Outcome
		for id, l := range active {
			out = append(out, queue.Outcome{ID: id, Token: l.Token, Kind: queue.OutcomeSucceeded})
			done[id] = true
			delete(active, id)
		}
		e.complete(t, "default", out...)
		for _, l := range e.claim(t, "default", 10) {
			active[l.Job.ID] = l
		}
		if len(active) > 2 {
			t.Fatalf("%d a active at once, limit 2", len(active))
		}
	}
	wantThrottled(t, e, "default", 0, "two-a", 0, 0)
}

// TestKeyedConcurrencyLimit gives every customer of the payload its own
// slot: one customer's backlog does not hold another's jobs.
func TestKeyedConcurrencyLimit(t *testing.T) {
	e := newEnv(t)
	e.setLimit(t, "default", queue.Limit{Name: "per-customer", Key: "customer", Concurrency: 1})
	var specs []job.Spec
	for _, c := range []string{"acme", "acme", "acme", "globex", `"odd value, with spaces"`, "42"} {
		p := json.RawMessage(`{"customer":"` + c + `"}`)
		if c == "42" {
			p = json.RawMessage(`{"customer":42}`)
		}
		if strings.HasPrefix(c, `"`) {
			p = json.RawMessage(`{"customer":` + c + `}`)
		}
		specs = append(specs, job.Spec{Type: "t", Payload: p})
	}
	specs = append(specs, job.Spec{Type: "t"}, job.Spec{Type: "t", Payload: json.RawMessage(`[1]`)}) // no key: one shared slot
	e.submit(t, specs...)
	ls := e.claim(t, "default", 20)
	var got []string
	for _, l := range ls {
		got = append(got, string(l.Job.Payload))
	}
	want := []string{`{"customer":"acme"}`, `{"customer":"globex"}`, `{"customer":"odd value, with spaces"}`, `{"customer":42}`, ""}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %q, want one job per customer %q", got, want)
	}
	wantThrottled(t, e, "default", 3, "per-customer", 5, 3)
}

// TestRateLimitSlidingWindow starts at most three jobs in any ten seconds:
// the held-back jobs go when the poller's promote pass finds the window
// has room, which it reports as its next due time.
func TestRateLimitSlidingWindow(t *testing.T) {
	e := newEnv(t)
	e.setLimit(t, "default", queue.Limit{Name: "r", Rate: &queue.Rate{Limit: 3, PeriodSeconds: 10}})
	specs := make([]job.Spec, 8)
	for i := range specs {
		specs[i] = job.Spec{Type: "t"}
	}
	e.submit(t, specs...)
	start := e.clock.Now()
	var starts []time.Time
	claim := func() {
		for range e.claim(t, "default", 10) {
			starts = append(starts, e.clock.Now())
		}
	}
	claim()
	if len(starts) != 3 {
		t.Fatalf("started %d, want 3", len(starts))
	}
	_, next, err := e.q.Promote(e.ctx, "default", 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(10 * time.Second); !next.Equal(want) {
		t.Fatalf("promote's next due %v, want the window's end %v", next, want)
	}
	for _, step := range []time.Duration{4 * time.Second, 6 * time.Second, 3 * time.Second, 7 * time.Second} {
		e.clock.Advance(step)
		if _, _, err := e.q.Promote(e.ctx, "default", 100); err != nil {
			t.Fatal(err)
		}
		claim()
	}
	if len(starts) != 8 {
		t.Fatalf("started %d of 8 after 20 s", len(starts))
	}
	for i := range starts {
		in := 0
		for _, s := range starts[i:] {
			if s.Sub(starts[i]) < 10*time.Second {
				in++
			}
		}
		if in > 3 {
			t.Fatalf("%d starts within 10 s from %v: %v", in, starts[i], starts)
		}
	}
}

// TestLimitChangesApplyAtOnce raises a limit (held-back jobs go at once),
// then deletes it (all go).
func TestLimitChangesApplyAtOnce(t *testing.T) {
	e := newEnv(t)
	e.setLimit(t, "default", queue.Limit{Name: "l", Types: []string{"t"}, Concurrency: 1})
	specs := make([]job.Spec, 6)
	for i := range specs {
		specs[i] = job.Spec{Type: "t"}
	}
	e.submit(t, specs...)
	if n := len(e.claim(t, "default", 10)); n != 1 {
		t.Fatalf("claimed %d, want 1", n)
	}
	st := e.setLimit(t, "default", queue.Limit{Name: "l", Types: []string{"t"}, Concurrency: 3})
	if st.Active != 1 || st.Throttled != 3 {
		t.Fatalf("after the raise: %+v, want 1 active and 3 held back (2 let go)", st)
	}
	if n := len(e.claim(t, "default", 10)); n != 2 {
		t.Fatalf("claimed %d after the raise, want 2", n)
	}
	if err := e.q.DeleteLimit(e.ctx, "default", "l"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.claim(t, "default", 10)); n != 3 {
		t.Fatalf("claimed %d after the delete, want 3", n)
	}
	if err := e.q.DeleteLimit(e.ctx, "default", "l"); err != queue.ErrLimitNotFound {
		t.Fatalf("second delete: %v, want ErrLimitNotFound", err)
	}
	if st := e.stats(t, "default"); st.Throttled != 0 || len(st.Limits) != 0 {
		t.Fatalf("stats after delete: %+v", st)
	}
}

// TestHeldBackJobKeepsItsPlace: a job let go after waiting for a slot is
// the next one claimed, before jobs that came after it, and a held-back
// high job goes before a held-back normal one.
func TestHeldBackJobKeepsItsPlace(t *testing.T) {
	e := newEnv(t)
	e.setLimit(t, "default", queue.Limit{Name: "l", Types: []string{"a"}, Concurrency: 1})
	first := e.submit(t, job.Spec{Type: "a"})[0]
	if ls := e.claim(t, "default", 1); len(ls) != 1 || ls[0].Job.ID != first.ID {
		t.Fatal("first a not claimed")
	}
	normal := e.submit(t, job.Spec{Type: "a"})[0]
	high := e.submit(t, job.Spec{Type: "a", Priority: job.High})[0]
	later := e.submit(t, job.Spec{Type: "b"}, job.Spec{Type: "b"})
	ls := e.claim(t, "default", 1) // parks both a, takes a b
	if len(ls) != 1 || ls[0].Job.ID != later[0].ID {
		t.Fatalf("claimed %v, want the first b", ls)
	}
	active, _ := e.q.Redis().HGet(e.ctx, queue.QueueKey("default", "active"), first.ID).Result()
	e.complete(t, "default", queue.Outcome{ID: first.ID, Token: strings.Fields(active)[0], Kind: queue.OutcomeSucceeded})
	ls = e.claim(t, "default", 1)
	if len(ls) != 1 || ls[0].Job.ID != high.ID {
		t.Fatalf("claimed %v, want the held-back high job %s first", ls, high.ID)
	}
	e.complete(t, "default", queue.Outcome{ID: high.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded})
	ls = e.claim(t, "default", 1)
	if len(ls) != 1 || ls[0].Job.ID != normal.ID {
		t.Fatalf("claimed %v, want the held-back normal job %s before the later b", ls, normal.ID)
	}
}

// TestGroupsTakeTurns: one group's backlog of 200 does not hold back
// another group's 3 jobs, submitted after it; ungrouped jobs take their
// turn too; queue depths stay exact; strict priority holds across groups.
func TestGroupsTakeTurns(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for range 200 {
		specs = append(specs, job.Spec{Type: "t", Group: "big"})
	}
	e.submit(t, specs...)
	small := e.submit(t, job.Spec{Type: "t", Group: "small"}, job.Spec{Type: "t", Group: "small"}, job.Spec{Type: "t", Group: "small"})
	plain := e.submit(t, job.Spec{Type: "t"})[0]
	if q := e.stats(t, "default").Queued["normal"]; q != 204 {
		t.Fatalf("queued %d, want 204", q)
	}
	// Cancel one small job while queued: it must not be claimed, nor counted.
	if _, err := e.q.Cancel(e.ctx, small[1].ID); err != nil {
		t.Fatal(err)
	}
	if q := e.stats(t, "default").Queued["normal"]; q != 203 {
		t.Fatalf("queued %d after a cancel, want 203", q)
	}
	pos := map[string]int{}
	for i := 0; i < 10; i++ {
		ls := e.claim(t, "default", 1)
		if len(ls) != 1 {
			t.Fatalf("claim %d: %d jobs", i, len(ls))
		}
		pos[ls[0].Job.ID] = i
	}
	for _, id := range []string{small[0].ID, small[2].ID, plain.ID} {
		p, ok := pos[id]
		if !ok || p > 6 {
			t.Fatalf("job %s claimed at %d (ok %v), want within the first 7 claims: groups take turns", id, p, ok)
		}
	}
	if _, ok := pos[small[1].ID]; ok {
		t.Fatal("the cancelled grouped job was claimed")
	}
	if q := e.stats(t, "default").Queued["normal"]; q != 193 {
		t.Fatalf("queued %d, want 193", q)
	}
	// A high grouped job goes before every normal job.
	h := e.submit(t, job.Spec{Type: "t", Group: "big", Priority: job.High})[0]
	if ls := e.claim(t, "default", 1); len(ls) != 1 || ls[0].Job.ID != h.ID {
		t.Fatal("the high grouped job did not go first")
	}
	// The rest drain in batches, exactly once each.
	seen := map[string]bool{}
	for {
		ls := e.claim(t, "default", 50)
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			if seen[l.Job.ID] || pos[l.Job.ID] > 0 {
				t.Fatalf("job %s claimed twice", l.Job.ID)
			}
			seen[l.Job.ID] = true
		}
	}
	if len(seen) != 193 {
		t.Fatalf("drained %d, want 193", len(seen))
	}
	st := e.stats(t, "default")
	if st.Queued["normal"] != 0 || st.Queued["high"] != 0 {
		t.Fatalf("queued %v after the drain", st.Queued)
	}
	if n, _ := e.q.Redis().LLen(e.ctx, queue.QueueKey("default", "normal")).Result(); n != 0 {
		t.Fatalf("%d markers left in the normal list", n)
	}
}

// TestGroupedJobWithTypesFilter: a claim for some types parks a group's
// next job of another type and goes on to the group's job after it; a
// claim that handles the type takes the parked one first.
func TestGroupedJobWithTypesFilter(t *testing.T) {
	e := newEnv(t)
	jobs := e.submit(t, job.Spec{Type: "x", Group: "g"}, job.Spec{Type: "y", Group: "g"})
	ls, err := e.q.Claim(e.ctx, "default", 5, "w", "y")
	if err != nil || len(ls) != 1 || ls[0].Job.ID != jobs[1].ID {
		t.Fatalf("claim of y: %v %v; want the group's y behind its x", ls, err)
	}
	ls, err = e.q.Claim(e.ctx, "default", 5, "w", "x", "y")
	if err != nil || len(ls) != 1 || ls[0].Job.ID != jobs[0].ID || ls[0].Job.Group != "g" {
		t.Fatalf("claim of x,y: %v %v", ls, err)
	}
}

// TestMixedBatchKeepsItsOrder: in one submitted batch, and in one promote
// of jobs due together, grouped and ungrouped jobs start in the order they
// came (ungrouped ids are pushed with one LPUSH per list, after the
// markers of grouped jobs before them and before those after).
func TestMixedBatchKeepsItsOrder(t *testing.T) {
	e := newEnv(t)
	check := func(what string, jobs []*job.Job) {
		t.Helper()
		ls := e.claim(t, "default", 10)
		if len(ls) != len(jobs) {
			t.Fatalf("%s: claimed %d of %d", what, len(ls), len(jobs))
		}
		for i, l := range ls {
			if l.Job.ID != jobs[i].ID {
				t.Fatalf("%s: claim %d is %s (group %q); want %s (group %q)", what, i, l.Job.ID, l.Job.Group, jobs[i].ID, jobs[i].Group)
			}
		}
	}
	check("submitted", e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t", Group: "g"}, job.Spec{Type: "t"}, job.Spec{Type: "t", Group: "h"}))
	due := e.clock.Now().Add(time.Minute)
	later := e.submit(t, job.Spec{Type: "t", RunAt: &due}, job.Spec{Type: "t", Group: "g", RunAt: &due}, job.Spec{Type: "t", RunAt: &due})
	e.clock.Advance(2 * time.Minute)
	if n, _, err := e.q.Promote(e.ctx, "default", 100); err != nil || n != 3 {
		t.Fatalf("promote: %d, %v", n, err)
	}
	check("promoted", later)
}

// TestLimitsAtTheirMaximum runs a concurrency limit of 10000 and a rate of
// 10000 per second, the most Limit.Validate accepts.
func TestLimitsAtTheirMaximum(t *testing.T) {
	e := newEnv(t)
	n := queue.MaxLimitConcurrency
	e.setLimit(t, "c", queue.Limit{Name: "max", Concurrency: n})
	e.setLimit(t, "r", queue.Limit{Name: "max", Rate: &queue.Rate{Limit: queue.MaxRateLimit, PeriodSeconds: 1}})
	for _, q := range []string{"c", "r"} {
		for b := 0; b <= n/1000; b++ {
			size := 1000
			if b == n/1000 {
				size = 1
			}
			specs := make([]job.Spec, size)
			for i := range specs {
				specs[i] = job.Spec{Queue: q, Type: "t"}
			}
			e.submit(t, specs...)
		}
		got := len(e.claim(t, q, n+1))
		if got != n {
			t.Fatalf("queue %s: claimed %d of %d, want %d", q, got, n+1, n)
		}
		if st := e.stats(t, q); st.Throttled != 1 || st.Limits[0].Throttled != 1 {
			t.Fatalf("queue %s: %+v", q, st)
		}
	}
	e.clock.Advance(time.Second)
	if _, _, err := e.q.Promote(e.ctx, "r", 100); err != nil {
		t.Fatal(err)
	}
	if got := len(e.claim(t, "r", 10)); got != 1 {
		t.Fatalf("rate: claimed %d after the window, want 1", got)
	}
}

func TestLimitValidation(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		l     queue.Limit
		field string
	}{
		{queue.Limit{Name: "a|b", Concurrency: 1}, "name"},
		{queue.Limit{Name: "", Concurrency: 1}, "name"},
		{queue.Limit{Name: "x"}, "concurrency"},
		{queue.Limit{Name: "x", Concurrency: queue.MaxLimitConcurrency + 1}, "concurrency"},
		{queue.Limit{Name: "x", Concurrency: -1}, "concurrency"},
		{queue.Limit{Name: "x", Rate: &queue.Rate{Limit: 0, PeriodSeconds: 1}}, "rate.limit"},
		{queue.Limit{Name: "x", Rate: &queue.Rate{Limit: queue.MaxRateLimit + 1, PeriodSeconds: 1}}, "rate.limit"},
		{queue.Limit{Name: "x", Rate: &queue.Rate{Limit: 1, PeriodSeconds: 0}}, "rate.period_seconds"},
		{queue.Limit{Name: "x", Rate: &queue.Rate{Limit: 1, PeriodSeconds: queue.MaxRatePeriod + 1}}, "rate.period_seconds"},
		{queue.Limit{Name: "x", Concurrency: 1, Types: []string{"ok", "bad type"}}, "types[1]"},
		{queue.Limit{Name: "x", Concurrency: 1, Types: []string{"t", "t"}}, "types[1]"},
		{queue.Limit{Name: "x", Concurrency: 1, Key: "a.b"}, "key"},
	} {
		_, _, err := e.q.SetLimit(e.ctx, "v", c.l)
		fe, ok := err.(*job.FieldError)
		if !ok || fe.Field != c.field {
			t.Errorf("%+v: %v, want a field error on %s", c.l, err, c.field)
		}
	}
	if n, _ := e.q.Redis().Exists(e.ctx, queue.QueueKey("v", "limits")).Result(); n != 0 {
		t.Fatal("a refused limit was stored")
	}
	for i := range queue.MaxLimitsPerQueue {
		e.setLimit(t, "v", queue.Limit{Name: fmt.Sprintf("l%d", i), Concurrency: 1})
	}
	if _, _, err := e.q.SetLimit(e.ctx, "v", queue.Limit{Name: "one-more", Concurrency: 1}); err != queue.ErrTooManyLimits {
		t.Fatalf("limit %d: %v, want ErrTooManyLimits", queue.MaxLimitsPerQueue+1, err)
	}
	if _, _, err := e.q.SetLimit(e.ctx, "v", queue.Limit{Name: "l0", Concurrency: 2}); err != nil {
		t.Fatalf("replacing a limit of a full queue: %v", err)
	}
}
