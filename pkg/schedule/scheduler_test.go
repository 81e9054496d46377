package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestMisfirePolicies fires schedules whose next run lies 10.5 s in the
// past, as a scheduler finds them after downtime, against a real Redis.
func TestMisfirePolicies(t *testing.T) {
	e := newEnv(t, true)
	for _, p := range []string{"skip", "run_once", "run_all"} {
		e.put(t, fmt.Sprintf(`{"id": %q, "every_seconds": 1, "misfire": %q, "job": {"queue": %q, "type": "x"}}`, p, p, "mf-"+p))
	}
	start := e.clock.Now()
	e.clock.Advance(11*time.Second + 500*time.Millisecond) // planned: start+1s; now: start+11.5s
	sch := e.scheduler(SchedulerConfig{})
	if _, err := sch.FireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	// Fire times start+1…start+11; those more than 1 s late (start+1…start+10) are misfires.
	want := map[string][]int{
		"skip":     {11},
		"run_once": {10, 11},
		"run_all":  {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	}
	for p, secs := range want {
		got := e.fireTimes(t, "mf-"+p)
		if len(got) != len(secs) {
			t.Errorf("%s: fired %d times (%v), want %v", p, len(got), got, secs)
		}
		for _, s := range secs {
			if got[start.Add(time.Duration(s)*time.Second)] != 1 {
				t.Errorf("%s: fire time +%ds fired %d times", p, s, got[start.Add(time.Duration(s)*time.Second)])
			}
		}
		s := e.get(t, p)
		if !s.NextRunAt.Equal(start.Add(12*time.Second)) || !s.LastRunAt.Equal(start.Add(11*time.Second)) {
			t.Errorf("%s: next %v last %v, want +12s and +11s", p, s.NextRunAt, s.LastRunAt)
		}
	}
	// A second pass at the same instant fires nothing more.
	if _, err := sch.FireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.jobs(t, "mf-run_all")); n != 11 {
		t.Fatalf("second pass fired again: %d jobs", n)
	}

	// An hour of downtime: skip fires only the on-time time, run_once one
	// misfire more, run_all the newest MaxCatchUp misfires more.
	e.clock.Advance(time.Hour)
	if _, err := sch.FireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	for p, n := range map[string]int{"skip": 1 + 1, "run_once": 2 + 2, "run_all": 11 + MaxCatchUp + 1} {
		if got := len(e.jobs(t, "mf-"+p)); got != n {
			t.Errorf("%s after an hour of downtime: %d jobs in all, want %d", p, got, n)
		}
	}

	// A schedule that never fired, planned an hour ago (downtime before
	// its first run): run_all fires the newest MaxCatchUp misfires plus the
	// two times at most MisfireTolerance old (now - 1 s and now).
	e.put(t, `{"id": "late", "every_seconds": 1, "misfire": "run_all", "job": {"queue": "mf-late", "type": "x"}}`)
	e.setNext(t, "mf-late", "late", e.clock.Now().Add(-time.Hour))
	if _, err := sch.FireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.jobs(t, "mf-late")); n != MaxCatchUp+2 {
		t.Fatalf("run_all after an hour: %d jobs, want %d misfires + 2 on time", n, MaxCatchUp)
	}
}

