// Command apibench loads a running Sundial API on loopback and prints what
// it measured: requests and jobs per second, latency percentiles, errors.
//
//	apibench -mode submit -c 32 -d 10s          # POST /v1/jobs, closed loop
//	apibench -mode batch -c 4 -batch 1000       # POST /v1/jobs/batch
//	apibench -mode rate -rate 2000 -d 10s       # POST /v1/jobs at a fixed rate (open loop)
//	apibench -mode stream -clients 500 -rate 200 # websocket delivery latency
//	apibench -mode claim -workers 20 -rate 1000   # HTTP workers: enqueue→claim latency
//	apibench -mode claim -workers 200 -rate 0 -pids api=PID,redis=PID  # idle long polls' CPU
//	apibench -mode lib-submit -redis 127.0.0.1:6379 -c 16  # the same jobs through the Go library
//	apibench -mode lib-batch -redis 127.0.0.1:6379 -c 4     # (queue.Client.Submit), for ratios
//
// It stops by itself after -d. Run the API with SUNDIAL_RATE_LIMIT=0 (or a
// high limit), and without workers on the bench queue for -mode stream.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

type options struct {
	base, key, mode, queue, jobType string
	conns, batch, clients, workers  int
	payloadBytes                    int
	rate                            float64
	pids, redis                     string
	duration, grace                 time.Duration
	allowRemote                     bool
}

func main() {
	var o options
	flag.StringVar(&o.base, "url", "http://127.0.0.1:8080", "the API's base URL")
	flag.StringVar(&o.key, "key", "", "API key, when the API needs one")
	flag.StringVar(&o.mode, "mode", "submit", "submit | batch | rate | stream | claim | lib-submit | lib-batch")
	flag.StringVar(&o.redis, "redis", "", "lib-submit, lib-batch: the Redis (host:port) the library submits to")
	flag.StringVar(&o.queue, "queue", fmt.Sprintf("bench-%d", os.Getpid()), "queue the jobs go to")
	flag.StringVar(&o.jobType, "type", "bench.noop", "job type")
	flag.IntVar(&o.conns, "c", 32, "concurrent connections (submit, batch)")
	flag.IntVar(&o.batch, "batch", 1000, "jobs per batch (batch)")
	flag.IntVar(&o.payloadBytes, "payload-bytes", 0, "submit, batch, lib-*: pad each job's payload with a string of this many bytes (0: a ~25-byte payload)")
	flag.IntVar(&o.clients, "clients", 500, "websocket clients (stream)")
	flag.IntVar(&o.workers, "workers", 20, "long-polling HTTP workers (claim)")
	flag.StringVar(&o.pids, "pids", "", "claim: name=pid,… of processes whose CPU time to report (e.g. api=123,redis=456)")
	flag.Float64Var(&o.rate, "rate", 2000, "requests per second (rate), events per second (stream)")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "how long to load")
	flag.DurationVar(&o.grace, "grace", 3*time.Second, "stream: how long to wait for the last events")
	flag.BoolVar(&o.allowRemote, "allow-remote", false, "allow a non-loopback API")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "apibench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if strings.HasPrefix(o.mode, "lib-") {
		b := &bench{o: o}
		return b.library()
	}
	u, err := url.Parse(o.base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-url %q is not a URL", o.base)
	}
	if !o.allowRemote && !loopback(u.Hostname()) {
		return fmt.Errorf("-url %q is not on loopback; pass -allow-remote to load it anyway", o.base)
	}
	conns := max(o.conns, o.workers) * 2
	b := &bench{o: o, client: &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
	}}}
	b.body = b.jobBody()
	switch o.mode {
	case "submit":
		return b.closedLoop(b.submitOne, 1)
	case "batch":
		body := b.batchBody()
		return b.closedLoop(func(ctx context.Context) error { return b.post(ctx, "/v1/jobs/batch", body) }, o.batch)
	case "rate":
		return b.openLoop()
	case "stream":
		return b.stream()
	case "claim":
		return b.claimBench()
	}
	return fmt.Errorf("-mode %q: want submit, batch, rate, stream, claim, lib-submit or lib-batch", o.mode)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type bench struct {
	o      options
	client *http.Client
	body   []byte // the job of every single submit, encoded once: the load is on the API, not on this tool
}

// result gathers what one worker saw.
type result struct {
	lat      []time.Duration
	requests int
	errors   map[string]int
}

