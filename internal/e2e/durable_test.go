package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/internal/runsink"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// durableWorker is internal/e2e/durableworker, a worker program written
// as a user writes one, with durable steps.
func durableWorker(t *testing.T) string {
	return proctest.Program(t, "github.com/sundialhq/sundial/internal/e2e/durableworker")
}

// TestDurableStepsUnderCrashes is the proof of docs/durable.md: 1,000 jobs
// of 5 steps each, run by two worker processes while one is killed (-9)
// and restarted, Redis is killed (-9) and restarted from its AOF, and the
// other worker is killed too. Every job succeeds with the values its steps
// got, every step's side effect was applied once at the sink, and the sink
// refused every write of a stale attempt.
func TestDurableStepsUnderCrashes(t *testing.T) {
	const jobs, steps = 1000, 5
	srv := queuetest.StartWith(t, "--appendfsync", "always")
	sink := runsink.Start(t)
	bin := durableWorker(t)
	env := serviceEnv(srv, "SINK_URL="+sink.URL, "STEPS="+strconv.Itoa(steps), "SUNDIAL_CONCURRENCY=16")
	startProc(t, binary(t, "poller"), serviceEnv(srv)...)
	workers := []*proctest.Proc{
		startProc(t, bin, append(env, "SUNDIAL_WORKER_ID=dw-1")...),
		startProc(t, bin, append(env, "SUNDIAL_WORKER_ID=dw-2")...),
	}
	q := queue.New(srv.Client(), queue.Options{})
	specs := make([]job.Spec, jobs)
	for i := range specs {
		specs[i] = job.Spec{Type: "pipeline", MaxAttempts: ptr(25), Backoff: &job.Backoff{BaseSeconds: 0.05, MaxSeconds: 0.5}}
	}
	submitted := submit(t, q, specs)
	total := jobs * steps
	atApplied := func(n int, what string) {
		queuetest.Eventually(t, 120*time.Second, what, func() bool { return sink.AppliedWithPrefix("") >= n })
	}
	atApplied(total/5, "a fifth of the steps applied")
	workers[0].Kill()
	workers[0].Restart(t)
	atApplied(total*2/5, "two fifths of the steps applied")
	srv.Kill()
	srv.Restart()
	atApplied(total*3/5, "three fifths of the steps applied")
	workers[1].Kill()
	workers[1].Restart(t)
	ctx := context.Background()
	queuetest.Eventually(t, 180*time.Second, "every job to succeed", func() bool {
		st, err := q.Stats(ctx, "default")
		return err == nil && len(st) == 1 && st[0].SucceededTotal == jobs
	})
	for _, j := range submitted {
		got, err := q.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		if err := json.Unmarshal(got.Result, &vals); err != nil || len(vals) != steps {
			t.Fatalf("job %s: result %s (%v)", j.ID, got.Result, err)
		}
		for i, v := range vals {
			if want := "v:default/" + j.ID + "/s" + strconv.Itoa(i+1); v != want {
				t.Fatalf("job %s step %d: value %q, want %q", j.ID, i+1, v, want)
			}
		}
		if got.Durable == nil || len(got.Durable.Steps) != steps {
			t.Fatalf("job %s: recorded steps %+v", j.ID, got.Durable)
		}
	}
	applied, again, stale := sink.Applied()
	if len(applied) != total {
		t.Fatalf("%d side effects applied; want %d", len(applied), total)
	}
	for k, n := range applied {
		if n != 1 {
			t.Fatalf("the side effect of %s applied %d times", k, n)
		}
	}
	t.Logf("%d jobs × %d steps: each side effect applied once; %d step runs answered as applied before (their attempt died after the side effect, before the record), %d stale writes refused",
		jobs, steps, again, stale)
}

