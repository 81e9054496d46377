package worker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkExecute measures what the worker does around one handler call
// (no Redis): the cost of the job span with tracing off (the no-op
// provider Setup installs, or the untouched global one) and on (an SDK
// provider sampling every span into a batch processor whose exporter
// drops them).
func BenchmarkExecute(b *testing.B) {
	on := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = on.Shutdown(context.Background()) })
	providers := []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", noop.NewTracerProvider()},
		{"global_unset", nil},
		{"on", on},
	}
	for _, p := range providers {
		for _, tp := range []string{"", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"} {
			name := p.name + "/no_traceparent"
			if tp != "" {
				name = p.name + "/traceparent"
			}
			b.Run(name, func(b *testing.B) {
				rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
				defer rdb.Close()
				w := New(rdb, Config{TracerProvider: p.tp, Logger: slog.New(slog.DiscardHandler)})
				w.HandleFunc("bench", func(context.Context, *job.Job) (any, error) { return nil, nil })
				l := queue.Lease{Token: "t", Job: &job.Job{ID: "01J0000000000000000000000", Queue: "default", Type: "bench",
					Attempt: 1, TimeoutSeconds: 60, Traceparent: tp}}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if o, ok := w.execute(ctx, l); !ok || o.Kind != queue.OutcomeSucceeded {
						b.Fatalf("outcome %+v", o)
					}
				}
			})
		}
	}
}
