package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// stepSink is the system outside Redis that durable steps write to: it
// refuses a request whose fencing token is older than one it saw for the
// job (a stale attempt), and applies each step's side effect once per
// idempotency key, answering a key applied before with its value (the
// retry of a step whose attempt crashed after the side effect, before its
// record). It counts how often each key was applied: never more than once.
type stepSink struct {
	URL string

	mu      sync.Mutex
	newest  map[string]int64 // job → the highest fence seen
	applied map[string]int   // idempotency key → times applied
	again   int              // requests for a key applied before
	stale   int              // requests refused for an older token
}

func startStepSink(t *testing.T) *stepSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stepSink{URL: "http://" + ln.Addr().String(), newest: map[string]int64{}, applied: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *stepSink) serve(w http.ResponseWriter, r *http.Request) {
	key, jobID, token := r.URL.Query().Get("key"), r.URL.Query().Get("job"), r.URL.Query().Get("token")
	f, _, _ := strings.Cut(token, "-")
	fence, err := strconv.ParseInt(f, 10, 64)
	if key == "" || err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.newest[jobID] {
		s.stale++
		http.Error(w, "stale token", http.StatusConflict)
		return
	}
	s.newest[jobID] = fence
	if s.applied[key] > 0 {
		s.again++
	} else {
		s.applied[key]++
	}
	_, _ = w.Write([]byte("v:" + key))
}

func (s *stepSink) appliedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.applied)
}

// buildDurableWorker builds internal/e2e/durableworker, a worker program
// written as a user writes one, with durable steps.
func buildDurableWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "durableworker")
	out, err := exec.Command("go", "build", "-race", "-o", bin, "github.com/sundialhq/sundial/internal/e2e/durableworker").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
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
	sink := startStepSink(t)
	bin := buildDurableWorker(t)
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
		queuetest.Eventually(t, 120*time.Second, what, func() bool { return sink.appliedCount() >= n })
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
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.applied) != total {
		t.Fatalf("%d side effects applied; want %d", len(sink.applied), total)
	}
	for k, n := range sink.applied {
		if n != 1 {
			t.Fatalf("the side effect of %s applied %d times", k, n)
		}
	}
	t.Logf("%d jobs × %d steps: each side effect applied once; %d step runs answered as applied before (their attempt died after the side effect, before the record), %d stale writes refused",
		jobs, steps, sink.again, sink.stale)
}
