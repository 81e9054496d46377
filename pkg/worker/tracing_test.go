package worker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/pkg/job"
)

// A worker that follows the global tracer provider does no span work while
// no application has set one (the provider OpenTelemetry starts with makes
// no spans), keeps a job's traceparent as its handler's parent, and starts
// recorded spans once a provider is set, without being made again. The
// test sets the process's global provider, so it runs alone.
func TestSpansFollowTheGlobalProvider(t *testing.T) {
	if unsetGlobal == nil {
		t.Fatalf("OpenTelemetry's initial global provider (%T) is no longer recognised: tracing.go's unsetGlobal needs its new name", otel.GetTracerProvider())
	}
	if !globalUnset() {
		t.Skip("the global tracer provider was set before this test")
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	w := New(rdb, Config{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	plain := &job.Job{ID: "01J0000000000000000000000", Queue: "default", Type: "t", Attempt: 1}
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traced := &job.Job{ID: "01J0000000000000000000001", Queue: "default", Type: "t", Attempt: 1, Traceparent: parent}

	if sctx, span := w.startSpan(ctx, plain); span != nil || sctx != ctx {
		t.Fatalf("unset global provider: span %v, context changed %v", span, sctx != ctx)
	}
	if n := testing.AllocsPerRun(100, func() { w.startSpan(ctx, plain) }); n != 0 {
		t.Errorf("unset global provider: %v allocations per job's span, want 0", n)
	}
	sctx, _ := w.startSpan(ctx, traced)
	if got := trace.SpanContextFromContext(sctx).TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("unset global provider: the handler's trace is %q, want the job's traceparent's", got)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	_, span := w.startSpan(ctx, plain)
	if span == nil || !span.IsRecording() {
		t.Fatalf("after the global provider was set: span %v, want a recorded one", span)
	}
	span.End()
	if ended := rec.Ended(); len(ended) != 1 || ended[0].Name() != "process t" {
		t.Fatalf("recorded spans %v, want one \"process t\"", ended)
	}
}