// TestOverlappingSchedulersFireOnce runs several schedulers' passes at
// once, as two leaders would during a split brain: every fire time of 200
// due schedules fires exactly once.
func TestOverlappingSchedulersFireOnce(t *testing.T) {
	e := newEnv(t, true)
	const n = 200
	for i := range n {
		e.put(t, fmt.Sprintf(`{"id": "s%d", "every_seconds": 2, "misfire": "run_all", "job": {"queue": "ov%d", "type": "x"}}`, i, i%4))
	}
	var fires atomic.Int64
	cfg := SchedulerConfig{Concurrency: 8, OnFire: func(Fire) { fires.Add(1) }}
	for round := range 5 {
		e.clock.Advance(3 * time.Second)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.scheduler(cfg).FireDue(e.ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		_ = round
	}
	total := 0
	for q := range 4 {
		for at, c := range e.fireTimes(t, fmt.Sprintf("ov%d", q)) {
			total += c
			if c != n/4 {
				t.Errorf("queue ov%d fire time %v: %d jobs, want %d (one per schedule)", q, at, c, n/4)
			}
		}
	}
	if int64(total) != fires.Load() {
		t.Errorf("%d jobs but %d reported fires", total, fires.Load())
	}
	if total != n*7 { // 15 s of fire times every 2 s: +2, +4, … +14
		t.Errorf("%d jobs, want %d", total, n*7)
	}
}

// TestEditTakesEffectWithoutRestart changes schedules under a running
// scheduler whose sleep is long: only the change notice can wake it.
func TestEditTakesEffectWithoutRestart(t *testing.T) {
	e := newEnv(t, false)
	e.put(t, `{"id": "slow", "every_seconds": 3600, "job": {"queue": "edit", "type": "slow"}}`)
	sch := e.scheduler(SchedulerConfig{MaxSleep: time.Minute})
	run(t, sch)
	queuetest.Eventually(t, 5*time.Second, "leader", sch.Leader)

	// From hourly to every second: fires within a second or two.
	changed := time.Now()
	if _, err := e.st.Patch(e.ctx, "slow", []byte(`{"every_seconds": 1}`)); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 3*time.Second, "the patched schedule fires", func() bool { return len(e.jobs(t, "edit")) >= 2 })
	t.Logf("patched schedule fired twice %v after the change", time.Since(changed).Round(time.Millisecond))

	// Disabled: no more fires, while a control schedule fires three times.
	if _, err := e.st.SetEnabled(e.ctx, "slow", false); err != nil {
		t.Fatal(err)
	}
	stopped := len(e.jobs(t, "edit"))
	e.put(t, `{"id": "control", "every_seconds": 1, "job": {"queue": "control", "type": "c"}}`)
	queuetest.Eventually(t, 6*time.Second, "control fires 3 times", func() bool { return len(e.jobs(t, "control")) >= 3 })
	if n := len(e.jobs(t, "edit")); n != stopped {
		t.Fatalf("disabled schedule fired %d more times", n-stopped)
	}

	// A replace with a new queue and type takes effect at the next fire.
	e.put(t, `{"id": "slow", "every_seconds": 1, "job": {"queue": "edit2", "type": "moved"}}`)
	queuetest.Eventually(t, 3*time.Second, "the moved schedule fires", func() bool { return len(e.jobs(t, "edit2")) >= 1 })
	if j := e.jobs(t, "edit2")[0]; j.Type != "moved" {
		t.Fatalf("fired the old template: %+v", j)
	}
}

// TestMissedNoticeCaughtByVersion changes schedules without publishing a
// notice: the scheduler sees the new version on its next pass and fires a
// schedule in a queue it did not know.
func TestMissedNoticeCaughtByVersion(t *testing.T) {
	e := newEnv(t, false)
	e.put(t, `{"id": "known", "every_seconds": 3600, "job": {"queue": "known", "type": "x"}}`)
	sch := e.scheduler(SchedulerConfig{MaxSleep: 200 * time.Millisecond})
	run(t, sch)
	queuetest.Eventually(t, 5*time.Second, "leader", sch.Leader)
	queuetest.Eventually(t, 5*time.Second, "first pass", func() bool {
		sch.mu.Lock()
		defer sch.mu.Unlock()
		return len(sch.queues) == 1
	})

	var published atomic.Int64
	ps := e.q.Redis().Subscribe(e.ctx, chanChanged)
	defer ps.Close()
	go func() {
		for range ps.Channel() {
			published.Add(1)
		}
	}()
	e.st.quiet = true
	e.put(t, `{"id": "new", "every_seconds": 1, "job": {"queue": "unknown-before", "type": "x"}}`)
	queuetest.Eventually(t, 3*time.Second, "the schedule in a new queue fires", func() bool { return len(e.jobs(t, "unknown-before")) >= 1 })
	if published.Load() != 0 {
		t.Fatal("a notice was published; the test proves nothing")
	}
}

