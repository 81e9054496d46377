package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func TestErrorTable(t *testing.T) {
	t.Parallel()
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		err          error
		status       int
		code, field  string
		wantInternal bool
	}{
		{&job.FieldError{Field: "priority", Message: "priority must be one of high, normal, low"}, 400, codeInvalidArgument, "priority", false},
		{&queue.DependencyError{Index: 3, Dep: 1, Reason: "not_found", Detail: "x"}, 400, codeInvalidArgument, "depends_on[1]", false},
		{&batchError{&queue.DependencyError{Index: 3, Dep: 1, Reason: "forward"}}, 400, codeInvalidArgument, "jobs[3].depends_on[1]", false},
		{&http.MaxBytesError{Limit: 10}, 413, codePayloadTooLarge, "", false},
		{fmt.Errorf("get: %w", queue.ErrNotFound), 404, codeNotFound, "", false},
		{history.ErrNotFound, 404, codeNotFound, "", false},
		{&queue.ConflictError{State: "succeeded"}, 409, codeConflict, "", false},
		{queue.ErrInvalidCursor, 400, codeInvalidArgument, "cursor", false},
		{history.ErrInvalidCursor, 400, codeInvalidArgument, "cursor", false},
		{errNoHistory, 503, codeUnavailable, "", false},
		{historyErr(errors.New("mongo down")), 503, codeUnavailable, "", false},
		{fmt.Errorf("submit: %w", opErr), 503, codeUnavailable, "", false},
		{context.DeadlineExceeded, 503, codeUnavailable, "", false},
		{errors.New("redis://:hunter2@10.1.2.3 exploded"), 500, codeInternal, "", true},
	}
	for _, c := range cases {
		e := toAPIError(c.err)
		if e.Status != c.status || e.Code != c.code || e.Field != c.field {
			t.Errorf("%v → %d %s %q, want %d %s %q", c.err, e.Status, e.Code, e.Field, c.status, c.code, c.field)
		}
		if c.wantInternal && (e.Message != "internal error" || strings.Contains(e.Message, "hunter2")) {
			t.Errorf("internal error leaks: %q", e.Message)
		}
	}
}

func TestBodyLimits(t *testing.T) {
	a := start(t, func(c *Config) { c.MaxBodyBytes = 2048 })
	big := `{"type":"a","payload":"` + strings.Repeat("x", 3000) + `"}`
	e := a.do("POST", "/v1/jobs", big).wantError(t, http.StatusRequestEntityTooLarge, codePayloadTooLarge, "")
	if !strings.Contains(e.Message, "2048") {
		t.Errorf("message %q does not say the limit", e.Message)
	}
	// The batch endpoint allows 16×.
	var out jobList
	a.do("POST", "/v1/jobs/batch", `{"jobs":[`+big+`]}`).decode(t, http.StatusCreated, &out)
	huge := `{"jobs":[{"type":"a","payload":"` + strings.Repeat("x", 16*2048) + `"}]}`
	a.do("POST", "/v1/jobs/batch", huge).wantError(t, http.StatusRequestEntityTooLarge, codePayloadTooLarge, "")
	// A body without Content-Length (chunked) is cut at the limit too.
	req, _ := http.NewRequest("POST", a.base+"/v1/jobs", chunked{strings.NewReader(big)})
	req.Header.Set("Content-Type", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d", res.StatusCode)
	}
	if st := a.stats(t); st[0].SubmittedTotal != 1 {
		t.Fatalf("%+v", st)
	}
}

