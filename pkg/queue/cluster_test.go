package queue_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestClusterScriptsKeepToOneSlot runs every transition script of the engine
// against a real Redis Cluster, on queues of all three shards. Redis 7 refuses
// a script that touches a key outside the slot of its KEYS (including keys the
// script builds itself) and go-redis refuses KEYS of several slots, so any
// script or key that breaks the one-queue-one-slot rule fails here. The test
// also fails when a script in lua/ is not run by the scenario, so a new
// script must be added to it.
func TestClusterScriptsKeepToOneSlot(t *testing.T) {
	cl := hatest.StartCluster(t)
	rdb := cl.Client()
	log := &hatest.ScriptLog{}
	rdb.AddHook(log)
	clk := &clock{t: time.Now()}
	q := queue.New(rdb, queue.Options{Now: clk.Now, LeaseClock: clk.Now, LeaseTTL: 10 * time.Second, LeaseGrace: time.Second})
	ctx := context.Background()

	var queues []string
	for _, names := range cl.QueuesOnShards("slotrule", 1) {
		exerciseEveryScript(t, ctx, q, clk, names[0])
		queues = append(queues, names[0], names[0]+"-up") // -up: a queue its jobs depend on
	}
	// A batch whose members are in queues of all three masters, and its
	// callback's queue: batchadd.lua and batchsettle.lua in the batch's slot.
	var batchQueues []string
	for _, names := range cl.QueuesOnShards("batchrule", 1) {
		batchQueues = append(batchQueues, names[0])
	}
	batchAcrossShards(t, ctx, q, clk, batchQueues)
	queues = append(queues, batchQueues...)
	queues = append(queues, "cb", "batch.cluster") // the callback's queue; the batch's tag

	// Redis 7 lets a script without flags read or write keys of another
	// slot when that slot is on the same node, so check what was written:
	// every key is a global key or carries the hash tag of its queue.
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		iter := m.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			ok := k == "sundial:queues" || k == "sundial:workers" || strings.HasPrefix(k, "sundial:worker:") || k == "sundial:batches:open" || k == "sundial:batches:settled" ||
				strings.HasPrefix(k, "sundial:{.storage}:")
			for _, name := range queues {
				ok = ok || strings.Contains(k, "{"+name+"}")
			}
			if !ok {
				t.Errorf("key %q is neither global nor in its queue's slot", k)
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}

	files, err := os.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".lua") && f.Name() != "lib.lua" && f.Name() != "batchlib.lua" {
			want++
		}
	}
	if log.Seen() < want {
		t.Fatalf("the scenario ran %d distinct scripts; lua/ has %d transition scripts: extend exerciseEveryScript to run the new one", log.Seen(), want)
	}
}

