package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// maxConcurrency is SUNDIAL_CONCURRENCY's upper bound: a worker may claim
// and complete this many jobs in one script call.
const maxConcurrency = 10_000

func (e *env) buildN(t *testing.T, n int, s job.Spec) []*job.Job {
	t.Helper()
	jobs := make([]*job.Job, n)
	for i := range jobs {
		jobs[i] = e.build(t, s)
	}
	return jobs
}

func (e *env) count(t *testing.T, key string) int64 {
	t.Helper()
	typ, err := e.q.Redis().Type(e.ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	switch typ {
	case "list":
		n, err = e.q.Redis().LLen(e.ctx, key).Result()
	case "zset": // a lease set's padding entry is no lease
		n, err = e.q.Redis().ZCount(e.ctx, key, "-inf", "("+queue.PaddingScore).Result()
	case "none":
	default:
		t.Fatalf("%s is a %s", key, typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Every script must be correct for the largest batch the configuration
// allows: Lua's unpack is bounded by its C stack (about 8000 values), so a
// script that unpacks a whole batch fails after some of its writes.
func TestScriptsAtTheLargestBatch(t *testing.T) {
	e := newEnv(t)
	const n = maxConcurrency
	if _, err := e.q.Submit(e.ctx, e.buildN(t, n, job.Spec{Type: "t", MaxAttempts: ptr(2), Backoff: &job.Backoff{}})); err != nil {
		t.Fatalf("submit %d: %v", n, err)
	}
	if got := e.count(t, queue.QueueKey("default", "normal")); got != n {
		t.Fatalf("normal list holds %d, want %d", got, n)
	}
	leases := e.claim(t, "default", n)
	if len(leases) != n {
		t.Fatalf("claimed %d, want %d", len(leases), n)
	}
	if got := e.count(t, queue.QueueKey("default", "leases")); got != n {
		t.Fatalf("lease set holds %d, want %d: claimed jobs without a lease are stranded", got, n)
	}
	// Half the leases expire and come back in one reclaim.
	half := leases[:n/2]
	held, err := e.q.Extend(e.ctx, "default", leases[n/2:])
	if err != nil {
		t.Fatalf("extend %d: %v", n/2, err)
	}
	for i, ok := range held {
		if !ok {
			t.Fatalf("extend: lease %d not held", i)
		}
	}
	e.clock.Advance(8 * time.Second)
	if _, err := e.q.Extend(e.ctx, "default", leases[n/2:]); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(4 * time.Second) // the unrenewed half expired (11 s), the renewed half did not
	if got, _, err := e.q.Reclaim(e.ctx, "default", n); err != nil || got != n/2 {
		t.Fatalf("reclaim = %d, %v; want %d", got, err, n/2)
	}
	for _, l := range half[:3] {
		wantState(t, e.get(t, l.Job.ID), job.Queued)
	}
	// The renewed half completes in one call.
	outs := make([]queue.Outcome, 0, n/2)
	for _, l := range leases[n/2:] {
		outs = append(outs, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, Result: json.RawMessage(`1`)})
	}
	st := e.complete(t, "default", outs...)
	for i, s := range st {
		if s != queue.StatusSucceeded {
			t.Fatalf("outcome %d: %s", i, s)
		}
	}
	if got := e.count(t, queue.QueueKey("default", "leases")); got != 0 {
		t.Fatalf("lease set holds %d after completion", got)
	}
	// The other half runs again and completes; then all of them are pruned at once.
	leases = e.claim(t, "default", n)
	outs = outs[:0]
	for _, l := range leases {
		outs = append(outs, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded})
	}
	e.complete(t, "default", outs...)
	e.clock.Advance(time.Minute)
	if got, err := e.q.Prune(e.ctx, "default", e.clock.Now(), n); err != nil || got != n {
		t.Fatalf("prune = %d, %v; want %d", got, err, n)
	}

	// Promote: n jobs due at once move in one call.
	if _, err := e.q.Submit(e.ctx, e.buildN(t, n, job.Spec{Type: "t", DelaySeconds: ptr(1.0)})); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	if got, _, err := e.q.Promote(e.ctx, "default", n); err != nil || got != n {
		t.Fatalf("promote = %d, %v; want %d", got, err, n)
	}
	if got := e.count(t, queue.QueueKey("default", "scheduled")); got != 0 {
		t.Fatalf("scheduled set holds %d after promote", got)
	}
}

// Reclaim acts only on a job that is still active under its lease: a
// leftover lease entry of a finished job must never run it again.
func TestReclaimNeverRerunsAFinishedJob(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t"})[0]
	l := e.claim(t, "default", 1)[0]
	e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l.Token, Kind: queue.OutcomeSucceeded})
	// A stray entry, as a crash of an older version or an operator could leave.
	e.q.Redis().ZAdd(e.ctx, queue.QueueKey("default", "leases"), redis.Z{Score: 1, Member: j.ID})
	e.clock.Advance(time.Hour)
	if n, _, err := e.q.Reclaim(e.ctx, "default", 10); err != nil || n != 0 {
		t.Fatalf("reclaim = %d, %v; want 0", n, err)
	}
	wantState(t, e.get(t, j.ID), job.Succeeded)
	if got := e.count(t, queue.QueueKey("default", "leases")); got != 0 {
		t.Fatal("stray lease entry left behind")
	}
	for _, ev := range e.events(t, "default") {
		if ev.Event == job.EventLeaseExpired {
			t.Fatal("lease_expired recorded for a finished job")
		}
	}
}