// chunked hides the length of its reader, so the request is sent chunked.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestContentType(t *testing.T) {
	a := start(t)
	body := `{"type":"a"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/jsonx", ""} {
		a.do("POST", "/v1/jobs", body, "Content-Type", ct).wantError(t, http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "")
		a.do("POST", "/v1/jobs/batch", `{"jobs":[`+body+`]}`, "Content-Type", ct).wantError(t, http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "")
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8"} {
		a.do("POST", "/v1/jobs", body, "Content-Type", ct).decode(t, http.StatusCreated, nil)
	}
}

func TestAuth(t *testing.T) {
	a := start(t, func(c *Config) { c.APIKeys = []string{"key-one", "key-two"} })
	a.do("GET", "/v1/queues", nil).wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	res := a.do("GET", "/v1/queues", nil, "Authorization", "Bearer nope")
	res.wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	if res.header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	a.do("GET", "/v1/queues", nil, "Authorization", "Basic a2V5LW9uZTo=").wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	a.do("GET", "/v1/queues?access_token=key-one", nil).wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	a.do("GET", "/v1/queues", nil, "Authorization", "Bearer key-one").decode(t, http.StatusOK, nil)
	a.do("GET", "/v1/queues", nil, "Authorization", "bearer key-two").decode(t, http.StatusOK, nil)
	a.do("GET", "/v1/openapi.json", nil).wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	// Operations and the live view need no key.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/"} {
		if res := a.do("GET", p, nil); res.status != http.StatusOK {
			t.Errorf("%s: %d", p, res.status)
		}
	}
	if a.auth().match("key-two") != 1 || a.auth().match("key-on") != -1 || a.auth().match("") != -1 {
		t.Error("match")
	}
}

func (a *testAPI) auth() *authenticator { return a.s.auth }

func TestOpenAPIWarnsWhenOpen(t *testing.T) {
	a := start(t)
	if !strings.Contains(a.logs.String(), "level=WARN msg=\"the API is open") {
		t.Fatalf("no warning for an open API in:\n%s", a.logs)
	}
}

func TestNotFoundRoute(t *testing.T) {
	a := start(t)
	a.do("GET", "/v1/nothing", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("PUT", "/v1/jobs", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("GET", "/v1/queues/", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
}

func TestPanicIs500(t *testing.T) {
	a := start(t)
	a.s.engine.GET("/v1/test-panic", func(*gin.Context) { panic("secret: hunter2") })
	res := a.do("GET", "/v1/test-panic", nil)
	e := res.wantError(t, http.StatusInternalServerError, codeInternal, "")
	if strings.Contains(string(res.body), "hunter2") || e.Message != "internal error" {
		t.Fatalf("leaks: %s", res.body)
	}
	id := res.header.Get("X-Request-Id")
	if logs := a.logs.String(); !strings.Contains(logs, "panic in handler") || !strings.Contains(logs, "request_id="+id) {
		t.Fatalf("panic not logged with its request id:\n%s", logs)
	}
}

func TestRedisDown(t *testing.T) {
	a := start(t, func(c *Config) { c.RateLimit = "100-S" })
	j := a.submit(t, map[string]any{"type": "a"})
	a.redis.Kill()
	checks := []struct{ method, path string }{
		{"POST", "/v1/jobs"}, {"POST", "/v1/jobs/batch"}, {"GET", "/v1/jobs/" + j.ID}, {"POST", "/v1/jobs/" + j.ID + "/cancel"},
		{"GET", "/v1/queues"}, {"GET", "/v1/queues/default"}, {"GET", "/v1/workers"}, {"GET", "/v1/storage"},
	}
	bodies := map[string]any{"/v1/jobs": map[string]any{"type": "a"}, "/v1/jobs/batch": map[string]any{"jobs": []any{map[string]any{"type": "a"}}}}
	for _, c := range checks {
		res := a.do(c.method, c.path, bodies[c.path])
		res.wantError(t, http.StatusServiceUnavailable, codeUnavailable, "")
		if strings.Contains(string(res.body), "127.0.0.1") || strings.Contains(string(res.body), "refused") {
			t.Errorf("%s %s leaks the cause: %s", c.method, c.path, res.body)
		}
	}
	a.do("GET", "/healthz", nil).decode(t, http.StatusOK, nil)
	var ready readiness
	a.do("GET", "/readyz", nil).decode(t, http.StatusServiceUnavailable, &ready)
	if ready.Checks["redis"].Status != "down" || ready.Error == nil || !strings.Contains(ready.Error.Message, "redis") {
		t.Fatalf("%+v", ready)
	}
	if !strings.Contains(a.logs.String(), "connection refused") {
		t.Error("the cause of a 503 is not logged")
	}
	a.redis.Restart()
	// go-redis waits out its dial backoff before it tries again.
	queuetest.Eventually(t, 10*time.Second, "ready after Redis came back", func() bool {
		return a.do("GET", "/readyz", nil).status == http.StatusOK
	})
	a.submit(t, map[string]any{"type": "a"})
}

// hungHistory is a history store whose Ping answers only once released,
// whatever its context: a client that does not honour deadlines.
type hungHistory struct {
	fakeHistory
	release chan struct{}
}

func (h *hungHistory) Ping(context.Context) error {
	<-h.release
	return nil
}

// /readyz answers within readyTimeout even when a dependency's client
// ignores the deadline (go-redis reads a reply for up to 3 s whatever the
// context): the dependency is then down, with detail timeout.
func TestReadyzAnswersWithinItsBound(t *testing.T) {
	h := &hungHistory{release: make(chan struct{})}
	a := start(t, func(c *Config) { c.History = h })
	// Released after 5 s at the latest, so that a /readyz that waits for
	// it fails the test rather than hanging it.
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	time.AfterFunc(5*time.Second, release)
	defer release()
	began := time.Now()
	var ready readiness
	a.do("GET", "/readyz", nil).decode(t, http.StatusServiceUnavailable, &ready)
	if took := time.Since(began); took > readyTimeout+500*time.Millisecond {
		t.Fatalf("/readyz took %v, want at most %v", took, readyTimeout)
	}
	if ready.Checks["history"] != (readyCheck{Status: "down", Detail: "timeout"}) || ready.Checks["redis"].Status != "ok" {
		t.Fatalf("%+v", ready)
	}
}

func TestReadyzHistory(t *testing.T) {
	h := &fakeHistory{}
	a := start(t, func(c *Config) { c.History = h })
	var ready readiness
	a.do("GET", "/readyz", nil).decode(t, http.StatusOK, &ready)
	if ready.Checks["history"].Status != "ok" || ready.Checks["redis"].Status != "ok" {
		t.Fatalf("%+v", ready)
	}
	h.setErr(context.DeadlineExceeded)
	a.do("GET", "/readyz", nil).decode(t, http.StatusServiceUnavailable, &ready)
	if ready.Checks["history"] != (readyCheck{Status: "down", Detail: "timeout"}) || ready.Checks["redis"].Status != "ok" ||
		ready.Error.Message != "not ready: history unavailable" {
		t.Fatalf("%+v", ready)
	}
}