func exerciseEveryScript(t *testing.T, ctx context.Context, q *queue.Client, clk *clock, name string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("queue %s: %v", name, err)
		}
	}
	build := func(s job.Spec) *job.Job {
		t.Helper()
		s.Queue, s.Type = name, "t"
		j, err := s.Build(clk.Now())
		must(err)
		return j
	}
	three, one, at := 3, 1, clk.Now().Add(time.Minute)
	// A limit over every job and a group put the flow-control keys
	// (limit.lua, parked sets, group lists) to the slot test too.
	_, _, err := q.SetLimit(ctx, name, queue.Limit{Name: "l", Key: "k", Concurrency: 5, Rate: &queue.Rate{Limit: 100, PeriodSeconds: 60}}) // limit.lua
	must(err)
	if err := q.Forget(ctx, name, time.Hour); !errors.Is(err, queue.ErrQueueBusy) { // forget.lua: refused, the queue has a limit
		t.Fatalf("queue %s: forget = %v, want ErrQueueBusy", name, err)
	}
	// A job no claimer handles: a typed claim parks it, unhandled.lua buries it.
	nobody := build(job.Spec{})
	nobody.Type = "nobody"
	if _, err := q.Submit(ctx, []*job.Job{nobody}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim(ctx, name, 1, "w", "somebody"); err != nil {
		t.Fatal(err)
	}
	if n, err := q.BuryUnhandled(ctx, name, "nobody", clk.Now(), 10); err != nil || n != 1 {
		t.Fatalf("queue %s: bury unhandled = %d %v, want 1", name, n, err)
	}
	// A dependency on a job of another queue (another slot): settle.lua.
	upSpec := job.Spec{Queue: name + "-up", Type: "t"}
	up, err := upSpec.Build(clk.Now())
	must(err)
	_, err = q.Submit(ctx, []*job.Job{up})
	must(err)
	down := build(job.Spec{DependsOn: []string{up.ID}})
	_, err = q.Submit(ctx, []*job.Job{down})
	must(err)
	_, err = q.Cancel(ctx, up.ID)
	must(err)
	if n, err := q.SettleRemoteDeps(ctx, name, 10); err != nil || n != 1 {
		t.Fatalf("queue %s: settle = %d %v, want 1", name, n, err)
	}
	parent := build(job.Spec{MaxAttempts: &three, Group: "g"})
	child := build(job.Spec{})
	child.DependsOn = []string{parent.ID}
	keyed := build(job.Spec{IdempotencyKey: "k-" + name, MaxAttempts: &one})
	later := build(job.Spec{RunAt: &at})
	_, err = q.Submit(ctx, []*job.Job{parent, child, keyed, later}) // submit.lua
	must(err)

	leases, err := q.Claim(ctx, name, 10, "w1") // claim.lua
	must(err)
	if len(leases) != 2 {
		t.Fatalf("queue %s: claimed %d jobs, want 2", name, len(leases))
	}
	_, err = q.Extend(ctx, name, leases) // extend.lua
	must(err)
	_, _, err = q.CompleteAndClaim(ctx, name, nil, 1, "w1") // cycle.lua (nothing left to claim)
	must(err)
	_, _, err = q.Progress(ctx, name, leases[0], queue.ProgressReport{Percent: 50})
	must(err)
	// A durable job's records: a signal kept for a key (signal.lua), then a
	// wait that chooses the key (step.lua) and a signal by id.
	_, _, err = q.SendSignal(ctx, queue.Signal{Queue: name, Key: "key-" + name, Name: "go"})
	must(err)
	_, _, err = q.RecordStep(ctx, name, leases[0], queue.StepWrite{Seq: 1, Record: job.StepRecord(job.StepWait, "signal:go", clk.Now(), time.Time{}, ""), Signal: "go", Key: "key-" + name})
	must(err)
	_, _, err = q.SendSignal(ctx, queue.Signal{Queue: name, ID: leases[0].Job.ID, Name: "other"})
	must(err)
	var out []queue.Outcome
	for _, l := range leases {
		kind := queue.OutcomeSucceeded
		if l.Job.ID == keyed.ID {
			kind = queue.OutcomeDead
		}
		out = append(out, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: kind, Error: "x", WorkerID: "w1"})
	}
	_, err = q.Complete(ctx, name, out) // complete.lua: succeeds parent (releases child), kills keyed
	must(err)

	leases, err = q.Claim(ctx, name, 1, "w1") // the child, released by its parent
	must(err)
	if len(leases) != 1 || leases[0].Job.ID != child.ID {
		t.Fatalf("queue %s: want the dependent job claimed", name)
	}
	_, err = q.Release(ctx, name, leases) // release.lua
	must(err)
	_, err = q.Claim(ctx, name, 1, "w1") // claimed again, then left to expire
	must(err)
	clk.Advance(time.Hour)
	_, _, err = q.Reclaim(ctx, name, 100) // reclaim.lua: the lease expired
	must(err)
	_, _, err = q.Promote(ctx, name, 100) // promote.lua
	must(err)
	rctx, reg := q.Register(ctx, "test", nil) // register.lua, over the storage format's keys
	must(context.Cause(rctx))
	must(reg.Close())

	_, err = q.Cancel(ctx, later.ID) // cancel.lua
	must(err)
	_, err = q.Retry(ctx, later.ID) // retry.lua
	must(err)
	_, err = q.RetryDead(ctx, name, []string{keyed.ID})
	must(err)
	_, err = q.Cancel(ctx, keyed.ID)
	must(err)
	_, err = q.PurgeDead(ctx, name, []string{keyed.ID}) // purge.lua
	must(err)
	_, err = q.Prune(ctx, name, clk.Now().Add(time.Hour), 100) // prune.lua
	must(err)
	_, err = q.PruneJobs(ctx, name, queue.PruneOptions{Dead: true, Cutoff: clk.Now().Add(time.Hour)})
	must(err)
	must(q.Pause(ctx, name))
	must(q.Resume(ctx, name)) // resume.lua
	must(q.DeleteLimit(ctx, name, "l"))

	// Job options (submit_options in lib.lua): a burst of one debounce
	// key made one job, a sequence, tags, an expiry; then the lines a
	// running attempt logs (log.lua) and the expiry's sweep.
	deb := func() *job.Job {
		return build(job.Spec{Debounce: &job.Debounce{Key: "d", WindowSeconds: 1}, Tags: []string{"t:1"}})
	}
	first, second := deb(), deb()
	seq1 := build(job.Spec{Sequence: &job.Sequence{Key: "s"}, ExpiresInSeconds: ptr(60.0)})
	seq2 := build(job.Spec{Sequence: &job.Sequence{Key: "s"}, DeadlineInSeconds: ptr(600.0)})
	res, err := q.Submit(ctx, []*job.Job{first, second, seq1, seq2})
	must(err)
	if !res[1].Debounced || res[1].Job.ID != first.ID {
		t.Fatalf("queue %s: the second submit of a debounce key made a job", name)
	}
	leases, err = q.Claim(ctx, name, 10, "w1")
	must(err)
	var head *queue.Lease
	for i, l := range leases {
		switch l.Job.ID {
		case seq1.ID:
			head = &leases[i]
		case seq2.ID:
			t.Fatalf("queue %s: the sequence's second job ran beside its first", name)
		}
	}
	if head == nil {
		t.Fatalf("queue %s: the sequence's first job was not claimed", name)
	}
	_, err = q.AppendLogs(ctx, name, *head, []queue.LogEntry{{Level: "info", Message: "hello"}})
	must(err)
	clk.Advance(time.Hour)
	_, _, err = q.Promote(ctx, name, 100)
	must(err)
}

