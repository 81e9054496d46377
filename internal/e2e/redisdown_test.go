package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// redisDownBound is how long any request may take to answer 503 once
// Redis is gone, the first one included.
const redisDownBound = 1500 * time.Millisecond

// TestRedisDeadAnswersAtOnce kills redis-server (-9) under an API whose
// connection pool is warm: every request, the first ones included, answers
// 503 unavailable within redisDownBound instead of waiting out retries
// and dials, and /readyz answers 503 naming redis as fast. Once Redis is
// back the API answers again on its own.
func TestRedisDeadAnswersAtOnce(t *testing.T) {
	t.Parallel()
	redisGone(t, (*queuetest.Server).Kill, (*queuetest.Server).Restart)
}

// TestRedisStoppedAnswersInTime stops redis-server with SIGSTOP: it still
// accepts connections and bytes and answers nothing. Every request answers
// 503 unavailable within redisDownBound (the request deadline,
// SUNDIAL_REQUEST_TIMEOUT), not after go-redis' read timeouts and retries
// (over 10 s before), and once Redis runs again (SIGCONT) the API answers
// without a restart.
func TestRedisStoppedAnswersInTime(t *testing.T) {
	t.Parallel()
	redisGone(t, (*queuetest.Server).Pause, (*queuetest.Server).Resume)
}

// redisGone runs the API over a warm pool, applies fault to its Redis,
// checks every answer, then heals it and waits for the API to answer.
func redisGone(t *testing.T, fault, heal func(*queuetest.Server)) {
	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	startProc(t, binary(t, "api"), serviceEnv(srv, "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_HISTORY=off")...)
	base := "http://" + addr
	hc := &http.Client{Timeout: 30 * time.Second}
	queuetest.Eventually(t, 30*time.Second, "the API ready", func() bool { return proctest.Ready(hc, base) })

	type answer struct {
		status  int
		body    []byte
		elapsed time.Duration
	}
	call := func(method, path string, body string) answer {
		var r io.Reader
		if body != "" {
			r = bytes.NewReader([]byte(body))
		}
		req, _ := http.NewRequest(method, base+path, r)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		start := time.Now()
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return answer{res.StatusCode, b, time.Since(start)}
	}
	type request struct{ method, path, body string }
	requests := []request{
		{"GET", "/v1/queues/default", ""},
		{"POST", "/v1/jobs", `{"type":"sundial.echo"}`},
		{"GET", "/v1/workers", ""},
	}

	// Warm the pool: several connections, each used (the first submit
	// makes the queue).
	if a := call("POST", "/v1/jobs", requests[1].body); a.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	for range 3 {
		var wg sync.WaitGroup
		for range 8 {
			for _, r := range requests {
				wg.Go(func() {
					if a := call(r.method, r.path, r.body); a.status >= 300 {
						t.Errorf("%s %s before the kill: %d %s", r.method, r.path, a.status, a.body)
					}
				})
			}
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}

	fault(srv)
	var mu sync.Mutex
	var slowest time.Duration
	check := func(r request, a answer) {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(a.body, &e)
		mu.Lock()
		slowest = max(slowest, a.elapsed)
		mu.Unlock()
		if a.status != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || a.elapsed > redisDownBound {
			t.Errorf("%s %s with Redis dead: %d %s after %v, want 503 unavailable within %v", r.method, r.path, a.status, a.body, a.elapsed.Round(time.Millisecond), redisDownBound)
		}
	}
	// The first request alone, then several at once (each on its own
	// pooled connection), then one after the other.
	first := call(requests[0].method, requests[0].path, "")
	check(requests[0], first)
	t.Logf("first request with Redis dead: %d after %v", first.status, first.elapsed.Round(time.Millisecond))
	var wg sync.WaitGroup
	for range 4 {
		for _, r := range requests {
			wg.Go(func() { check(r, call(r.method, r.path, r.body)) })
		}
	}
	wg.Wait()
	for range 3 {
		for _, r := range requests {
			check(r, call(r.method, r.path, r.body))
		}
	}
	for range 3 {
		a := call("GET", "/readyz", "")
		var ready struct {
			Status string
			Checks map[string]struct{ Status string }
		}
		_ = json.Unmarshal(a.body, &ready)
		if a.status != http.StatusServiceUnavailable || ready.Checks["redis"].Status != "down" || a.elapsed > redisDownBound {
			t.Errorf("/readyz with Redis dead: %d %s after %v, want 503 naming redis within %v", a.status, a.body, a.elapsed.Round(time.Millisecond), redisDownBound)
		}
		slowest = max(slowest, a.elapsed)
	}
	t.Logf("slowest answer with Redis dead: %v", slowest.Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}

	heal(srv)
	queuetest.Eventually(t, 30*time.Second, "the API answering once Redis is back", func() bool {
		return call("POST", "/v1/jobs", `{"type":"sundial.echo"}`).status == http.StatusCreated
	})
}
