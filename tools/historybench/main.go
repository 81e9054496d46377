// Command historybench measures the history writer against a MongoDB (or
// the FerretDB stand-in) while real jobs flow through Redis: the history
// lag at a fixed job rate, and the queue's own throughput with the writer
// off and on, in one run.
//
//	scripts/mongo-standin.sh &                       # FerretDB on 127.0.0.1:27017
//	go run ./tools/historybench -rate 2000 -d 30s -sat 15s
//
// Jobs are submitted in small batches and run by pkg/worker with a no-op
// handler (submitted, started, succeeded: three events per job). Without
// -redis it starts a private redis-server (AOF everysec, like production)
// on a free port; with -redis the Redis must hold nothing else, as the
// writer records every queue it finds. The MongoDB database
// historybench_<pid> is dropped at the end unless -keep.
//
// Phases: rate off, rate on (lag measured), then saturation off/on
// alternated -rounds times. Each phase reports jobs/s, job latency (created
// → handler start) and the machine's CPU use from /proc/stat.
package main

import (
	"github.com/sundialhq/sundial/internal/freeport"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/worker"
)

type options struct {
	redisURL, mongoURI string
	rate               float64
	duration, sat      time.Duration
	rounds             int
	linger, hold       time.Duration
	watch              string
	concurrency        int
	keep, verbose      bool
}

