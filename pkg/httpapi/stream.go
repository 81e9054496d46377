package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/access"
	"github.com/sundialhq/sundial/pkg/job"
)

// streamPath is the route of the live stream.
const streamPath = "/v1/stream"

// streamFilter selects the events a client receives: each named dimension
// must match one of its values; an empty dimension matches everything.
type streamFilter struct {
	queues, types, jobs []string
	// allow are the queues the caller may see (fence.go): events of the
	// others never reach it, whatever it asks for.
	allow access.Patterns
}

func (f *streamFilter) match(e *streamEvent) bool {
	return f.allow.Allows(e.Queue) &&
		(len(f.queues) == 0 || slices.Contains(f.queues, e.Queue)) &&
		(len(f.types) == 0 || slices.Contains(f.types, e.Type)) &&
		(len(f.jobs) == 0 || slices.Contains(f.jobs, e.JobID))
}

// parseFilter reads ?queue=&type=&job= (each repeatable).
func parseFilter(c *gin.Context) (streamFilter, error) {
	var f streamFilter
	if err := checkQuery(c, "queue", "type", "job", "access_token"); err != nil {
		return f, err
	}
	q := c.Request.URL.Query()
	f.queues, f.types, f.jobs = q["queue"], q["type"], q["job"]
	for _, v := range f.queues {
		if !job.ValidQueue(v) {
			return f, invalid("queue", "queue must match [a-z0-9_-]{1,64}")
		}
	}
	for _, v := range f.types {
		if !job.ValidType(v) {
			return f, invalid("type", "type must match [A-Za-z0-9_.:-]{1,128}")
		}
	}
	for _, v := range f.jobs {
		if v == "" || len(v) > 64 {
			return f, invalid("job", "job must be a job id")
		}
	}
	return f, nil
}

// client is one websocket connection of the stream.
type client struct {
	filter   streamFilter
	send     chan []byte
	dropped  chan struct{} // closed when the hub drops the client
	dropOnce sync.Once
	cancel   context.CancelFunc // ends the connection's context
	raw      net.Conn           // the socket: closing it ends any write at once
}

// abort cuts the connection off, whatever it is doing.
func (c *client) abort() {
	c.cancel()
	_ = c.raw.Close()
}

// abortAfter cuts the connection off after d.
func (c *client) abortAfter(d time.Duration) {
	if d <= 0 {
		c.abort()
		return
	}
	time.AfterFunc(d, c.abort)
}

var (
	errNotWebsocket = invalid("", "GET /v1/stream needs a websocket handshake (Upgrade: websocket)")
	errOrigin       = &apiError{Status: http.StatusForbidden, Code: codePermissionDenied, Message: "origin not allowed"}
	errNoStream     = &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "the live stream is not running"}
)

// stream handles GET /v1/stream: it upgrades to a websocket and sends the
// matching job events and a stats message every tick until the client
// leaves, falls behind, or the server shuts down.
func (s *Server) stream(c *gin.Context) {
	f, err := parseFilter(c)
	if err != nil {
		fail(c, err)
		return
	}
	f.allow = principalOf(c).queues
	r := c.Request
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		fail(c, errNotWebsocket)
		return
	}
	if !originAllowed(r, s.cfg.AllowedOrigins) {
		fail(c, errOrigin)
		return
	}
	if !s.hub.running.Load() {
		fail(c, errNoStream)
		return
	}
	w := &corkingWriter{ResponseWriter: c.Writer, timeout: s.hub.opts.WriteTimeout}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		OriginPatterns:  s.cfg.AllowedOrigins,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil || w.conn == nil {
		// Accept has answered the handshake error itself.
		c.Abort()
		return
	}
	s.hub.serve(context.WithoutCancel(r.Context()), conn, w.conn, f)
}

// maxRun bounds the messages written to one client between two flushes.
const maxRun = 64

// serve writes to one client until it goes. The connection's reads are
// handled by CloseRead, which answers pings and notices the peer's close.
func (h *hub) serve(ctx context.Context, conn *websocket.Conn, cork *corkConn, f streamFilter) {
	ctx = conn.CloseRead(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &client{filter: f, send: make(chan []byte, h.opts.ClientBuffer), dropped: make(chan struct{}), cancel: cancel, raw: cork.Conn}
	if !h.add(c) {
		_ = conn.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	defer h.wg.Done()
	defer h.remove(c)
	if st := h.lastStats.Load(); st != nil {
		c.send <- h.statsFor(c, st)
	}
	var keepalive sync.WaitGroup
	defer keepalive.Wait()
	defer cancel()
	keepalive.Go(func() { h.keepalive(ctx, conn, c.abort) })
	// Writes take a context that never ends (ending it mid-frame would
	// corrupt the stream); the socket's write deadline bounds each write,
	// and abort closes the socket under a stuck one.
	wctx := context.WithoutCancel(ctx)
	for {
		select {
		case msg := <-c.send:
			if err := h.writeRun(wctx, conn, cork, c, msg); err != nil {
				_ = conn.CloseNow()
				return
			}
		case <-c.dropped:
			h.closeWith(conn, c, websocket.StatusTryAgainLater, fmt.Sprintf("too slow: more than %d messages behind", h.opts.ClientBuffer))
			return
		case <-h.leaving:
			h.closeWith(conn, c, websocket.StatusGoingAway, "server shutting down")
			return
		case <-ctx.Done():
			_ = conn.CloseNow()
			return
		}
	}
}

// closeWith closes the connection with a status; the closing handshake
// waits for the peer at most WriteTimeout, then the socket is closed.
func (h *hub) closeWith(conn *websocket.Conn, c *client, code websocket.StatusCode, reason string) {
	t := time.AfterFunc(h.opts.WriteTimeout, c.abort)
	defer t.Stop()
	_ = conn.Close(code, reason)
}

// writeRun writes msg and whatever else is queued for c (up to maxRun
// messages) with the connection corked, so that a burst of events costs one
// system call.
func (h *hub) writeRun(ctx context.Context, conn *websocket.Conn, cork *corkConn, c *client, msg []byte) error {
	cork.cork()
	err := conn.Write(ctx, websocket.MessageText, msg)
	for n := 1; err == nil && n < maxRun; n++ {
		more := false
		select {
		case msg = <-c.send:
			more = true
		default:
		}
		if !more {
			break
		}
		err = conn.Write(ctx, websocket.MessageText, msg)
	}
	if uerr := cork.uncork(); err == nil {
		err = uerr
	}
	return err
}

// keepalive pings the client every PingInterval; a client that does not
// answer within WriteTimeout is disconnected.
func (h *hub) keepalive(ctx context.Context, conn *websocket.Conn, abort func()) {
	t := time.NewTicker(h.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, done := context.WithTimeout(ctx, h.opts.WriteTimeout)
		err := conn.Ping(pctx)
		done()
		if err != nil {
			abort()
			return
		}
	}
}

// originAllowed applies the websocket's origin rule before the handshake,
// so that a refusal has the API's error shape: no Origin header (not a
// browser), the API's own host, or a match of one of patterns ("host",
// "*.example.com", or "scheme://host" patterns).
func originAllowed(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}