// TestDurableOrderFromOutside runs docs/durable.md's example (order →
// charge → wait for "shipped" → sleep → email) with the real binaries and
// a Go-library worker, driven over HTTP: a signal sent before the wait
// (by key, before any job chose it), one during it, a duplicate, one
// refused, a wait that times out, and a 2 s sleep across a worker killed
// (-9) and restarted. Each side effect is applied once at the sink.
func TestDurableOrderFromOutside(t *testing.T) {
	srv := queuetest.StartWith(t, "--appendfsync", "always")
	sink := runsink.Start(t)
	bin := durableWorker(t)
	addr := proctest.FreeAddr(t)
	startProc(t, binary(t, "api"), serviceEnv(srv, "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_HISTORY=off")...)
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_HISTORY=off")...)
	w := startProc(t, bin, serviceEnv(srv, "SINK_URL="+sink.URL, "SUNDIAL_WORKER_ID=orders-1")...)
	api := &proctest.API{HTTP: &http.Client{Timeout: 10 * time.Second}, URLs: []string{"http://" + addr}}
	queuetest.Eventually(t, 30*time.Second, "the API ready", func() bool { return proctest.Ready(api.HTTP, api.URLs[0]) })
	call := func(method, path string, body any, want int) []byte {
		t.Helper()
		code, b, err := api.Call(method, path, body, 20*time.Second)
		if err != nil || code != want {
			t.Fatalf("%s %s: %d %s %v; want %d", method, path, code, b, err, want)
		}
		return b
	}
	get := func(id string) job.Job {
		t.Helper()
		var j job.Job
		if err := json.Unmarshal(call("GET", "/v1/jobs/"+id, nil, http.StatusOK), &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	submit := func(order string, timeoutMS int) string {
		t.Helper()
		var j job.Job
		b := call("POST", "/v1/jobs", map[string]any{"type": "order", "max_attempts": 5,
			"payload": map[string]any{"order": order, "sleep_ms": 2000, "timeout_ms": timeoutMS}}, http.StatusCreated)
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	// Before: the signal for order 1 goes to its key before its job exists.
	call("POST", "/v1/signals", map[string]any{"queue": "default", "key": "order-1", "name": "shipped", "value": "dhl"}, http.StatusAccepted)
	early := submit("1", 60_000)
	during := submit("2", 60_000)
	never := submit("3", 1500)
	queuetest.Eventually(t, 30*time.Second, "order 2 parked, waiting for its signal", func() bool {
		j := get(during)
		return j.HeldBack != nil && j.HeldBack.Reason == job.HeldSignal
	})
	// During: by id, then the same again (a retry) and another (refused).
	call("POST", "/v1/jobs/"+during+"/signals/shipped", map[string]any{"value": "ups", "idempotency_key": "ship-2"}, http.StatusOK)
	var dup struct{ Status string }
	_ = json.Unmarshal(call("POST", "/v1/jobs/"+during+"/signals/shipped", map[string]any{"value": "ups", "idempotency_key": "ship-2"}, http.StatusOK), &dup)
	if dup.Status != "duplicate" {
		t.Fatalf("the same signal again: %q, want duplicate", dup.Status)
	}
	call("POST", "/v1/jobs/"+during+"/signals/shipped", map[string]any{"value": "fedex"}, http.StatusConflict)
	// Order 2 now sleeps 2 s; the worker dies meanwhile and a new one
	// takes over (order 1, shipped before its wait, may have woken already).
	queuetest.Eventually(t, 30*time.Second, "order 2 asleep", func() bool {
		b := get(during)
		return b.HeldBack != nil && b.HeldBack.Reason == job.HeldSleeping
	})
	w.Kill()
	w.Restart(t)
	for id, carrier := range map[string]string{early: "dhl", during: "ups"} {
		var j job.Job
		queuetest.Eventually(t, 30*time.Second, "order "+id+" to succeed", func() bool { j = get(id); return j.State == job.Succeeded })
		var res map[string]string
		if err := json.Unmarshal(j.Result, &res); err != nil || res["carrier"] != carrier || res["charge"] != "v:default/"+id+"/charge" || res["email"] != "v:default/"+id+"/email" {
			t.Fatalf("order %s: result %s", id, j.Result)
		}
		steps := j.Durable.Steps
		if len(steps) != 4 || steps[2].Name != "sleep" || steps[2].EndedAt == nil {
			t.Fatalf("order %s: steps %+v", id, steps)
		}
		if slept := time.Time(*steps[2].EndedAt).Sub(time.Time(steps[2].StartedAt)); slept < 2*time.Second {
			t.Fatalf("order %s slept %v; want 2 s", id, slept)
		}
	}
	j := get(never)
	queuetest.Eventually(t, 30*time.Second, "order 3 to give up", func() bool { j = get(never); return j.State == job.Cancelled })
	if j.LastError != "never shipped" || j.Durable.Steps[1].Status != job.StepTimeout {
		t.Fatalf("order 3: %s %q %+v", j.State, j.LastError, j.Durable.Steps)
	}
	// After: a signal to an order that ended is refused.
	call("POST", "/v1/jobs/"+never+"/signals/shipped", map[string]any{"value": "late"}, http.StatusConflict)
	applied, _, _ := sink.Applied()
	for k, n := range applied {
		if n != 1 {
			t.Fatalf("%s applied %d times", k, n)
		}
	}
	if len(applied) != 5 { // two charges and two emails of the shipped orders, one charge of the other
		t.Fatalf("%d side effects applied: %v", len(applied), applied)
	}
}

// TestTenThousandSleepingJobs: 10,000 jobs sleep at once under a worker of
// concurrency 1 — parked jobs hold no worker — and all wake and succeed.
func TestTenThousandSleepingJobs(t *testing.T) {
	const n = 10_000
	srv := queuetest.StartWith(t, "--appendonly", "no")
	bin := durableWorker(t)
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_HISTORY=off")...)
	startProc(t, bin, serviceEnv(srv, "SINK_URL=http://127.0.0.1:9", "SUNDIAL_CONCURRENCY=1", "SUNDIAL_WORKER_ID=napper")...)
	q := queue.New(srv.Client(), queue.Options{})
	specs := make([]job.Spec, n)
	for i := range specs {
		specs[i] = job.Spec{Type: "nap", Payload: json.RawMessage(`40000`)} // parking them all took 4.5 s here
	}
	ctx := context.Background()
	start := time.Now()
	submit(t, q, specs)
	queuetest.Eventually(t, 120*time.Second, "every job asleep at once", func() bool {
		st, err := q.Stats(ctx, "default")
		return err == nil && len(st) == 1 && st[0].Scheduled == n && st[0].Sleeping == n
	})
	t.Logf("%d jobs asleep after %v (one worker slot)", n, time.Since(start).Round(time.Millisecond))
	queuetest.Eventually(t, 240*time.Second, "every job to wake and succeed", func() bool {
		st, err := q.Stats(ctx, "default")
		return err == nil && len(st) == 1 && st[0].SucceededTotal == n
	})
	if st, err := q.Stats(ctx, "default"); err != nil || st[0].Sleeping != 0 || st[0].Scheduled != 0 {
		t.Fatalf("after every job woke: %+v %v", st, err)
	}
}
