package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/runsink"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestRedisRolledBackRunsNoJobTwiceAtOnce: Redis is restarted from an
// older copy of its append-only files while workers run jobs, as after
// losing its disk's last writes or restoring a backup. The restored Redis
// has forgotten leases it granted (and jobs that ended since): jobs run
// again — at least once — but no second run of a job may overlap one that
// was still going, and no fencing token is handed out twice (issue 32,
// findings 3 and the rollback fault). Runs are recorded outside Redis, by
// a sink the jobs call.
func TestRedisRolledBackRunsNoJobTwiceAtOnce(t *testing.T) {
	t.Parallel()
	srv := queuetest.StartWith(t, "--appendfsync", "always")
	sink := runsink.Start(t)
	env := serviceEnv(srv, "SUNDIAL_HTTP_JOB_ALLOW=127.0.0.1", "SUNDIAL_CONCURRENCY=4", "SUNDIAL_SHUTDOWN_TIMEOUT=1s")
	for i := range 2 {
		startProc(t, binary(t, "worker"), append(env, fmt.Sprintf("SUNDIAL_WORKER_ID=w%d", i))...)
	}
	startProc(t, binary(t, "poller"), append(env, "SUNDIAL_HISTORY=off")...)
	q := queue.New(srv.Client(), queue.Options{})
	var specs []job.Spec
	for i := range 40 {
		// Runs of 150 ms to 2.5 s: some run across the rollback.
		ms := 150 + (i%8)*300
		specs = append(specs, job.Spec{Type: "sundial.http", MaxAttempts: ptr(25), TimeoutSeconds: ptr(30),
			Backoff: &job.Backoff{BaseSeconds: 0.05, MaxSeconds: 0.2},
			Payload: []byte(fmt.Sprintf(`{"method":"POST","url":"%s/run?ms=%d"}`, sink.URL, ms))})
	}
	jobs := submit(t, q, specs)
	// The older snapshot: once some jobs ran, copy the append-only files.
	queuetest.Eventually(t, 20*time.Second, "some jobs to finish", func() bool {
		c, err := q.Counts(context.Background(), "default")
		return err == nil && c.SucceededTotal >= 4
	})
	aof := filepath.Join(srv.Dir(), "appendonlydir")
	snapshot := t.TempDir()
	if err := os.CopyFS(snapshot, os.DirFS(aof)); err != nil {
		t.Fatal(err)
	}
	// Let more jobs start and end, then lose it all back to the snapshot.
	queuetest.Eventually(t, 20*time.Second, "more jobs to finish", func() bool {
		c, err := q.Counts(context.Background(), "default")
		return err == nil && c.SucceededTotal >= 12 && c.Active > 0
	})
	srv.Kill()
	if err := os.RemoveAll(aof); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(aof, os.DirFS(snapshot)); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	for _, j := range jobs {
		queuetest.Eventually(t, 60*time.Second, "job "+j.ID+" to succeed after the rollback", func() bool {
			got, err := q.Get(context.Background(), j.ID)
			return err == nil && got.State == job.Succeeded
		})
	}
	overlaps, committed, fenced := sink.Overlaps(t)
	t.Logf("runs committed %d, stale attempts refused by token %d, overlapping %d", committed, fenced, overlaps)
	if overlaps > 0 {
		t.Fatalf("%d pairs of runs of one job overlapped after the rollback", overlaps)
	}
	// Nor did the sink have to refuse a stale writer to prevent one: a
	// second run started only once the first had stopped (without the
	// restored server's wait of a lease TTL before claims, it had to).
	if fenced > 0 {
		t.Fatalf("the sink refused %d stale attempts: a second run started while the first still ran", fenced)
	}
	seen := map[int64]bool{}
	for _, f := range sink.Fences() {
		if seen[f] {
			t.Fatalf("fence %d handed out twice", f)
		}
		seen[f] = true
	}
	if committed < len(jobs) {
		t.Fatalf("%d runs committed for %d jobs", committed, len(jobs))
	}
}
