package hatest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
)

func TestMain(m *testing.M) {
	code := mongotest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

// stack is Sundial's binaries as processes over one Redis deployment.
type stack struct {
	t             *testing.T
	*proctest.API // the API process's client: s.Call
	url           string
	api           *proctest.Proc
	poller        *proctest.Proc
	workers       []*proctest.Proc
}

// startStack runs one API, one poller and n workers serving queues, with
// SUNDIAL_REDIS_URL redisURL and extra variables env.
func startStack(t *testing.T, redisURL string, queues []string, workers int, env ...string) *stack {
	common := append([]string{
		"SUNDIAL_REDIS_URL=" + redisURL,
		"SUNDIAL_LOG_LEVEL=warn",
		"SUNDIAL_LEASE_TTL=2s",
		"SUNDIAL_LEASE_GRACE=300ms",
		"SUNDIAL_HEARTBEAT_INTERVAL=300ms",
		"SUNDIAL_METRICS_ADDR=127.0.0.1:0",
		"SUNDIAL_SHUTDOWN_TIMEOUT=2s",
		"SUNDIAL_RATE_LIMIT=0",
		"SUNDIAL_QUEUES=" + strings.Join(queues, ","),
		"SUNDIAL_CONCURRENCY=20",
	}, env...)
	with := func(extra ...string) []string { return append(slices.Clone(common), extra...) }
	addr := proctest.FreeAddr(t)
	s := &stack{t: t, url: "http://" + addr, API: &proctest.API{URLs: []string{"http://" + addr}, HTTP: &http.Client{Timeout: 5 * time.Second}}}
	s.api = proctest.Start(t, proctest.Binary(t, "api"), with("SUNDIAL_HTTP_ADDR="+addr)...)
	s.poller = proctest.Start(t, proctest.Binary(t, "poller"), with()...)
	for i := range workers {
		s.workers = append(s.workers, proctest.Start(t, proctest.Binary(t, "worker"), with(fmt.Sprintf("SUNDIAL_WORKER_ID=ha-worker-%d", i))...))
	}
	hatest.Eventually(t, 60*time.Second, "the API ready", func() bool { return proctest.Ready(s.HTTP, s.url) })
	return s
}

// alive fails the test when a binary exited: every part must ride out a
// Redis failover without a restart.
func (s *stack) alive() {
	s.t.Helper()
	for _, p := range append([]*proctest.Proc{s.api, s.poller}, s.workers...) {
		select {
		case <-p.Done():
			s.t.Fatalf("a binary exited (code %d):\n%s", p.ExitCode(), p.Output())
		default:
		}
	}
}

// ledger is every acknowledged (201) job and when it was acknowledged.
type ledger struct {
	mu   sync.Mutex
	jobs map[string]acked
}

type acked struct {
	queue string
	at    time.Time
}

func (l *ledger) add(id, queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs == nil {
		l.jobs = map[string]acked{}
	}
	l.jobs[id] = acked{queue: queue, at: time.Now()}
}

func (l *ledger) snapshot() map[string]acked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps(l.jobs)
}

func maps(m map[string]acked) map[string]acked {
	out := make(map[string]acked, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// submit submits one job with an idempotency key and records it once a 201
// (or the 200 of a duplicate) acknowledges it.
func (s *stack) submit(queue, key string, spec map[string]any, l *ledger) (string, error) {
	body := map[string]any{"queue": queue, "type": "sundial.echo", "idempotency_key": key, "max_attempts": 25}
	for k, v := range spec {
		body[k] = v
	}
	code, b, err := s.Call("POST", "/v1/jobs", body, 30*time.Second)
	if err != nil {
		return "", err
	}
	var j job.Job
	if (code != http.StatusCreated && code != http.StatusOK) || json.Unmarshal(b, &j) != nil {
		return "", fmt.Errorf("submit: %d %s", code, b)
	}
	l.add(j.ID, queue)
	return j.ID, nil
}

// load submits to queues round robin every interval until the returned
// stop is called; stop waits for the load to end and fails the test if a
// submit got no answer (the client's timeout is 30 s).
func (s *stack) load(queues []string, interval time.Duration, l *ledger) (stop func()) {
	done := make(chan struct{})
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			q := queues[n%len(queues)]
			spec := map[string]any{}
			if n%5 == 0 {
				spec["delay_seconds"] = 0.3 // the poller promotes these
			}
			if _, err := s.submit(q, fmt.Sprintf("load-%d", n), spec, l); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		select {
		case err := <-errs:
			s.t.Errorf("a submit got no answer within 30 s: %v", err)
		default:
		}
	}
}

// state returns a job's state through the API ("" when not found).
func (s *stack) state(id string) job.State {
	code, b, err := s.Call("GET", "/v1/jobs/"+id, nil, 10*time.Second)
	if err != nil || code != http.StatusOK {
		return ""
	}
	var j job.Job
	if json.Unmarshal(b, &j) != nil {
		return ""
	}
	return j.State
}

// settle waits until every acknowledged job succeeded and fails the test
// naming those that did not (lost, or stuck).
func (s *stack) settle(l *ledger, timeout time.Duration) {
	s.t.Helper()
	pending := l.snapshot()
	deadline := time.Now().Add(timeout)
	for len(pending) > 0 && time.Now().Before(deadline) {
		for id := range pending {
			if s.state(id) == job.Succeeded {
				delete(pending, id)
			}
		}
	}
	for id, a := range pending {
		s.t.Errorf("acknowledged job %s (queue %s, acknowledged %s) is %q, not succeeded", id, a.queue, a.at.Format("15:04:05.000"), s.state(id))
	}
}
