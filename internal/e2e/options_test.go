package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// startAPIs starts n API binaries over srv and returns their base URLs.
func startAPIs(t *testing.T, n int, env []string) []string {
	t.Helper()
	var urls []string
	hc := &http.Client{Timeout: 10 * time.Second}
	for range n {
		addr := proctest.FreeAddr(t)
		startProc(t, binary(t, "api"), append(env, "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_HISTORY=off")...)
		urls = append(urls, "http://"+addr)
	}
	for _, u := range urls {
		queuetest.Eventually(t, 30*time.Second, "the API ready", func() bool { return proctest.Ready(hc, u) })
	}
	return urls
}

// 1,000 concurrent submits of one debounce key through 3 API processes
// make exactly one job, which carries the last payload.
func TestDebounceAcrossAPIProcesses(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	// 1,000 submits in about a second from one client: above the default
	// rate limit per client (1000-S), which is not what this test is about.
	urls := startAPIs(t, 3, serviceEnv(srv, "SUNDIAL_RATE_LIMIT=0"))
	hc := &http.Client{Timeout: 20 * time.Second}
	post := func(u string, n any) (int, job.Job) {
		body, _ := json.Marshal(map[string]any{"queue": "deb", "type": "t", "payload": map[string]any{"n": n},
			"debounce": map[string]any{"key": "order-7", "window_seconds": 60}})
		res, err := hc.Post(u+"/v1/jobs", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, job.Job{}
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var j job.Job
		if err := json.Unmarshal(b, &j); err != nil {
			t.Errorf("%d %s", res.StatusCode, b)
		}
		return res.StatusCode, j
	}
	const n = 1000
	ids := make([]string, n)
	created := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 48)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			code, j := post(urls[i%3], i)
			mu.Lock()
			defer mu.Unlock()
			ids[i] = j.ID
			switch {
			case code == http.StatusCreated && !j.Debounced:
				created++
			case code == http.StatusOK && j.Debounced:
			default:
				t.Errorf("submit %d: %d debounced=%v", i, code, j.Debounced)
			}
		}()
	}
	wg.Wait()
	if created != 1 {
		t.Fatalf("%d submits made a job, want 1", created)
	}
	for i, id := range ids {
		if id != ids[0] {
			t.Fatalf("submit %d answered job %s, submit 0 job %s", i, id, ids[0])
		}
	}
	code, last := post(urls[1], "last")
	if code != http.StatusOK || last.ID != ids[0] || string(last.Payload) != `{"n":"last"}` {
		t.Fatalf("the last submit: %d %s %s", code, last.ID, last.Payload)
	}
	c, err := queue.New(srv.Client(), queue.Options{}).Counts(context.Background(), "deb")
	if err != nil || c.Scheduled != 1 || c.Queued["normal"] != 0 {
		t.Fatalf("the queue holds %+v (%v), want one scheduled job", c, err)
	}
}

// seqCall is what the sink saw of one run: the sequence key and the job's
// place in it.
type seqCall struct {
	key string
	n   int
}

// Jobs of one sequence key run one at a time in submit order across
// worker processes, one of them killed with -9 mid-run; other keys run
// beside them. The sink sees each run's HTTP call (sundial.http): per key
// the places never go back, and every job ran.
func TestSequencesAcrossWorkersWithAKill(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	jobs, keys, workers := 2000, 40, 4
	if v, err := strconv.Atoi(os.Getenv("SUNDIAL_SEQUENCE_JOBS")); err == nil && v > 0 {
		jobs, keys, workers = v, v/100, 8 // the run: 10,000 jobs over 100 keys, 8 workers
	}
	var mu sync.Mutex
	var calls []seqCall
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			Key string `json:"key"`
			N   int    `json:"n"`
		}
		_ = json.NewDecoder(r.Body).Decode(&c)
		mu.Lock()
		calls = append(calls, seqCall{c.Key, c.N})
		mu.Unlock()
		time.Sleep(time.Millisecond)
	}))
	t.Cleanup(sink.Close)
	env := func(id string) []string {
		return serviceEnv(srv, "SUNDIAL_QUEUES=seq", "SUNDIAL_CONCURRENCY=16", "SUNDIAL_WORKER_ID="+id, "SUNDIAL_HTTP_JOB_ALLOW=127.0.0.1")
	}
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_QUEUES=seq", "SUNDIAL_HISTORY=off")...)
	procs := make([]*proctest.Proc, workers)
	for i := range workers {
		procs[i] = startProc(t, binary(t, "worker"), env(fmt.Sprintf("seq-%d", i))...)
	}
	q := queue.New(srv.Client(), queue.Options{})
	t.Cleanup(func() {
		if t.Failed() {
			c, err := q.Counts(context.Background(), "seq")
			t.Logf("counts %+v %v", c, err)
			for _, st := range []job.State{job.Waiting, job.Queued, job.Scheduled, job.Active} {
				js, _, _ := q.List(context.Background(), "seq", queue.ListOptions{State: st, Limit: 3})
				for _, j := range js {
					t.Logf("%s job %s attempt %d held %+v err %q", st, j.ID, j.Attempt, j.HeldBack, j.LastError)
				}
			}
		}
	})
	specs := make([]job.Spec, jobs)
	for i := range jobs {
		key := fmt.Sprintf("k%03d", i%keys)
		body, _ := json.Marshal(map[string]any{"key": key, "n": i / keys})
		payload, _ := json.Marshal(map[string]any{"method": "POST", "url": sink.URL + "/call", "body": json.RawMessage(body)})
		specs[i] = job.Spec{Queue: "seq", Type: "sundial.http", Payload: payload, MaxAttempts: ptr(20),
			Backoff: &job.Backoff{BaseSeconds: 0.05, MaxSeconds: 0.2}, Sequence: &job.Sequence{Key: key}}
	}
	submit(t, q, specs)
	// Kill one worker once a quarter of the calls came in: its running
	// jobs come back after their leases expire, and their keys wait.
	queuetest.Eventually(t, 60*time.Second, "a quarter of the jobs ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= jobs/4
	})
	procs[0].Kill()
	queuetest.Eventually(t, 180*time.Second, "every job succeeded", func() bool {
		c, err := q.Counts(context.Background(), "seq")
		if err == nil && c.Dead != 0 {
			t.Fatalf("counts %+v: a job died", c)
		}
		return err == nil && c.SucceededTotal == int64(jobs)
	})
	mu.Lock()
	defer mu.Unlock()
	last := map[string]int{}
	seen := map[string]map[int]bool{}
	for i, c := range calls {
		if prev, ok := last[c.key]; ok && c.n < prev {
			t.Fatalf("call %d: key %s ran job %d after job %d", i, c.key, c.n, prev)
		}
		if prev, ok := last[c.key]; ok && c.n > prev+1 {
			t.Fatalf("call %d: key %s ran job %d right after job %d (one skipped)", i, c.key, c.n, prev)
		}
		last[c.key] = c.n
		if seen[c.key] == nil {
			seen[c.key] = map[int]bool{}
		}
		seen[c.key][c.n] = true
	}
	for k, s := range seen {
		if len(s) != jobs/keys {
			t.Fatalf("key %s: %d of %d jobs ran", k, len(s), jobs/keys)
		}
	}
	t.Logf("%d jobs over %d keys, %d workers (one killed): %d calls, in order per key", jobs, keys, workers, len(calls))
}

