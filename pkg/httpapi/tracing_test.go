package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/telemetry/telemetrytest"
	"github.com/sundialhq/sundial/pkg/worker"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The tests of this file set process environment and the otel globals, so
// none runs in parallel (they run before the parallel tests start).

const (
	traceType = "test.trace"
	// headerTP is the client's trace context, sent as the traceparent header.
	headerTP    = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	headerTrace = "0af7651916cd43dd8448eb211c80319c"
	headerSpan  = "b7ad6b7169203331"
	// bodyTP is a trace context a submit names in its body.
	bodyTP    = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	bodyTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	bodySpan  = "00f067aa0ba902b7"
)

// handled is what the handler of a traceType job saw.
type handled struct {
	jobID string
	sc    trace.SpanContext // the span in the handler's ctx
	child trace.SpanContext // a span the handler started under it
}

// runTracedWorker runs a worker over srv (with the global tracer provider,
// as services/worker does) whose traceType handler reports what it saw.
func runTracedWorker(t *testing.T, srv *queuetest.Server) <-chan handled {
	t.Helper()
	seen := make(chan handled, 16)
	w := worker.New(srv.Client(), worker.Config{
		Concurrency: 2, ShutdownTimeout: 5 * time.Second, IdleWait: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	w.HandleFunc(traceType, func(ctx context.Context, j *job.Job) (any, error) {
		_, child := otel.Tracer("handler").Start(ctx, "handler work")
		child.End()
		seen <- handled{jobID: j.ID, sc: trace.SpanContextFromContext(ctx), child: child.SpanContext()}
		return nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
	return seen
}

// waitHandled returns what the handler saw of each of the jobs.
func waitHandled(t *testing.T, seen <-chan handled, ids ...string) map[string]handled {
	t.Helper()
	out := map[string]handled{}
	deadline := time.After(10 * time.Second)
	for len(out) < len(ids) {
		select {
		case h := <-seen:
			out[h.jobID] = h
		case <-deadline:
			t.Fatalf("handler ran %d of jobs %v", len(out), ids)
		}
	}
	return out
}

// waitSpans waits until the receiver holds one span per name in trace,
// and returns them by name.
func waitSpans(t *testing.T, r *telemetrytest.Receiver, traceID string, names ...string) map[string]telemetrytest.Span {
	t.Helper()
	var got map[string]telemetrytest.Span
	queuetest.Eventually(t, 10*time.Second, "spans "+strings.Join(names, ", ")+" of trace "+traceID, func() bool {
		got = map[string]telemetrytest.Span{}
		for _, s := range r.Find(func(s telemetrytest.Span) bool { return s.TraceID == traceID }) {
			got[s.Name] = s
		}
		for _, n := range names {
			if _, ok := got[n]; !ok {
				return false
			}
		}
		return true
	})
	return got
}

// splitTP returns the trace id and parent id of a traceparent.
func splitTP(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	if !job.ValidTraceparent(tp) {
		t.Fatalf("traceparent %q is not valid", tp)
	}
	return tp[3:35], tp[36:52]
}

// TestTraceSubmitToWorker follows a client's trace through the API's
// request span and the job to the worker's span, with tracing on: a job
// without a traceparent of its own carries the request span's context, one
// with its own keeps it.
func TestTraceSubmitToWorker(t *testing.T) {
	r := telemetrytest.NewReceiver(t)
	telemetrytest.Env(t, r)
	if _, on := telemetrytest.Setup(t, "sundial-test", slog.New(slog.DiscardHandler)); !on {
		t.Fatal("tracing off")
	}
	srv := queuetest.Start(t)
	a := startOn(t, srv)
	seen := runTracedWorker(t, srv)

	// One job over POST /v1/jobs: the job continues the request span.
	var single job.Job
	a.do("POST", "/v1/jobs", map[string]any{"type": traceType}, "traceparent", headerTP).decode(t, http.StatusCreated, &single)
	stored, err := a.q.Get(context.Background(), single.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Traceparent != single.Traceparent {
		t.Fatalf("stored traceparent %q, answered %q", stored.Traceparent, single.Traceparent)
	}
	jobTrace, jobParent := splitTP(t, single.Traceparent)
	if jobTrace != headerTrace || jobParent == headerSpan || !strings.HasSuffix(single.Traceparent, "-01") {
		t.Fatalf("job traceparent %q: want trace %s, a new span id (the request span's), sampled", single.Traceparent, headerTrace)
	}
	// The access log line of the request names its trace.
	queuetest.Eventually(t, 5*time.Second, "the access log line with the trace id", func() bool {
		for _, line := range strings.Split(a.logs.String(), "\n") {
			if strings.Contains(line, "route=/v1/jobs ") && strings.Contains(line, "trace_id="+headerTrace) {
				return true
			}
		}
		return false
	})

	// A batch over POST /v1/jobs/batch: the job naming its traceparent
	// keeps it, the other continues the request span.
	var batch jobList
	a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
		{"type": traceType, "traceparent": bodyTP},
		{"type": traceType},
	}}, "traceparent", headerTP).decode(t, http.StatusCreated, &batch)
	if len(batch.Jobs) != 2 {
		t.Fatalf("batch answered %d jobs", len(batch.Jobs))
	}
	own, inherited := batch.Jobs[0], batch.Jobs[1]
	if own.Traceparent != bodyTP {
		t.Fatalf("body traceparent %q became %q", bodyTP, own.Traceparent)
	}
	if tr, _ := splitTP(t, inherited.Traceparent); tr != headerTrace {
		t.Fatalf("batch job without traceparent got %q, want trace %s", inherited.Traceparent, headerTrace)
	}

	h := waitHandled(t, seen, single.ID, own.ID, inherited.ID)
	spans := waitSpans(t, r, headerTrace, "POST /v1/jobs", "POST /v1/jobs/batch")

	// The API's request spans: children of the client's span.
	for _, name := range []string{"POST /v1/jobs", "POST /v1/jobs/batch"} {
		s := spans[name]
		if s.ParentSpanID != headerSpan || s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Service != "sundial-test" {
			t.Errorf("%s span %+v: want kind server, parent %s", name, s, headerSpan)
		}
		if s.Attrs["http.route"] != strings.TrimPrefix(name, "POST ") || s.Attrs["http.response.status_code"] != "201" || s.Attrs["http.request.method"] != "POST" {
			t.Errorf("%s span attributes %v", name, s.Attrs)
		}
		if s.Attrs["sundial.request_id"] == "" {
			t.Errorf("%s span has no request id: %v", name, s.Attrs)
		}
	}
	if apiSpan := spans["POST /v1/jobs"].SpanID; jobParent != apiSpan {
		t.Errorf("job's parent id %s is not the request span %s", jobParent, apiSpan)
	}
	if _, p := splitTP(t, inherited.Traceparent); p != spans["POST /v1/jobs/batch"].SpanID {
		t.Errorf("batch job's parent id %s is not the batch request span %s", p, spans["POST /v1/jobs/batch"].SpanID)
	}

	// The worker's spans: children of the job's traceparent, in the
	// handler's ctx, with the handler's own span beneath.
	checkWorkerSpan := func(j *job.Job, traceID, parent string) {
		t.Helper()
		got := h[j.ID]
		if !got.sc.IsValid() || got.sc.TraceID().String() != traceID {
			t.Fatalf("handler of %s ran with span context %v, want trace %s", j.ID, got.sc, traceID)
		}
		// This job's span and its handler's child, which may come in a
		// later export than the spans of the other jobs.
		var s telemetrytest.Span
		queuetest.Eventually(t, 10*time.Second, "the worker span of job "+j.ID, func() bool {
			for _, c := range r.Find(func(s telemetrytest.Span) bool { return s.Attrs["messaging.message.id"] == j.ID }) {
				s = c
			}
			return s.SpanID != "" && len(r.Find(func(c telemetrytest.Span) bool { return c.SpanID == got.child.SpanID().String() })) == 1
		})
		if s.SpanID != got.sc.SpanID().String() {
			t.Fatalf("the worker span of job %s is %s, not the handler's %s", j.ID, s.SpanID, got.sc.SpanID())
		}
		if s.Name != "process "+traceType || s.TraceID != traceID || s.ParentSpanID != parent || s.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
			t.Errorf("worker span %+v: want trace %s, parent %s, kind consumer", s, traceID, parent)
		}
		want := map[string]string{"messaging.system": "sundial", "messaging.destination.name": job.DefaultQueue,
			"sundial.job.type": traceType, "sundial.job.attempt": "1", "sundial.job.outcome": "succeeded"}
		for k, v := range want {
			if s.Attrs[k] != v {
				t.Errorf("worker span attribute %s = %q, want %q (all: %v)", k, s.Attrs[k], v, s.Attrs)
			}
		}
		if s.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("worker span of a succeeded job has error status %q", s.StatusMessage)
		}
		child := r.Find(func(c telemetrytest.Span) bool { return c.SpanID == got.child.SpanID().String() })
		if len(child) != 1 || child[0].ParentSpanID != s.SpanID {
			t.Errorf("handler's span %+v: want one, child of the worker span %s", child, s.SpanID)
		}
	}
	checkWorkerSpan(&single, headerTrace, spans["POST /v1/jobs"].SpanID)
	checkWorkerSpan(inherited, headerTrace, spans["POST /v1/jobs/batch"].SpanID)
	checkWorkerSpan(own, bodyTrace, bodySpan)
}

