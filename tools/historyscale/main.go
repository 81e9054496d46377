// Command historyscale measures the history search (pkg/history's
// Store.Search, Events and Job) with a big history: it fills a MongoDB (by
// default a private FerretDB v1 on PostgreSQL, started as the tests do) with
// -events events of -events/3 jobs, creates the indexes (Store.Setup) and
// times the dashboard's filters, printing a markdown table.
//
//	go run ./tools/historyscale                      # 10,000,000 events on a private FerretDB
//	go run ./tools/historyscale -events 300000       # a quick run
//	go run ./tools/historyscale -mongo mongodb://127.0.0.1:27017/ -db histscale
//	go run ./tools/historyscale -mongo URI -fill=false   # measure an existing fill again
//
// The fill writes jobs and events through the history writer's own code
// (Store.Import: the same documents, unordered InsertMany batches) from
// several goroutines, without Redis streams: it is not what is measured.
// Jobs spread over 20 queues, 10 common types and one rare type (0.1 %),
// mostly succeeded, some dead and cancelled, created over the last 30 days;
// each job has 3 events (submitted, started, then its end).
//
// Without -mongo the tool runs scripts/mongo-standin.sh on free loopback
// ports with a data directory under -dir (default: a new temporary
// directory, removed at the end unless -keep) and stops it when done.
// Each case runs -n queries (default 100) or until -case-budget passes.
// docs/benchmarks/2026-11.md holds the figures.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/sundialhq/sundial/internal/freeport"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
)

var (
	flagEvents   = flag.Int("events", 10_000_000, "history events to fill (3 per job)")
	flagMongo    = flag.String("mongo", "", "MongoDB URI to use instead of starting a private FerretDB")
	flagDB       = flag.String("db", "historyscale", "database name")
	flagFill     = flag.Bool("fill", true, "fill the database (false: measure what is there)")
	flagBatch    = flag.Int("batch", 3000, "jobs per Store.Import batch (3 times as many events)")
	flagWorkers  = flag.Int("workers", 4, "batches inserted at once")
	flagN        = flag.Int("n", 100, "queries per case")
	flagBudget   = flag.Duration("case-budget", 90*time.Second, "stop a case after this long (fewer queries)")
	flagQTimeout = flag.Duration("query-timeout", 30*time.Second, "give up a query after this long (counted as an error)")
	flagDir      = flag.String("dir", "", "data directory of the private PostgreSQL (default: a temporary one)")
	flagKeep     = flag.Bool("keep", false, "keep the private data directory")
	flagOnly     = flag.String("only", "", "run only the cases whose name contains this (comma-separated)")
	flagSetup    = flag.Bool("setup", true, "run Store.Setup (create the indexes) before measuring")
	flagDeadline = flag.String("stop-fill-at", "", "stop filling at this UTC time (HH:MM) and measure what is there")
)

const (
	queues = 20
	days   = 30
)

var (
	types    = []string{"email.send", "sms.send", "image.resize", "video.transcode", "report.build", "invoice.render", "webhook.deliver", "search.index", "cache.warm", "export.csv"}
	rareType = "audit.rebuild" // 0.1 % of the jobs
)

func queueName(i int) string { return fmt.Sprintf("q%02d", i) }

func jobID(i int) string { return fmt.Sprintf("hs%010d", i) }