func (r *result) fail(err error) {
	if r.errors == nil {
		r.errors = map[string]int{}
	}
	r.errors[err.Error()]++
}

func (b *bench) jobBody() []byte {
	payload := map[string]any{"n": 1, "note": "apibench"}
	if b.o.payloadBytes > 0 {
		payload["pad"] = strings.Repeat("x", b.o.payloadBytes)
	}
	body, _ := json.Marshal(map[string]any{"queue": b.o.queue, "type": b.o.jobType, "payload": payload})
	return body
}

func (b *bench) batchBody() []byte {
	jobs := make([]json.RawMessage, b.o.batch)
	for i := range jobs {
		jobs[i] = b.jobBody()
	}
	body, _ := json.Marshal(map[string]any{"jobs": jobs})
	return body
}

func (b *bench) submitOne(ctx context.Context) error { return b.post(ctx, "/v1/jobs", b.body) }

// statusError is a non-2xx answer.
type statusError int

func (e statusError) Error() string { return fmt.Sprintf("HTTP %d", int(e)) }

func (b *bench) post(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.o.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.o.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.o.key)
	}
	res, err := b.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return statusError(res.StatusCode)
	}
	return nil
}

// closedLoop runs o.conns workers that each send a request as soon as the
// previous one is answered.
func (b *bench) closedLoop(do func(context.Context) error, jobsPerRequest int) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.o.duration)
	defer cancel()
	results := make([]result, b.o.conns)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range results {
		wg.Go(func() {
			r := &results[i]
			for ctx.Err() == nil {
				t0 := time.Now()
				err := do(ctx)
				if ctx.Err() != nil {
					return // cut off by the end of the run: not counted
				}
				r.requests++
				r.lat = append(r.lat, time.Since(t0))
				if err != nil {
					r.fail(err)
				}
			}
		})
	}
	wg.Wait()
	report(fmt.Sprintf("mode=%s connections=%d", b.o.mode, b.o.conns), time.Since(begin), results, jobsPerRequest)
	return nil
}

// openLoop sends o.rate requests per second on schedule, whatever the
// answers' latency; latency counts from the scheduled send time, so a
// stall is not hidden (no coordinated omission).
func (b *bench) openLoop() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.o.duration)
	defer cancel()
	const workers = 256
	slots := make(chan time.Time, workers)
	results := make([]result, workers)
	var missed atomic.Int64
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			r := &results[i]
			for due := range slots {
				err := b.submitOne(context.Background())
				r.requests++
				r.lat = append(r.lat, time.Since(due))
				if err != nil {
					r.fail(err)
				}
			}
		})
	}
	begin := time.Now()
	interval := time.Duration(float64(time.Second) / b.o.rate)
	for n := 0; ; n++ {
		due := begin.Add(time.Duration(n) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case slots <- due:
		default:
			missed.Add(1)
		}
	}
	close(slots)
	wg.Wait()
	report(fmt.Sprintf("mode=rate target=%.0f/s", b.o.rate), time.Since(begin), results, 1)
	if m := missed.Load(); m > 0 {
		fmt.Printf("missed sends: %d (all %d workers busy: the API fell behind the rate)\n", m, workers)
	}
	return nil
}

func report(title string, elapsed time.Duration, results []result, jobsPerRequest int) {
	var lat []time.Duration
	requests := 0
	errs := map[string]int{}
	for _, r := range results {
		lat = append(lat, r.lat...)
		requests += r.requests
		for k, v := range r.errors {
			errs[k] += v
		}
	}
	nerr := 0
	for _, v := range errs {
		nerr += v
	}
	secs := elapsed.Seconds()
	fmt.Printf("%s duration=%.1fs\n", title, secs)
	fmt.Printf("requests: %d (%.0f req/s)", requests, float64(requests)/secs)
	if jobsPerRequest > 1 {
		fmt.Printf("  jobs: %d (%.0f jobs/s)", (requests-nerr)*jobsPerRequest, float64((requests-nerr)*jobsPerRequest)/secs)
	}
	fmt.Println()
	fmt.Println("latency:", percentiles(lat))
	fmt.Printf("errors: %d", nerr)
	for k, v := range errs {
		fmt.Printf("  [%s]×%d", k, v)
	}
	fmt.Println()
}