// TestTraceFailedJob: a job submitted without a traceparent (straight to
// the engine, as the scheduler does) gets a root span, and the handler's
// error marks it.
func TestTraceFailedJob(t *testing.T) {
	r := telemetrytest.NewReceiver(t)
	telemetrytest.Env(t, r)
	telemetrytest.Setup(t, "sundial-test", slog.New(slog.DiscardHandler))
	srv := queuetest.Start(t)
	w := worker.New(srv.Client(), worker.Config{ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	w.HandleFunc("test.fail", func(ctx context.Context, j *job.Job) (any, error) {
		return nil, worker.NoRetry(errors.New("the mail server said no"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	spec := job.Spec{Type: "test.fail"}
	j, err := spec.Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.New(srv.Client(), queue.Options{}).Submit(context.Background(), []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	var s []telemetrytest.Span
	queuetest.Eventually(t, 10*time.Second, "the worker span of the failed job", func() bool {
		s = r.Find(func(s telemetrytest.Span) bool { return s.Attrs["messaging.message.id"] == j.ID })
		return len(s) == 1
	})
	if s[0].ParentSpanID != "" {
		t.Errorf("span of a job without traceparent has parent %s, want a root span", s[0].ParentSpanID)
	}
	if s[0].StatusCode != tracepb.Status_STATUS_CODE_ERROR || s[0].StatusMessage != "the mail server said no" || s[0].Attrs["sundial.job.outcome"] != "dead" {
		t.Errorf("span of a failed job: %+v, want error status with the error, outcome dead", s[0])
	}
}

// TestTraceOff: with tracing off (no OTEL_* variable; or an endpoint set
// but OTEL_SDK_DISABLED=true), nothing reaches the receiver, a traceparent
// header is stored on the job as it came (a bad one is dropped), the
// body's wins, and handlers run without a span.
func TestTraceOff(t *testing.T) {
	t.Run("no variables", func(t *testing.T) {
		r := telemetrytest.NewReceiver(t)
		telemetrytest.ClearEnv(t)
		testTraceOff(t, r)
	})
	t.Run("sdk disabled", func(t *testing.T) {
		r := telemetrytest.NewReceiver(t)
		telemetrytest.Env(t, r)
		t.Setenv("OTEL_SDK_DISABLED", "true")
		testTraceOff(t, r)
	})
}

func testTraceOff(t *testing.T, r *telemetrytest.Receiver) {
	stop, on := telemetrytest.Setup(t, "sundial-test", slog.New(slog.DiscardHandler))
	if on {
		t.Fatal("tracing on")
	}
	srv := queuetest.Start(t)
	a := startOn(t, srv)
	seen := runTracedWorker(t, srv)

	var asIs, bad, body job.Job
	a.do("POST", "/v1/jobs", map[string]any{"type": traceType}, "traceparent", headerTP).decode(t, http.StatusCreated, &asIs)
	a.do("POST", "/v1/jobs", map[string]any{"type": traceType}, "traceparent", "00-"+headerTrace+"-0000000000000000-01").decode(t, http.StatusCreated, &bad)
	a.do("POST", "/v1/jobs", map[string]any{"type": traceType, "traceparent": bodyTP}, "traceparent", headerTP).decode(t, http.StatusCreated, &body)
	var batch jobList
	a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"type": traceType}}}, "traceparent", headerTP).decode(t, http.StatusCreated, &batch)
	for _, c := range []struct {
		j    *job.Job
		want string
	}{{&asIs, headerTP}, {&bad, ""}, {&body, bodyTP}, {batch.Jobs[0], headerTP}} {
		stored, err := a.q.Get(context.Background(), c.j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.j.Traceparent != c.want || stored.Traceparent != c.want {
			t.Errorf("job %s: answered traceparent %q, stored %q, want %q", c.j.ID, c.j.Traceparent, stored.Traceparent, c.want)
		}
	}
	for id, h := range waitHandled(t, seen, asIs.ID, bad.ID, body.ID, batch.Jobs[0].ID) {
		if h.sc.IsValid() {
			t.Errorf("handler of %s ran in span %v with tracing off", id, h.sc)
		}
	}
	stop() // would flush any span
	if n := r.Requests(); n != 0 {
		t.Fatalf("receiver got %d export requests with tracing off: %+v", n, r.Spans())
	}
}

// BenchmarkTraceRequests measures the request-span middleware alone (a Gin
// engine with one route, no network): off is the no-op provider Setup
// installs when tracing is off; on samples every span into a batch
// processor whose exporter drops them.
func BenchmarkTraceRequests(b *testing.B) {
	on := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = on.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	for _, p := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"off", noop.NewTracerProvider()}, {"on", on}} {
		b.Run(p.name, func(b *testing.B) {
			gin.SetMode(gin.ReleaseMode)
			e := gin.New()
			e.Use(traceRequests(p.tp, prop))
			e.POST("/v1/jobs", func(c *gin.Context) {
				if requestTraceparent(c) == "" {
					b.Fatal("no traceparent")
				}
				c.Status(http.StatusNoContent)
			})
			req := httptest.NewRequest("POST", "/v1/jobs", nil)
			req.Header.Set("traceparent", headerTP)
			b.ReportAllocs()
			for b.Loop() {
				e.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
