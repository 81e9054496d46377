// Package soak is Sundial's fault soak: the real binaries (two APIs, two
// pollers with the history writer, two workers) on loopback, under steady
// load of every kind of job, while faults are injected at random: kill -9
// and restart of workers, pollers, APIs and Redis (AOF, fsync always),
// SIGTERM of workers with jobs in flight, a worker, poller or API cut off
// from Redis (a proxy stalls its connections) or frozen (SIGSTOP) for
// longer than a lease, MongoDB stopped for a while; and the ambiguous
// faults: a reply dropped after Redis ran the command (a proxy forwards a
// script call, drops its answer and resets the connection, so go-redis
// sends it again), Redis itself stopped with SIGSTOP (it accepts bytes and
// answers nothing), an operator cancelling and retrying jobs while they
// run (one by one and in bulk), and workers with different lease TTLs.
// A third worker, written with the Go library (internal/e2e/durableworker),
// runs durable jobs: a step, a wait for a signal the soak sends by key
// (before or during the wait), a sleep, a step; their side effects go to
// the sink, which applies each step's idempotency key once.
// At the end every
// acknowledged job is accounted for, in Redis and in the history, and no
// two runs of one job overlapped in time at the sink (internal/runsink),
// which records runs outside Redis.
//
//	go test ./internal/soak -run TestSoak -v                                   # CI: 45 s
//	SUNDIAL_SOAK_DURATION=10m SUNDIAL_SOAK_SEED=7 go test ./internal/soak -run TestSoak -v -timeout 30m
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/internal/netfault"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/internal/runsink"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func TestMain(m *testing.M) {
	code := mongotest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

const (
	soakQueue  = "soak"
	schedQueue = "soak-sched"
	// upQueue holds the jobs that the crossqueue kind's jobs of soakQueue
	// depend on: edges the poller settles across queues (settle.lua).
	upQueue = "soak-up"
)

// kind is a kind of job the soak submits and the final state it must reach.
type kind struct {
	name  string
	final job.State
	specs func(r *rand.Rand) []map[string]any // one job, or a batch (dependencies)
}

var kinds = []kind{
	{"fast", job.Succeeded, func(r *rand.Rand) []map[string]any {
		return []map[string]any{{"type": "sundial.echo", "payload": map[string]any{"n": r.Int()}}}
	}},
	{"slow", job.Succeeded, func(r *rand.Rand) []map[string]any {
		return []map[string]any{{"type": "sundial.sleep", "payload": map[string]any{"ms": 200 + r.IntN(1300)}, "max_attempts": 25,
			"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}}}
	}},
	{"flaky", job.Succeeded, func(r *rand.Rand) []map[string]any {
		return []map[string]any{{"type": "sundial.fail", "payload": map[string]any{"times": 1 + r.IntN(2)}, "max_attempts": 25,
			"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}}}
	}},
	{"doomed", job.Dead, func(r *rand.Rand) []map[string]any {
		return []map[string]any{{"type": "sundial.fail", "payload": map[string]any{"times": 1000}, "max_attempts": 2,
			"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.1}}}
	}},
	{"delayed", job.Succeeded, func(r *rand.Rand) []map[string]any {
		return []map[string]any{{"type": "sundial.echo", "delay_seconds": 0.2 + 2*r.Float64(), "max_attempts": 25}}
	}},
	{"cancelled", job.Cancelled, func(r *rand.Rand) []map[string]any {
		return []map[string]any{{"type": "sundial.echo", "delay_seconds": 3600}}
	}},
	{"fenced", job.Succeeded, func(r *rand.Rand) []map[string]any {
		// A run recorded by the sink, outside Redis (internal/runsink).
		return []map[string]any{{"type": "sundial.http", "max_attempts": 25,
			"payload": map[string]any{"method": "POST", "url": fmt.Sprintf("%s/run?ms=%d", sinkURL, 20+r.IntN(130))},
			"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}}}
	}},
	{"crossqueue", job.Succeeded, func(r *rand.Rand) []map[string]any {
		// "@0": the id of the first job, submitted first, in another queue.
		return []map[string]any{
			{"type": "sundial.sleep", "queue": upQueue, "payload": map[string]any{"ms": 20 + r.IntN(80)}, "max_attempts": 25,
				"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}},
			{"type": "sundial.echo", "depends_on": []string{"@0"}, "max_attempts": 25},
		}
	}},
	{"workflow", job.Succeeded, func(r *rand.Rand) []map[string]any {
		// Steps of POST /v1/workflows (submitWorkflow): a diamond over two
		// queues, whose cross-queue edges the poller settles.
		retry := map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}
		return []map[string]any{
			{"name": "a", "job": map[string]any{"type": "sundial.sleep", "queue": upQueue, "payload": map[string]any{"ms": 20 + r.IntN(80)}, "max_attempts": 25, "backoff": retry}},
			{"name": "b", "job": map[string]any{"type": "sundial.echo", "queue": soakQueue, "max_attempts": 25, "backoff": retry}, "after": []string{"a"}},
			{"name": "c", "job": map[string]any{"type": "sundial.fail", "queue": upQueue, "payload": map[string]any{"times": 1}, "max_attempts": 25, "backoff": retry}, "after": []string{"a"}},
			{"name": "d", "job": map[string]any{"type": "sundial.echo", "queue": soakQueue, "max_attempts": 25, "backoff": retry}, "after": []string{"b", "c"}},
		}
	}},
	{"operator", job.Succeeded, func(r *rand.Rand) []map[string]any {
		// A fenced run long enough for an operator to cancel and retry it
		// while it runs (stack.operate): the retry must not start while
		// the cancelled run may still go on at the sink.
		return []map[string]any{{"type": "sundial.http", "max_attempts": 25,
			"payload": map[string]any{"method": "POST", "url": fmt.Sprintf("%s/run?ms=%d", sinkURL, 300+r.IntN(600))},
			"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}}}
	}},
	{"durable", job.Succeeded, func(r *rand.Rand) []map[string]any {
		// docs/durable.md's order (durableworker): charge → wait for
		// "shipped" (sent by the soak to the key, stack.ship) → sleep →
		// email, each step's side effect at the sink.
		return []map[string]any{{"type": "order", "max_attempts": 25,
			"payload": map[string]any{"order": strconv.FormatUint(r.Uint64(), 36), "sleep_ms": 100 + r.IntN(900), "timeout_ms": 600_000},
			"backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.5}}}
	}},
	{"sequenced", job.Succeeded, func(r *rand.Rand) []map[string]any {
		// A fenced run in line behind the earlier ones of its key (one of
		// four): the runs of a key wait for each other through the
		// soak's kills, partitions and restarts. Tags, a start_by and a
		// deadline far enough not to end it ride along.
		return []map[string]any{{"type": "sundial.http", "max_attempts": 25,
			"payload":  map[string]any{"method": "POST", "url": fmt.Sprintf("%s/run?ms=%d", sinkURL, 10+r.IntN(60))},
			"backoff":  map[string]any{"base_seconds": 0.05, "max_seconds": 0.5},
			"sequence": map[string]any{"key": fmt.Sprintf("seq-%d", r.IntN(4))},
			"tags":     []string{"soak", fmt.Sprintf("n=%d", r.IntN(10))}, "expires_in_seconds": 3600, "deadline_in_seconds": 7200}}
	}},
	{"chain", job.Succeeded, func(r *rand.Rand) []map[string]any {
		return []map[string]any{
			{"type": "sundial.echo", "max_attempts": 25},
			{"type": "sundial.sleep", "payload": map[string]any{"ms": 50}, "depends_on": []string{"#0"}, "max_attempts": 25},
			{"type": "sundial.echo", "depends_on": []string{"#1"}, "max_attempts": 25},
		}
	}},
}

// sinkURL is the sink's address (startSink), which the fenced jobs call.
var sinkURL string

// settings are the soak's knobs, from the environment.
type settings struct {
	duration time.Duration
	seed     uint64
	rate     int // jobs submitted per second
}

func loadSettings(t *testing.T) settings {
	s := settings{duration: 45 * time.Second, seed: uint64(time.Now().UnixNano()), rate: 40}
	if v := os.Getenv("SUNDIAL_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SUNDIAL_SOAK_DURATION: %v", err)
		}
		s.duration = d
	}
	if v := os.Getenv("SUNDIAL_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SUNDIAL_SOAK_SEED: %v", err)
		}
		s.seed = n
	}
	if v := os.Getenv("SUNDIAL_SOAK_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SUNDIAL_SOAK_RATE: must be a positive number")
		}
		s.rate = n
	}
	return s
}

// stack is the system under test.
type stack struct {
	redis         *queuetest.Server
	mongo         *mongotest.Server
	apis          []*proctest.Proc
	*proctest.API // the APIs' client: s.Call
	workers       []*proctest.Proc
	pollers       []*proctest.Proc
	db            string // the history's MongoDB database
	// proxies stand between each process and Redis, for partitions.
	proxies map[*proctest.Proc]*netfault.Proxy
	// shipping counts the signals sent later to durable jobs (ship).
	shipping sync.WaitGroup
}

func startStack(t *testing.T) *stack {
	s := &stack{
		redis: queuetest.StartWith(t, "--appendfsync", "always"),
		mongo: mongotest.NewServer(t),
		API:   &proctest.API{HTTP: &http.Client{Timeout: 5 * time.Second}},
		db:    mongotest.DBName(t),

		proxies: map[*proctest.Proc]*netfault.Proxy{},
	}
	common := []string{
		"SUNDIAL_REDIS_URL=" + s.redis.URL(),
		"SUNDIAL_MONGO_URI=" + s.mongo.URI(),
		"SUNDIAL_MONGO_DB=" + s.db,
		"SUNDIAL_LOG_LEVEL=warn",
		"SUNDIAL_LEASE_TTL=1s",
		"SUNDIAL_LEASE_GRACE=300ms",
		"SUNDIAL_HEARTBEAT_INTERVAL=300ms",
		"SUNDIAL_METRICS_ADDR=127.0.0.1:0",
		"SUNDIAL_SHUTDOWN_TIMEOUT=2s",
		"SUNDIAL_RATE_LIMIT=0",
		"SUNDIAL_QUEUES=" + soakQueue + "," + schedQueue + "," + upQueue,
		"SUNDIAL_CONCURRENCY=20",
		"SUNDIAL_HTTP_JOB_ALLOW=127.0.0.1", // the sink
	}
	// Each process reaches Redis through a proxy of its own.
	start := func(bin string, extra ...string) *proctest.Proc {
		px := netfault.Start(t, s.redis.Addr())
		env := append(slices.Clone(common), extra...)
		env = append(env, "SUNDIAL_REDIS_URL=redis://"+px.Addr()+"/0")
		path := bin
		if !strings.Contains(bin, "/") {
			path = proctest.Binary(t, bin)
		}
		p := proctest.Start(t, path, env...)
		s.proxies[p] = px
		return p
	}
	for i := 0; i < 2; i++ {
		addr := proctest.FreeAddr(t)
		s.apis = append(s.apis, start("api", "SUNDIAL_HTTP_ADDR="+addr))
		s.URLs = append(s.URLs, "http://"+addr)
		s.pollers = append(s.pollers, start("poller"))
		// The workers' lease TTLs differ (1 s and 2 s): the restart
		// quarantine and renewals must follow the longest.
		s.workers = append(s.workers, start("worker", fmt.Sprintf("SUNDIAL_WORKER_ID=soak-worker-%d", i), fmt.Sprintf("SUNDIAL_LEASE_TTL=%ds", i+1)))
	}
	// The durable jobs' worker: a program written with the Go library.
	s.workers = append(s.workers, start(proctest.Program(t, "github.com/sundialhq/sundial/internal/e2e/durableworker"),
		"SUNDIAL_WORKER_ID=soak-durable", "SINK_URL="+sinkURL))
	for _, u := range s.URLs {
		queuetest.Eventually(t, 30*time.Second, "the API at "+u, func() bool { return proctest.Ready(s.HTTP, u) })
	}
	return s
}

// tracked is an acknowledged job and the final state it must reach.
type tracked struct {
	id, kind string
	final    job.State
}

// ledger records every acknowledged job.
type ledger struct {
	mu   sync.Mutex
	jobs []tracked
}

func (l *ledger) add(ts ...tracked) {
	l.mu.Lock()
	l.jobs = append(l.jobs, ts...)
	l.mu.Unlock()
}

// submit submits one job or batch of kind k with idempotency keys (so a
// retry after a lost answer creates nothing twice) and records it once
// acknowledged.
func (s *stack) submit(t *testing.T, r *rand.Rand, k kind, seq string, l *ledger) ([]string, error) {
	specs := k.specs(r)
	if k.name == "workflow" {
		return s.submitWorkflow(k, seq, specs, l)
	}
	group := ""
	if r.IntN(2) == 0 {
		group = fmt.Sprintf("tenant-%d", r.IntN(3)) // fairness groups (docs/flow-control.md)
	}
	crossQueue := false
	for i, sp := range specs {
		if sp["queue"] != nil {
			crossQueue = true
		} else {
			sp["queue"] = soakQueue
		}
		sp["idempotency_key"] = fmt.Sprintf("%s-%d", seq, i)
		if group != "" {
			sp["group"] = group
		}
	}
	var ids []string
	if crossQueue {
		// One at a time, in order: "@k" in depends_on names job k's id.
		for _, sp := range specs {
			if deps, ok := sp["depends_on"].([]string); ok {
				resolved := make([]string, len(deps))
				for d, dep := range deps {
					resolved[d] = dep
					if k, err := strconv.Atoi(strings.TrimPrefix(dep, "@")); err == nil && strings.HasPrefix(dep, "@") {
						resolved[d] = ids[k]
					}
				}
				sp["depends_on"] = resolved
			}
			code, b, err := s.Call("POST", "/v1/jobs", sp, 60*time.Second)
			if err != nil {
				return nil, err
			}
			var j job.Job
			if (code != http.StatusCreated && code != http.StatusOK) || json.Unmarshal(b, &j) != nil {
				return nil, fmt.Errorf("submit: %d %s", code, b)
			}
			ids = append(ids, j.ID)
		}
	} else if len(specs) == 1 {
		code, b, err := s.Call("POST", "/v1/jobs", specs[0], 60*time.Second)
		if err != nil {
			return nil, err
		}
		var j job.Job
		if (code != http.StatusCreated && code != http.StatusOK) || json.Unmarshal(b, &j) != nil {
			return nil, fmt.Errorf("submit: %d %s", code, b)
		}
		ids = []string{j.ID}
	} else {
		code, b, err := s.Call("POST", "/v1/jobs/batch", map[string]any{"jobs": specs}, 60*time.Second)
		if err != nil {
			return nil, err
		}
		var out struct{ Jobs []job.Job }
		if code != http.StatusCreated || json.Unmarshal(b, &out) != nil {
			return nil, fmt.Errorf("batch: %d %s", code, b)
		}
		for _, j := range out.Jobs {
			ids = append(ids, j.ID)
		}
	}
	for _, id := range ids {
		l.add(tracked{id: id, kind: k.name, final: k.final})
	}
	if k.name == "operator" {
		return ids, s.operate(r, ids[0])
	}
	if k.name == "durable" {
		order := specs[0]["payload"].(map[string]any)["order"].(string)
		if r.IntN(2) == 0 {
			return ids, s.ship(order, seq) // most likely before the job's wait began
		}
		delay := time.Duration(r.IntN(1500)) * time.Millisecond
		s.shipping.Add(1)
		go func() { // during the wait
			defer s.shipping.Done()
			time.Sleep(delay)
			if err := s.ship(order, seq); err != nil {
				t.Errorf("durable job %s: %v", ids[0], err)
			}
		}()
	}
	if k.final == job.Cancelled {
		code, b, err := s.Call("POST", "/v1/jobs/"+ids[0]+"/cancel", map[string]any{}, 60*time.Second)
		if err == nil && code == http.StatusConflict {
			// A retried cancel whose first answer was lost (an API killed
			// after the script ran) finds the job cancelled already.
			var j job.Job
			code2, b2, err2 := s.Call("GET", "/v1/jobs/"+ids[0], nil, 60*time.Second)
			if err2 == nil && code2 == http.StatusOK && json.Unmarshal(b2, &j) == nil && j.State == job.Cancelled {
				code = http.StatusOK
			}
		}
		if err != nil || code != http.StatusOK {
			return ids, fmt.Errorf("cancel %s: %d %s %v", ids[0], code, b, err)
		}
	}
	return ids, nil
}

// ship sends the signal "shipped" to the durable job of order, by its key,
// with an idempotency key: a retry after a lost answer is a duplicate.
func (s *stack) ship(order, seq string) error {
	code, b, err := s.Call("POST", "/v1/signals", map[string]any{"queue": soakQueue, "key": "order-" + order, "name": "shipped",
		"value": "ups", "idempotency_key": "ship-" + seq}, 60*time.Second)
	if err != nil || (code != http.StatusOK && code != http.StatusAccepted) {
		return fmt.Errorf("signal order %s: %d %s %v", order, code, b, err)
	}
	return nil
}

// operated counts operate's cancel-then-retry actions.
var operated atomic.Int64

// operate acts on job id as an operator would while it runs: once it is
// active (or after a while), cancel it and retry it at once, one by one or
// through the bulk route. The job must still end succeeded, and its runs at
// the sink must never overlap: the retry waits for the cancelled lease.
func (s *stack) operate(r *rand.Rand, id string) error {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		code, b, err := s.Call("GET", "/v1/jobs/"+id, nil, 30*time.Second)
		var j job.Job
		if err == nil && code == http.StatusOK && json.Unmarshal(b, &j) == nil && j.State != job.Queued && j.State != job.Scheduled {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	bulk := r.IntN(2) == 0
	act := func(action string) (int, []byte, error) {
		if bulk {
			return s.Call("POST", "/v1/queues/"+soakQueue+"/jobs/bulk", map[string]any{"action": action, "ids": []string{id}}, 60*time.Second)
		}
		return s.Call("POST", "/v1/jobs/"+id+"/"+action, map[string]any{}, 60*time.Second)
	}
	// A 409 says the job already ended (succeeded before the cancel) or the
	// cancel's first answer was lost: the job is checked at the end.
	if code, b, err := act("cancel"); err != nil || (code != http.StatusOK && code != http.StatusConflict) {
		return fmt.Errorf("cancel %s: %d %s %v", id, code, b, err)
	}
	code, b, err := act("retry")
	if err != nil || (code != http.StatusOK && code != http.StatusConflict) {
		return fmt.Errorf("retry %s: %d %s %v", id, code, b, err)
	}
	operated.Add(1)
	return nil
}

// submitWorkflow submits steps as one workflow named seq: its steps'
// idempotency keys ("wf:<seq>:<step>") make a retry after a lost answer
// create nothing twice.
func (s *stack) submitWorkflow(k kind, seq string, steps []map[string]any, l *ledger) ([]string, error) {
	code, b, err := s.Call("POST", "/v1/workflows", map[string]any{"id": "soak-" + seq, "steps": steps}, 60*time.Second)
	if err != nil {
		return nil, err
	}
	var out struct{ Steps map[string]job.Job }
	if (code != http.StatusCreated && code != http.StatusOK) || json.Unmarshal(b, &out) != nil || len(out.Steps) != len(steps) {
		return nil, fmt.Errorf("workflow: %d %s", code, b)
	}
	var ids []string
	for _, st := range steps {
		id := out.Steps[st["name"].(string)].ID
		ids = append(ids, id)
		l.add(tracked{id: id, kind: k.name, final: k.final})
	}
	return ids, nil
}

// fault is one kind of injected failure.
type fault struct {
	name   string
	weight int
	inject func(t *testing.T, s *stack, r *rand.Rand)
}

func pause(r *rand.Rand, lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(r.Int64N(int64(hi-lo))))
}

var faults = []fault{
	{"worker kill -9", 3, func(t *testing.T, s *stack, r *rand.Rand) {
		w := s.workers[r.IntN(len(s.workers))]
		w.Kill()
		pause(r, 200*time.Millisecond, 2*time.Second)
		w.Restart(t)
	}},
	{"worker SIGTERM", 2, func(t *testing.T, s *stack, r *rand.Rand) {
		w := s.workers[r.IntN(len(s.workers))]
		if !w.Signal(syscall.SIGTERM, 10*time.Second) {
			t.Errorf("a worker did not exit within 10 s of SIGTERM (shutdown timeout 2 s)")
			w.Kill()
		}
		w.Restart(t)
	}},
	{"poller kill -9", 2, func(t *testing.T, s *stack, r *rand.Rand) {
		p := s.pollers[r.IntN(len(s.pollers))]
		p.Kill()
		pause(r, 200*time.Millisecond, 2*time.Second)
		p.Restart(t)
	}},
	{"api kill -9", 2, func(t *testing.T, s *stack, r *rand.Rand) {
		a := s.apis[r.IntN(len(s.apis))]
		a.Kill()
		pause(r, 200*time.Millisecond, time.Second)
		a.Restart(t)
	}},
	{"redis kill -9", 2, func(t *testing.T, s *stack, r *rand.Rand) {
		s.redis.Kill()
		pause(r, 100*time.Millisecond, time.Second)
		s.redis.Restart()
	}},
	// A process cut off from Redis while it lives on: its connections
	// stall, longer than a lease, then heal.
	{"worker partition", 2, func(t *testing.T, s *stack, r *rand.Rand) {
		s.partition(s.workers[r.IntN(len(s.workers))], r)
	}},
	{"poller partition", 1, func(t *testing.T, s *stack, r *rand.Rand) {
		s.partition(s.pollers[r.IntN(len(s.pollers))], r)
	}},
	{"api partition", 1, func(t *testing.T, s *stack, r *rand.Rand) {
		s.partition(s.apis[r.IntN(len(s.apis))], r)
	}},
	// A process frozen for longer than a lease (SIGSTOP, then SIGCONT).
	{"worker SIGSTOP", 2, func(t *testing.T, s *stack, r *rand.Rand) {
		freeze(s.workers[r.IntN(len(s.workers))], r)
	}},
	{"poller SIGSTOP", 1, func(t *testing.T, s *stack, r *rand.Rand) {
		freeze(s.pollers[r.IntN(len(s.pollers))], r)
	}},
	// A reply lost after Redis ran the command: the proxy of a process
	// forwards one of its script calls, drops the answer and resets the
	// connection; go-redis sends the call again.
	{"lost reply", 4, func(t *testing.T, s *stack, r *rand.Rand) {
		// The scripts each kind of process calls.
		var p *proctest.Proc
		var scripts []string
		switch r.IntN(3) {
		case 0:
			p, scripts = s.workers[r.IntN(len(s.workers))], []string{"claim", "cycle", "complete", "extend", "step"}
		case 1:
			p, scripts = s.pollers[r.IntN(len(s.pollers))], []string{"promote", "reclaim", "settle", "batchsettle", "submit"}
		default:
			p, scripts = s.apis[r.IntN(len(s.apis))], []string{"submit", "cancel", "retry"}
		}
		px := s.proxies[p]
		before := px.Dropped.Load()
		px.DropReply("_"+scripts[r.IntN(len(scripts))]+"\r\n", 1+r.IntN(3))
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && px.Dropped.Load() == before {
			time.Sleep(10 * time.Millisecond)
		}
		px.Disarm()
	}},
	// Redis frozen: it accepts connections and bytes and answers nothing.
	{"redis SIGSTOP", 1, func(t *testing.T, s *stack, r *rand.Rand) {
		s.redis.Pause()
		pause(r, 500*time.Millisecond, 3*time.Second)
		s.redis.Resume()
	}},
	{"mongodb down", 1, func(t *testing.T, s *stack, r *rand.Rand) {
		s.mongo.Kill()
		pause(r, time.Second, 5*time.Second)
		s.mongo.Start()
	}},
}

// partition stalls p's connections to Redis for 1.5–4 lease TTLs.
func (s *stack) partition(p *proctest.Proc, r *rand.Rand) {
	px := s.proxies[p]
	px.Stall()
	pause(r, 1500*time.Millisecond, 4*time.Second)
	px.Heal()
}

// freeze stops p for 1.5–4 lease TTLs.
func freeze(p *proctest.Proc, r *rand.Rand) {
	p.Pause()
	pause(r, 1500*time.Millisecond, 4*time.Second)
	p.Resume()
}

// probe submits an echo job and returns how long it took to succeed: the
// time the system needs to serve again after a fault.
func (s *stack) probe(t *testing.T, r *rand.Rand, seq string, l *ledger) time.Duration {
	begin := time.Now()
	ids, err := s.submit(t, r, kinds[0], seq, l)
	if err != nil {
		t.Errorf("probe submit: %v", err)
		return -1
	}
	for time.Since(begin) < 2*time.Minute {
		code, b, err := s.Call("GET", "/v1/jobs/"+ids[0], nil, 30*time.Second)
		var j job.Job
		if err == nil && code == http.StatusOK && json.Unmarshal(b, &j) == nil && j.State == job.Succeeded {
			return time.Since(begin)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("probe %s did not succeed within 2 minutes", ids[0])
	return -1
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for a while; not in -short")
	}
	cfg := loadSettings(t)
	t.Logf("soak: seed %d, %v, %d jobs/s (replay: SUNDIAL_SOAK_SEED=%d)", cfg.seed, cfg.duration, cfg.rate, cfg.seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("soak FAILED with seed %d: replay with SUNDIAL_SOAK_SEED=%d SUNDIAL_SOAK_DURATION=%v", cfg.seed, cfg.seed, cfg.duration)
		}
	})
	sk := runsink.Start(t)
	sinkURL = sk.URL
	s := startStack(t)
	l := &ledger{}

	// A schedule fires a job every second into its own queue throughout.
	code, b, err := s.Call("PUT", "/v1/schedules/soak-tick", map[string]any{
		"every_seconds": 1, "job": map[string]any{"queue": schedQueue, "type": "sundial.echo", "max_attempts": 25},
	}, 30*time.Second)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create schedule: %d %s %v", code, b, err)
	}

	// Limits that bind now and then under this load (docs/flow-control.md):
	// held-back jobs must come back through every fault too.
	for name, l := range map[string]any{
		"slow":  map[string]any{"types": []string{"sundial.sleep"}, "concurrency": 8},
		"fails": map[string]any{"types": []string{"sundial.fail"}, "rate": map[string]any{"limit": 20, "period_seconds": 1}},
	} {
		code, b, err := s.Call("PUT", "/v1/queues/"+soakQueue+"/limits/"+name, l, 30*time.Second)
		if err != nil || code != http.StatusCreated {
			t.Fatalf("create limit %s: %d %s %v", name, code, b, err)
		}
	}

	stop := make(chan struct{})
	var load sync.WaitGroup
	// The most jobs the limits held back at once, sampled: the report
	// shows that they bound.
	var mostHeld atomic.Int64
	load.Add(1)
	go func() {
		defer load.Done()
		q := queue.New(s.redis.Client(), queue.Options{})
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if c, err := q.Counts(context.Background(), soakQueue); err == nil && c.Throttled > mostHeld.Load() {
				mostHeld.Store(c.Throttled)
			}
		}
	}()
	var submitErrs sync.Map
	const producers = 4
	for p := 0; p < producers; p++ {
		load.Add(1)
		go func(p int) {
			defer load.Done()
			r := rand.New(rand.NewPCG(cfg.seed, uint64(p)+1))
			tick := time.NewTicker(time.Second * producers / time.Duration(cfg.rate))
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				k := kinds[r.IntN(len(kinds))]
				if _, err := s.submit(t, r, k, fmt.Sprintf("p%d-%d", p, n), l); err != nil {
					submitErrs.Store(fmt.Sprintf("p%d-%d", p, n), err)
				}
			}
		}(p)
	}

	// Faults, one at a time, each followed by a probe.
	r := rand.New(rand.NewPCG(cfg.seed, 0))
	counts := map[string]int{}
	recovery := map[string][]time.Duration{}
	total := 0
	for _, f := range faults {
		total += f.weight
	}
	end := time.Now().Add(cfg.duration)
	for n := 0; time.Now().Before(end); n++ {
		pause(r, time.Second, 3*time.Second)
		pick := r.IntN(total)
		var f fault
		for _, f = range faults {
			if pick < f.weight {
				break
			}
			pick -= f.weight
		}
		f.inject(t, s, r)
		counts[f.name]++
		recovery[f.name] = append(recovery[f.name], s.probe(t, r, fmt.Sprintf("probe-%d", n), l))
	}
	close(stop)
	load.Wait()
	s.shipping.Wait()
	submitErrs.Range(func(k, v any) bool {
		t.Errorf("submit %v was never acknowledged: %v", k, v)
		return true
	})
	if _, _, err := s.Call("PATCH", "/v1/schedules/soak-tick", map[string]any{"enabled": false}, 30*time.Second); err != nil {
		t.Errorf("disable schedule: %v", err)
	}

	rep := account(t, s, l)
	rep.faults, rep.recovery = counts, recovery
	rep.mostHeld = mostHeld.Load()
	rep.overlapping, rep.sinkRuns, rep.fencedOff = sk.Overlaps(t)
	for _, px := range s.proxies {
		rep.repliesDropped += px.Dropped.Load()
	}
	rep.operated = operated.Load()
	rep.checkDurable(t, s, l, sk)
	rep.print(t, cfg)
	if rep.lost > 0 || rep.wrong > 0 || rep.badHistory > 0 || rep.unrecordedDup > 0 || rep.ranAfterSuccess > 0 || rep.overlapping > 0 || rep.badDurable > 0 {
		t.Fatalf("the soak found %d lost, %d in a wrong final state, %d with a broken history, %d unrecorded duplicate runs, %d runs after success, %d overlapping runs, %d wrong durable jobs",
			rep.lost, rep.wrong, rep.badHistory, rep.unrecordedDup, rep.ranAfterSuccess, rep.overlapping, rep.badDurable)
	}
	if rep.jobs["fenced"] > 0 && rep.sinkRuns == 0 {
		t.Errorf("the sink recorded no run of %d fenced jobs", rep.jobs["fenced"])
	}
}

// report is the soak's accounting.
type report struct {
	jobs            map[string]int
	scheduled       int
	lost, wrong     int
	badHistory      int
	dupAfterLease   int // runs that followed a recorded lease expiry
	released        int // attempts given back by a stopping worker
	unrecordedDup   int // a run following a run with no ending event
	ranAfterSuccess int
	faults          map[string]int
	recovery        map[string][]time.Duration
	mostHeld        int64 // the most jobs the limits held back at once
	overlapping     int   // pairs of one job's runs at the sink that overlap in time
	repliesDropped  int64 // script replies the proxies dropped after Redis ran the call
	operated        int64 // cancel-then-retry actions on running jobs
	sinkRuns        int   // runs the sink committed
	fencedOff       int   // stale attempts the sink refused by their fencing token
	stepsApplied    int   // durable steps' side effects applied at the sink
	stepsAgain      int   // step runs the sink answered as applied before
	badDurable      int   // durable jobs whose result or records are wrong
}

// checkDurable checks every durable job that succeeded: its result holds
// the values its steps got and the signal, its four steps are recorded,
// and each step's side effect was applied once at the sink.
func (rep *report) checkDurable(t *testing.T, s *stack, l *ledger, sk *runsink.Sink) {
	ctx := context.Background()
	q := queue.New(s.redis.Client(), queue.Options{})
	applied, again, _ := sk.Applied()
	rep.stepsApplied, rep.stepsAgain = len(applied), again
	l.mu.Lock()
	jobs := slices.Clone(l.jobs)
	l.mu.Unlock()
	for _, tj := range jobs {
		if tj.kind != "durable" {
			continue
		}
		j, err := q.Get(ctx, tj.id)
		if err != nil || j.State != job.Succeeded {
			continue // counted by account
		}
		var res map[string]string
		_ = json.Unmarshal(j.Result, &res)
		prefix := soakQueue + "/" + j.ID + "/"
		switch {
		case res["carrier"] != "ups" || res["charge"] != "v:"+prefix+"charge" || res["email"] != "v:"+prefix+"email":
			t.Errorf("durable job %s: result %s", j.ID, j.Result)
		case j.Durable == nil || len(j.Durable.Steps) != 4:
			t.Errorf("durable job %s: records %+v", j.ID, j.Durable)
		case applied[prefix+"charge"] != 1 || applied[prefix+"email"] != 1:
			t.Errorf("durable job %s: charge applied %d times, email %d", j.ID, applied[prefix+"charge"], applied[prefix+"email"])
		default:
			continue
		}
		rep.badDurable++
	}
}

// account waits for every job to reach a final state and for the history
// to catch up, then checks each job in Redis and in MongoDB.
func account(t *testing.T, s *stack, l *ledger) *report {
	ctx := context.Background()
	rdb := s.redis.Client()
	q := queue.New(rdb, queue.Options{})
	rep := &report{jobs: map[string]int{}}
	l.mu.Lock()
	jobs := slices.Clone(l.jobs)
	l.mu.Unlock()

	final := map[string]*job.Job{}
	deadline := time.Now().Add(3 * time.Minute)
	for _, tj := range jobs {
		rep.jobs[tj.kind]++
		for {
			j, err := q.Get(ctx, tj.id)
			if err == nil && j.State.Final() {
				final[tj.id] = j
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, tj := range jobs {
		j := final[tj.id]
		switch {
		case j == nil:
			rep.lost++
			t.Errorf("job %s (%s) lost or never finished", tj.id, tj.kind)
		case j.State != tj.final:
			rep.wrong++
			t.Errorf("job %s (%s) ended %s, want %s (last error %q)", tj.id, tj.kind, j.State, tj.final, j.LastError)
		}
	}

	// The history: wait until nothing waits, then check every job's events.
	mc, err := history.Connect(s.mongo.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Disconnect(ctx)
	store := history.NewStore(mc.Database(s.db), history.StoreOptions{})
	mon := history.NewMonitor(q, history.MonitorConfig{})
	waitHistory(t, mon)
	// Schedule-fired jobs, found in the history.
	var sched []*job.Job
	cursor := ""
	for {
		page, next, err := store.Search(ctx, history.Query{Queue: schedQueue, Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatalf("search scheduled jobs: %v", err)
		}
		sched = append(sched, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	rep.scheduled = len(sched)
	if len(sched) == 0 {
		t.Errorf("the schedule fired no job")
	}
	for _, j := range sched {
		jobs = append(jobs, tracked{id: j.ID, kind: "scheduled", final: job.Succeeded})
		live, err := q.Get(ctx, j.ID)
		if err != nil || live.State != job.Succeeded {
			queuetest.Eventually(t, time.Minute, "scheduled job "+j.ID+" to succeed", func() bool {
				live, err = q.Get(ctx, j.ID)
				return err == nil && live.State == job.Succeeded
			})
		}
		final[j.ID] = live
	}
	waitHistory(t, mon)
	// Every recorded event, read once per queue in stream order.
	recorded := map[string][]job.Event{}
	for _, qn := range []string{soakQueue, schedQueue, upQueue} {
		err := store.EachEvent(ctx, qn, func(e job.Event) error {
			recorded[e.JobID] = append(recorded[e.JobID], e)
			return nil
		})
		if err != nil {
			t.Fatalf("read the history of %s: %v", qn, err)
		}
	}
	for _, tj := range jobs {
		j := final[tj.id]
		if j == nil {
			continue
		}
		evs := recorded[tj.id]
		if problem := rep.checkEvents(j, evs); problem != "" {
			rep.badHistory++
			t.Errorf("job %s (%s): history %s: %s", tj.id, tj.kind, eventList(evs), problem)
		}
	}
	return rep
}

// waitHistory waits until the history writers have recorded every event.
// On this shared 2-core machine FerretDB may fall behind under the soak's
// load, so the wait is long, but it must keep shrinking: a backlog that
// stops moving for two minutes fails the soak, with what still waits.
func waitHistory(t *testing.T, mon *history.Monitor) {
	t.Helper()
	var b history.Backlog
	var err error
	best, since := int64(-1), time.Now()
	for time.Since(since) < 2*time.Minute {
		if b, err = mon.Measure(context.Background()); err == nil {
			if b.Events == 0 {
				return
			}
			if best < 0 || b.Events < best {
				best, since = b.Events, time.Now()
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	detail, _ := json.Marshal(b)
	t.Errorf("the history backlog stopped shrinking for 2 minutes: %s (err %v)", detail, err)
}

func eventList(evs []job.Event) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf("%s/%s/%d", e.Event, e.State, e.Attempt))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkEvents walks a job's recorded events as the engine's state machine:
// every transition must start from the state the previous event left, so a
// missing event shows as a broken step. It counts duplicate runs by cause.
func (rep *report) checkEvents(j *job.Job, evs []job.Event) string {
	if len(evs) == 0 || evs[0].Event != job.EventSubmitted {
		return "does not start with submitted"
	}
	state := evs[0].State
	started, released, succeeded := 0, 0, false
	ended := true // the last run ended with a recorded event
	afterLease := false
	for _, e := range evs[1:] {
		from := state
		switch e.Event {
		case job.EventStarted:
			if from != job.Queued {
				return fmt.Sprintf("started from %s", from)
			}
			if succeeded {
				rep.ranAfterSuccess++
			}
			if !ended {
				rep.unrecordedDup++
			}
			if afterLease {
				rep.dupAfterLease++
				afterLease = false
			}
			started++
			ended = false
		case job.EventSucceeded:
			if from != job.Active {
				return fmt.Sprintf("succeeded from %s", from)
			}
			succeeded, ended = true, true
		case job.EventFailed:
			if from != job.Active {
				return fmt.Sprintf("failed from %s", from)
			}
			ended = true
		case job.EventLeaseExpired:
			if from != job.Active {
				return fmt.Sprintf("lease_expired from %s", from)
			}
			ended, afterLease = true, true
		case job.EventDead:
			if from != job.Active && from != job.Dead {
				return fmt.Sprintf("dead from %s", from)
			}
			ended = true
		case job.EventQueued:
			if from == job.Active { // a stopping worker gave the lease back
				released++
				ended = true
			} else if from != job.Scheduled && from != job.Waiting {
				return fmt.Sprintf("queued from %s", from)
			}
		case job.EventScheduled:
			if from != job.Waiting {
				return fmt.Sprintf("scheduled from %s", from)
			}
		case job.EventCancelled:
			if from.Final() {
				return fmt.Sprintf("cancelled from %s", from)
			}
			if from == job.Active {
				ended = true // an operator stopped the run
			}
		case job.EventStep:
			if from != job.Active {
				return fmt.Sprintf("step from %s", from)
			}
		case job.EventParked:
			if from != job.Active {
				return fmt.Sprintf("parked from %s", from)
			}
			ended = true
		case job.EventSignal:
			if from.Final() {
				return fmt.Sprintf("signal to a job that ended %s", from)
			}
		case job.EventRetried:
			if from != job.Cancelled && from != job.Dead {
				return fmt.Sprintf("retried from %s", from)
			}
			// A retry starts the attempts afresh (attempt 0).
			started, released, succeeded = 0, 0, false
		default:
			return fmt.Sprintf("unexpected event %s", e.Event)
		}
		state = e.State
	}
	rep.released += released
	if state != j.State {
		return fmt.Sprintf("history ends %s, Redis says %s", state, j.State)
	}
	if started-released != j.Attempt {
		return fmt.Sprintf("%d starts and %d give-backs recorded, attempt is %d", started, released, j.Attempt)
	}
	return ""
}

func (rep *report) print(t *testing.T, cfg settings) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n== soak report (seed %d, %v, %d jobs/s)\n", cfg.seed, cfg.duration, cfg.rate)
	total := rep.scheduled
	names := make([]string, 0, len(rep.jobs))
	for k := range rep.jobs {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "| jobs | count |\n|---|---|\n")
	for _, k := range names {
		fmt.Fprintf(&b, "| %s | %d |\n", k, rep.jobs[k])
		total += rep.jobs[k]
	}
	fmt.Fprintf(&b, "| fired by the schedule | %d |\n| **total** | %d |\n\n", rep.scheduled, total)
	fmt.Fprintf(&b, "| fault | count | recovery p50 | recovery max |\n|---|---|---|---|\n")
	fnames := make([]string, 0, len(rep.faults))
	for k := range rep.faults {
		fnames = append(fnames, k)
	}
	sort.Strings(fnames)
	for _, k := range fnames {
		ds := slices.Clone(rep.recovery[k])
		slices.Sort(ds)
		p50, mx := time.Duration(0), time.Duration(0)
		if len(ds) > 0 {
			p50, mx = ds[len(ds)/2], ds[len(ds)-1]
		}
		fmt.Fprintf(&b, "| %s | %d | %v | %v |\n", k, rep.faults[k], p50.Round(time.Millisecond), mx.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\n| outcome | count |\n|---|---|\n")
	fmt.Fprintf(&b, "| lost | %d |\n| wrong final state | %d |\n| broken history | %d |\n", rep.lost, rep.wrong, rep.badHistory)
	fmt.Fprintf(&b, "| runs again after a recorded lease expiry | %d |\n| attempts given back at shutdown | %d |\n", rep.dupAfterLease, rep.released)
	fmt.Fprintf(&b, "| runs with no recorded cause | %d |\n| runs after success | %d |\n", rep.unrecordedDup, rep.ranAfterSuccess)
	fmt.Fprintf(&b, "| most jobs held back by limits at once | %d |\n", rep.mostHeld)
	fmt.Fprintf(&b, "| script replies dropped after Redis ran the call | %d |\n| running jobs cancelled then retried by an operator | %d |\n", rep.repliesDropped, rep.operated)
	fmt.Fprintf(&b, "| runs committed at the sink | %d |\n| stale attempts the sink refused by token | %d |\n| **overlapping runs** | %d |\n", rep.sinkRuns, rep.fencedOff, rep.overlapping)
	fmt.Fprintf(&b, "| durable steps' side effects applied (each once) | %d |\n| step runs answered as applied before | %d |\n| **wrong durable jobs** | %d |\n", rep.stepsApplied, rep.stepsAgain, rep.badDurable)
	t.Log(b.String())
	if p := os.Getenv("SUNDIAL_SOAK_REPORT"); p != "" {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}
}
