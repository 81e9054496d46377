package worker_test

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
	"github.com/sundialhq/sundial/pkg/worker"
)

// BenchmarkDurableJobs runs b.N jobs through a worker (concurrency 50) on
// a redis-server without AOF: plain jobs, and jobs of 5 steps each
// (docs/durable.md, "What it costs"). It reports jobs/s, steps/s and the
// Redis CPU per job.
//
//	go test -run X -bench DurableJobs -benchtime 20000x ./pkg/worker/
func BenchmarkDurableJobs(b *testing.B) {
	for _, steps := range []int{0, 5} {
		b.Run(strconv.Itoa(steps)+"-steps", func(b *testing.B) {
			srv := queuetest.StartWith(b, "--appendonly", "no")
			rdb := srv.Client()
			q := queue.New(rdb, queue.Options{})
			w := worker.New(rdb, worker.Config{Concurrency: 50, ID: "bench"})
			w.HandleFunc("t", func(ctx context.Context, j *job.Job) (any, error) {
				for i := range steps {
					if _, err := worker.Step(ctx, "s"+strconv.Itoa(i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return nil, err
					}
				}
				return nil, nil
			})
			ctx := context.Background()
			for start := 0; start < b.N; start += 1000 {
				jobs := make([]*job.Job, min(1000, b.N-start))
				for i := range jobs {
					jobs[i], _ = (&job.Spec{Type: "t"}).Build(time.Now())
				}
				if _, err := q.Submit(ctx, jobs); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := redisCPU(b, rdb)
			b.ResetTimer()
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(runCtx) }()
			for {
				st, err := q.Stats(ctx, "default")
				if err == nil && st[0].SucceededTotal >= int64(b.N) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			cancel()
			<-done
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(float64(b.N*steps)/b.Elapsed().Seconds(), "steps/s")
			b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis-µs/job")
		})
	}
}

// redisCPU is Redis' CPU seconds so far (INFO cpu: system + user).
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, l := range strings.Split(info, "\r\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(l, f); ok {
				n, _ := strconv.ParseFloat(v, 64)
				total += n
			}
		}
	}
	return total
}
