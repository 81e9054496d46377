package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/worker"
)

// promoting makes the queues' due jobs ready, and relays their batches'
// ends and fires the batches' callbacks, every few milliseconds until the
// test ends, as a poller does.
func promoting(t *testing.T, e *env, queueNames ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, q := range queueNames {
				_, _, _ = e.q.Promote(ctx, q, 100)
				_, _ = e.q.RelayBatchEnds(ctx, q, 100)
			}
			_, _ = e.q.FireBatchCallbacks(ctx, 100)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// A step runs once per job: an attempt that fails after two steps is
// retried, and the retry gets the two results back without running them.
func TestStepsRunOncePerJob(t *testing.T) {
	e := newEnv(t)
	promoting(t, e, "default")
	var ran [3]atomic.Int32
	var attempts atomic.Int32
	w := newWorker(e, worker.Config{Concurrency: 2})
	w.HandleFunc("order", func(ctx context.Context, j *job.Job) (any, error) {
		attempts.Add(1)
		a, err := worker.Step(ctx, "reserve", func(context.Context) (int, error) { ran[0].Add(1); return 41, nil })
		if err != nil {
			return nil, err
		}
		b, err := worker.Step(ctx, "charge", func(context.Context) (string, error) { ran[1].Add(1); return "ch_1", nil })
		if err != nil {
			return nil, err
		}
		if j.Attempt == 1 {
			return nil, errors.New("crash after two steps")
		}
		c, err := worker.Step(ctx, "email", func(context.Context) (bool, error) { ran[2].Add(1); return true, nil })
		if err != nil {
			return nil, err
		}
		return map[string]any{"a": a + 1, "b": b, "c": c}, nil
	})
	start(t, w)
	jobs := e.submit(t, job.Spec{Type: "order", Backoff: &job.Backoff{BaseSeconds: 0.05, MaxSeconds: 0.05}})
	got := e.waitState(t, jobs[0].ID, job.Succeeded)
	if string(got.Result) != `{"a":42,"b":"ch_1","c":true}` {
		t.Fatalf("result %s", got.Result)
	}
	for i := range ran {
		if n := ran[i].Load(); n != 1 {
			t.Fatalf("step %d ran %d times over %d attempts; want once", i+1, n, attempts.Load())
		}
	}
	if got.Durable == nil || len(got.Durable.Steps) != 3 || got.Durable.Steps[1].Name != "charge" || string(got.Durable.Steps[1].Result) != `"ch_1"` {
		t.Fatalf("recorded steps %+v", got.Durable)
	}
}

// A sleep parks the job (no worker, no lease) and it resumes after it,
// skipping the steps before; a wait for a signal parks it until the
// signal comes, and a signal sent before the wait is read at once.
func TestSleepAndSignals(t *testing.T) {
	e := newEnv(t)
	promoting(t, e, "default")
	var charged, emailed atomic.Int32
	w := newWorker(e, worker.Config{Concurrency: 4})
	w.HandleFunc("flow", func(ctx context.Context, j *job.Job) (any, error) {
		if _, err := worker.Step(ctx, "charge", func(context.Context) (int, error) { return int(charged.Add(1)), nil }); err != nil {
			return nil, err
		}
		if err := worker.Sleep(ctx, 300*time.Millisecond); err != nil {
			return nil, err
		}
		var p struct{ Key string }
		_ = json.Unmarshal(j.Payload, &p)
		var opts []worker.WaitOption
		if p.Key != "" {
			opts = append(opts, worker.SignalKey(p.Key))
		}
		v, err := worker.WaitSignal[string](ctx, "shipped", time.Minute, opts...)
		if err != nil {
			return nil, err
		}
		if _, err := worker.Step(ctx, "email", func(context.Context) (int, error) { return int(emailed.Add(1)), nil }); err != nil {
			return nil, err
		}
		return v, nil
	})
	start(t, w)
	ctx := context.Background()
	jobs := e.submit(t, job.Spec{Type: "flow"}, job.Spec{Type: "flow"}, job.Spec{Type: "flow", Payload: json.RawMessage(`{"Key":"order-7"}`)})
	// Job 0: the signal comes while it waits. Job 1: before its wait began
	// (during the sleep). Job 2: by key, before the job chose the key.
	if st, _, err := e.q.SendSignal(ctx, queue.Signal{Queue: "default", ID: jobs[1].ID, Name: "shipped", Value: json.RawMessage(`"early"`), IdempotencyKey: "k1"}); err != nil || st != queue.SignalDelivered {
		t.Fatalf("early signal: %v %v", st, err)
	}
	if st, _, err := e.q.SendSignal(ctx, queue.Signal{Queue: "default", ID: jobs[1].ID, Name: "shipped", Value: json.RawMessage(`"early"`), IdempotencyKey: "k1"}); err != nil || st != queue.SignalDuplicate {
		t.Fatalf("the same signal again: %v %v; want duplicate", st, err)
	}
	if st, _, err := e.q.SendSignal(ctx, queue.Signal{Queue: "default", ID: jobs[1].ID, Name: "shipped", Value: json.RawMessage(`"other"`)}); err != nil || st != queue.SignalConflict {
		t.Fatalf("another signal of the name: %v %v; want conflict", st, err)
	}
	if st, _, err := e.q.SendSignal(ctx, queue.Signal{Queue: "default", Key: "order-7", Name: "shipped", Value: json.RawMessage(`"by key"`)}); err != nil || st != queue.SignalPending {
		t.Fatalf("signal by key before the wait: %v %v; want pending", st, err)
	}
	var j0 *job.Job
	queuetest.Eventually(t, 10*time.Second, "job 0 to wait for its signal", func() bool {
		j0 = e.state(t, jobs[0].ID)
		return j0.HeldBack != nil && j0.HeldBack.Reason == job.HeldSignal
	})
	if j0.State != job.Scheduled || !strings.Contains(j0.HeldBack.Message, `"shipped"`) {
		t.Fatalf("waiting job: %s %+v", j0.State, j0.HeldBack)
	}
	queuetest.Eventually(t, 10*time.Second, "the queue to count one job awaiting a signal", func() bool {
		c, err := e.q.Counts(ctx, "default")
		return err == nil && c.Awaiting == 1
	})
	if st, id, err := e.q.SendSignal(ctx, queue.Signal{Queue: "default", ID: jobs[0].ID, Name: "shipped", Value: json.RawMessage(`"late"`)}); err != nil || st != queue.SignalDelivered || id != jobs[0].ID {
		t.Fatalf("signal: %v %s %v", st, id, err)
	}
	for i, want := range []string{`"late"`, `"early"`, `"by key"`} {
		got := e.waitState(t, jobs[i].ID, job.Succeeded)
		if string(got.Result) != want {
			t.Fatalf("job %d: result %s, want %s", i, got.Result, want)
		}
	}
	if c, err := e.q.Counts(ctx, "default"); err != nil || c.Awaiting != 0 || c.Sleeping != 0 {
		t.Fatalf("parked counts after every job ended: %+v %v", c, err)
	}
	if charged.Load() != 3 || emailed.Load() != 3 {
		t.Fatalf("charged %d, emailed %d times for 3 jobs", charged.Load(), emailed.Load())
	}
	if st, _, _ := e.q.SendSignal(ctx, queue.Signal{Queue: "default", ID: jobs[0].ID, Name: "other"}); st != queue.SignalFinished {
		t.Fatalf("a signal to an ended job: %v; want finished", st)
	}
}

// A wait whose timeout passes resumes with ErrSignalTimeout, recorded.
func TestWaitSignalTimesOut(t *testing.T) {
	e := newEnv(t)
	promoting(t, e, "default")
	w := newWorker(e, worker.Config{})
	w.HandleFunc("approve", func(ctx context.Context, _ *job.Job) (any, error) {
		_, err := worker.WaitSignal[bool](ctx, "approved", 200*time.Millisecond)
		if errors.Is(err, worker.ErrSignalTimeout) {
			return "timed out", nil
		}
		return nil, err
	})
	start(t, w)
	jobs := e.submit(t, job.Spec{Type: "approve"})
	got := e.waitState(t, jobs[0].ID, job.Succeeded)
	if string(got.Result) != `"timed out"` || got.Durable == nil || got.Durable.Steps[0].Status != job.StepTimeout {
		t.Fatalf("result %s, steps %+v", got.Result, got.Durable)
	}
}

// A handler whose steps changed under a running job fails with an error
// naming the step.
func TestChangedStepsFailClearly(t *testing.T) {
	e := newEnv(t)
	promoting(t, e, "default")
	w := newWorker(e, worker.Config{})
	w.HandleFunc("v", func(ctx context.Context, j *job.Job) (any, error) {
		name := "charge"
		if j.Attempt > 1 {
			name = "refund" // the code changed
		}
		if _, err := worker.Step(ctx, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		if j.Attempt == 1 {
			return nil, errors.New("crash")
		}
		return nil, nil
	})
	start(t, w)
	jobs := e.submit(t, job.Spec{Type: "v", MaxAttempts: ptr(2), Backoff: &job.Backoff{BaseSeconds: 0.05, MaxSeconds: 0.05}})
	got := e.waitState(t, jobs[0].ID, job.Dead)
	if !strings.Contains(got.LastError, `step 1 is "refund" in the handler but the job recorded "charge"`) {
		t.Fatalf("last error %q", got.LastError)
	}
}

// An attempt that lost its lease records nothing: its step's record is
// refused, and the next attempt runs the step.
func TestStaleAttemptRecordsNoStep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	jobs := e.submit(t, job.Spec{Type: "t"})
	ls, err := e.q.Claim(ctx, "default", 1, "w1")
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	stale := ls[0]
	if _, err := e.q.Cancel(ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.q.RecordStep(ctx, "default", stale, queue.StepWrite{Seq: 1, Record: job.StepRecord(job.StepOK, "s", time.Now(), time.Now(), "1")})
	if !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("a cancelled attempt's step: %v; want ErrLeaseLost", err)
	}
	if got := e.state(t, jobs[0].ID); got.Durable != nil {
		t.Fatalf("recorded %+v", got.Durable)
	}
}

// A parent spawns children in two queues and awaits them parked; each
// child runs once, and the parent gets their ends in order.
func TestRunChildren(t *testing.T) {
	e := newEnv(t)
	promoting(t, e, "default", "other")
	var spawned, childRuns atomic.Int32
	w := newWorker(e, worker.Config{Concurrency: 4, Queues: []worker.Queue{{Name: "default"}, {Name: "other"}}})
	w.HandleFunc("child", func(ctx context.Context, j *job.Job) (any, error) {
		childRuns.Add(1)
		var n int
		_ = json.Unmarshal(j.Payload, &n)
		if n == 2 {
			return nil, worker.NoRetry(errors.New("child 2 fails"))
		}
		return n * 10, nil
	})
	w.HandleFunc("parent", func(ctx context.Context, j *job.Job) (any, error) {
		var kids []*job.Job
		for i := range 3 {
			q := "default"
			if i%2 == 1 {
				q = "other"
			}
			k, err := (&job.Spec{Queue: q, Type: "child", Payload: json.RawMessage(strconv.Itoa(i))}).Build(time.Now())
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		if j.Attempt == 1 {
			spawned.Add(1)
		}
		res, err := worker.RunChildren(ctx, "fan", kids)
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, r := range res {
			out = append(out, r.Queue+":"+string(r.State)+":"+string(r.Result))
		}
		return out, nil
	})
	start(t, w)
	jobs := e.submit(t, job.Spec{Type: "parent"})
	got := e.waitState(t, jobs[0].ID, job.Succeeded)
	if string(got.Result) != `["default:succeeded:0","other:succeeded:10","default:dead:"]` {
		t.Fatalf("result %s", got.Result)
	}
	if childRuns.Load() != 3 {
		t.Fatalf("children ran %d times; want 3", childRuns.Load())
	}
}

// With AwaitFirst the parent runs again once the first child ended, and
// gets the children as they stood then; the others go on.
func TestRunChildrenAwaitFirst(t *testing.T) {
	e := newEnv(t)
	promoting(t, e, "default")
	release := make(chan struct{})
	var slowDone atomic.Int32
	w := newWorker(e, worker.Config{Concurrency: 4})
	w.HandleFunc("kid", func(ctx context.Context, j *job.Job) (any, error) {
		if string(j.Payload) == `"slow"` {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			slowDone.Add(1)
		}
		return strings.Trim(string(j.Payload), `"`), nil
	})
	w.HandleFunc("parent", func(ctx context.Context, j *job.Job) (any, error) {
		var kids []*job.Job
		for _, p := range []string{`"slow"`, `"fast"`, `"slow"`} {
			k, _ := (&job.Spec{Type: "kid", Payload: json.RawMessage(p)}).Build(time.Now())
			kids = append(kids, k)
		}
		res, err := worker.RunChildren(ctx, "race", kids, worker.AwaitFirst())
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, r := range res {
			out = append(out, string(r.State)+":"+string(r.Result))
		}
		return out, nil
	})
	start(t, w)
	jobs := e.submit(t, job.Spec{Type: "parent"})
	got := e.waitState(t, jobs[0].ID, job.Succeeded)
	defer close(release)
	var res []string
	if err := json.Unmarshal(got.Result, &res); err != nil || len(res) != 3 || res[1] != `succeeded:"fast"` ||
		strings.HasPrefix(res[0], "succeeded") || strings.HasPrefix(res[2], "succeeded") {
		t.Fatalf("result %s", got.Result)
	}
	release <- struct{}{}
	release <- struct{}{}
	queuetest.Eventually(t, 10*time.Second, "the slow children to end anyway", func() bool { return slowDone.Load() == 2 })
}

// A job's steps hold at most queue.MaxJobStepBytes together: the step past
// it fails the job for good, with the limit in its error, and nothing of
// it is recorded.
func TestStepsOfAJobAreBounded(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 200<<10)
	w := newWorker(e, worker.Config{})
	w.HandleFunc("hoard", func(ctx context.Context, _ *job.Job) (any, error) {
		for i := range 30 {
			if _, err := worker.Step(ctx, "s"+strconv.Itoa(i), func(context.Context) (string, error) { return big, nil }); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	start(t, w)
	jobs := e.submit(t, job.Spec{Type: "hoard"})
	got := e.waitState(t, jobs[0].ID, job.Dead)
	if !strings.Contains(got.LastError, "4194304 bytes together") || got.Durable == nil || len(got.Durable.Steps) != 20 {
		n := 0
		if got.Durable != nil {
			n = len(got.Durable.Steps)
		}
		t.Fatalf("last error %q, %d steps recorded", got.LastError, n)
	}
}

// A signal to a running job is recorded as an event of its running
// attempt (state active, its attempt number): the job's hash does not say
// it runs, its active record does.
func TestSignalEventOfARunningJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	jobs := e.submit(t, job.Spec{Type: "t"})
	if ls, err := e.q.Claim(ctx, "default", 1, "w1"); err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	if st, _, err := e.q.SendSignal(ctx, queue.Signal{Queue: "default", ID: jobs[0].ID, Name: "go"}); err != nil || st != queue.SignalDelivered {
		t.Fatal(st, err)
	}
	xs, err := e.rdb.XRange(ctx, queue.EventStreamKey("default"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range xs {
		evs, err := queue.ParseEvents("default", x)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Event == job.EventSignal {
				got = append(got, string(ev.State)+"/"+strconv.Itoa(ev.Attempt)+"/"+ev.Message)
			}
		}
	}
	if len(got) != 1 || got[0] != "active/1/go" {
		t.Fatalf("signal events %v; want one of the running attempt", got)
	}
}
