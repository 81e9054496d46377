package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// streamMsg is any message of the stream.
type streamMsg struct {
	Kind    string             `json:"kind"`
	Event   *wireEvent         `json:"event"`
	Queues  []queue.QueueStats `json:"queues"`
	Workers *int               `json:"workers"`
	At      string             `json:"at"`
}

// wireEvent is an event as a client decodes it.
type wireEvent struct {
	ID       string  `json:"id"`
	JobID    string  `json:"job_id"`
	Queue    string  `json:"queue"`
	Type     string  `json:"type"`
	Event    string  `json:"event"`
	State    string  `json:"state"`
	At       string  `json:"at"`
	Attempt  *int    `json:"attempt"`
	Error    *string `json:"error"`
	WorkerID *string `json:"worker_id"`
}

// waitStream waits until the hub has looked for streams once.
func (a *testAPI) waitStream(t *testing.T) {
	t.Helper()
	select {
	case <-a.s.hub.discovered:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream reader never discovered the queues")
	}
}

// waitClients waits until n websocket clients are registered.
func (a *testAPI) waitClients(t *testing.T, n int) {
	t.Helper()
	queuetest.Eventually(t, 10*time.Second, fmt.Sprintf("%d stream clients", n), func() bool {
		return len(a.s.hub.snapshot()) == n
	})
}

// dial opens a stream; hdr are header name/value pairs.
func (a *testAPI) dial(t *testing.T, query string, hdr ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(a.base, "http") + streamPath + "?" + query
	c, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: a.client, HTTPHeader: h})
	if c != nil {
		c.SetReadLimit(1 << 20)
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, res, err
}

func (a *testAPI) mustDial(t *testing.T, query string, hdr ...string) *websocket.Conn {
	t.Helper()
	c, _, err := a.dial(t, query, hdr...)
	if err != nil {
		t.Fatalf("dial %s: %v", query, err)
	}
	return c
}

func read(t *testing.T, c *websocket.Conn) (streamMsg, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := c.Read(ctx)
	if err != nil {
		return streamMsg{}, err
	}
	var m streamMsg
	if typ != websocket.MessageText || json.Unmarshal(data, &m) != nil {
		t.Fatalf("bad message %q", data)
	}
	return m, nil
}

// events reads events (skipping stats) until it has seen until's job
// reach event untilEvent, and returns them.
func events(t *testing.T, c *websocket.Conn, untilJob, untilEvent string) []wireEvent {
	t.Helper()
	var out []wireEvent
	for {
		m, err := read(t, c)
		if err != nil {
			t.Fatalf("read: %v (after %d events)", err, len(out))
		}
		if m.Kind != "event" {
			continue
		}
		out = append(out, *m.Event)
		if m.Event.JobID == untilJob && m.Event.Event == untilEvent {
			return out
		}
	}
}

func summary(evs []wireEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type + "@" + e.Queue + ":" + e.Event
	}
	return out
}

var msTimeRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestStreamEventsAndFilters(t *testing.T) {
	a := start(t)
	a.waitStream(t)
	all := a.mustDial(t, "")
	mail := a.mustDial(t, "queue=mail")
	bc := a.mustDial(t, "type=b&type=c")
	a.waitClients(t, 3)

	ja := a.submit(t, map[string]any{"type": "a"})
	// Once the unfiltered client has A's submission, it was published: a
	// client that joins now sees only what follows.
	evs := events(t, all, ja.ID, "submitted")
	jobOnly := a.mustDial(t, "job="+ja.ID)
	a.waitClients(t, 4)
	a.submit(t, map[string]any{"type": "b", "queue": "mail"})
	a.submit(t, map[string]any{"type": "c"})
	a.do("POST", "/v1/jobs/"+ja.ID+"/cancel", nil).decode(t, http.StatusOK, nil)
	endMail := a.submit(t, map[string]any{"type": "end", "queue": "mail"})
	endC := a.submit(t, map[string]any{"type": "c", "queue": "mail"})

	got := events(t, jobOnly, ja.ID, "cancelled")
	if s := summary(got); strings.Join(s, " ") != "a@default:cancelled" {
		t.Errorf("job filter got %v", s)
	}
	if s := summary(events(t, mail, endC.ID, "submitted")); strings.Join(s, " ") != "b@mail:submitted end@mail:submitted c@mail:submitted" {
		t.Errorf("queue filter got %v", s)
	}
	if s := summary(events(t, bc, endC.ID, "submitted")); strings.Join(s, " ") != "b@mail:submitted c@default:submitted c@mail:submitted" &&
		strings.Join(s, " ") != "c@default:submitted b@mail:submitted c@mail:submitted" {
		t.Errorf("type filter got %v", s)
	}
	for len(evs) < 6 {
		m, err := read(t, all)
		if err != nil {
			t.Fatalf("unfiltered client: %v after %v", err, summary(evs))
		}
		if m.Kind == "event" {
			evs = append(evs, *m.Event)
		}
	}
	for _, e := range evs {
		if e.JobID != ja.ID || e.Event != "submitted" {
			continue
		}
		if e.Queue != "default" || e.Type != "a" || e.State != "queued" || e.ID == "" || !msTimeRe.MatchString(e.At) ||
			e.Attempt == nil || *e.Attempt != 0 || e.Error == nil || e.WorkerID == nil {
			t.Errorf("event %+v", e)
		}
	}
	_ = endMail
}