// jobOf makes job i and its 3 events, deterministically from i and seed.
// The events' ids are stream entry ids whose sequence is unique per job.
func jobOf(i int, now time.Time) (*job.Job, [3]job.Event) {
	r := rand.New(rand.NewPCG(uint64(i), 36))
	created := now.Add(-time.Duration(r.Int64N(int64(days * 24 * time.Hour))))
	started := created.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
	finished := started.Add(time.Duration(10+r.IntN(5000)) * time.Millisecond)
	typ := types[r.IntN(len(types))]
	if r.IntN(1000) == 0 {
		typ = rareType
	}
	state, end, errText, attempt := job.Succeeded, job.EventSucceeded, "", 1
	switch p := r.IntN(100); {
	case p < 7:
		state, end, errText, attempt = job.Dead, job.EventDead, "upstream said 503", 3
	case p < 10:
		state, end = job.Cancelled, job.EventCancelled
	}
	q := queueName(r.IntN(queues))
	id := jobID(i)
	worker := fmt.Sprintf("w-%02d", r.IntN(40))
	entry := func(t time.Time, k int) string { return fmt.Sprintf("%d-%d", t.UnixMilli(), i*3+k) }
	j := &job.Job{
		ID: id, Queue: q, Type: typ, State: state, Attempt: attempt, CreatedAt: created,
		Payload: []byte(`{"to":"user@example.com","n":` + fmt.Sprint(i) + `}`), Priority: job.Normal,
		MaxAttempts: 3, TimeoutSeconds: 60,
	}
	if state == job.Succeeded {
		j.Result = []byte(`{"ok":true}`)
	}
	ev := [3]job.Event{
		{ID: entry(created, 0), JobID: id, Queue: q, Type: typ, Event: job.EventSubmitted, State: job.Queued, At: created},
		{ID: entry(started, 1), JobID: id, Queue: q, Type: typ, Event: job.EventStarted, State: job.Active, Attempt: attempt, WorkerID: worker, At: started},
		{ID: entry(finished, 2), JobID: id, Queue: q, Type: typ, Event: end, State: state, Attempt: attempt, WorkerID: worker, Error: errText, At: finished},
	}
	return j, ev
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("historyscale: ")
	uri := *flagMongo
	if uri == "" {
		u, stop, err := startStandin()
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		uri = u
	}
	if err := run(uri); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(uri string) error {
	ctx := context.Background()
	mc, err := history.Connect(uri)
	if err != nil {
		return err
	}
	defer mc.Disconnect(ctx)
	db := mc.Database(*flagDB)
	now := time.Now().UTC().Truncate(time.Millisecond)
	nJobs := *flagEvents / 3
	store := history.NewStore(db, history.StoreOptions{OpTimeout: 5 * time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if *flagFill {
		if err := db.Drop(ctx); err != nil {
			return fmt.Errorf("drop: %w", err)
		}
		n, err := fill(ctx, store, nJobs, now)
		if err != nil {
			return err
		}
		nJobs = n
	} else {
		c, err := db.Collection(history.JobsCollection).EstimatedDocumentCount(ctx)
		if err != nil {
			return err
		}
		nJobs = int(c) // the time windows assume the fill was recent (created_at over the 30 days before it)
	}
	if *flagSetup {
		t0 := time.Now()
		if err := store.Setup(ctx); err != nil {
			return err
		}
		log.Printf("Setup (indexes) took %s", time.Since(t0).Round(time.Millisecond))
	}
	measure(ctx, store, nJobs, now)
	return nil
}

// fill writes nJobs jobs and their events through the history's own
// writing code (Store.Import) and returns how many jobs it wrote.
func fill(ctx context.Context, store *history.Store, nJobs int, now time.Time) (int, error) {
	var stopAt time.Time
	if *flagDeadline != "" {
		t, err := time.Parse("15:04", *flagDeadline)
		if err != nil {
			return 0, fmt.Errorf("-stop-fill-at: %w", err)
		}
		stopAt = time.Date(now.Year(), now.Month(), now.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
	}
	var next, doneJobs atomic.Int64
	var stopped atomic.Bool
	start := time.Now()
	errc := make(chan error, *flagWorkers)
	var wg sync.WaitGroup
	for range *flagWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped.Load() {
				lo := int(next.Add(int64(*flagBatch))) - *flagBatch
				if lo >= nJobs {
					return
				}
				hi := min(lo+*flagBatch, nJobs)
				js := make([]*job.Job, 0, hi-lo)
				es := make([]job.Event, 0, 3*(hi-lo))
				for i := lo; i < hi; i++ {
					j, ev := jobOf(i, now)
					js = append(js, j)
					es = append(es, ev[:]...)
				}
				if err := store.Import(ctx, es, js); err != nil {
					errc <- fmt.Errorf("import: %w", err)
					stopped.Store(true)
					return
				}
				doneJobs.Add(int64(hi - lo))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	report := func() {
		d := doneJobs.Load()
		el := time.Since(start).Seconds()
		log.Printf("fill: %d/%d events, %d jobs, %.0f events/s (%.0f documents/s), %s", 3*d, 3*nJobs, d,
			float64(3*d)/el, float64(4*d)/el, time.Since(start).Round(time.Second))
	}
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		case <-tick.C:
			report()
			if !stopAt.IsZero() && time.Now().After(stopAt) {
				log.Printf("fill: stopping at %s as asked (-stop-fill-at)", *flagDeadline)
				stopped.Store(true)
			}
		}
	}
	report()
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	// Batches are taken in order, so with a stop the jobs written are a
	// prefix of ids give or take the batches in flight: count them.
	n := int(doneJobs.Load())
	rate := float64(3*n) / time.Since(start).Seconds()
	fmt.Printf("\nFill: %d events and %d jobs in %s (%.0f events/s, %.0f documents/s, %d workers × %d jobs per batch)\n\n",
		3*n, n, time.Since(start).Round(time.Second), rate, rate*4/3, *flagWorkers, *flagBatch)
	return n, nil
}

type result struct {
	name   string
	n      int
	rows   int
	times  []time.Duration
	errors int
	note   string
}

func pct(ts []time.Duration, p float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

func measure(parent context.Context, store *history.Store, nJobs int, now time.Time) {
	var ctx context.Context
	r := rand.New(rand.NewPCG(1, 2))
	states := []job.State{job.Succeeded, job.Dead, job.Cancelled}
	pickState := func() job.State { return states[r.IntN(len(states))] }
	pickType := func() string { return types[r.IntN(len(types))] }
	var results []result
	// runCase runs q (which returns the rows it got) up to -n times.
	runCase := func(name string, q func() (int, error)) {
		if *flagOnly != "" && !slices.ContainsFunc(strings.Split(*flagOnly, ","), func(o string) bool { return strings.Contains(name, o) }) {
			return
		}
		res := result{name: name}
		begin := time.Now()
		for i := 0; i < *flagN; i++ {
			if time.Since(begin) > *flagBudget {
				res.note = fmt.Sprintf("stopped after %s", *flagBudget)
				break
			}
			t := time.Now()
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(parent, *flagQTimeout)
			rows, err := q()
			cancel()
			res.times = append(res.times, time.Since(t))
			if err != nil {
				res.errors++
				if errors.Is(err, context.DeadlineExceeded) || mongo.IsTimeout(err) {
					res.note = fmt.Sprintf("timed out after %s", *flagQTimeout)
					break // the next would too
				}
				if res.errors == 1 {
					log.Printf("%s: %v", name, err)
				}
				continue
			}
			res.rows += rows
		}
		res.n = len(res.times)
		log.Printf("%-40s n=%d p50=%sms p95=%sms", name, res.n, ms(pct(res.times, .5)), ms(pct(res.times, .95)))
		results = append(results, res)
	}
	search := func(q history.Query) (int, error) {
		js, _, err := store.Search(ctx, q)
		return len(js), err
	}
	runCase("type + state (common type)", func() (int, error) { return search(history.Query{Type: pickType(), State: pickState()}) })
	runCase("type + state (rare type, 0.1 %)", func() (int, error) { return search(history.Query{Type: rareType, State: pickState()}) })
	runCase("queue + state", func() (int, error) {
		return search(history.Query{Queue: queueName(r.IntN(queues)), State: pickState()})
	})
	runCase("state alone", func() (int, error) { return search(history.Query{State: pickState()}) })
	runCase("type alone", func() (int, error) { return search(history.Query{Type: pickType()}) })
	runCase("no filter (newest)", func() (int, error) { return search(history.Query{}) })
	window := func() (time.Time, time.Time) {
		from := now.Add(-time.Duration(r.Int64N(int64((days-1)*24*time.Hour))) - 24*time.Hour)
		return from, from.Add(24 * time.Hour)
	}
	runCase("time range (1 day, anywhere in 30)", func() (int, error) {
		from, to := window()
		return search(history.Query{From: from, To: to})
	})
	runCase("type + state + time range (1 day)", func() (int, error) {
		from, to := window()
		return search(history.Query{Type: pickType(), State: pickState(), From: from, To: to})
	})
	// Paging: follow the cursor of type + state, 10 pages from a start, again and again.
	var cur string
	var page int
	var pq history.Query
	runCase("type + state, next page (cursor, pages 2–11)", func() (int, error) {
		if cur == "" || page >= 10 {
			pq = history.Query{Type: pickType(), State: pickState()}
			_, c, err := store.Search(ctx, pq)
			if err != nil {
				return 0, err
			}
			cur, page = c, 0
		}
		q := pq
		q.Cursor = cur
		js, c, err := store.Search(ctx, q)
		cur = c
		page++
		return len(js), err
	})
	var dcur string
	var dq history.Query
	runCase("dead, deep page (cursor, page 2–101)", func() (int, error) {
		if dcur == "" {
			dq = history.Query{State: job.Dead, Queue: queueName(r.IntN(queues))}
			_, c, err := store.Search(ctx, dq)
			if err != nil {
				return 0, err
			}
			dcur = c
		}
		q := dq
		q.Cursor = dcur
		js, c, err := store.Search(ctx, q)
		dcur = c
		return len(js), err
	})
	runCase("Events of one job (2 pages of 2)", func() (int, error) {
		id := jobID(r.IntN(nJobs))
		ev, c, err := store.Events(ctx, id, history.EventPage{Limit: 2})
		if err != nil {
			return 0, err
		}
		ev2, _, err := store.Events(ctx, id, history.EventPage{Limit: 2, Cursor: c})
		return len(ev) + len(ev2), err
	})
	runCase("Job(id)", func() (int, error) {
		_, err := store.Job(ctx, jobID(r.IntN(nJobs)))
		return 1, err
	})

	fmt.Printf("\nHistory search, %d jobs, %d events (page of 50, newest first), %s, GOMAXPROCS %d:\n\n",
		nJobs, 3*nJobs, time.Now().UTC().Format("2006-01-02"), runtime.GOMAXPROCS(0))
	fmt.Println("| case | queries | rows/query | p50 ms | p95 ms | p99 ms | max ms |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, res := range results {
		name := res.name
		if res.note != "" {
			name += " (" + res.note + ")"
		}
		if res.errors > 0 && !strings.HasPrefix(res.note, "timed out") {
			name += fmt.Sprintf(" (%d errors)", res.errors)
		}
		rows := 0.0
		if res.n > 0 {
			rows = float64(res.rows) / float64(res.n)
		}
		fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %s |\n", name, res.n, rows,
			ms(pct(res.times, .5)), ms(pct(res.times, .95)), ms(pct(res.times, .99)), ms(pct(res.times, 1)))
	}
}

// startStandin runs scripts/mongo-standin.sh on free loopback ports and
// returns the URI and a function that stops it (and removes a temporary data dir).
func startStandin() (string, func(), error) {
	repo, err := repoRoot()
	if err != nil {
		return "", nil, err
	}
	port, err := freeport.Port()
	if err != nil {
		return "", nil, err
	}
	pgPort, err := freeport.Port()
	if err != nil {
		return "", nil, err
	}
	dir, tmp := *flagDir, false
	if dir == "" {
		// under /tmp: the postgres user must reach it when running as root
		dir, err = os.MkdirTemp("/tmp", "historyscale-")
		if err != nil {
			return "", nil, err
		}
		_ = os.Chmod(dir, 0o755)
		tmp = true
	}
	cmd := exec.Command(filepath.Join(repo, "scripts/mongo-standin.sh"), "run",
		"--port", fmt.Sprint(port), "--pg-port", fmt.Sprint(pgPort),
		"--data-dir", filepath.Join(dir, "pg"), "--log-dir", filepath.Join(dir, "logs"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the script stops FerretDB, then PostgreSQL
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
		}
		if tmp && !*flagKeep {
			_ = os.RemoveAll(dir)
		} else {
			log.Printf("data kept in %s", dir)
		}
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if _, uri, ok := strings.Cut(line, "ready: "); ok {
			log.Printf("FerretDB + PostgreSQL up (%s, data %s)", uri, dir)
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return strings.TrimSpace(uri), stop, nil
		}
	}
	stop()
	return "", nil, errors.New("mongo-standin.sh exited before it was ready")
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts/mongo-standin.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the sundial repository (scripts/mongo-standin.sh not found)")
		}
		dir = parent
	}
}