// A job that no worker starts before its start_by ends dead, expired, by
// the poller's pass; one with a deadline the same when it passes; one
// running when its deadline comes is stopped at it, not retried.
func TestExpiryThroughTheBinaries(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	urls := startAPIs(t, 1, serviceEnv(srv))
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_HISTORY=off")...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_QUEUES=slow")...)
	api := &proctest.API{HTTP: &http.Client{Timeout: 10 * time.Second}, URLs: urls}
	submitted := time.Now()
	var ids []string
	for _, body := range []map[string]any{
		{"queue": "noworker", "type": "t", "expires_in_seconds": 1},
		{"queue": "noworker", "type": "t", "deadline_in_seconds": 1.5, "delay_seconds": 60},
	} {
		code, b, err := api.Call("POST", "/v1/jobs", body, 10*time.Second)
		var j job.Job
		if err != nil || code != http.StatusCreated || json.Unmarshal(b, &j) != nil {
			t.Fatalf("submit: %d %s %v", code, b, err)
		}
		ids = append(ids, j.ID)
	}
	// Mid-attempt: a 10 s sleep whose deadline is 2 s away.
	code, b, err := api.Call("POST", "/v1/jobs", map[string]any{"queue": "slow", "type": "sundial.sleep", "payload": map[string]any{"ms": 10000},
		"deadline_in_seconds": 2, "max_attempts": 5, "timeout_seconds": 60}, 10*time.Second)
	var running job.Job
	if err != nil || code != http.StatusCreated || json.Unmarshal(b, &running) != nil {
		t.Fatalf("submit: %d %s %v", code, b, err)
	}
	var stopped job.Job
	queuetest.Eventually(t, 15*time.Second, "the running job stopped at its deadline", func() bool {
		_, b, err := api.Call("GET", "/v1/jobs/"+running.ID, nil, 5*time.Second)
		return err == nil && json.Unmarshal(b, &stopped) == nil && stopped.State == job.Dead
	})
	if took := time.Since(submitted); stopped.Attempt != 1 || took > 8*time.Second || !strings.Contains(stopped.LastError, "deadline passed") {
		t.Fatalf("the running job: attempt %d, %q, ended after %v; want 1 attempt stopped near its deadline, not retried", stopped.Attempt, stopped.LastError, took)
	}
	for i, id := range ids {
		var j job.Job
		queuetest.Eventually(t, 10*time.Second, "the job expired", func() bool {
			_, b, err := api.Call("GET", "/v1/jobs/"+id, nil, 5*time.Second)
			return err == nil && json.Unmarshal(b, &j) == nil && j.State == job.Dead
		})
		took := time.Since(submitted)
		if want := []string{"expired", "deadline passed"}[i]; len(j.LastError) < len(want) || j.LastError[:len(want)] != want {
			t.Fatalf("job %d: last_error %q", i, j.LastError)
		}
		// The poller wakes for the expiry: well before its idle sleep.
		if took > 5*time.Second {
			t.Fatalf("job %d ended %v after its submit", i, took)
		}
	}
}
