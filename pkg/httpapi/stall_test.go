package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// A client that stops reading while its buffer still has room blocks the
// server's writes on a full socket: every write has a deadline, so the
// client is cut off after WriteTimeout, and a shutdown meanwhile finishes
// within its timeout.
func TestStreamCutsOffAStalledClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := startListener(t, queuetest.Start(t), smallBuffers{ln}, func(c *Config) {
		c.Stream.ClientBuffer = 1 << 20 // never full: only the write deadline can help
		c.Stream.WriteTimeout = 300 * time.Millisecond
		c.ShutdownTimeout = time.Second
	})
	a.waitStream(t)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stalled, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(a.base, "http")+streamPath, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.CloseNow()
	a.waitClients(t, 1)
	batch := make([]map[string]any, 200)
	for i := range batch {
		batch[i] = map[string]any{"type": "stall." + strings.Repeat("x", 100)}
	}
	queuetest.Eventually(t, 30*time.Second, "the stalled client to be cut off", func() bool {
		a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": batch}).decode(t, http.StatusCreated, &jobList{})
		return len(a.s.hub.snapshot()) == 0
	})
	if n := a.s.metrics.dropped(); n != 0 {
		t.Fatalf("dropped %v for a full buffer; the buffer never filled", n)
	}
}