func TestStreamStats(t *testing.T) {
	a := start(t)
	a.submit(t, map[string]any{"type": "a", "priority": "low"})
	c := a.mustDial(t, "")
	for i := 0; ; i++ {
		m, err := read(t, c)
		if err != nil {
			t.Fatal(err)
		}
		// A tick may fall between the queue's registration and its job.
		if m.Kind != "stats" || len(m.Queues) == 0 || m.Queues[0].Queued["low"] == 0 && i < 100 {
			continue
		}
		if m.Queues[0].Name != "default" || m.Queues[0].Queued["low"] != 1 || m.Workers == nil || *m.Workers != 0 || !msTimeRe.MatchString(m.At) {
			t.Fatalf("stats %+v", m)
		}
		return
	}
}

func TestStreamRejects(t *testing.T) {
	a := start(t, func(c *Config) {
		c.APIKeys = []string{"secret"}
		c.AllowedOrigins = []string{"http://localhost:5173", "*.example.org"}
	})
	auth := []string{"Authorization", "Bearer secret"}
	_, res, err := a.dial(t, "")
	if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %v %v", err, res)
	}
	_, res, err = a.dial(t, "access_token=wrong")
	if err == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong access_token: %v", err)
	}
	a.mustDial(t, "access_token=secret")
	a.mustDial(t, "", auth...)
	a.mustDial(t, "", append(auth, "Origin", a.base)...)
	a.mustDial(t, "", append(auth, "Origin", "http://localhost:5173")...)
	a.mustDial(t, "", append(auth, "Origin", "https://app.example.org")...)
	_, res, err = a.dial(t, "", append(auth, "Origin", "http://evil.example.com")...)
	if err == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v %v", err, res)
	}
	body, _ := io.ReadAll(res.Body)
	response{status: res.StatusCode, body: body}.wantError(t, http.StatusForbidden, codePermissionDenied, "")
	_, res, err = a.dial(t, "queue=NOT+VALID", auth...)
	if err == nil || res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad filter: %v", err)
	}
	a.do("GET", "/v1/stream", nil, auth...).wantError(t, http.StatusBadRequest, codeInvalidArgument, "")
	a.do("GET", "/v1/stream?queue=a&since=1", nil, auth...).wantError(t, http.StatusBadRequest, codeInvalidArgument, "since")
}

// smallBuffers shrinks the kernel buffers of accepted connections, so that
// a client that does not read blocks the server after a few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func TestStreamDropsSlowClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := startListener(t, queuetest.Start(t), smallBuffers{ln})
	a.waitStream(t)

	// The slow client's socket reads little, and it never reads at all.
	slowTransport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	defer slowTransport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slow, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(a.base, "http")+streamPath, &websocket.DialOptions{HTTPClient: &http.Client{Transport: slowTransport}})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.CloseNow()
	fast := a.mustDial(t, "")
	a.waitClients(t, 2)

	// The fast client records every event it receives. The test posts the
	// next batch only once the fast client has the events of the last one,
	// so that only the slow client can fall behind (both sockets have small
	// buffers, and a fast reader that the scheduler starves would be
	// dropped too).
	var mu sync.Mutex
	seen := map[string]bool{}
	fastErr := make(chan error, 1)
	go func() {
		for {
			_, data, err := fast.Read(context.Background())
			if err != nil {
				fastErr <- err
				return
			}
			var m streamMsg
			if json.Unmarshal(data, &m) == nil && m.Kind == "event" {
				mu.Lock()
				seen[m.Event.JobID] = true
				mu.Unlock()
			}
		}
	}()
	submitted := map[string]bool{}
	batch := make([]map[string]any, 25)
	for i := range batch {
		batch[i] = map[string]any{"type": "burst"}
	}
	post := func() {
		t.Helper()
		var out jobList
		a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": batch}).decode(t, http.StatusCreated, &out)
		for _, j := range out.Jobs {
			submitted[j.ID] = true
		}
		queuetest.Eventually(t, 10*time.Second, "the fast client to receive every event", func() bool {
			select {
			case err := <-fastErr:
				t.Fatalf("fast client: %v", err)
			default:
			}
			mu.Lock()
			defer mu.Unlock()
			for id := range submitted {
				if !seen[id] {
					return false
				}
			}
			return true
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for a.s.metrics.dropped() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow client was never dropped")
		}
		post()
	}
	if d := a.s.metrics.dropped(); d != 1 {
		t.Fatalf("%v clients dropped, want only the slow one", d)
	}
	a.waitClients(t, 1)
	// More events after the drop still reach the fast client.
	post()
	// The slow client finds its connection closed once it reads what was
	// buffered: with 1013 when the close frame fit, abnormally otherwise.
	for {
		_, _, err := slow.Read(ctx)
		if err == nil {
			continue
		}
		if st := websocket.CloseStatus(err); st != -1 && st != websocket.StatusTryAgainLater {
			t.Fatalf("slow client closed with %v", err)
		}
		break
	}
}

func TestShutdownClosesStreamWith1001(t *testing.T) {
	a := start(t)
	c := a.mustDial(t, "")
	a.waitClients(t, 1)
	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()
	for {
		_, err := read(t, c)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway {
			t.Fatalf("closed with %v, want 1001", err)
		}
		break
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
