package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// BenchmarkFireEverySecond runs 10,000 schedules that fire every second
// against a private Redis for SUNDIAL_SCHEDULE_BENCH_SECONDS (default 10;
// the run is 60) and reports the fire lateness (from the fire time
// to the return of its guarded submit) and whether any fire time was missed
// or fired twice. Run it once:
//
//	SUNDIAL_SCHEDULE_BENCH_SECONDS=60 go test -run '^$' -bench FireEverySecond -benchtime 1x ./pkg/schedule
//
// The private Redis persists with AOF (appendfsync everysec), as queuetest
// starts it; SUNDIAL_SCHEDULE_BENCH_REDIS=redis://… runs against another
// server instead (its database must be empty; the benchmark flushes it).
//
// spread: interval schedules, each counting from its creation (as the
// store anchors them), created at evenly spread instants of one second —
// schedules created at different times, as in a real system.
// aligned: "* * * * * *" cron schedules, all due at the same instant each
// second: the worst case.
func BenchmarkFireEverySecond(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("SUNDIAL_SCHEDULE_BENCH_COUNT")); err == nil && v > 0 {
		n = v
	}
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("SUNDIAL_SCHEDULE_BENCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	for _, mode := range []string{"spread", "aligned"} {
		b.Run(mode, func(b *testing.B) {
			timing := `"every_seconds": 1`
			if mode == "aligned" {
				timing = `"cron": "* * * * * *"`
			}
			fireBench(b, n, time.Duration(secs)*time.Second, timing)
		})
	}
}

func fireBench(b *testing.B, n int, window time.Duration, timing string) {
	rdb := benchRedis(b)
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()

	// The scheduler runs from the start, so that every schedule's first
	// fire time lies ahead of it: no catch-up burst.
	var mu sync.Mutex
	fires := make([]Fire, 0, n*int(window/time.Second+5))
	sch := NewScheduler(q, SchedulerConfig{
		Fire:   FireClient(rdb, queue.Options{}),
		Logger: slog.New(slog.DiscardHandler),
		OnFire: func(f Fire) {
			mu.Lock()
			fires = append(fires, f)
			mu.Unlock()
		},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = sch.Run(runCtx); close(done) }()

	// The store's clock creates schedule i at phase i/n of the current
	// second, so interval schedules start at evenly spread instants, and
	// their first fire time (creation + 1 s) is still ahead.
	var created atomic.Int64
	st := NewStore(queue.New(rdb, queue.Options{Now: func() time.Time {
		phase := time.Duration(created.Add(1)-1) * time.Second / time.Duration(n)
		return time.Now().Truncate(time.Second).Add(phase % time.Second)
	}}))
	const queues = 4
	var wg sync.WaitGroup
	ids := make(chan int, n)
	for i := range n {
		ids <- i
	}
	close(ids)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				s, err := Decode(fmt.Appendf(nil, `{"id": "s%d", %s, "job": {"queue": "bench%d", "type": "tick"}}`, i, timing, i%queues))
				if err == nil {
					_, _, err = st.Put(ctx, s)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		stop()
		<-done
		return
	}

	cpu0, self0 := redisCPU(ctx, q), selfCPU()
	b.ResetTimer()
	started := time.Now()
	time.Sleep(window) // the benchmark's measuring window
	stop()
	<-done
	b.StopTimer()
	elapsed := time.Since(started).Seconds()
	if os.Getenv("SUNDIAL_SCHEDULE_BENCH_STATS") != "" {
		fmt.Fprintln(os.Stderr, q.Redis().Info(ctx, "commandstats").Val())
	}
	redisBusy := (redisCPU(ctx, q) - cpu0) / elapsed
	selfBusy := (selfCPU() - self0) / elapsed

	// Fire times from one second after the last schedule was created to
	// one second before the end.
	from, to := started.Add(time.Second), started.Add(window-time.Second)
	var late []time.Duration
	per := map[string][]time.Time{}
	for _, f := range fires {
		if f.At.Before(from) || f.At.After(to) {
			continue
		}
		late = append(late, f.Done.Sub(f.At))
		per[f.Schedule] = append(per[f.Schedule], f.At)
	}
	missed, twice := 0, 0
	for i := range n {
		times := per["s"+strconv.Itoa(i)]
		slices.SortFunc(times, func(a, c time.Time) int { return a.Compare(c) })
		for j := 1; j < len(times); j++ {
			switch d := times[j].Sub(times[j-1]); {
			case d == 0:
				twice++
			case d > time.Second:
				missed += int(d/time.Second) - 1
			}
		}
		if len(times) == 0 {
			missed += int(to.Sub(from) / time.Second)
		}
	}
	if os.Getenv("SUNDIAL_SCHEDULE_BENCH_STATS") != "" {
		bySec := map[int64][]time.Duration{}
		for _, f := range fires {
			sec := int64(f.At.Sub(started) / time.Second)
			bySec[sec] = append(bySec[sec], f.Done.Sub(f.At))
		}
		for sec := int64(-3); sec <= int64(window/time.Second); sec++ {
			l := bySec[sec]
			slices.Sort(l)
			if len(l) > 0 {
				fmt.Fprintf(os.Stderr, "second %d: %d fires, p50 %v p99 %v max %v\n", sec, len(l), l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
			}
		}
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration {
		if len(late) == 0 {
			return 0
		}
		return late[min(len(late)-1, int(p*float64(len(late))))]
	}
	b.ReportMetric(float64(len(late))/to.Sub(from).Seconds(), "fires/s")
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(pct(1).Microseconds())/1000, "max_ms")
	b.ReportMetric(float64(missed), "missed")
	b.ReportMetric(float64(twice), "twice")
	b.ReportMetric(float64(infoInt(ctx, q, "persistence", "aof_rewrites")), "aof_rewrites")
	b.ReportMetric(redisBusy*100, "redis_cpu_%")
	b.ReportMetric(selfBusy*100, "sched_cpu_%")
	b.Logf("%d schedules, %v window: %d fires measured, lateness p50 %v p99 %v max %v, %d missed, %d fired twice; CPU: redis-server %.0f%%, scheduler %.0f%% of one core",
		n, window, len(late), pct(0.5), pct(0.99), pct(1), missed, twice, redisBusy*100, selfBusy*100)
}

// redisCPU returns the CPU seconds redis-server has used so far.
func redisCPU(ctx context.Context, q *queue.Client) float64 {
	info := q.Redis().Info(ctx, "cpu").Val()
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// selfCPU returns the CPU seconds this process has used so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// benchRedis returns a client of the benchmark's Redis: a private server,
// or the empty database named by SUNDIAL_SCHEDULE_BENCH_REDIS.
func benchRedis(b *testing.B) redis.UniversalClient {
	url := os.Getenv("SUNDIAL_SCHEDULE_BENCH_REDIS")
	if url == "" {
		return queuetest.Start(b).Client()
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	ctx := context.Background()
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		b.Fatalf("SUNDIAL_SCHEDULE_BENCH_REDIS: database must be empty (%d keys, %v)", n, err)
	}
	b.Cleanup(func() {
		rdb.FlushDB(ctx)
		rdb.Close()
	})
	return rdb
}

// infoInt reads one integer field of Redis' INFO section.
func infoInt(ctx context.Context, q *queue.Client, section, field string) int64 {
	for _, line := range strings.Split(q.Redis().Info(ctx, section).Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