// batchAcrossShards runs a batch of members in queues (on different
// masters) to its end: the batch's slot is none of theirs, its callback
// fires once, and the counts add up.
func batchAcrossShards(t *testing.T, ctx context.Context, q *queue.Client, clk *clock, queues []string) {
	t.Helper()
	b := queue.BatchSpec{ID: "cluster"}
	for i := range 9 {
		j, err := (&job.Spec{Type: "m", Queue: queues[i%len(queues)]}).Build(clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		b.Jobs = append(b.Jobs, j)
	}
	cb, err := (&job.Spec{Type: "cb", Queue: "cb"}).Build(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.OnSuccess = cb
	if _, _, err := q.CreateBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, name := range queues {
		ls, err := q.Claim(ctx, name, 10, "w")
		if err != nil || len(ls) != 3 {
			t.Fatalf("claim %s: %d %v", name, len(ls), err)
		}
		var out []queue.Outcome
		for _, l := range ls {
			out = append(out, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, WorkerID: "w"})
		}
		if _, err := q.Complete(ctx, name, out); err != nil {
			t.Fatal(err)
		}
		if n, err := q.RelayBatchEnds(ctx, name, 100); err != nil || n != 3 {
			t.Fatalf("relay %s: %d %v", name, n, err)
		}
	}
	for want := 1; want >= 0; want-- {
		if n, err := q.FireBatchCallbacks(ctx, 10); err != nil || n != want {
			t.Fatalf("fire = %d %v, want %d", n, err, want)
		}
	}
	info, err := q.Batch(ctx, "cluster")
	if err != nil || info.Counts != (queue.BatchCounts{Succeeded: 9}) || info.OnSuccess.State != "fired" {
		t.Fatalf("batch = %+v %v", info, err)
	}
	if ls, err := q.Claim(ctx, "cb", 10, "w"); err != nil || len(ls) != 1 || ls[0].Job.ID != info.OnSuccess.JobID {
		t.Fatalf("callback claimed: %v %v", ls, err)
	}
}

// TestClusterWaitForWorkWaitsOnAllShards checks that a worker serving queues
// on three shards is woken at once by a job on any of them, and that each
// wait leaves no BLPOP blocked behind it.
func TestClusterWaitForWorkWaitsOnAllShards(t *testing.T) {
	cl := hatest.StartCluster(t)
	rdb := cl.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	var names []string
	for _, on := range cl.QueuesOnShards("wait", 2) {
		names = append(names, on...)
	}
	blocked := func() int {
		n := 0
		for _, m := range cl.Masters() {
			r := redis.NewClient(&redis.Options{Addr: m.Addr()})
			if blocked(r) {
				n++
			}
			r.Close()
		}
		return n
	}
	for _, target := range []string{names[len(names)-1], names[0], names[3]} {
		// Drain signals left from earlier rounds, as a worker's empty claim does.
		for _, n := range names {
			_, err := q.Claim(ctx, n, 100, "w")
			if err != nil {
				t.Fatal(err)
			}
		}
		woke := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			ok, err := q.WaitForWork(ctx, names, 20*time.Second)
			if err != nil || !ok {
				t.Errorf("WaitForWork = %v, %v", ok, err)
			}
			woke <- time.Since(start)
		}()
		hatest.Eventually(t, 5*time.Second, "every slot's BLPOP blocked", func() bool { return blocked() == 3 })
		spec := job.Spec{Queue: target, Type: "t"}
		j, err := spec.Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-woke:
			t.Logf("woken by %s after %v", target, d)
		case <-time.After(5 * time.Second):
			t.Fatalf("a job on %s did not wake the worker", target)
		}
		if n := blocked(); n != 0 {
			t.Fatalf("%d masters still have a blocked client after the wake", n)
		}
	}

	// A timeout returns false and a cancelled context returns at once; neither
	// leaves a BLPOP behind.
	start := time.Now()
	if ok, err := q.WaitForWork(ctx, names, 300*time.Millisecond); ok || err != nil {
		t.Fatalf("idle WaitForWork = %v, %v", ok, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("300 ms wait took %v", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := q.WaitForWork(cctx, names, time.Minute); done <- err }()
	hatest.Eventually(t, 5*time.Second, "blocked", func() bool { return blocked() == 3 })
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("cancelled wait returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled WaitForWork did not return")
	}
	if n := blocked(); n != 0 {
		t.Fatalf("%d masters still have a blocked client after cancel", n)
	}
}
