package hatest_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestScaleOutCurve measures drain throughput of no-op jobs spread over N
// queues by 1, 2 and 4 worker processes, on one Redis, on a 3-master Redis
// Cluster and on one with a replica per master (AOF everysec everywhere). It is a measurement, not a check, so
// it runs only when asked (docs/benchmarks/2026-11.md has the results):
//
//	SUNDIAL_SCALEOUT=1 go test ./internal/hatest -run TestScaleOutCurve -v -timeout 20m
//
// SUNDIAL_SCALEOUT_JOBS (default 30000) and SUNDIAL_SCALEOUT_QUEUES
// (default 12) change the load.
func TestScaleOutCurve(t *testing.T) {
	if os.Getenv("SUNDIAL_SCALEOUT") == "" {
		t.Skip("a measurement: set SUNDIAL_SCALEOUT=1 to run it")
	}
	jobs := envInt(t, "SUNDIAL_SCALEOUT_JOBS", 30000)
	nq := envInt(t, "SUNDIAL_SCALEOUT_QUEUES", 12)

	// Every server alike: AOF with fsync every second.
	single := queuetest.Start(t)
	cl := hatest.StartClusterReplicas(t, 0)
	clr := hatest.StartCluster(t)
	clusterQueues := clusterQueuesOf(cl, nq)
	var rows []string
	for _, topo := range []struct {
		name, url string
		queues    []string
	}{
		{"one Redis", single.URL(), clusterQueues},
		{"3-master cluster", cl.Seeds(), clusterQueues},
		{"3 masters + 3 replicas", clr.Seeds(), clusterQueuesOf(clr, nq)},
	} {
		for _, workers := range []int{1, 2, 4} {
			rate := drain(t, topo.url, topo.queues, workers, jobs)
			rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %.0f |", topo.name, len(topo.queues), workers, jobs, rate))
			t.Log(rows[len(rows)-1])
		}
	}
	t.Logf("\n| Redis | queues | worker processes | jobs | jobs/s |\n|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// clusterQueuesOf returns n queue names spread evenly over c's shards.
func clusterQueuesOf(c *hatest.Cluster, n int) []string {
	var out []string
	for _, on := range c.QueuesOnShards("scale", (n+2)/3) {
		for _, q := range on {
			if len(out) < n {
				out = append(out, q)
			}
		}
	}
	return out
}

// drain pauses queues, submits jobs no-op jobs over them in batches, starts
// workers worker processes (concurrency 50 each), resumes the queues and
// returns jobs per second from the resume until every job succeeded.
func drain(t *testing.T, url string, queues []string, workers, jobs int) float64 {
	ctx := context.Background()
	rdb, err := config.NewRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	run := fmt.Sprintf("r%d", time.Now().UnixNano()%1e6)
	names := queues
	q := queue.New(rdb, queue.Options{})
	before := succeeded(t, q, names)
	for _, n := range names {
		if err := q.Pause(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	per := jobs / len(names)
	for _, n := range names {
		for done := 0; done < per; done += 1000 {
			batch := make([]*job.Job, 0, 1000)
			for i := 0; i < 1000 && done+i < per; i++ {
				spec := job.Spec{Queue: n, Type: "sundial.echo"}
				j, err := spec.Build(time.Now())
				if err != nil {
					t.Fatal(err)
				}
				batch = append(batch, j)
			}
			if _, err := q.Submit(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	var procs []*proctest.Proc
	for i := range workers {
		procs = append(procs, proctest.Start(t, proctest.Binary(t, "worker"),
			"SUNDIAL_REDIS_URL="+url, "SUNDIAL_QUEUES="+strings.Join(names, ","),
			"SUNDIAL_CONCURRENCY=50", "SUNDIAL_LOG_LEVEL=warn", "SUNDIAL_METRICS_ADDR=off",
			fmt.Sprintf("SUNDIAL_WORKER_ID=scale-%s-%d", run, i)))
	}
	hatest.Eventually(t, 30*time.Second, "workers registered", func() bool {
		ws, err := q.Workers(ctx, time.Minute)
		n := 0
		for _, w := range ws {
			if strings.HasPrefix(w.ID, "scale-"+run) {
				n++
			}
		}
		return err == nil && n == workers
	})
	start := time.Now()
	for _, n := range names {
		if err := q.Resume(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// Poll the counters every 50 ms (not faster: the poll is load too).
	want := before + int64(per*len(names))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for succeeded(t, q, names) < want {
		if time.Since(start) > 5*time.Minute {
			t.Fatal("the jobs did not drain within 5 minutes")
		}
		<-tick.C
	}
	took := time.Since(start)
	for _, p := range procs {
		p.Kill()
	}
	return float64(per*len(names)) / took.Seconds()
}

func succeeded(t *testing.T, q *queue.Client, names []string) int64 {
	stats, err := q.Stats(context.Background(), names...)
	if err != nil {
		return -1
	}
	var n int64
	for _, s := range stats {
		n += s.SucceededTotal
	}
	return n
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s: want a positive number", name)
	}
	return n
}
