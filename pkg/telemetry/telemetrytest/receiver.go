// Package telemetrytest is a test helper for tracing: an in-process OTLP/HTTP
// trace receiver that decodes what an exporter sends, and the environment
// that points telemetry.Setup at it.
package telemetrytest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sundialhq/sundial/pkg/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in lower-case hex.
type Span struct {
	Service         string // the resource's service.name
	Scope           string // the instrumentation scope
	Name            string
	Kind            tracepb.Span_SpanKind
	TraceID, SpanID string
	ParentSpanID    string // empty for a root span
	Attrs           map[string]string
	StatusCode      tracepb.Status_StatusCode
	StatusMessage   string
}

// Receiver is an OTLP/HTTP trace receiver on a loopback port. It accepts
// POST /v1/traces with a protobuf ExportTraceServiceRequest (gzip or not)
// and keeps every span.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests int
	headers  http.Header // of the last request
	spans    []Span
	errs     []string
}

// NewReceiver starts a Receiver that stops when t ends; t fails if a
// request could not be decoded.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Errorf("OTLP receiver: %s", e)
		}
	})
	return r
}

// URL is the receiver's base URL, the value of OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) URL() string { return r.srv.URL }

// Requests returns how many export requests arrived.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Header returns a header of the last export request.
func (r *Receiver) Header(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers.Get(name)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Find returns the received spans that match.
func (r *Receiver) Find(match func(Span) bool) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

func (r *Receiver) fail(w http.ResponseWriter, format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	http.Error(w, "bad request", http.StatusBadRequest)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.fail(w, "unexpected %s %s", req.Method, req.URL.Path)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, "gzip: %v", err)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		r.fail(w, "read: %v", err)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		r.fail(w, "decode: %v", err)
		return
	}
	var spans []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				spans = append(spans, Span{
					Service:       service,
					Scope:         ss.GetScope().GetName(),
					Name:          s.GetName(),
					Kind:          s.GetKind(),
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Attrs:         attrs(s.GetAttributes()),
					StatusCode:    s.GetStatus().GetCode(),
					StatusMessage: s.GetStatus().GetMessage(),
				})
			}
		}
	}
	r.mu.Lock()
	r.requests++
	r.headers = req.Header.Clone()
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attrs renders attribute values as strings (ints in decimal).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetDoubleValue())
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// ClearEnv blanks every OTEL_* variable of the process for the rest of t
// (t.Setenv: t must not be parallel), so that a test starts from tracing
// off whatever the machine has set.
func ClearEnv(t testing.TB) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "OTEL_") {
			t.Setenv(name, "")
		}
	}
}

// Env points the OTLP exporter at r for the rest of t, with a short batch
// delay so that spans arrive soon after they end; every other OTEL_*
// variable is blanked first.
func Env(t testing.TB, r *Receiver) {
	t.Helper()
	ClearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
}

// Setup runs telemetry.Setup for t and undoes it when t ends: the spans are
// flushed, then the global provider is the no-op one again and the global
// propagator propagates nothing. stop flushes at once (again is a no-op).
func Setup(t testing.TB, serviceName string, log *slog.Logger) (stop func(), enabled bool) {
	t.Helper()
	flush, enabled, err := telemetry.Setup(context.Background(), serviceName, log)
	if err != nil {
		t.Fatalf("telemetry.Setup: %v", err)
	}
	stop = sync.OnceFunc(flush)
	t.Cleanup(func() {
		stop()
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	return stop, enabled
}
