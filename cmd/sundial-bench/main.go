// Command sundial-bench measures the engine on a Redis you point it at
// (loopback only): drain throughput, batch and single submit rates,
// enqueue→start latency at a fixed rate, and lateness of many jobs due
// within the same second. Each scenario uses its own fresh queue, deletes its keys
// when done, and stops by itself.
//
//	sundial-bench -redis redis://127.0.0.1:6379/0 -scenario all
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/buildinfo"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/worker"
)

type options struct {
	redisURL    string
	scenario    string
	jobs        int
	concurrency int
	workers     int
	producers   int
	rate        int
	duration    time.Duration
	due         int
	dueSpread   time.Duration
}

func main() {
	if buildinfo.IsVersionFlag(os.Args[1:]) {
		fmt.Println(buildinfo.String("bench"))
		return
	}
	var o options
	flag.StringVar(&o.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL (must be on loopback)")
	flag.StringVar(&o.scenario, "scenario", "all", "drain | batch | single | latency | due | all")
	flag.IntVar(&o.jobs, "jobs", 100_000, "jobs for drain, batch and single")
	flag.IntVar(&o.concurrency, "concurrency", 50, "total worker concurrency")
	flag.IntVar(&o.workers, "workers", 2, "worker instances sharing the concurrency")
	flag.IntVar(&o.producers, "producers", 16, "concurrent producers for single submits")
	flag.IntVar(&o.rate, "rate", 1000, "jobs per second for the latency scenario")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the latency scenario")
	flag.IntVar(&o.due, "due", 50_000, "jobs for the due scenario")
	flag.DurationVar(&o.dueSpread, "due-spread", time.Second, "due scenario: the jobs' due times spread evenly over this span (0 = all due at one instant, as peerbench's row)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memprofile := flag.String("memprofile", "", "write a profile of the whole run's allocations to this file at its end")
	flag.Parse()
	if *memprofile != "" {
		defer writeAllocs(*memprofile)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail("cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("cpuprofile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}

	opt, err := redis.ParseURL(o.redisURL)
	if err != nil {
		fail("bad -redis: %v", err)
	}
	if host := strings.Split(opt.Addr, ":")[0]; host != "127.0.0.1" && host != "localhost" && host != "::1" {
		fail("refusing to load %s: sundial-bench only targets loopback", (&url.URL{Host: opt.Addr}).Host)
	}
	opt.PoolSize = 128
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fail("redis: %v", err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	fmt.Printf("sundial-bench: redis %s, %d jobs, concurrency %d over %d workers\n", opt.Addr, o.jobs, o.concurrency, o.workers)
	scenarios := map[string]func(context.Context, *redis.Client, options){
		"batch": benchBatch, "single": benchSingle, "drain": benchDrain, "latency": benchLatency, "due": benchDue,
	}
	order := []string{"batch", "single", "drain", "latency", "due"}
	if o.scenario != "all" {
		if scenarios[o.scenario] == nil {
			fail("unknown scenario %q", o.scenario)
		}
		order = []string{o.scenario}
	}
	for _, name := range order {
		scenarios[name](ctx, rdb, o)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sundial-bench: "+format+"\n", args...)
	os.Exit(2)
}

// freshQueue returns a queue name no one uses and a cleanup that deletes its keys.
func freshQueue(ctx context.Context, rdb *redis.Client, name string) (string, func()) {
	q := fmt.Sprintf("bench-%s-%d", name, time.Now().UnixNano())
	return q, func() {
		for _, pattern := range []string{"sundial:{" + q + "}:*", "sundial:job:{" + q + "}:*"} {
			iter := rdb.Scan(ctx, 0, pattern, 5000).Iterator()
			var batch []string
			for iter.Next(ctx) {
				batch = append(batch, iter.Val())
				if len(batch) == 5000 {
					rdb.Unlink(ctx, batch...)
					batch = batch[:0]
				}
			}
			if len(batch) > 0 {
				rdb.Unlink(ctx, batch...)
			}
		}
		rdb.SRem(ctx, "sundial:queues", q)
	}
}

func build(q string, n int, mod func(*job.Spec)) []*job.Job {
	now := time.Now()
	out := make([]*job.Job, n)
	for i := range out {
		s := job.Spec{Queue: q, Type: "noop"}
		if mod != nil {
			mod(&s)
		}
		j, err := s.Build(now)
		if err != nil {
			fail("build: %v", err)
		}
		out[i] = j
	}
	return out
}

func submitBatches(ctx context.Context, c *queue.Client, jobs []*job.Job) {
	for i := 0; i < len(jobs); i += 1000 {
		if _, err := c.Submit(ctx, jobs[i:min(i+1000, len(jobs))]); err != nil {
			fail("submit: %v", err)
		}
	}
}

func benchBatch(ctx context.Context, rdb *redis.Client, o options) {
	q, cleanup := freshQueue(ctx, rdb, "batch")
	defer cleanup()
	c := queue.New(rdb, queue.Options{})
	jobs := build(q, o.jobs, nil)
	start := time.Now()
	// Four producers, 1000-job batches.
	var wg sync.WaitGroup
	per := (len(jobs) + 3) / 4
	for p := 0; p < 4; p++ {
		part := jobs[min(p*per, len(jobs)):min((p+1)*per, len(jobs))]
		wg.Add(1)
		go func() { defer wg.Done(); submitBatches(ctx, c, part) }()
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("batch submit:   %d jobs in %v = %.0f jobs/s (1000-job batches, 4 producers)\n", len(jobs), el.Round(time.Millisecond), float64(len(jobs))/el.Seconds())
}

func benchSingle(ctx context.Context, rdb *redis.Client, o options) {
	q, cleanup := freshQueue(ctx, rdb, "single")
	defer cleanup()
	c := queue.New(rdb, queue.Options{})
	n := o.jobs / 2
	jobs := build(q, n, nil)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < o.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := c.Submit(ctx, jobs[i:i+1]); err != nil {
					fail("submit: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("single submit:  %d jobs in %v = %.0f jobs/s (%d producers, one job per call)\n", n, el.Round(time.Millisecond), float64(n)/el.Seconds(), o.producers)
}

// runWorkers starts o.workers workers over q sharing o.concurrency with
// handler h, and returns a stop function.
func runWorkers(rdb *redis.Client, o options, q string, h worker.HandlerFunc) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < o.workers; i++ {
		w := worker.New(rdb, worker.Config{
			Queues: []worker.Queue{{Name: q}}, Concurrency: max(o.concurrency/o.workers, 1),
			ID: fmt.Sprintf("bench-%d-%d", os.Getpid(), i), ShutdownTimeout: 5 * time.Second,
		})
		w.Handle("noop", h)
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	return func() { cancel(); wg.Wait() }
}

func waitDone(ctx context.Context, c *queue.Client, q string, n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		st, err := c.Stats(ctx, q)
		if err == nil && st[0].SucceededTotal >= n {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func benchDrain(ctx context.Context, rdb *redis.Client, o options) {
	q, cleanup := freshQueue(ctx, rdb, "drain")
	defer cleanup()
	c := queue.New(rdb, queue.Options{})
	submitBatches(ctx, c, build(q, o.jobs, nil))
	profBefore := redisProfile(ctx, rdb)
	cpuBefore := processCPU()
	start := time.Now()
	stop := runWorkers(rdb, o, q, func(context.Context, *job.Job) (any, error) { return nil, nil })
	ok := waitDone(ctx, c, q, int64(o.jobs), 5*time.Minute)
	el := time.Since(start)
	stop()
	prof := redisProfile(ctx, rdb).since(profBefore)
	if !ok {
		fmt.Printf("drain:          did not finish in 5 minutes\n")
		return
	}
	fmt.Printf("drain:          %d no-op jobs in %v = %.0f jobs/s (concurrency %d); %.2f Redis commands per job (incl. stats polling)\n",
		o.jobs, el.Round(time.Millisecond), float64(o.jobs)/el.Seconds(), o.concurrency, float64(prof.commands())/float64(o.jobs))
	fmt.Printf("                this process (workers, poller, the bench's polling) %.1f µs of CPU per job\n",
		(processCPU()-cpuBefore).Seconds()*1e6/float64(o.jobs))
	prof.print(o.jobs)
}

// processCPU is the CPU time this process used so far (user+system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profile is what Redis reports of its own work: CPU seconds (user+sys)
// and, per command, calls and microseconds (INFO commandstats; a script's
// commands count both in the script's time and on their own).
type profile struct {
	cpu   float64
	calls map[string]int64
	usec  map[string]int64
}

// redisProfile reads the profile now; zero on error (the figures are then
// not printed meaningfully, but the bench goes on).
func redisProfile(ctx context.Context, rdb *redis.Client) profile {
	p := profile{calls: map[string]int64{}, usec: map[string]int64{}}
	info, err := rdb.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return p
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			var f float64
			fmt.Sscan(v, &f)
			p.cpu += f
		}
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			var n int64
			fmt.Sscan(v, &n)
			switch k {
			case "calls":
				p.calls[name] = n
			case "usec":
				p.usec[name] = n
			}
		}
	}
	return p
}

// since is the difference p − before.
func (p profile) since(before profile) profile {
	d := profile{cpu: p.cpu - before.cpu, calls: map[string]int64{}, usec: map[string]int64{}}
	for k, v := range p.calls {
		if n := v - before.calls[k]; n > 0 {
			d.calls[k] = n
			d.usec[k] = p.usec[k] - before.usec[k]
		}
	}
	return d
}

// commands counts the commands of the profile (a script call once, plus
// the commands it runs).
func (p profile) commands() int64 {
	n := int64(0)
	for _, c := range p.calls {
		n += c
	}
	return n
}

// print writes the profile per job: Redis CPU, then each command's calls
// and time, most time first.
func (p profile) print(jobs int) {
	n := float64(jobs)
	fmt.Printf("                Redis CPU %.1f µs per job (user+sys, every client included)\n", p.cpu*1e6/n)
	names := make([]string, 0, len(p.calls))
	for k := range p.calls {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return int(p.usec[b] - p.usec[a]) })
	for _, k := range names {
		fmt.Printf("                %-16s %6.3f calls  %6.2f µs per job  (%.1f µs per call)\n", k, float64(p.calls[k])/n, float64(p.usec[k])/n, float64(p.usec[k])/float64(p.calls[k]))
	}
}

// writeAllocs writes the allocations made since the process started
// (pprof's "allocs" profile: look at it with -sample_index=alloc_space).
func writeAllocs(path string) {
	f, err := os.Create(path)
	if err != nil {
		fail("memprofile: %v", err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fail("memprofile: %v", err)
	}
}

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	slices.Sort(d)
	p := func(q float64) time.Duration { return d[min(int(q*float64(len(d))), len(d)-1)] }
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  max %v  (n=%d)", p(0.5).Round(10*time.Microsecond), p(0.9).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond), len(d))
}

func benchLatency(ctx context.Context, rdb *redis.Client, o options) {
	q, cleanup := freshQueue(ctx, rdb, "latency")
	defer cleanup()
	c := queue.New(rdb, queue.Options{})
	var mu sync.Mutex
	var lat []time.Duration
	sent := map[string]time.Time{}
	stop := runWorkers(rdb, o, q, func(_ context.Context, j *job.Job) (any, error) {
		now := time.Now()
		mu.Lock()
		if t, ok := sent[j.ID]; ok {
			lat = append(lat, now.Sub(t))
		}
		mu.Unlock()
		return nil, nil
	})
	defer stop()
	total := int(o.duration.Seconds() * float64(o.rate))
	interval := time.Second / time.Duration(o.rate)
	start := time.Now()
	for i := 0; i < total; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		j := build(q, 1, nil)[0]
		mu.Lock()
		sent[j.ID] = time.Now()
		mu.Unlock()
		if _, err := c.Submit(ctx, []*job.Job{j}); err != nil {
			fail("submit: %v", err)
		}
	}
	waitDone(ctx, c, q, int64(total), time.Minute)
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("latency:        enqueue→start at %d jobs/s for %v: %s\n", o.rate, o.duration, percentiles(lat))
}

func benchDue(ctx context.Context, rdb *redis.Client, o options) {
	q, cleanup := freshQueue(ctx, rdb, "due")
	defer cleanup()
	c := queue.New(rdb, queue.Options{})
	pctx, stopPoller := context.WithCancel(ctx)
	pdone := make(chan struct{})
	go func() { _ = poller.New(queue.New(rdb, queue.Options{}), poller.Config{}).Run(pctx); close(pdone) }()
	defer func() { stopPoller(); <-pdone }()

	var mu sync.Mutex
	var startLate []time.Duration
	stop := runWorkers(rdb, o, q, func(_ context.Context, j *job.Job) (any, error) {
		d := time.Since(j.RunAt)
		mu.Lock()
		startLate = append(startLate, d)
		mu.Unlock()
		return nil, nil
	})
	defer stop()
	// Due times spread evenly over -due-spread, three seconds from now.
	dueAt := time.Now().Add(3 * time.Second).Truncate(time.Second)
	jobs := build(q, o.due, nil)
	runAt := map[string]time.Time{}
	for i, j := range jobs {
		j.RunAt = dueAt.Add(time.Duration(i) * o.dueSpread / time.Duration(len(jobs)))
		j.State = job.Scheduled
		runAt[j.ID] = j.RunAt
	}
	submitBatches(ctx, c, jobs)
	if time.Now().After(dueAt) {
		fmt.Printf("due:            submitting took longer than the 3 s lead; results are not meaningful\n")
	}
	time.Sleep(time.Until(dueAt))
	profBefore := redisProfile(ctx, rdb)
	waitDone(ctx, c, q, int64(o.due), 2*time.Minute)
	prof := redisProfile(ctx, rdb).since(profBefore)
	// Promotion lateness from the stream: queued event time − run_at.
	var promoteLate []time.Duration
	last := "-"
	for {
		xs, err := rdb.XRangeN(ctx, queue.EventStreamKey(q), last, "+", 10000).Result()
		if err != nil || len(xs) == 0 {
			break
		}
		for _, x := range xs {
			evs, _ := queue.ParseEvents(q, x)
			for _, ev := range evs {
				if ev.Event == job.EventQueued {
					promoteLate = append(promoteLate, ev.At.Sub(runAt[ev.JobID]))
				}
			}
		}
		if len(xs) < 10000 {
			break
		}
		last = "(" + xs[len(xs)-1].ID
	}
	fmt.Printf("due (promote):  %d jobs due over %v, queued-after-due %s\n", o.due, o.dueSpread, percentiles(promoteLate))
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("due (start):    handler-start-after-due %s (bounded by drain throughput)\n", percentiles(startLate))
	fmt.Printf("                from the first due time until every job finished:\n")
	prof.print(o.due)
}
