package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/worker"
	"github.com/sundialhq/sundial/pkg/worker/builtin"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, queuetest.IgnorePoolRedial) }

type env struct {
	rdb *redis.Client
	q   *queue.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	return &env{rdb: rdb, q: queue.New(rdb, queue.Options{LeaseGrace: 500 * time.Millisecond})}
}

func (e *env) submit(t *testing.T, specs ...job.Spec) []*job.Job {
	t.Helper()
	jobs := make([]*job.Job, len(specs))
	for i := range specs {
		j, err := specs[i].Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		jobs[i] = j
	}
	if _, err := e.q.Submit(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
	return jobs
}

func (e *env) state(t *testing.T, id string) *job.Job {
	t.Helper()
	j, err := e.q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (e *env) waitState(t *testing.T, id string, s job.State) *job.Job {
	t.Helper()
	var j *job.Job
	queuetest.Eventually(t, 10*time.Second, fmt.Sprintf("job %s to reach %s", id, s), func() bool {
		j = e.state(t, id)
		return j.State == s
	})
	return j
}

// start runs w until the test ends (or stop is called) and fails the test
// if Run returns an error.
func start(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newWorker(e *env, cfg worker.Config) *worker.Worker {
	if cfg.ID == "" {
		cfg.ID = queuetest.Name("w")
	}
	w := worker.New(e.rdb, cfg)
	builtin.Register(w)
	return w
}

func ptr[T any](v T) *T { return &v }

func TestOutcomes(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{Concurrency: 4})
	w.HandleFunc("panics", func(context.Context, *job.Job) (any, error) { panic("kaboom") })
	w.HandleFunc("noretry", func(context.Context, *job.Job) (any, error) {
		return nil, worker.NoRetry(errors.New("invalid address"))
	})
	w.HandleFunc("snoozes", func(_ context.Context, j *job.Job) (any, error) {
		if j.Attempt == 1 {
			return nil, worker.Snooze(0)
		}
		return j.Attempt, nil
	})
	w.HandleFunc("cancels", func(context.Context, *job.Job) (any, error) {
		return nil, worker.Cancel(errors.New("nothing to do"))
	})
	w.HandleFunc("ratelimited", func(_ context.Context, j *job.Job) (any, error) {
		if j.Attempt == 1 {
			return nil, worker.RetryAfter(errors.New("429"), 50*time.Millisecond)
		}
		return "ok", nil
	})
	start(t, w)
	zero := &job.Backoff{}
	hour := &job.Backoff{BaseSeconds: 3600, MaxSeconds: 3600}
	js := e.submit(t,
		job.Spec{Type: "sundial.echo", Payload: json.RawMessage(`{"hello":"world"}`)},
		job.Spec{Type: "sundial.fail", Payload: json.RawMessage(`{"times":2,"message":"boom"}`), MaxAttempts: ptr(3), Backoff: zero},
		job.Spec{Type: "sundial.fail", Payload: json.RawMessage(`{"times":5}`), MaxAttempts: ptr(2), Backoff: zero},
		job.Spec{Type: "nobody.handles.this", MaxAttempts: ptr(5)},
		job.Spec{Type: "panics", MaxAttempts: ptr(1)},
		job.Spec{Type: "noretry", MaxAttempts: ptr(5)},
		job.Spec{Type: "snoozes", MaxAttempts: ptr(1)},
		job.Spec{Type: "cancels"},
		job.Spec{Type: "ratelimited", Backoff: hour},
	)
	echo := e.waitState(t, js[0].ID, job.Succeeded)
	if string(echo.Result) != `{"hello":"world"}` || echo.Attempt != 1 {
		t.Errorf("echo = %+v", echo)
	}
	retried := e.waitState(t, js[1].ID, job.Succeeded)
	if retried.Attempt != 3 || retried.LastError != "boom" {
		t.Errorf("fail-twice job = attempt %d, last_error %q", retried.Attempt, retried.LastError)
	}
	if d := e.waitState(t, js[2].ID, job.Dead); d.Attempt != 2 {
		t.Errorf("exhausted job attempt = %d", d.Attempt)
	}
	// A type the worker does not handle is not claimed: it waits for a
	// worker that does (the poller ends it dead after
	// SUNDIAL_UNHANDLED_TIMEOUT when none is live).
	queuetest.Eventually(t, 10*time.Second, "the unknown type parked for a handler", func() bool {
		j, err := e.q.Get(context.Background(), js[3].ID)
		return err == nil && j.State == job.Queued && j.Attempt == 0 && j.HeldBack != nil && j.HeldBack.Reason == job.HeldNoHandler
	})
	if d := e.waitState(t, js[4].ID, job.Dead); d.LastError != "handler panicked: kaboom" {
		t.Errorf("panic job last_error = %q", d.LastError)
	}
	if d := e.waitState(t, js[5].ID, job.Dead); d.Attempt != 1 || d.LastError != "invalid address" {
		t.Errorf("no-retry job = %+v", d)
	}
	// Snoozed once with max_attempts 1: the attempt was given back.
	if d := e.waitState(t, js[6].ID, job.Succeeded); d.Attempt != 2 || d.MaxAttempts != 2 || string(d.Result) != "2" {
		t.Errorf("snoozed job = attempt %d/%d result %s", d.Attempt, d.MaxAttempts, d.Result)
	}
	if d := e.waitState(t, js[7].ID, job.Cancelled); d.LastError != "nothing to do" {
		t.Errorf("cancelled job = %+v", d)
	}
	// Due again 50 ms after its failure, not after its hour of backoff (no
	// poller runs here to make it due).
	if d := e.waitState(t, js[8].ID, job.Scheduled); d.Attempt != 1 || d.LastError != "429" || time.Until(d.RunAt) > time.Second {
		t.Errorf("rate-limited job = attempt %d %q, due in %v", d.Attempt, d.LastError, time.Until(d.RunAt))
	}
}

func TestTimeoutFailsTheAttempt(t *testing.T) {
	e := newEnv(t)
	start(t, newWorker(e, worker.Config{}))
	j := e.submit(t, job.Spec{Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":60000}`), TimeoutSeconds: ptr(1), MaxAttempts: ptr(1)})[0]
	d := e.waitState(t, j.ID, job.Dead)
	if d.LastError != "timeout after 1s: context deadline exceeded" {
		t.Fatalf("last_error = %q", d.LastError)
	}
}

func TestCancelActiveJobStopsHandler(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{})
	started := make(chan struct{})
	stopped := make(chan error, 1)
	heldAfterCancel := make(chan bool, 1)
	w.HandleFunc("block", func(ctx context.Context, _ *job.Job) (any, error) {
		close(started)
		<-ctx.Done()
		l, _ := worker.LeaseOf(ctx)
		heldAfterCancel <- l.Held(time.Now())
		stopped <- ctx.Err()
		return nil, ctx.Err()
	})
	start(t, w)
	j := e.submit(t, job.Spec{Type: "block"})[0]
	<-started
	// The cancel notice is pub/sub: retry the cancel's effect check until the
	// worker's subscription is live, by cancelling once and waiting.
	if _, err := e.q.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ctx err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler context was not cancelled")
	}
	if got := e.state(t, j.ID); got.State != job.Cancelled {
		t.Fatalf("state = %s", got.State)
	}
	// The lease went with the cancel: Held says so at once, not at the
	// next renewal.
	if <-heldAfterCancel {
		t.Fatal("LeaseOf(ctx).Held is true after the job was cancelled")
	}
}

func TestGracefulShutdownGivesLeasesBack(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{ShutdownTimeout: 50 * time.Millisecond})
	var running atomic.Int32
	w.HandleFunc("long", func(ctx context.Context, _ *job.Job) (any, error) {
		running.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	stop := start(t, w)
	js := e.submit(t, job.Spec{Type: "long", TimeoutSeconds: ptr(3600)}, job.Spec{Type: "long", TimeoutSeconds: ptr(3600)})
	queuetest.Eventually(t, 10*time.Second, "both jobs running", func() bool { return running.Load() == 2 })
	stop() // returns only after the leases were given back
	for _, j := range js {
		got := e.state(t, j.ID)
		if got.State != job.Queued || got.Attempt != 0 {
			t.Fatalf("after shutdown job = %s attempt %d, want queued attempt 0", got.State, got.Attempt)
		}
	}
	ws, _ := e.q.Workers(context.Background(), time.Minute)
	if len(ws) != 0 {
		t.Fatalf("worker still registered after shutdown: %+v", ws)
	}
}

func TestHeartbeatRegistry(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{Concurrency: 7, HeartbeatInterval: 50 * time.Millisecond, Queues: []worker.Queue{{Name: "a"}, {Name: "b", Weight: 2}}})
	block := make(chan struct{})
	w.HandleFunc("block", func(context.Context, *job.Job) (any, error) { <-block; return nil, nil })
	stop := start(t, w)
	j := e.submit(t, job.Spec{Type: "block", Queue: "b"})[0]
	queuetest.Eventually(t, 10*time.Second, "worker entry showing the active job", func() bool {
		ws, err := e.q.Workers(context.Background(), time.Minute)
		return err == nil && len(ws) == 1 && ws[0].Concurrency == 7 && len(ws[0].ActiveJobs) == 1 &&
			ws[0].ActiveJobs[0] == j.ID && ws[0].ID == w.ID() && len(ws[0].Queues) == 2
	})
	close(block)
	e.waitState(t, j.ID, job.Succeeded)
	queuetest.Eventually(t, 10*time.Second, "processed counter", func() bool {
		ws, _ := e.q.Workers(context.Background(), time.Minute)
		return len(ws) == 1 && ws[0].Processed == 1 && len(ws[0].ActiveJobs) == 0
	})
	stop()
}

func TestMiddlewareWrapsHandlers(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{})
	var order []string
	var mu sync.Mutex
	mw := func(name string) worker.Middleware {
		return func(next worker.Handler) worker.Handler {
			return worker.HandlerFunc(func(ctx context.Context, j *job.Job) (any, error) {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return next.Work(ctx, j)
			})
		}
	}
	w.Use(mw("outer"), mw("inner"))
	start(t, w)
	j := e.submit(t, job.Spec{Type: "sundial.echo"})[0]
	e.waitState(t, j.ID, job.Succeeded)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(order) != "[outer inner]" {
		t.Fatalf("middleware order = %v", order)
	}
}

// Strict priority under two workers × 20 concurrency: with every job due
// before the workers start, the claims (recorded in order in the queue's
// event stream) take all high jobs, then all normal, then all low.
func TestStrictPriorityAcrossWorkers(t *testing.T) {
	e := newEnv(t)
	var specs []job.Spec
	for i := 0; i < 150; i++ {
		for _, p := range []job.Priority{job.Low, job.Normal, job.High} {
			specs = append(specs, job.Spec{Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":1}`), Priority: p})
		}
	}
	js := e.submit(t, specs...)
	prio := map[string]job.Priority{}
	for _, j := range js {
		prio[j.ID] = j.Priority
	}
	for i := 0; i < 2; i++ {
		start(t, newWorker(e, worker.Config{Concurrency: 20}))
	}
	queuetest.Eventually(t, 30*time.Second, "every job done", func() bool {
		st, _ := e.q.Stats(context.Background(), "default")
		return st[0].SucceededTotal == int64(len(js))
	})
	xs, err := e.rdb.XRange(context.Background(), queue.EventStreamKey("default"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	rank := map[job.Priority]int{job.High: 0, job.Normal: 1, job.Low: 2}
	last, starts := 0, 0
	for _, x := range xs {
		evs, err := queue.ParseEvents("default", x)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Event != job.EventStarted {
				continue
			}
			starts++
			r := rank[prio[ev.JobID]]
			if r < last {
				t.Fatalf("start #%d is %s after a lower priority started", starts, prio[ev.JobID])
			}
			last = r
		}
	}
	if starts != len(js) {
		t.Fatalf("%d starts, want %d", starts, len(js))
	}
}

// An idle worker blocks on the queue's signal and starts a new job at once;
// it does not wait for its safety-net timeout (3 s here, so a job that took
// longer than 1.5 s would mean the wake-up failed).
func TestIdleWorkerWakesOnSubmit(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{IdleWait: 3 * time.Second})
	start(t, w)
	queuetest.Eventually(t, 10*time.Second, "worker registered", func() bool {
		ws, _ := e.q.Workers(context.Background(), time.Minute)
		return len(ws) == 1
	})
	for i := 0; i < 3; i++ {
		j := e.submit(t, job.Spec{Type: "sundial.echo"})[0]
		done := e.waitState(t, j.ID, job.Succeeded)
		if took := done.FinishedAt.Sub(j.CreatedAt); took > 1500*time.Millisecond {
			t.Fatalf("job %d took %v from submit to finish: the idle worker was not woken", i, took)
		}
	}
}

// TestJobsClaimedAfterTheStopAreGivenBack: an idle worker's claim rides
// behind its blocking wait (queue.Client.WaitAndClaim), so a job submitted
// after the worker was told to stop, but before its wait ended, is still
// claimed by Redis. The worker must give it back, not run it.
func TestJobsClaimedAfterTheStopAreGivenBack(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{IdleWait: 2 * time.Second}) // a second inside the 3 s read timeout
	var ran atomic.Int32
	w.HandleFunc("probe", func(context.Context, *job.Job) (any, error) {
		ran.Add(1)
		return nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	queuetest.Eventually(t, 10*time.Second, "the idle worker blocked in its wait", func() bool {
		info, _ := e.rdb.Info(context.Background(), "clients").Result()
		return strings.Contains(info, "blocked_clients:1")
	})
	cancel()
	j := e.submit(t, job.Spec{Type: "probe"})[0]
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop")
	}
	xs, err := e.rdb.XRange(context.Background(), queue.EventStreamKey("default"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	started := false
	for _, x := range xs {
		evs, err := queue.ParseEvents("default", x)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			started = started || (ev.JobID == j.ID && ev.Event == job.EventStarted)
		}
	}
	if !started {
		t.Fatal("the job was never claimed: the wait ended before the submit, so this run tests nothing")
	}
	got := e.state(t, j.ID)
	if ran.Load() != 0 || got.State != job.Queued || got.Attempt != 0 {
		t.Fatalf("handler ran %d times, job %s attempt %d; want it given back unrun (queued, attempt 0)", ran.Load(), got.State, got.Attempt)
	}
}

// TestQueueMaxConcurrency: a queue's MaxConcurrency caps how many of the
// worker's slots its jobs hold; the other queue's jobs run beside them.
func TestQueueMaxConcurrency(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{Concurrency: 6, Queues: []worker.Queue{{Name: "bulk", MaxConcurrency: 2}, {Name: "fast"}}})
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	release := make(chan struct{})
	w.HandleFunc("work", func(_ context.Context, j *job.Job) (any, error) {
		mu.Lock()
		running[j.Queue]++
		most[j.Queue] = max(most[j.Queue], running[j.Queue])
		mu.Unlock()
		if j.Queue == "bulk" {
			<-release
		}
		mu.Lock()
		running[j.Queue]--
		mu.Unlock()
		return nil, nil
	})
	start(t, w)
	var bulk []job.Spec
	for range 8 {
		bulk = append(bulk, job.Spec{Type: "work", Queue: "bulk"})
	}
	bulkJobs := e.submit(t, bulk...)
	queuetest.Eventually(t, 10*time.Second, "two bulk jobs running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running["bulk"] == 2
	})
	// With bulk at its cap, fast jobs still get the free slots.
	var fast []job.Spec
	for range 10 {
		fast = append(fast, job.Spec{Type: "work", Queue: "fast"})
	}
	for _, j := range e.submit(t, fast...) {
		e.waitState(t, j.ID, job.Succeeded)
	}
	close(release)
	for _, j := range bulkJobs {
		e.waitState(t, j.ID, job.Succeeded)
	}
	mu.Lock()
	defer mu.Unlock()
	if most["bulk"] != 2 {
		t.Fatalf("at most %d bulk jobs ran at once, want 2 (the cap)", most["bulk"])
	}
}

// TestShutdownGivesBackOnlyOnceHandlersReturned: at the shutdown deadline
// a handler is cancelled and unwinds for a while; its lease goes back only
// once it returned (or after the lease margin), so the job is never queued
// for another worker while this one still runs it.
func TestShutdownGivesBackOnlyOnceHandlersReturned(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	// A 2 s lease: the margin (a fifth) is 400 ms, more than the unwind.
	e := &env{rdb: rdb, q: queue.New(rdb, queue.Options{LeaseTTL: 2 * time.Second, LeaseGrace: 500 * time.Millisecond})}
	w := worker.New(rdb, worker.Config{ID: queuetest.Name("w"), ShutdownTimeout: 50 * time.Millisecond, Engine: queue.Options{LeaseTTL: 2 * time.Second, LeaseGrace: 500 * time.Millisecond}})
	var running atomic.Int32
	stateAtReturn := make(chan job.State, 1)
	w.HandleFunc("unwinds", func(ctx context.Context, j *job.Job) (any, error) {
		running.Add(1)
		<-ctx.Done()
		time.Sleep(250 * time.Millisecond) // the handler's cleanup after its context ended
		got, err := e.q.Get(context.WithoutCancel(ctx), j.ID)
		if err == nil {
			stateAtReturn <- got.State
		}
		return nil, ctx.Err()
	})
	stop := start(t, w)
	j := e.submit(t, job.Spec{Type: "unwinds", TimeoutSeconds: ptr(3600)})[0]
	queuetest.Eventually(t, 10*time.Second, "the job running", func() bool { return running.Load() == 1 })
	stop()
	select {
	case st := <-stateAtReturn:
		if st != job.Active {
			t.Fatalf("the job was %s while its cancelled handler still ran: given back before the handler returned", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return")
	}
	if got := e.state(t, j.ID); got.State != job.Queued || got.Attempt != 0 {
		t.Fatalf("after shutdown job = %s attempt %d, want queued attempt 0", got.State, got.Attempt)
	}
}

// What a handler logs with Logger is kept with its job, every line sent
// before the outcome (the last lines of a job that ends at once too).
func TestLoggerKeepsLinesWithTheJob(t *testing.T) {
	e := newEnv(t)
	w := newWorker(e, worker.Config{Concurrency: 1})
	w.HandleFunc("chatty", func(ctx context.Context, j *job.Job) (any, error) {
		log := worker.Logger(ctx).With("job", j.ID)
		for i := range 150 {
			log.Info("working", "i", i)
		}
		log.WithGroup("db").Warn("slow query", "ms", 812)
		log.Debug("done")
		return nil, nil
	})
	j := e.submit(t, job.Spec{Type: "chatty"})[0]
	start(t, w)
	e.waitState(t, j.ID, job.Succeeded)
	lines, dropped, err := e.q.Logs(context.Background(), job.DefaultQueue, j.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 152 || dropped != 0 {
		t.Fatalf("%d lines kept, %d dropped; want 152, 0", len(lines), dropped)
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d: out of order", i, l.Seq)
		}
	}
	if l := lines[150]; l.Level != "warn" || l.Message != "slow query" || l.Fields["db.ms"] != "812" || l.Fields["job"] != j.ID {
		t.Fatalf("line 151: %+v", l)
	}
	if l := lines[151]; l.Level != "debug" || l.Attempt != 1 {
		t.Fatalf("line 152: %+v", l)
	}
	worker.Logger(context.Background()).Info("outside a handler: discarded")
}
