// Command millionbench measures the operator routes with a big backlog
// (issue 36): it fills a Redis with -jobs queued jobs over -queues queues,
// measures GET /v1/queues/{q}/jobs (first pages, deep pages, filters by a
// common and a rare type), then makes -dead jobs dead in one queue and
// measures bulk retries through POST /v1/queues/{q}/jobs/bulk: a filtered
// one that finds 12 among them, then all of them. It prints the figures
// docs/benchmarks/2026-11.md records.
//
//	go run ./tools/millionbench                       # its own redis-server and API, 1,000,000 jobs
//	go run ./tools/millionbench -jobs 100000 -dead 10000
//	go run ./tools/millionbench -redis 127.0.0.1:6379 -url http://127.0.0.1:8080   # a running stack
//
// By default it starts a private redis-server (AOF on, as the stack runs
// it) and the API in this process on loopback, with the rate limit off.
// The jobs are submitted through the engine (queue.Client.Submit, batches
// of 1,000), not over HTTP: the fill is not what is measured. Against a
// running stack, run no workers on the load queues.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/httpapi"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

type options struct {
	redisAddr, api      string
	jobs, queues, dead  int
	requests, pageLoads int
	skipFill            bool
}

func main() {
	var o options
	flag.StringVar(&o.redisAddr, "redis", "", "the Redis (host:port) to fill; empty: start a private redis-server")
	flag.StringVar(&o.api, "url", "", "the API's base URL; empty: run the API in this process on loopback")
	flag.IntVar(&o.jobs, "jobs", 1_000_000, "queued jobs to fill, over -queues queues")
	flag.IntVar(&o.queues, "queues", 20, "queues the jobs go to (load-00, load-01…)")
	flag.IntVar(&o.dead, "dead", 100_000, "dead jobs to make in queue load-dead, for the bulk retries")
	flag.IntVar(&o.requests, "requests", 300, "list requests per measured case")
	flag.BoolVar(&o.skipFill, "skip-fill", false, "measure what the Redis already holds")
	flag.IntVar(&o.pageLoads, "page-loads", 5, "Chromium loads of each dashboard page (pages.mjs; 0: none, also when node or Chromium is missing)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "millionbench:", err)
		os.Exit(1)
	}
}

// rareEvery makes one queued job in this many of type "rare.type".
const rareEvery = 1000

