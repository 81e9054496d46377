package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"
)

// requestIDHeader carries the request id in and out.
const requestIDHeader = "X-Request-Id"

// ctxRequestID is the gin context key of the request id.
const ctxRequestID = "request_id"

// requestIDs makes process-unique request ids: a random prefix chosen at
// start and a counter.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &requestIDs{prefix: hex.EncodeToString(b) + "-"}
}

func (r *requestIDs) next() string {
	return r.prefix + strconv.FormatUint(r.n.Add(1), 36)
}

// saneRequestID accepts an incoming id of 1..128 characters from
// [A-Za-z0-9._:/+=-], so that a client's id can be followed through the
// logs while nothing odd reaches them.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			ch == '.' || ch == '_' || ch == ':' || ch == '/' || ch == '+' || ch == '=' || ch == '-') {
			return false
		}
	}
	return true
}

// quietRoutes are probes logged at debug level, so that health checks do
// not flood the log.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// observe gives each request its id, and after it, writes the access log
// line and the request-duration metric. It logs neither the query string
// (which may hold access_token) nor any header.
func (s *Server) observe(ids *requestIDs) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		id := c.GetHeader(requestIDHeader)
		if !saneRequestID(id) {
			id = ids.next()
		}
		c.Set(ctxRequestID, id)
		c.Header(requestIDHeader, id)

		c.Next()

		elapsed := time.Since(start)
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		status := c.Writer.Status()
		if route != streamPath {
			s.metrics.observeHTTP(c.Request.Method, route, status, elapsed)
		}
		level := slog.LevelInfo
		switch {
		case status >= 500:
			level = slog.LevelError
		case quietRoutes[route]:
			level = slog.LevelDebug
		}
		ctx := c.Request.Context()
		if !s.log.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("method", c.Request.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.String("remote_ip", c.ClientIP()),
		}
		if len(c.Errors) > 0 {
			attrs = append(attrs, slog.String("err", c.Errors.Last().Err.Error()))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			// The request's span (tracing on): its trace finds the line.
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		s.log.LogAttrs(ctx, level, "http request", attrs...)
	}
}

// recoverer turns a panic in a handler into a 500 with the API's error
// shape; the panic value and stack go to the log with the request id.
func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v)
		}
		s.log.Error("panic in handler", "request_id", c.GetString(ctxRequestID), "panic", v, "stack", string(debug.Stack()))
		if c.Writer.Written() {
			c.Abort()
			return
		}
		fail(c, errors.New("handler panicked"))
	}()
	c.Next()
}

// deadline gives each request a deadline of Config.RequestTimeout on its
// context, which every Redis call of the request honours (the clients
// config.NewRedis makes time out with their context): a Redis that stops
// answering makes the request answer 503 unavailable in time instead of
// hanging. Long routes (operation.Long) and those outside the route table
// (the dashboard's files, /metrics) run without it; routes of many calls
// (operation.Many) have a longer one.
func (s *Server) deadline(c *gin.Context) {
	p := c.FullPath()
	d, own := s.deadlines[c.Request.Method+" "+p]
	if !own {
		d = s.cfg.RequestTimeout
	}
	if p == "" || d == 0 || quietRoutes[p] && p != "/readyz" {
		c.Next()
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), d)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}