func TestExtendKeepsALeaseUntilItIsLost(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t", TimeoutSeconds: ptr(3600), Backoff: &job.Backoff{}})[0]
	l := e.claim(t, "default", 1)
	for i := 0; i < 5; i++ { // 5 × 8 s: far past the 11 s lease, renewed each time
		e.clock.Advance(8 * time.Second)
		held, err := e.q.Extend(e.ctx, "default", l)
		if err != nil || !held[0] {
			t.Fatalf("extend %d = %v, %v", i, held, err)
		}
		if n, _, _ := e.q.Reclaim(e.ctx, "default", 10); n != 0 {
			t.Fatalf("reclaimed a renewed lease after %d renewals", i+1)
		}
	}
	// A stale token renews nothing.
	stale := []queue.Lease{{Job: l[0].Job, Token: "1" + l[0].Token}}
	if held, _ := e.q.Extend(e.ctx, "default", stale); held[0] {
		t.Fatal("a stale token renewed the lease")
	}
	// Unrenewed, the lease expires: a job with a one-hour timeout comes back
	// after the lease TTL, not after its timeout.
	e.clock.Advance(12 * time.Second)
	if n, _, _ := e.q.Reclaim(e.ctx, "default", 10); n != 1 {
		t.Fatalf("reclaimed %d, want 1", n)
	}
	wantState(t, e.get(t, j.ID), job.Queued)
	if held, _ := e.q.Extend(e.ctx, "default", l); held[0] {
		t.Fatal("the old holder renewed a reclaimed lease")
	}
}

// Lease expiry is judged by Redis' clock: callers whose clocks are an hour
// apart cannot expire each other's leases.
func TestLeaseExpiryUsesRedisClock(t *testing.T) {
	e := newEnv(t)
	rdb := e.q.Redis()
	behind := queue.New(rdb, queue.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }, LeaseTTL: time.Second})
	ahead := queue.New(rdb, queue.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }, LeaseTTL: time.Second})
	if _, err := behind.Submit(e.ctx, e.buildN(t, 1, job.Spec{Type: "t", Queue: "skew"})); err != nil {
		t.Fatal(err)
	}
	ls, err := behind.Claim(e.ctx, "skew", 1, "w")
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim = %v, %v", ls, err)
	}
	if n, _, _ := ahead.Reclaim(e.ctx, "skew", 10); n != 0 {
		t.Fatal("a poller whose clock is an hour ahead reclaimed a live lease")
	}
	// The lease does expire after its TTL on Redis' clock.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _, err := ahead.Reclaim(e.ctx, "skew", 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cancelling a queued job is O(1): its id stays in the list as a tombstone