func TestLeaderLock(t *testing.T) {
	e := newEnv(t, false)
	a := &lease{rdb: e.q.Redis(), key: keyLeader, token: "a", ttl: 200 * time.Millisecond}
	b := &lease{rdb: e.q.Redis(), key: keyLeader, token: "b", ttl: 200 * time.Millisecond}
	ctx := context.Background()
	if ok, err := a.acquire(ctx); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	if ok, _ := b.acquire(ctx); ok {
		t.Fatal("b took a held lock")
	}
	if ok, _ := b.renew(ctx); ok {
		t.Fatal("b renewed a's lock")
	}
	if err := b.release(ctx); err != nil || e.q.Redis().Get(ctx, keyLeader).Val() != "a" {
		t.Fatal("b released a's lock")
	}
	if ok, _ := a.renew(ctx); !ok {
		t.Fatal("a could not renew")
	}
	queuetest.Eventually(t, 2*time.Second, "a's lock expires", func() bool { ok, _ := b.acquire(ctx); return ok })
	if ok, _ := a.renew(ctx); ok {
		t.Fatal("a renewed b's lock after losing it")
	}
}

// TestOneLeaderAndShutdown runs three schedulers: exactly one leads; when
// it stops it releases the lock and another takes over at once.
func TestOneLeaderAndShutdown(t *testing.T) {
	e := newEnv(t, false)
	cfg := SchedulerConfig{AcquireInterval: 50 * time.Millisecond}
	var scheds []*Scheduler
	stops := map[*Scheduler]func(){}
	for i := range 3 {
		c := cfg
		c.ID = fmt.Sprintf("s%d", i)
		s := e.scheduler(c)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = s.Run(ctx); close(done) }()
		stops[s] = func() { cancel(); <-done }
		scheds = append(scheds, s)
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	leaders := func() (n int, who *Scheduler) {
		for _, s := range scheds {
			if s.Leader() {
				n, who = n+1, s
			}
		}
		return n, who
	}
	queuetest.Eventually(t, 5*time.Second, "one leader", func() bool { n, _ := leaders(); return n == 1 })
	_, first := leaders()
	stops[first]()
	delete(stops, first)
	if v := e.q.Redis().Get(e.ctx, keyLeader).Val(); v == first.ID() {
		t.Fatal("the stopped leader did not release the lock")
	}
	queuetest.Eventually(t, time.Second, "another leader at once", func() bool { n, who := leaders(); return n == 1 && who != first })
}

// redisErr is an error reply of Redis, as go-redis returns them.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestRefused tells a script Redis refused (the schedule is put aside)
// from Redis being unavailable (the pass fails and is retried).
func TestRefused(t *testing.T) {
	for err, want := range map[error]bool{
		redisErr("ERR user_script:12: Script attempted to access a non local key"):    true,
		redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"): true,
		fmt.Errorf("submit: %w", redisErr("ERR something in the script")):             true,
		redisErr("LOADING Redis is loading the dataset in memory"):                    false,
		redisErr("READONLY You can't write against a read only replica."):             false,
		redisErr("BUSY Redis is busy running a script."):                              false,
		redisErr("OOM command not allowed when used memory > 'maxmemory'."):           false,
		redisErr("CLUSTERDOWN The cluster is down"):                                   false,
		context.DeadlineExceeded: false,
		errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"): false,
	} {
		if got := refused(err); got != want {
			t.Errorf("refused(%q) = %v, want %v", err, got, want)
		}
	}
}

// With submits that wait for replicas (the binaries' default, auto), fires
// go through a client WAIT can run on, not the auto-pipeliner: before,
// every fire failed ("WaitReplicas needs a redis.Client…").
func TestFireClientWithWaitReplicas(t *testing.T) {
	t.Parallel()
	rdb := queuetest.Start(t).Client()
	for _, n := range []int{queue.WaitReplicasAuto, 0} {
		c := FireClient(rdb, queue.Options{WaitReplicas: n})
		j, err := (&job.Spec{Type: "tick"}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Submit(context.Background(), []*job.Job{j}); err != nil {
			t.Fatalf("WaitReplicas %d: submit through the fire client: %v", n, err)
		}
	}
}
