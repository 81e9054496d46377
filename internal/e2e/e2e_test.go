// Package e2e tests Sundial's binaries as processes against a real
// redis-server: crashes (kill -9) of workers and of Redis, SIGTERM, and a
// rolling upgrade (the previous release's services beside these).
package e2e

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func binary(t *testing.T, name string) string { return proctest.Binary(t, name) }

func TestMain(m *testing.M) {
	code := m.Run()
	proctest.Cleanup()
	os.Exit(code)
}

func startProc(t *testing.T, bin string, env ...string) *proctest.Proc {
	t.Helper()
	return proctest.Start(t, bin, env...)
}

func serviceEnv(srv *queuetest.Server, extra ...string) []string {
	return append([]string{
		"SUNDIAL_REDIS_URL=" + srv.URL(),
		"SUNDIAL_LOG_LEVEL=warn",
		"SUNDIAL_LEASE_GRACE=200ms",
		"SUNDIAL_LEASE_TTL=1s",
		"SUNDIAL_METRICS_ADDR=127.0.0.1:0",
		"SUNDIAL_HEARTBEAT_INTERVAL=200ms",
	}, extra...)
}

func submit(t *testing.T, q *queue.Client, specs []job.Spec) []*job.Job {
	t.Helper()
	jobs := make([]*job.Job, len(specs))
	for i := range specs {
		j, err := specs[i].Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		jobs[i] = j
	}
	for start := 0; start < len(jobs); start += 500 {
		if _, err := q.Submit(context.Background(), jobs[start:min(start+500, len(jobs))]); err != nil {
			t.Fatal(err)
		}
	}
	return jobs
}

func ptr[T any](v T) *T { return &v }

// eventCounts counts each job's events of each type in queue's stream.
func eventCounts(t *testing.T, rdb *redis.Client, queueName string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	xs, err := rdb.XRange(context.Background(), queue.EventStreamKey(queueName), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		evs, err := queue.ParseEvents(queueName, x)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if out[e.JobID] == nil {
				out[e.JobID] = map[string]int{}
			}
			out[e.JobID][string(e.Event)]++
		}
	}
	return out
}

// waitAllFinal waits until the n jobs submitted to the default queue are
// all in a final state.
func waitAllFinal(t *testing.T, q *queue.Client, n int, timeout time.Duration) {
	t.Helper()
	queuetest.Eventually(t, timeout, "every job in a final state", func() bool {
		st, err := q.Stats(context.Background(), "default")
		if err != nil || len(st) == 0 {
			return false
		}
		s := st[0]
		return s.Queued["high"]+s.Queued["normal"]+s.Queued["low"]+s.Throttled+s.Scheduled+s.Active+s.Waiting == 0 &&
			s.SubmittedTotal == int64(n)
	})
}

// TestWorkerKilledMidJob kills one of two worker processes with SIGKILL
// while it runs jobs. Every job must still end exactly once in a final
// state: the dead worker's leases expire, the poller puts the jobs back
// (lease_expired), and the other worker runs them.
func TestWorkerKilledMidJob(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	startProc(t, binary(t, "poller"), serviceEnv(srv)...)
	victim := startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_CONCURRENCY=20", "SUNDIAL_WORKER_ID=victim")...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_CONCURRENCY=20", "SUNDIAL_WORKER_ID=survivor")...)

	const n = 600
	specs := make([]job.Spec, n)
	for i := range specs {
		specs[i] = job.Spec{Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":20}`),
			TimeoutSeconds: ptr(1), MaxAttempts: ptr(10), Backoff: &job.Backoff{}}
	}
	jobs := submit(t, q, specs)

	// Kill the victim while it holds leases.
	queuetest.Eventually(t, 20*time.Second, "victim running jobs", func() bool {
		ws, _ := q.Workers(context.Background(), time.Minute)
		for _, w := range ws {
			if w.ID == "victim" && len(w.ActiveJobs) > 0 && w.Processed > 20 {
				return true
			}
		}
		return false
	})
	victim.Kill()

	waitAllFinal(t, q, len(jobs), 60*time.Second)
	counts := eventCounts(t, rdb, "default")
	expired := 0
	for _, j := range jobs {
		got, err := q.Get(context.Background(), j.ID)
		if err != nil {
			t.Fatalf("job %s lost: %v", j.ID, err)
		}
		if got.State != job.Succeeded {
			t.Fatalf("job %s ended %s (%s)", j.ID, got.State, got.LastError)
		}
		c := counts[j.ID]
		if c["succeeded"] != 1 || c["dead"]+c["cancelled"] != 0 {
			t.Fatalf("job %s final events: %v", j.ID, c)
		}
		expired += c["lease_expired"]
	}
	if expired == 0 {
		t.Fatal("no lease expired: the kill did not hit a running job")
	}
	t.Logf("%d jobs, %d leases expired and were retried", n, expired)
}