func percentiles(lat []time.Duration) string {
	if len(lat) == 0 {
		return "no samples"
	}
	slices.Sort(lat)
	at := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("p50=%s p90=%s p99=%s p99.9=%s max=%s (n=%d)", ms(at(.5)), ms(at(.9)), ms(at(.99)), ms(at(.999)), ms(lat[len(lat)-1]), len(lat))
}

// stream connects o.clients websocket clients filtered on the bench queue,
// submits o.rate jobs per second (one submitted event each), and measures
// each event's delivery latency from its "at" to its arrival.
func (b *bench) stream() error {
	wsBase := "ws" + strings.TrimPrefix(b.o.base, "http") + "/v1/stream?queue=" + url.QueryEscape(b.o.queue)
	if b.o.key != "" {
		wsBase += "&access_token=" + url.QueryEscape(b.o.key)
	}
	type client struct {
		conn     *websocket.Conn
		lat      []time.Duration
		received int
		err      error
	}
	// The API discovers new queues every second: create the bench queue
	// first, so that the run measures steady delivery, not discovery.
	if err := b.submitOne(context.Background()); err != nil {
		return fmt.Errorf("warm-up submit: %w", err)
	}
	time.Sleep(2 * time.Second)
	clients := make([]*client, b.o.clients)
	dialer := &http.Client{Transport: &http.Transport{}}
	for i := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := websocket.Dial(ctx, wsBase, &websocket.DialOptions{HTTPClient: dialer})
		cancel()
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
		clients[i] = &client{conn: c}
	}
	var stopping atomic.Bool
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			// Cheap on purpose: 500 readers share the machine with the API.
			var buf bytes.Buffer
			for {
				_, r, err := c.conn.Reader(context.Background())
				if err == nil {
					buf.Reset()
					_, err = buf.ReadFrom(r)
				}
				now := time.Now()
				if err != nil {
					if !stopping.Load() {
						c.err = err
					}
					return
				}
				at, ok := eventAt(buf.Bytes())
				if !ok {
					continue
				}
				c.received++
				c.lat = append(c.lat, now.Sub(at))
			}
		})
	}
	fmt.Printf("mode=stream clients=%d connected; submitting %.0f jobs/s to %s for %v\n", len(clients), b.o.rate, b.o.queue, b.o.duration)

	ctx, cancel := context.WithTimeout(context.Background(), b.o.duration)
	defer cancel()
	var submitted, failed atomic.Int64
	var sends sync.WaitGroup
	interval := time.Duration(float64(time.Second) / b.o.rate)
	begin := time.Now()
	for n := 0; ; n++ {
		if d := time.Until(begin.Add(time.Duration(n) * interval)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		sends.Go(func() {
			if err := b.submitOne(context.Background()); err != nil {
				failed.Add(1)
				return
			}
			submitted.Add(1)
		})
	}
	sends.Wait()
	loadTime := time.Since(begin)
	time.Sleep(b.o.grace)
	stopping.Store(true)
	for _, c := range clients {
		c.conn.CloseNow()
	}
	wg.Wait()

	want := int(submitted.Load())
	var lat []time.Duration
	complete, dropped, minRecv := 0, 0, want
	for _, c := range clients {
		lat = append(lat, c.lat...)
		if c.received >= want {
			complete++
		}
		if c.err != nil {
			dropped++
		}
		minRecv = min(minRecv, c.received)
	}
	fmt.Printf("events submitted: %d (%.0f/s, %d failed); messages delivered: %d (%.0f/s)\n",
		want, float64(want)/loadTime.Seconds(), failed.Load(), len(lat), float64(len(lat))/loadTime.Seconds())
	fmt.Printf("clients with every event: %d of %d; fewest received: %d; disconnected: %d\n", complete, len(clients), minRecv, dropped)
	fmt.Println("delivery latency (arrival − event at; at has ms resolution):", percentiles(lat))
	if dropped > 0 {
		for _, c := range clients {
			if c.err != nil {
				fmt.Println("first disconnect:", c.err)
				break
			}
		}
		return errors.New("some clients were disconnected")
	}
	return nil
}

var (
	eventKind = []byte(`{"kind":"event"`)
	atField   = []byte(`"at":"`)
)

// eventAt returns the "at" of an event message, without decoding it all.
func eventAt(msg []byte) (time.Time, bool) {
	if !bytes.HasPrefix(msg, eventKind) {
		return time.Time{}, false
	}
	i := bytes.Index(msg, atField)
	if i < 0 {
		return time.Time{}, false
	}
	rest := msg[i+len(atField):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	return t, err == nil
}
