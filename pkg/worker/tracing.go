package worker

import (
	"context"
	"reflect"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the worker's spans.
const tracerName = "github.com/sundialhq/sundial/pkg/worker"

// newTracer returns the tracer of the job spans, or nil when tp is the
// no-op provider: then a job costs no tracing work at all. A nil tp means
// the global provider.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if _, off := tp.(noop.TracerProvider); off {
		return nil
	}
	return tp.Tracer(tracerName)
}

// unsetGlobal is the type of OpenTelemetry's global tracer provider
// while no application has set one: it makes no spans (and forwards to a
// provider set later). Nil when this release of OpenTelemetry names it
// otherwise: the spans are then started as before.
var unsetGlobal = func() reflect.Type {
	t := reflect.TypeOf(otel.GetTracerProvider())
	if t != nil && t.Kind() == reflect.Pointer && t.Elem().Name() == "tracerProvider" &&
		t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" {
		return t
	}
	return nil
}()

// globalUnset tells whether the global tracer provider is still the one
// OpenTelemetry starts with, which would make a span that is neither
// recorded nor propagated: a worker that follows the global provider
// then skips the span's work for a job without a traceparent (~0.5 µs and
// 6 allocations per job; a job with one still gets its parent's context),
// and starts spans as soon as an application sets a provider.
func globalUnset() bool {
	return unsetGlobal != nil && reflect.TypeOf(otel.GetTracerProvider()) == unsetGlobal
}

// traceparentCarrier hands a job's traceparent to the W3C propagator.
type traceparentCarrier string

func (c traceparentCarrier) Get(key string) string {
	if key == "traceparent" {
		return string(c)
	}
	return ""
}
func (traceparentCarrier) Set(string, string) {}
func (traceparentCarrier) Keys() []string     { return []string{"traceparent"} }

// startSpan starts the span of one attempt of j: a child of the job's
// traceparent when it has one, else a root span. It returns ctx unchanged
// and a nil span when tracing is off.
func (w *Worker) startSpan(ctx context.Context, j *job.Job) (context.Context, trace.Span) {
	if w.tracer == nil || (j.Traceparent == "" && w.followGlobal && globalUnset()) {
		return ctx, nil
	}
	parent := ctx
	if j.Traceparent != "" {
		parent = propagation.TraceContext{}.Extract(ctx, traceparentCarrier(j.Traceparent))
	}
	sctx, span := w.tracer.Start(parent, "process "+j.Type, trace.WithSpanKind(trace.SpanKindConsumer))
	if !span.SpanContext().IsValid() {
		// A provider that makes no spans (the global one before any is
		// set): keep the context as it was.
		return ctx, nil
	}
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.system", "sundial"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", j.Queue),
			attribute.String("messaging.message.id", j.ID),
			attribute.String("sundial.job.type", j.Type),
			attribute.Int("sundial.job.attempt", j.Attempt),
			attribute.String("sundial.worker.id", w.cfg.ID),
		)
	}
	return sctx, span
}

// endSpan records the attempt's outcome on span and ends it. report=false
// means the outcome was not reported: cause says why (cancelled, given back,
// lease lost).
func endSpan(span trace.Span, o queue.Outcome, report bool, cause error) {
	if span.IsRecording() {
		switch {
		case !report:
			span.SetAttributes(attribute.String("sundial.job.outcome", notReported(cause)))
			if cause == errLeaseLost {
				span.SetStatus(codes.Error, cause.Error())
			}
		case o.Kind == queue.OutcomeSucceeded:
			span.SetAttributes(attribute.String("sundial.job.outcome", "succeeded"))
		default:
			span.SetAttributes(attribute.String("sundial.job.outcome", outcomeName(o.Kind)))
			span.SetStatus(codes.Error, o.Error)
		}
	}
	span.End()
}

func notReported(cause error) string {
	switch cause {
	case errCancelled:
		return "cancelled"
	case errShutdown:
		return "given_back"
	case errLeaseLost:
		return "lease_lost"
	}
	return "unknown"
}

func outcomeName(k queue.OutcomeKind) string {
	switch k {
	case queue.OutcomeFailed:
		return "failed"
	case queue.OutcomeDead:
		return "dead"
	}
	return string(k)
}