// TestRedisRestart kills redis-server (-9) and restarts it from its
// append-only file while jobs are queued and scheduled and the services
// run: nothing is lost and the services reconnect on their own.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	// fsync every write so that kill -9 loses nothing (everysec may lose ~1 s).
	if err := rdb.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	q := queue.New(rdb, queue.Options{})
	if err := q.Pause(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	startProc(t, binary(t, "poller"), serviceEnv(srv)...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_CONCURRENCY=10")...)
	var specs []job.Spec
	for i := 0; i < 300; i++ {
		s := job.Spec{Type: "sundial.echo", Priority: job.Priorities[i%3]}
		if i%2 == 0 {
			s.DelaySeconds = ptr(1.0)
		}
		specs = append(specs, s)
	}
	jobs := submit(t, q, specs)

	srv.Restart()
	if err := rdb.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if got := st[0].Queued["high"] + st[0].Queued["normal"] + st[0].Queued["low"] + st[0].Scheduled; got != 300 {
		t.Fatalf("after restart %d jobs queued or scheduled, want 300", got)
	}
	if err := q.Resume(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	waitAllFinal(t, q, len(jobs), 60*time.Second)
	counts := eventCounts(t, rdb, "default")
	for _, j := range jobs {
		if c := counts[j.ID]; c["succeeded"] != 1 {
			t.Fatalf("job %s: events %v", j.ID, c)
		}
	}
}

// TestWorkerSIGTERMGivesLeasesBack stops a worker process with SIGTERM
// while its jobs run far longer than the shutdown timeout: it exits 0 at
// once and its jobs are queued again without waiting for their lease.
func TestWorkerSIGTERMGivesLeasesBack(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	w := startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_SHUTDOWN_TIMEOUT=200ms", "SUNDIAL_CONCURRENCY=5")...)
	var specs []job.Spec
	for i := 0; i < 5; i++ {
		specs = append(specs, job.Spec{Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":3600000}`), TimeoutSeconds: ptr(3600)})
	}
	jobs := submit(t, q, specs)
	queuetest.Eventually(t, 20*time.Second, "all five jobs active", func() bool {
		st, _ := q.Stats(context.Background(), "default")
		return len(st) == 1 && st[0].Active == 5
	})
	if !w.Signal(syscall.SIGTERM, 15*time.Second) {
		t.Fatal("worker did not exit after SIGTERM")
	}
	if code := w.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, j := range jobs {
		got, err := q.Get(context.Background(), j.ID)
		if err != nil || got.State != job.Queued || got.Attempt != 0 {
			t.Fatalf("job after SIGTERM = %+v, %v", got, err)
		}
	}
}

// TestWorkerExitsWithinItsShutdownTimeout: with SUNDIAL_SHUTDOWN_TIMEOUT=2s
// and a 30 s job running, a worker exits within 2 s (+300 ms) of SIGTERM,
// the promise the Helm chart's terminationGracePeriodSeconds is computed
// from (issue 33, item 2: it exited after 2.8 s, the deadline counted from
// when its claim loop noticed, up to a wait for work later).
func TestWorkerExitsWithinItsShutdownTimeout(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{})
	w := startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_SHUTDOWN_TIMEOUT=2s", "SUNDIAL_CONCURRENCY=4")...)
	j := submit(t, q, []job.Spec{{Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":30000}`), TimeoutSeconds: ptr(60)}})[0]
	queuetest.Eventually(t, 20*time.Second, "the job active", func() bool {
		got, err := q.Get(context.Background(), j.ID)
		return err == nil && got.State == job.Active
	})
	for range 3 { // SIGTERM at a few moments of the idle slots' waits
		start := time.Now()
		if !w.Signal(syscall.SIGTERM, 10*time.Second) {
			t.Fatal("worker did not exit within 10 s of SIGTERM")
		}
		if d := time.Since(start); d > 2300*time.Millisecond {
			t.Fatalf("worker exited %v after SIGTERM; want within the 2 s shutdown timeout + 300 ms", d)
		}
		if code := w.ExitCode(); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		got, err := q.Get(context.Background(), j.ID)
		if err != nil || got.State != job.Queued {
			t.Fatalf("job after SIGTERM = %+v, %v; want given back", got, err)
		}
		w.Restart(t)
		queuetest.Eventually(t, 20*time.Second, "the job active again", func() bool {
			got, err := q.Get(context.Background(), j.ID)
			return err == nil && got.State == job.Active
		})
	}
}