func run(o options) error {
	ctx := context.Background()
	var rdb *redis.Client
	if o.redisAddr == "" {
		srv, stop, err := queuetest.StartMain()
		if err != nil {
			return err
		}
		defer stop()
		rdb = srv.Client()
		fmt.Printf("redis-server on %s (AOF everysec)\n", srv.Addr())
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: o.redisAddr})
	}
	defer rdb.Close()
	q := queue.New(rdb, queue.Options{})
	ctx, reg := q.Register(ctx, "bench", slog.New(slog.DiscardHandler))
	defer reg.Close()
	base := o.api
	if base == "" {
		stop, addr, err := startAPI(q)
		if err != nil {
			return err
		}
		defer stop()
		base = "http://" + addr
	}
	b := &bench{q: q, rdb: rdb, base: base, http: &http.Client{Timeout: 30 * time.Minute}}
	queues := make([]string, o.queues)
	for i := range queues {
		queues[i] = fmt.Sprintf("load-%02d", i)
	}
	if !o.skipFill {
		mem0 := b.usedMemory(ctx)
		start := time.Now()
		if err := b.fill(ctx, queues, o.jobs); err != nil {
			return err
		}
		d := time.Since(start)
		mem1 := b.usedMemory(ctx)
		fmt.Printf("filled %d queued jobs over %d queues in %s (%.0f jobs/s); Redis used_memory +%.0f MB (%.0f bytes a job)\n",
			o.jobs, o.queues, d.Round(time.Millisecond), float64(o.jobs)/d.Seconds(), float64(mem1-mem0)/1e6, float64(mem1-mem0)/float64(o.jobs))
	}
	fmt.Println()
	fmt.Println("| GET /v1/queues/{q}/jobs | requests | p50 | p95 | p99 | max | jobs a page |")
	fmt.Println("|---|---|---|---|---|---|---|")
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name  string
		query string
		deep  bool
	}{
		{"queued, first page (limit 50), a random queue", "state=queued&limit=50", false},
		{"queued, limit 500", "state=queued&limit=500", false},
		{"queued, following the cursor page after page", "state=queued&limit=50", true},
		{"queued, type=t3 (1 job in 10)", "state=queued&type=t3&limit=50", false},
		{"queued, type=rare.type (1 job in 1,000)", "state=queued&type=rare.type&limit=50", false},
		{"queued, priority=low", "state=queued&priority=low&limit=50", false},
	}
	for _, c := range cases {
		var lat []time.Duration
		jobs := 0
		cursor, qn := "", queues[0]
		for range o.requests {
			if !c.deep {
				qn, cursor = queues[rng.IntN(len(queues))], ""
			}
			path := "/v1/queues/" + qn + "/jobs?" + c.query
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			var page struct {
				Jobs       []json.RawMessage `json:"jobs"`
				NextCursor string            `json:"next_cursor"`
			}
			d, err := b.do(ctx, "GET", path, nil, &page)
			if err != nil {
				return err
			}
			lat = append(lat, d)
			jobs += len(page.Jobs)
			cursor = page.NextCursor
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %s | %.1f |\n", c.name, len(lat), pct(lat, 50), pct(lat, 95), pct(lat, 99), pct(lat, 100), float64(jobs)/float64(len(lat)))
	}
	// The on-call search: every rare.type job of one queue, following the
	// cursor to the end.
	{
		start, requests, found, cursor := time.Now(), 0, 0, ""
		var lat []time.Duration
		for {
			path := "/v1/queues/" + queues[0] + "/jobs?state=queued&type=rare.type&limit=500"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			var page struct {
				Jobs       []json.RawMessage `json:"jobs"`
				NextCursor string            `json:"next_cursor"`
			}
			d, err := b.do(ctx, "GET", path, nil, &page)
			if err != nil {
				return err
			}
			lat = append(lat, d)
			requests++
			found += len(page.Jobs)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		fmt.Printf("\nevery rare.type job of %s (type filter, cursor followed to the end): %d found in %d requests, %s in all, p95 %s a request\n",
			queues[0], found, requests, time.Since(start).Round(time.Millisecond), pct(lat, 95))
	}
	if o.dead <= 0 {
		return b.pageTimes(o)
	}
	fmt.Println()
	start := time.Now()
	if err := b.bury(ctx, "load-dead", o.dead); err != nil {
		return err
	}
	fmt.Printf("made %d jobs dead in load-dead in %s (12 of type needle.type with error \"smtp: 451 needle\")\n", o.dead, time.Since(start).Round(time.Millisecond))
	var lat []time.Duration
	for range o.requests {
		d, err := b.do(ctx, "GET", "/v1/queues/load-dead/jobs?state=dead&limit=50", nil, nil)
		if err != nil {
			return err
		}
		lat = append(lat, d)
	}
	fmt.Printf("GET /v1/queues/load-dead/jobs?state=dead&limit=50: p50 %s, p95 %s, p99 %s over %d requests\n", pct(lat, 50), pct(lat, 95), pct(lat, 99), len(lat))
	for _, c := range []struct{ name, body string }{
		{"bulk retry by filter (type needle.type, error contains \"smtp: 451\": 12 among them)",
			`{"action":"retry","filter":{"type":"needle.type","error_contains":"smtp: 451"}}`},
		{"bulk retry of every dead job", `{"action":"retry","filter":{}}`},
	} {
		var res struct {
			Matched, Count, Scanned int
		}
		d, err := b.do(ctx, "POST", "/v1/queues/load-dead/jobs/bulk", []byte(c.body), &res)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s, matched %d, retried %d, read %d\n", c.name, d.Round(time.Millisecond), res.Matched, res.Count, res.Scanned)
	}
	return b.pageTimes(o)
}

// pageTimes loads the dashboard's pages in Chromium (pages.mjs) and prints
// how long each took to show its data; it says why when it cannot.
func (b *bench) pageTimes(o options) error {
	if o.pageLoads <= 0 {
		return nil
	}
	script := filepath.Join("tools", "millionbench", "pages.mjs")
	if _, err := os.Stat(script); err != nil {
		fmt.Println("\npage timings skipped: run from the repository's root (tools/millionbench/pages.mjs)")
		return nil
	}
	if _, err := exec.LookPath("node"); err != nil {
		fmt.Println("\npage timings skipped: no node (and web/node_modules with playwright-core) on PATH")
		return nil
	}
	fmt.Println()
	cmd := exec.Command("node", script, b.base, strconv.Itoa(o.queues), strconv.Itoa(o.pageLoads))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("page timings: %w", err)
	}
	return nil
}