func main() {
	var o options
	flag.StringVar(&o.redisURL, "redis", "", "Redis URL holding nothing else (default: start a private redis-server)")
	flag.StringVar(&o.mongoURI, "mongo", "mongodb://127.0.0.1:27017", "MongoDB or FerretDB URI")
	flag.Float64Var(&o.rate, "rate", 2000, "jobs per second in the rate phases")
	flag.DurationVar(&o.duration, "d", 30*time.Second, "length of each rate phase")
	flag.DurationVar(&o.sat, "sat", 15*time.Second, "length of each saturation phase (0 skips them)")
	flag.IntVar(&o.rounds, "rounds", 2, "saturation off/on pairs")
	flag.IntVar(&o.concurrency, "c", 200, "worker concurrency")
	flag.BoolVar(&o.keep, "keep", false, "keep the MongoDB database")
	flag.BoolVar(&o.verbose, "v", false, "log the writer's debug lines to stderr")
	flag.DurationVar(&o.linger, "linger", 0, "the writer's Linger (0: its default)")
	flag.StringVar(&o.watch, "watch", "", "more processes to report CPU for, name=pid,… (their children included), e.g. ferretdb=123,postgres=456")
	flag.DurationVar(&o.hold, "hold", 0, "the writer's Hold (0: its default)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "historybench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := context.Background()
	procs := []proc{{"bench", os.Getpid()}}
	if o.redisURL == "" {
		url, pid, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		o.redisURL = url
		procs = append(procs, proc{"redis", pid})
	}
	for _, w := range strings.Split(o.watch, ",") {
		if w == "" {
			continue
		}
		name, pid, ok := strings.Cut(w, "=")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil {
			return fmt.Errorf("-watch: %q is not name=pid", w)
		}
		procs = append(procs, proc{name, n})
	}
	ropts, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return err
	}
	ropts.PoolSize = 4 * o.concurrency
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	q := queue.New(rdb, queue.Options{})
	if qs, err := q.Queues(ctx); err != nil || len(qs) > 0 {
		return fmt.Errorf("the Redis at %s must be empty of Sundial queues (found %v, %v)", o.redisURL, qs, err)
	}
	client, err := history.Connect(o.mongoURI)
	if err != nil {
		return err
	}
	defer client.Disconnect(ctx)
	db := client.Database(fmt.Sprintf("historybench_%d", os.Getpid()))
	if !o.keep {
		defer db.Drop(ctx)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := history.NewStore(db, history.StoreOptions{Logger: quiet})
	if err := store.Setup(ctx); err != nil {
		return err
	}
	server := "MongoDB"
	if store.FerretDB() {
		server = "FerretDB"
	}
	fmt.Printf("historybench: %s, rate %.0f jobs/s for %v, saturation %v × %d, worker concurrency %d, %d CPUs\n",
		server, o.rate, o.duration, o.sat, o.rounds, o.concurrency, numCPU())

	b := &bench{o: o, rdb: rdb, q: q, store: store, log: quiet, wlog: quiet, procs: procs}
	if o.verbose {
		b.wlog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b.phase(ctx, "rate, writer off", false, o.rate, o.duration)
	// The writer-off phase's events are a backlog, as after a MongoDB
	// outage of that length: time how long a writer takes to record it.
	b.catchUp(ctx)
	on := b.phase(ctx, "rate, writer on", true, o.rate, o.duration)
	fmt.Printf("  history lag (oldest unrecorded event, sampled every 100 ms): p50 %v  p99 %v  max %v\n",
		pct(on.lags, 50), pct(on.lags, 99), pct(on.lags, 100))
	fmt.Printf("  event → MongoDB delay (histogram estimate): p50 %.2fs  p99 %.2fs;  writer drained %v after the load stopped\n",
		on.delayP50, on.delayP99, on.drain)
	if o.sat > 0 {
		var off, onSat []float64
		for r := 0; r < o.rounds; r++ {
			off = append(off, b.phase(ctx, "saturation, writer off", false, 0, o.sat).rate)
			onSat = append(onSat, b.phase(ctx, "saturation, writer on", true, 0, o.sat).rate)
		}
		mOff, mOn := mean(off), mean(onSat)
		fmt.Printf("saturation: writer off %.0f jobs/s, writer on %.0f jobs/s: %+.1f%%\n", mOff, mOn, 100*(mOn-mOff)/mOff)
	}
	return nil
}

// catchUp measures how fast a writer records the backlog in Redis, with no
// other load (at most 10 minutes).
func (b *bench) catchUp(ctx context.Context) {
	mon := history.NewMonitor(b.q, history.MonitorConfig{Logger: b.log})
	bl, err := mon.Measure(ctx)
	if err != nil || bl.Events == 0 {
		return
	}
	w := history.NewWriter(b.q, b.store, history.WriterConfig{Logger: b.wlog, Linger: b.o.linger, Hold: b.o.hold})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	cpu0, ticks0 := readCPU(), b.ticks()
	start := time.Now()
	go func() { _ = w.Run(wctx); close(done) }()
	for time.Since(start) < 10*time.Minute {
		if now, err := mon.Measure(ctx); err == nil && now.Events == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu, ticks := readCPU().since(cpu0), b.ticks()
	stop()
	<-done
	left, _ := mon.Measure(ctx)
	recorded := bl.Events - left.Events
	line := fmt.Sprintf("catch-up of that backlog, no load: %d of %d events recorded in %v: %.0f events/s  CPU: machine %3.0f%%, ",
		recorded, bl.Events, elapsed.Round(time.Millisecond), float64(recorded)/elapsed.Seconds(), cpu)
	for i, p := range b.procs {
		line += fmt.Sprintf("%s %.0f%% ", p.name, float64(ticks[i]-ticks0[i])/clockTicks/elapsed.Seconds()*100)
	}
	fmt.Println(line)
}

type bench struct {
	o     options
	rdb   *redis.Client
	q     *queue.Client
	store *history.Store
	log   *slog.Logger
	wlog  *slog.Logger // the writer's
	procs []proc       // processes whose CPU use is reported
	n     int
}

type result struct {
	rate               float64
	lags               []time.Duration
	delayP50, delayP99 float64
	drain              time.Duration
}

// phase runs jobs on a fresh queue for d: at rate jobs/s, or as fast as the
// worker drains them when rate is 0 (at most 5,000 queued). With the writer
// on, it samples the writer's lag and waits for it to drain afterwards
// (rate phases only).
func (b *bench) phase(ctx context.Context, name string, writerOn bool, rate float64, d time.Duration) result {
	b.n++
	qname := fmt.Sprintf("hb-%d-%d", os.Getpid(), b.n)
	var res result
	var started atomic.Int64
	var latMu sync.Mutex
	var lats []time.Duration
	wk := worker.New(b.rdb, worker.Config{
		Queues: []worker.Queue{{Name: qname}}, Concurrency: b.o.concurrency, Logger: b.log, ID: qname + "-worker",
	})
	wk.HandleFunc("bench.noop", func(ctx context.Context, j *job.Job) (any, error) {
		started.Add(1)
		if rate > 0 {
			latMu.Lock()
			lats = append(lats, time.Since(j.CreatedAt))
			latMu.Unlock()
		}
		return nil, nil
	})
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() { _ = wk.Run(wctx); close(workerDone) }()

	var w *history.Writer
	reg := prometheus.NewRegistry()
	writerCtx, stopWriter := context.WithCancel(ctx)
	writerDone := make(chan struct{})
	if writerOn {
		w = history.NewWriter(b.q, b.store, history.WriterConfig{Logger: b.wlog, Linger: b.o.linger, Hold: b.o.hold})
		reg.MustRegister(w.Collector())
		go func() { _ = w.Run(writerCtx); close(writerDone) }()
	} else {
		close(writerDone)
	}

	if w != nil {
		// Warm up: the writer runs before the load, as in production, and
		// has found the queue (its first jobs are recorded).
		warm := make([]*job.Job, 10)
		for i := range warm {
			warm[i], _ = (&job.Spec{Queue: qname, Type: "bench.noop"}).Build(time.Now())
		}
		if _, err := b.q.Submit(ctx, warm); err != nil {
			fmt.Fprintln(os.Stderr, "historybench: submit:", err)
		}
		for t0 := time.Now(); time.Since(t0) < time.Minute; time.Sleep(20 * time.Millisecond) {
			if bl := w.Backlog(); bl.At.After(t0) && bl.Events == 0 && started.Load() == 10 {
				break
			}
		}
		started.Store(0)
	}
	hist0 := histogram(reg, "sundial_history_event_delay_seconds")
	cpu0, ticks0 := readCPU(), b.ticks()
	start := time.Now()
	deadline := start.Add(d)
	var submitted int64
	sampleLag := time.NewTicker(100 * time.Millisecond)
	defer sampleLag.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for now := time.Now(); now.Before(deadline); now = time.Now() {
		var n int
		if rate > 0 {
			n = int(rate*now.Sub(start).Seconds()) - int(submitted)
		} else if backlog := submitted - started.Load(); backlog < 5000 {
			n = 1000
		}
		for n > 0 {
			k := min(n, 500)
			jobs := make([]*job.Job, k)
			for i := range jobs {
				jobs[i], _ = (&job.Spec{Queue: qname, Type: "bench.noop"}).Build(time.Now())
			}
			if _, err := b.q.Submit(ctx, jobs); err != nil {
				fmt.Fprintln(os.Stderr, "historybench: submit:", err)
			}
			submitted += int64(k)
			n -= k
		}
		select {
		case <-tick.C:
		case <-sampleLag.C:
			if w != nil {
				res.lags = append(res.lags, w.Lag())
			}
		}
	}
	elapsed := time.Since(start)
	res.rate = float64(started.Load()) / elapsed.Seconds()
	cpu, ticks := readCPU().since(cpu0), b.ticks()
	stopWorker()
	<-workerDone
	if w != nil && rate > 0 {
		stop := time.Now()
		for w.Backlog().Events > 0 || w.Backlog().At.Before(stop) {
			if time.Since(stop) > 5*time.Minute {
				fmt.Println("  (writer did not drain within 5 min)")
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		res.drain = time.Since(stop).Round(time.Millisecond)
		h := histogram(reg, "sundial_history_event_delay_seconds").minus(hist0)
		res.delayP50, res.delayP99 = h.quantile(.5), h.quantile(.99)
	}
	stopWriter()
	<-writerDone
	// The saturation writer-off phases' events are nobody's to record.
	if !writerOn && rate == 0 {
		b.rdb.Del(ctx, queue.EventStreamKey(qname))
	}
	line := fmt.Sprintf("%-24s %6.0f jobs/s (%d in %v)  CPU: machine %3.0f%% of %d, ", name+":", res.rate, started.Load(), elapsed.Round(time.Millisecond), cpu, numCPU())
	for i, p := range b.procs {
		line += fmt.Sprintf("%s %.0f%% ", p.name, float64(ticks[i]-ticks0[i])/clockTicks/elapsed.Seconds()*100)
	}
	if rate > 0 {
		line += fmt.Sprintf("  job latency p50 %v p99 %v", pct(lats, 50), pct(lats, 99))
	}
	fmt.Println(line)
	return res
}

// hist is a cumulative histogram: upper bounds and counts.
type hist struct {
	bounds []float64
	counts []float64
}

// histogram reads the histogram name from reg (empty when absent).
func histogram(reg *prometheus.Registry, name string) hist {
	var h hist
	mfs, err := reg.Gather()
	if err != nil {
		return h
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		for _, bk := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			h.bounds = append(h.bounds, bk.GetUpperBound())
			h.counts = append(h.counts, float64(bk.GetCumulativeCount()))
		}
	}
	return h
}

// minus returns what h counted since h0.
func (h hist) minus(h0 hist) hist {
	out := hist{bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range out.counts {
		if i < len(h0.counts) {
			out.counts[i] -= h0.counts[i]
		}
	}
	return out
}

// quantile estimates quantile q as Prometheus' histogram_quantile does
// (linear within the bucket); +Inf when it lies beyond the last bound.
func (h hist) quantile(q float64) float64 {
	if len(h.counts) == 0 {
		return math.NaN()
	}
	rank := q * h.counts[len(h.counts)-1] // events within the last bound
	prevCount, prevBound := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if c == prevCount {
				return h.bounds[i]
			}
			return prevBound + (h.bounds[i]-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevCount, prevBound = c, h.bounds[i]
	}
	return math.Inf(1)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))].Round(time.Millisecond)
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// proc is a process whose CPU use is reported, with its children.
type proc struct {
	name string
	pid  int
}

// clockTicks is the unit of /proc/<pid>/stat times (USER_HZ).
const clockTicks = 100

// ticks returns the CPU time (user + system, in clock ticks) of each
// watched process and its live children.
func (b *bench) ticks() []float64 {
	index := map[int]int{} // pid → index in b.procs
	for i, p := range b.procs {
		index[p.pid] = i
	}
	out := make([]float64, len(b.procs))
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command name (which may hold spaces): state ppid … utime stime.
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		i, ok := index[pid]
		if !ok {
			if i, ok = index[ppid]; !ok {
				continue
			}
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		out[i] += u + s
	}
	return out
}

// cpuTimes are the machine's busy and total jiffies from /proc/stat.
type cpuTimes struct{ busy, total float64 }

func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var t cpuTimes
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// since returns the share of CPU time spent busy since c0, in percent.
func (c cpuTimes) since(c0 cpuTimes) float64 {
	if c.total == c0.total {
		return 0
	}
	return 100 * (c.busy - c0.busy) / (c.total - c0.total)
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return max(strings.Count(string(b), "processor\t:"), 1)
}

// startRedis starts a private redis-server on a free port with AOF every
// second, and returns its URL, its pid and a function that stops it.
func startRedis() (string, int, func(), error) {
	port, err := freeport.Port()
	if err != nil {
		return "", 0, nil, err
	}
	dir, err := os.MkdirTemp("", "historybench-redis-")
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", 0, nil, fmt.Errorf("start redis-server: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return url, cmd.Process.Pid, stop, nil
		} else if time.Now().After(deadline) {
			stop()
			return "", 0, nil, errors.Join(errors.New("redis-server did not start"), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
