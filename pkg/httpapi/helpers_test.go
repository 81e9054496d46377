package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// mongotest starts PostgreSQL + FerretDB only if a test asks (the
	// audit log's tests).
	code := mongotest.Run(m)
	if code == 0 {
		if err := goleak.Find(queuetest.IgnorePoolRedial); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testAPI is a Server running on a loopback port over a private Redis.
type testAPI struct {
	t      testing.TB
	redis  *queuetest.Server
	q      *queue.Client
	s      *Server
	base   string
	client *http.Client
	logs   *logbuf.Buffer
	stop   func() error // cancels Run and returns its result
}

type option func(*Config)

// start runs a Server for t over a new Redis. The test runs in parallel.
func start(t *testing.T, opts ...option) *testAPI {
	t.Helper()
	t.Parallel()
	return startOn(t, queuetest.Start(t), opts...)
}

// startOn runs a Server over the given Redis; several may share one.
func startOn(t testing.TB, srv *queuetest.Server, opts ...option) *testAPI {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startListener(t, srv, ln, opts...)
}

func startListener(t testing.TB, srv *queuetest.Server, ln net.Listener, opts ...option) *testAPI {
	t.Helper()
	q := queue.New(srv.Client(), queue.Options{})
	logs := &logbuf.Buffer{}
	cfg := Config{
		Queue:           q,
		RateLimit:       "0",
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Stream:          StreamOptions{DiscoverInterval: 20 * time.Millisecond, StatsInterval: 100 * time.Millisecond},
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	a := &testAPI{t: t, redis: srv, q: q, s: s, base: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}, logs: logs}
	a.stop = sync.OnceValue(func() error {
		cancel()
		err := <-done
		tr.CloseIdleConnections()
		return err
	})
	t.Cleanup(func() {
		if err := a.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a
}

// response is an HTTP answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request. body may be nil, a string or []byte (sent as is),
// or a value sent as JSON; hdr are header name/value pairs that override
// the defaults (Content-Type: application/json when there is a body).
func (a *testAPI) do(method, path string, body any, hdr ...string) response {
	a.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// decode decodes the body into v, failing the test on a status other
// than want.
func (r response) decode(t *testing.T, want int, v any) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// wantError checks an error answer: status, code and field.
func (r response) wantError(t *testing.T, status int, code, field string) errorDetail {
	t.Helper()
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("status %d: error body %q is not the error shape: %v", r.status, r.body, err)
	}
	if r.status != status || e.Error.Code != code || e.Error.Field != field {
		t.Fatalf("got %d %s field %q (%s), want %d %s field %q", r.status, e.Error.Code, e.Error.Field, e.Error.Message, status, code, field)
	}
	if e.Error.Message == "" {
		t.Fatalf("error without message: %s", r.body)
	}
	return e.Error
}

// submit posts a job and returns it.
func (a *testAPI) submit(t *testing.T, spec map[string]any) *job.Job {
	t.Helper()
	var j job.Job
	a.do("POST", "/v1/jobs", spec).decode(t, http.StatusCreated, &j)
	return &j
}

// stats returns the engine's counts of every queue.
func (a *testAPI) stats(t *testing.T) []queue.QueueStats {
	t.Helper()
	st, err := a.q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
