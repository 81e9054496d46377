package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/job"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the API's request spans.
const tracerName = "github.com/sundialhq/sundial/pkg/httpapi"

// traceRequests returns the middleware that gives each request a server
// span named for its route template ("POST /v1/jobs"), a child of the
// request's W3C trace context as prop reads it. The probes (/healthz,
// /readyz, /metrics) are not traced. With the no-op provider (tracing off)
// the middleware does nothing.
//
// The span ends when the request is answered; its attributes are the
// method, route, status and request id, never the query string (which may
// hold access_token) nor any header.
func traceRequests(tp trace.TracerProvider, prop propagation.TextMapPropagator) gin.HandlerFunc {
	if _, off := tp.(noop.TracerProvider); off {
		return func(c *gin.Context) { c.Next() }
	}
	tracer := tp.Tracer(tracerName)
	return func(c *gin.Context) {
		route := c.FullPath()
		if quietRoutes[route] {
			c.Next()
			return
		}
		name := c.Request.Method
		if route != "" {
			name += " " + route
		}
		ctx := prop.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.SpanContext().IsValid() {
			// A provider that makes no spans: leave the request alone.
			c.Next()
			return
		}
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		if !span.IsRecording() {
			return
		}
		status := c.Writer.Status()
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", c.Request.Method),
			attribute.Int("http.response.status_code", status),
			attribute.String("sundial.request_id", c.GetString(ctxRequestID)),
		}
		if route != "" {
			attrs = append(attrs, attribute.String("http.route", route))
		}
		span.SetAttributes(attrs...)
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}

// traceparentHeader is the W3C trace context request header.
const traceparentHeader = "traceparent"

// requestTraceparent returns the trace context a job submitted by c carries
// when its body names none: the request span's when tracing is on (so that
// the worker's span is the request span's child), written by the W3C
// propagator the worker reads it back with; else the request's traceparent
// header as it came, when valid (an invalid one is ignored).
func requestTraceparent(c *gin.Context) string {
	if sc := trace.SpanContextFromContext(c.Request.Context()); sc.IsValid() {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(c.Request.Context(), carrier)
		return carrier[traceparentHeader]
	}
	if h := c.GetHeader(traceparentHeader); job.ValidTraceparent(h) {
		return h
	}
	return ""
}
