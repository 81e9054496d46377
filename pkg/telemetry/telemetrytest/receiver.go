// Package telemetrytest is a test helper for telemetry: an in-process
// OTLP/HTTP receiver of traces and metrics that decodes what an exporter
// sends, and the environment that points telemetry.Setup and
// telemetry.SetupMetrics at it.
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sundialhq/sundial/pkg/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
	metricscollectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
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

// Point is one data point of a received metric: a sum's or gauge's
// value, or a histogram's count, sum and bucket counts.
type Point struct {
	Attrs  map[string]string
	Value  float64 // sums and gauges
	Count  uint64  // histograms and summaries
	Sum    float64 // histograms and summaries
	Bounds []float64
	Counts []uint64 // per bucket, len(Bounds)+1
}

// Metric is one metric of one export request.
type Metric struct {
	Service string // the resource's service.name
	Scope   string
	Name    string
	// Kind is "sum", "gauge", "histogram", "summary" or the data's
	// other type.
	Kind string
	// Monotonic and Cumulative describe a sum (a Prometheus counter is
	// both).
	Monotonic, Cumulative bool
	Points                []Point
}

// Receiver is an OTLP/HTTP receiver on a loopback port. It accepts POST
// /v1/traces with a protobuf ExportTraceServiceRequest and POST
// /v1/metrics with an ExportMetricsServiceRequest (gzip or not), and keeps
// every span and every metric.
type Receiver struct {
	srv *httptest.Server

	mu             sync.Mutex
	requests       int
	metricRequests int
	headers        http.Header // of the last request
	spans          []Span
	metrics        []Metric
	errs           []string
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

// MetricRequests returns how many metric export requests arrived.
func (r *Receiver) MetricRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metricRequests
}

// Metrics returns the metrics received so far, each export's in order.
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Metric(nil), r.metrics...)
}

// LastMetric returns the newest received metric named name, and whether
// one arrived.
func (r *Receiver) LastMetric(name string) (Metric, bool) {
	ms := r.Metrics()
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Name == name {
			return ms[i], true
		}
	}
	return Metric{}, false
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
	if req.Method != http.MethodPost || (req.URL.Path != "/v1/traces" && req.URL.Path != "/v1/metrics") {
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
	if req.URL.Path == "/v1/metrics" {
		r.serveMetrics(w, req, data)
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

func (r *Receiver) serveMetrics(w http.ResponseWriter, req *http.Request, data []byte) {
	var msg metricscollectorpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		r.fail(w, "decode metrics: %v", err)
		return
	}
	var ms []Metric
	for _, rm := range msg.GetResourceMetrics() {
		service := attrs(rm.GetResource().GetAttributes())["service.name"]
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				out := Metric{Service: service, Scope: sm.GetScope().GetName(), Name: m.GetName()}
				number := func(dps []*metricspb.NumberDataPoint) {
					for _, dp := range dps {
						v := dp.GetAsDouble()
						if _, ok := dp.GetValue().(*metricspb.NumberDataPoint_AsInt); ok {
							v = float64(dp.GetAsInt())
						}
						out.Points = append(out.Points, Point{Attrs: attrs(dp.GetAttributes()), Value: v})
					}
				}
				switch d := m.GetData().(type) {
				case *metricspb.Metric_Sum:
					out.Kind = "sum"
					out.Monotonic = d.Sum.GetIsMonotonic()
					out.Cumulative = d.Sum.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
					number(d.Sum.GetDataPoints())
				case *metricspb.Metric_Gauge:
					out.Kind = "gauge"
					number(d.Gauge.GetDataPoints())
				case *metricspb.Metric_Histogram:
					out.Kind = "histogram"
					out.Cumulative = d.Histogram.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
					for _, dp := range d.Histogram.GetDataPoints() {
						out.Points = append(out.Points, Point{Attrs: attrs(dp.GetAttributes()), Count: dp.GetCount(), Sum: dp.GetSum(),
							Bounds: dp.GetExplicitBounds(), Counts: dp.GetBucketCounts()})
					}
				case *metricspb.Metric_Summary:
					out.Kind = "summary"
					for _, dp := range d.Summary.GetDataPoints() {
						out.Points = append(out.Points, Point{Attrs: attrs(dp.GetAttributes()), Count: dp.GetCount(), Sum: dp.GetSum()})
					}
				default:
					out.Kind = fmt.Sprintf("%T", d)
				}
				ms = append(ms, out)
			}
		}
	}
	r.mu.Lock()
	r.metricRequests++
	r.headers = req.Header.Clone()
	r.metrics = append(r.metrics, ms...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&metricscollectorpb.ExportMetricsServiceResponse{})
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

// Env points the OTLP exporters at r for the rest of t, with a short batch
// delay and metric export interval so that spans arrive soon after they
// end and metrics every 50 ms; every other OTEL_* variable is blanked
// first.
func Env(t testing.TB, r *Receiver) {
	t.Helper()
	ClearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
}

// SetupMetrics runs telemetry.SetupMetrics for t over g and stops it when
// t ends (a last export first). stop stops at once (again is a no-op).
func SetupMetrics(t testing.TB, serviceName string, g prometheus.Gatherer, log *slog.Logger) (stop func(), enabled bool) {
	t.Helper()
	flush, enabled, err := telemetry.SetupMetrics(context.Background(), serviceName, g, log)
	if err != nil {
		t.Fatalf("telemetry.SetupMetrics: %v", err)
	}
	stop = sync.OnceFunc(flush)
	t.Cleanup(stop)
	return stop, enabled
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