// startAPI runs the API in this process on a loopback port, rate limit off.
func startAPI(q *queue.Client) (stop func(), addr string, err error) {
	api, err := httpapi.New(httpapi.Config{Queue: q, RateLimit: "0", ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Run(ctx, ln) }()
	return func() { cancel(); <-done }, ln.Addr().String(), nil
}

type bench struct {
	q    *queue.Client
	rdb  *redis.Client
	base string
	http *http.Client
}

// fill submits n queued jobs round-robin over queues, 1,000 a call, two
// calls at a time: types t0…t9, one in rareEvery of type rare.type,
// priorities high, normal, low.
func (b *bench) fill(ctx context.Context, queues []string, n int) error {
	const batch = 1000
	work := make(chan int)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := range work {
				qn := queues[(from/batch)%len(queues)]
				var jobs []*job.Job
				for i := from; i < min(from+batch, n); i++ {
					typ := "t" + strconv.Itoa(i/4%10) // every type at every priority
					if i%rareEvery == rareEvery/2-1 {
						typ = "rare.type"
					}
					spec := job.Spec{Queue: qn, Type: typ, Priority: []job.Priority{job.High, job.Normal, job.Low, job.Normal}[i%4],
						Payload: []byte(`{"order":` + strconv.Itoa(i) + `,"note":"a small payload"}`)}
					j, err := spec.Build(time.Now())
					if err != nil {
						errs <- err
						return
					}
					jobs = append(jobs, j)
				}
				if _, err := b.q.Submit(ctx, jobs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
loop:
	for from := 0; from < n; from += batch {
		select {
		case work <- from:
		case err = <-errs:
			break loop
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// bury submits n jobs to qn and makes them dead, 1,000 at a time (a claim
// and a dead outcome each): 12 of type needle.type with an smtp error, the
// rest of types t0…t9 with other errors.
func (b *bench) bury(ctx context.Context, qn string, n int) error {
	const batch = 1000
	needles := map[int]bool{}
	for i := range 12 {
		needles[i*(n/12)+n/24] = true
	}
	for from := 0; from < n; from += batch {
		var jobs []*job.Job
		why := map[string]string{}
		for i := from; i < min(from+batch, n); i++ {
			typ, e := "t"+strconv.Itoa(i%10), []string{"connection refused", "timeout after 30s", "smtp: 550 no such user"}[i%3]
			if needles[i] {
				typ, e = "needle.type", "smtp: 451 needle"
			}
			spec := job.Spec{Queue: qn, Type: typ, MaxAttempts: ptr(1)}
			j, err := spec.Build(time.Now())
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
			why[j.ID] = e
		}
		if _, err := b.q.Submit(ctx, jobs); err != nil {
			return err
		}
		leases, err := b.q.Claim(ctx, qn, len(jobs), "millionbench")
		if err != nil {
			return err
		}
		var outs []queue.Outcome
		for _, l := range leases {
			outs = append(outs, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeDead, Error: why[l.Job.ID], WorkerID: "millionbench"})
		}
		if _, err := b.q.Complete(ctx, qn, outs); err != nil {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// do sends one request and decodes a 200 answer into out (when not nil);
// it returns the request's latency.
func (b *bench) do(ctx context.Context, method, path string, body []byte, out any) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	res, err := b.http.Do(req)
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, err
		}
	}
	return d, nil
}

// usedMemory is INFO memory's used_memory, in bytes.
func (b *bench) usedMemory(ctx context.Context) int64 {
	info, err := b.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// pct is the p-th percentile of lat (100: the maximum), in milliseconds.
func pct(lat []time.Duration, p int) string {
	if len(lat) == 0 {
		return "-"
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := min(len(s)*p/100, len(s)-1)
	return fmt.Sprintf("%.2f ms", float64(s[i].Microseconds())/1000)
}
