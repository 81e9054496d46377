package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// lifecycle runs submit, claim, a failure that retries, a fused
// complete-and-claim and a cancel through q, and checks each outcome: every
// kind of script call a worker makes.
func lifecycle(t *testing.T, q *queue.Client) {
	t.Helper()
	ctx := context.Background()
	var jobs []*job.Job
	for range 3 {
		j, err := (&job.Spec{Type: "t"}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	if _, err := q.Submit(ctx, jobs); err != nil {
		t.Fatalf("submit: %v", err)
	}
	// A claim right after the library was loaded again waits a lease TTL
	// (quarantined, lib.lua).
	var ls []queue.Lease
	queuetest.Eventually(t, 20*time.Second, "a claim", func() bool {
		var err error
		ls, err = q.Claim(ctx, "default", 1, "w")
		return err == nil && len(ls) == 1
	})
	st, err := q.Complete(ctx, "default", []queue.Outcome{{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeFailed, Error: "boom"}})
	if err != nil || st[0] == queue.StatusStale || st[0] == queue.StatusSucceeded {
		t.Fatalf("fail: %v, %v", st, err)
	}
	ls, err = q.Claim(ctx, "default", 1, "w")
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	st, more, err := q.CompleteAndClaim(ctx, "default", []queue.Outcome{{ID: ls[0].Job.ID, Token: ls[0].Token, Kind: queue.OutcomeSucceeded}}, 1, "w")
	if err != nil || st[0] != queue.StatusSucceeded || len(more) != 1 {
		t.Fatalf("complete and claim: %v, %d leases, %v", st, len(more), err)
	}
	if _, err := q.Cancel(ctx, more[0].Job.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	got, err := q.Get(ctx, more[0].Job.ID)
	if err != nil || got.State != job.Cancelled {
		t.Fatalf("cancelled job: %+v, %v", got, err)
	}
}

// calls returns how many times the server ran command cmd (INFO commandstats).
func calls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	_, stats := serverStats(t, rdb)
	return int(stats[cmd].calls)
}

// The scripts run as one function library, loaded by the first call that
// misses it: on a fresh server, and again after the server lost it (a
// restart without persistence, FUNCTION FLUSH).
func TestScriptsRunAsFunctionsLoadedOnDemand(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{LeaseTTL: time.Second})
	lifecycle(t, q)
	ctx := context.Background()
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "sundial_*"}).Result()
	if err != nil || len(libs) != 1 {
		t.Fatalf("function libraries: %+v, %v", libs, err)
	}
	if n := calls(t, rdb, "fcall"); n < 6 {
		t.Fatalf("%d FCALLs; want every call of the lifecycle", n)
	}
	if n := calls(t, rdb, "evalsha") + calls(t, rdb, "eval"); n != 0 {
		t.Fatalf("%d EVAL/EVALSHA calls on a server with functions", n)
	}
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lifecycle(t, q)
	if libs, _ := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "sundial_*"}).Result(); len(libs) != 1 {
		t.Fatalf("the library was not loaded again: %+v", libs)
	}
}

// Processes that start together all miss the library and load it; one
// that loads it after another process already ran scripts must not wipe
// the library's state, or every queue it knew would wait out the restart
// quarantine (a lease TTL) as if Redis had restarted.
func TestLateLibraryLoadKeepsQueuesRunning(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	a := queue.New(rdb, queue.Options{LeaseTTL: time.Minute})
	for range 3 {
		j, _ := (&job.Spec{Queue: "late-load", Type: "t"}).Build(time.Now())
		if _, err := a.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	late := queue.New(srv.Client(), queue.Options{})
	if err := queue.LoadLibrary(ctx, late, rdb); err != nil {
		t.Fatalf("loading the library a second time: %v", err)
	}
	leases, err := a.Claim(ctx, "late-load", 3, "w")
	if err != nil || len(leases) != 3 {
		t.Fatalf("claimed %d of 3 jobs after a late load (%v): the queue was held as after a restart", len(leases), err)
	}
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := queue.LoadLibrary(ctx, late, rdb); err != nil {
		t.Fatalf("loading the library on a server without it: %v", err)
	}
}

// A server that cannot load functions (FUNCTION renamed away here, as an
// ACL or an older Redis would refuse it) gets the same scripts by EVALSHA.
func TestScriptsFallBackToEvalWithoutFunctions(t *testing.T) {
	t.Parallel()
	srv := queuetest.StartWith(t, "--rename-command", "FUNCTION", "")
	rdb := srv.Client()
	lifecycle(t, queue.New(rdb, queue.Options{}))
	if n := calls(t, rdb, "evalsha"); n < 6 {
		t.Fatalf("%d EVALSHA calls; want the lifecycle's calls to fall back to scripts", n)
	}
	if n := calls(t, rdb, "fcall"); n != 1 {
		t.Fatalf("%d FCALLs; want one (the first call, before the client fell back)", n)
	}
}

// When Redis is out of memory (maxmemory reached, noeviction), functions
// that write are refused before they run, but pruning ended jobs, which
// frees memory, still runs; so does a submit once memory is back.
func TestPruneRunsWhenRedisIsOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	q := queue.New(rdb, queue.Options{Now: clk.Now})
	var jobs []*job.Job
	for range 200 {
		j, err := (&job.Spec{Type: "t", Payload: []byte(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)}).Build(clk.t)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	if _, err := q.Submit(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "default", 200, "w")
	if err != nil || len(ls) != 200 {
		t.Fatalf("claim: %d, %v", len(ls), err)
	}
	outs := make([]queue.Outcome, len(ls))
	for i, l := range ls {
		outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded}
	}
	if _, err := q.Complete(ctx, "default", outs); err != nil {
		t.Fatal(err)
	}
	used, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(used, "used_memory:")
	v, _, _ = strings.Cut(v, "\r\n")
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	mem, _ := strconv.Atoi(v)
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.Itoa(mem-250_000)).Err(); err != nil {
		t.Fatal(err)
	}
	j, _ := (&job.Spec{Type: "t"}).Build(clk.t)
	if _, err := q.Submit(ctx, []*job.Job{j}); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a submit while out of memory: %v; want Redis' OOM refusal", err)
	}
	clk.Advance(time.Hour)
	n, err := q.Prune(ctx, "default", clk.t, 1000)
	if err != nil || n != 200 {
		t.Fatalf("prune while out of memory: %d, %v; want all 200 ended jobs deleted", n, err)
	}
	if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
		t.Fatalf("a submit after the prune freed memory: %v", err)
	}
}
