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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
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
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "historybench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := context.Background()
	if o.redisURL == "" {
		url, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		o.redisURL = url
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

	b := &bench{o: o, rdb: rdb, q: q, store: store, log: quiet, wlog: quiet}
	if o.verbose {
		b.wlog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b.phase(ctx, "rate, writer off", false, o.rate, o.duration)
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

type bench struct {
	o     options
	rdb   *redis.Client
	q     *queue.Client
	store *history.Store
	log   *slog.Logger
	wlog  *slog.Logger // the writer's
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
		w = history.NewWriter(b.q, b.store, history.WriterConfig{Logger: b.wlog})
		reg.MustRegister(w.Collector())
		go func() { _ = w.Run(writerCtx); close(writerDone) }()
	} else {
		close(writerDone)
	}

	cpu0 := readCPU()
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
	cpu := readCPU().since(cpu0)
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
		res.delayP50, res.delayP99 = histQuantile(reg, "sundial_history_event_delay_seconds", .5), histQuantile(reg, "sundial_history_event_delay_seconds", .99)
	}
	stopWriter()
	<-writerDone
	// The writer-off phases' events are nobody's to record: drop them.
	if !writerOn {
		b.rdb.Del(ctx, queue.EventStreamKey(qname))
	}
	line := fmt.Sprintf("%-24s %7.0f jobs/s  (%d jobs in %v)  CPU busy %3.0f%%", name+":", res.rate, started.Load(), elapsed.Round(time.Millisecond), cpu)
	if rate > 0 {
		line += fmt.Sprintf("  job latency p50 %v p99 %v", pct(lats, 50), pct(lats, 99))
	}
	fmt.Println(line)
	return res
}

// histQuantile estimates a quantile of a histogram in reg as Prometheus'
// histogram_quantile does (linear within the bucket).
func histQuantile(reg *prometheus.Registry, name string, q float64) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return math.NaN()
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		total := float64(h.GetSampleCount())
		if total == 0 {
			return 0
		}
		rank := q * total
		prevCount, prevBound := 0.0, 0.0
		for _, bk := range h.GetBucket() {
			c := float64(bk.GetCumulativeCount())
			if c >= rank {
				if c == prevCount {
					return bk.GetUpperBound()
				}
				return prevBound + (bk.GetUpperBound()-prevBound)*(rank-prevCount)/(c-prevCount)
			}
			prevCount, prevBound = c, bk.GetUpperBound()
		}
		return math.Inf(1)
	}
	return math.NaN()
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
// second, and returns its URL and a function that stops it.
func startRedis() (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "historybench-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start redis-server: %w", err)
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
			return url, stop, nil
		} else if time.Now().After(deadline) {
			stop()
			return "", nil, errors.Join(errors.New("redis-server did not start"), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