// that claims drop; depth and retry account for it.
func TestCancelQueuedLeavesATombstone(t *testing.T) {
	e := newEnv(t)
	js := e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t"}, job.Spec{Type: "t"}, job.Spec{Type: "t"})
	for _, j := range js[1:3] {
		if _, err := e.q.Cancel(e.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.q.Stats(e.ctx, "default")
	if err != nil || st[0].Queued["normal"] != 2 {
		t.Fatalf("queued after cancel = %v, %v; want 2", st, err)
	}
	// A cancelled job retried before a claim passed its tombstone is
	// served from its old place, once.
	if _, err := e.q.Retry(e.ctx, js[2].ID); err != nil {
		t.Fatal(err)
	}
	ls := e.claim(t, "default", 10)
	var got []string
	for _, l := range ls {
		got = append(got, l.Job.ID)
	}
	want := []string{js[0].ID, js[2].ID, js[3].ID}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	wantState(t, e.get(t, js[1].ID), job.Cancelled)
	st, _ = e.q.Stats(e.ctx, "default")
	if st[0].Queued["normal"] != 0 {
		t.Fatalf("queued after claims = %d", st[0].Queued["normal"])
	}
	if n, _ := e.q.Redis().HLen(e.ctx, queue.QueueKey("default", "tomb")).Result(); n != 0 {
		t.Fatalf("%d tombstones left", n)
	}
}

func TestThroughputCountsPerMinute(t *testing.T) {
	e := newEnv(t)
	e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t"}, job.Spec{Type: "t", MaxAttempts: ptr(1)})
	ls := e.claim(t, "default", 3)
	e.complete(t, "default",
		queue.Outcome{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded},
		queue.Outcome{ID: ls[1].Job.ID, Token: ls[1].Token, Kind: queue.OutcomeSucceeded},
		queue.Outcome{ID: ls[2].Job.ID, Token: ls[2].Token, Kind: queue.OutcomeFailed, Error: "x"})
	e.clock.Advance(2 * time.Minute)
	tp, err := e.q.Throughput(e.ctx, "default", e.clock.Now().Add(-5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(tp) != 6 {
		t.Fatalf("%d minutes, want 6", len(tp))
	}
	m := tp[3] // two minutes before now
	if m.Succeeded != 2 || m.Failed != 1 || m.Dead != 1 || !m.Minute.Equal(e.clock.Now().Add(-2*time.Minute).Truncate(time.Minute)) {
		t.Fatalf("minute = %+v", m)
	}
	if tp[5].Succeeded != 0 {
		t.Fatalf("current minute = %+v", tp[5])
	}
	// Past the window the counts are trimmed.
	e.clock.Advance(queue.ThroughputWindow)
	if n, err := e.q.TrimThroughput(e.ctx, "default"); err != nil || n != 3 {
		t.Fatalf("trim = %d, %v; want 3 fields", n, err)
	}
}

// Dead jobs are bounded by age and count; a floor (history not yet
// written) protects the newest.
func TestPruneDeadByAgeCountAndFloor(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := 0; i < 5; i++ {
		j := e.submit(t, job.Spec{Type: "t", MaxAttempts: ptr(1)})[0]
		l := e.claim(t, "default", 1)[0]
		e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l.Token, Kind: queue.OutcomeDead, Error: "x"})
		ids = append(ids, j.ID)
		e.clock.Advance(time.Minute)
	}
	prune := func(o queue.PruneOptions) int {
		t.Helper()
		o.Dead, o.Limit = true, 100
		n, err := e.q.PruneJobs(e.ctx, "default", o)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	now := e.clock.Now()
	// By age: the oldest (5 min ago) goes, but not past the floor.
	if n := prune(queue.PruneOptions{Cutoff: now.Add(-270 * time.Second), Floor: now.Add(-10 * time.Minute)}); n != 0 {
		t.Fatalf("pruned %d below the floor", n)
	}
	if n := prune(queue.PruneOptions{Cutoff: now.Add(-270 * time.Second)}); n != 1 {
		t.Fatalf("pruned %d by age, want 1", n)
	}
	// By count: keep 2 → the two oldest of the remaining four go, unless the floor protects them.
	if n := prune(queue.PruneOptions{Cutoff: now.Add(-time.Hour), Keep: 2, Floor: now.Add(-210 * time.Second)}); n != 1 {
		t.Fatalf("pruned %d by count under a floor, want 1", n)
	}
	if n := prune(queue.PruneOptions{Cutoff: now.Add(-time.Hour), Keep: 2}); n != 1 {
		t.Fatalf("pruned %d by count, want 1", n)
	}
	dead, _, err := e.q.Dead(e.ctx, "default", 10, "")
	if err != nil || len(dead) != 2 || dead[0].ID != ids[4] || dead[1].ID != ids[3] {
		t.Fatalf("dead left = %v, %v", dead, err)
	}
	if _, err := e.q.Get(e.ctx, ids[0]); err != queue.ErrNotFound {
		t.Fatalf("pruned job still readable: %v", err)
	}
}

// SUNDIAL_DEAD_MAX's upper bound (100,000) works: the count bound finds
// the entries beyond it in a set of that size.
func TestPruneDeadAtTheLargestKeep(t *testing.T) {
	e := newEnv(t)
	const keep = 100_000
	key := queue.QueueKey("default", "dead")
	pipe := e.q.Redis().Pipeline()
	for i := 0; i < keep+5; i += 1000 {
		zs := make([]redis.Z, 0, 1000)
		for k := i; k < min(i+1000, keep+5); k++ {
			zs = append(zs, redis.Z{Score: float64(k), Member: fmt.Sprintf("j%06d", k)})
		}
		pipe.ZAdd(e.ctx, key, zs...)
	}
	if _, err := pipe.Exec(e.ctx); err != nil {
		t.Fatal(err)
	}
	n, err := e.q.PruneJobs(context.Background(), "default", queue.PruneOptions{Dead: true, Keep: keep, Limit: 1000})
	if err != nil || n != 5 {
		t.Fatalf("prune = %d, %v; want 5", n, err)
	}
	if first, _ := e.q.Redis().ZRange(e.ctx, key, 0, 0).Result(); first[0] != "j000005" {
		t.Fatalf("oldest left = %v", first)
	}
}

// A claim's fencing tokens are "<fence>-<tag>": fences strictly grow, never
// below the lease clock's ms times 1000 nor the queue's counter (claim.lua,
// next_token), and no two tokens share a tag. A retried job's next attempt
// is numbered by next_attempt (lib.lua).
func TestClaimTokens(t *testing.T) {
	e := newEnv(t)
	fence := queue.QueueKey("default", "fence")
	seen := map[string]bool{}
	// A first claim, before the queue has a fence: a fence set by hand is
	// then no sign of a restart (quarantined in lib.lua).
	e.claim(t, "default", 1)
	for _, start := range []int64{0, 7, 999, 9007199254739990 / 2} {
		const n = 12
		if err := e.q.Redis().Set(e.ctx, fence, start, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.q.Submit(e.ctx, e.buildN(t, n, job.Spec{Type: "t"})); err != nil {
			t.Fatal(err)
		}
		floor := start
		leases, err := e.q.Claim(e.ctx, "default", n, "w")
		if err != nil || len(leases) != n {
			t.Fatalf("claim after %d: %d leases, %v", start, len(leases), err)
		}
		last := floor
		for i, l := range leases {
			f, tag, ok := strings.Cut(l.Token, "-")
			v, err := strconv.ParseInt(f, 10, 64)
			if !ok || err != nil || len(tag) != 12 {
				t.Fatalf("token %q is not <fence>-<12 hex digits>", l.Token)
			}
			if v <= last {
				t.Errorf("counter at %d: token %d's fence %d is not above %d", start, i, v, last)
			}
			last = v
			if seen[tag] {
				t.Errorf("tag %s handed out twice", tag)
			}
			seen[tag] = true
			if l.Job.Attempt != 1 {
				t.Errorf("attempt %d, want 1", l.Job.Attempt)
			}
		}
		outs := make([]queue.Outcome, n)
		for i, l := range leases {
			outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, WorkerID: "w"}
		}
		st, err := e.q.Complete(e.ctx, "default", outs)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range st {
			if s != queue.StatusSucceeded {
				t.Fatalf("counter at %d: job %d ended %s", start, i, s)
			}
		}
	}
}

// A Redis that comes back from a snapshot taken before a claim forgets the
// claim and its fencing counter; the job's next claim must still get a
// token never handed out before, so that the first holder's heartbeat and
// outcome are refused (issue 32, finding 3).
func TestTokensDifferAfterARollback(t *testing.T) {
	e := newEnv(t)
	if _, err := e.q.Submit(e.ctx, e.buildN(t, 1, job.Spec{Type: "t"})); err != nil {
		t.Fatal(err)
	}
	rollback := snapshot(t, e.q.Redis(), "*")
	first, err := e.q.Claim(e.ctx, "default", 1, "w1")
	if err != nil || len(first) != 1 {
		t.Fatalf("claim: %v, %v", first, err)
	}
	rollback() // every key as it was before the claim
	second, err := e.q.Claim(e.ctx, "default", 1, "w2")
	if err != nil || len(second) != 1 {
		t.Fatalf("claim after the rollback: %v, %v", second, err)
	}
	if second[0].Token == first[0].Token {
		t.Fatalf("the rolled-back claim handed out token %s again", first[0].Token)
	}
	held, err := e.q.Extend(e.ctx, "default", first)
	if err != nil || held[0] {
		t.Fatalf("the first holder's renewal = %v, %v; want refused", held, err)
	}
	st, err := e.q.Complete(e.ctx, "default", []queue.Outcome{{ID: first[0].Job.ID, Token: first[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"}})
	if err != nil || st[0] != queue.StatusStale {
		t.Fatalf("the first holder's outcome = %v, %v; want stale", st, err)
	}
	st, err = e.q.Complete(e.ctx, "default", []queue.Outcome{{ID: second[0].Job.ID, Token: second[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w2"}})
	if err != nil || st[0] != queue.StatusSucceeded {
		t.Fatalf("the second holder's outcome = %v, %v", st, err)
	}
}

// A Redis that restarts may come back with less than it acknowledged (an
// older snapshot, an AOF that lost its last second) and so forget a lease
// a worker still runs under: a client that saw the server change identity
// claims nothing for a lease TTL, by when that worker has stopped.
func TestClaimsWaitALeaseTTLAfterARestart(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	ctx := context.Background()
	const ttl = 2 * time.Second
	q := queue.New(srv.Client(), queue.Options{LeaseTTL: ttl})
	submit := func() {
		j, err := (&job.Spec{Type: "t"}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	submit()
	if l, err := q.Claim(ctx, "default", 1, "w"); err != nil || len(l) != 1 {
		t.Fatalf("claim before the restart: %v, %v", l, err)
	}
	srv.Restart()
	restarted := time.Now()
	queuetest.Eventually(t, 10*time.Second, "a submit after the restart", func() bool {
		j, _ := (&job.Spec{Type: "t"}).Build(time.Now())
		_, err := q.Submit(ctx, []*job.Job{j})
		return err == nil
	})
	var l []queue.Lease
	queuetest.Eventually(t, 10*time.Second, "a claim after the restart", func() bool {
		var err error
		l, err = q.Claim(ctx, "default", 1, "w")
		return err == nil && len(l) == 1
	})
	if d := time.Since(restarted); d < ttl-600*time.Millisecond {
		t.Fatalf("claimed %v after the restart; want no claim for a lease TTL (%v)", d, ttl)
	}
}

// SUNDIAL_LEASE_TTL is per process: after a restart, the quarantine must
// last the longest TTL any process granted, not the claimer's own, and a
// renewal by a process with a shorter TTL (an API pod answering an HTTP
// worker's heartbeat) must not shorten a lease another granted.
func TestQuarantineAndRenewalsUseTheLongestTTL(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	ctx := context.Background()
	const long, short = 3 * time.Second, 1 * time.Second
	qLong := queue.New(srv.Client(), queue.Options{LeaseTTL: long})
	qShort := queue.New(srv.Client(), queue.Options{LeaseTTL: short})
	submit := func() {
		j, err := (&job.Spec{Type: "t"}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := qShort.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	submit()
	l, err := qLong.Claim(ctx, "default", 1, "w-long")
	if err != nil || len(l) != 1 {
		t.Fatalf("claim: %v, %v", l, err)
	}
	// The short-TTL process renews the long lease: it keeps its length.
	if held, err := qShort.Extend(ctx, "default", l); err != nil || !held[0] {
		t.Fatalf("renewal: %v %v", held, err)
	}
	exp, err := srv.Client().ZScore(ctx, queue.QueueKey("default", "leases"), l[0].Job.ID).Result()
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := srv.Client().Time(ctx).Result()
	if left := time.Duration(int64(exp)-tm.UnixMilli()) * time.Millisecond; left < long-500*time.Millisecond {
		t.Fatalf("after a renewal by a %v process the %v lease has %v left", short, long, left)
	}
	submit()
	srv.Restart()
	restarted := time.Now()
	queuetest.Eventually(t, 10*time.Second, "Redis back", func() bool { return srv.Client().Ping(ctx).Err() == nil })
	var got []queue.Lease
	queuetest.Eventually(t, 15*time.Second, "a claim after the restart", func() bool {
		got, err = qShort.Claim(ctx, "default", 1, "w-short")
		return err == nil && len(got) == 1
	})
	if d := time.Since(restarted); d < long-600*time.Millisecond {
		t.Fatalf("the %v process claimed %v after the restart; a %v lease may still have been trusted", short, d.Round(time.Millisecond), long)
	}
}

// A forward step of Redis' clock (an NTP step, a VM restored) must not
// expire every lease at once while their holders, on their own monotonic
// clocks, still trust them: a reclaim judges expiry on Redis' clock but
// never past the poller's own (give or take ClockStepTolerance).
func TestReclaimIgnoresAForwardStepOfRedisClock(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	ctx := context.Background()
	q := queue.New(srv.Client(), queue.Options{LeaseTTL: 5 * time.Second})
	j, err := (&job.Spec{Type: "t"}).Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	if l, err := q.Claim(ctx, "default", 1, "w"); err != nil || len(l) != 1 {
		t.Fatalf("claim: %v %v", l, err)
	}
	// The poller's view with Redis' clock stepped an hour ahead (the lease
	// clock override stands for Redis' TIME; the poller's own clock is
	// real).
	stepped := queue.New(srv.Client(), queue.Options{LeaseClock: func() time.Time { return time.Now().Add(time.Hour) }})
	n, _, err := stepped.Reclaim(ctx, "default", 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("reclaimed %d leases when only Redis' clock jumped ahead", n)
	}
	if got, _ := q.Get(ctx, j.ID); got.State != job.Active {
		t.Fatalf("the job is %s, want still active", got.State)
	}
}

// A Redis rolled back to a snapshot taken after a queue's first submit but
// before its first claim forgets the claim and, before, the queue's fence:
// the restart quarantine must still hold the job back, since its first
// holder may still run it.
func TestQuarantineAfterARollbackToBeforeTheFirstClaim(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{LeaseTTL: 2 * time.Second})
	j, err := (&job.Spec{Type: "t"}).Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	rollback := snapshot(t, rdb, "*")
	if l, err := q.Claim(ctx, "default", 1, "w1"); err != nil || len(l) != 1 {
		t.Fatalf("claim: %v %v", l, err)
	}
	// The rollback: the keys as they were, and the library's state fresh,
	// as after a restart.
	rollback()
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if l, err := q.Claim(ctx, "default", 1, "w2"); err != nil || len(l) != 0 {
		t.Fatalf("claim right after the rollback: %d leases (%v); the first holder may still run the job", len(l), err)
	}
}
