package telemetry_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/pkg/telemetry"
	"github.com/sundialhq/sundial/pkg/telemetry/telemetrytest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests below set process environment and the otel globals, so none
// runs in parallel.

func newLog() (*slog.Logger, *logbuf.Buffer) {
	buf := &logbuf.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func TestSetupOffByDefault(t *testing.T) {
	telemetrytest.ClearEnv(t)
	log, logs := newLog()
	_, enabled := telemetrytest.Setup(t, "sundial-test", log)
	if enabled {
		t.Fatal("tracing on with no OTEL_* variable")
	}
	if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
		t.Fatalf("global provider is %T, want the no-op one", otel.GetTracerProvider())
	}
	if logs.String() != "" {
		t.Errorf("logged while off: %s", logs)
	}
}

// TestSetupDisabled: an endpoint is set, but OTEL_SDK_DISABLED or
// OTEL_TRACES_EXPORTER=none keeps every span from the receiver.
func TestSetupDisabled(t *testing.T) {
	for _, kv := range [][2]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		t.Run(kv[0], func(t *testing.T) {
			r := telemetrytest.NewReceiver(t)
			telemetrytest.Env(t, r)
			t.Setenv(kv[0], kv[1])
			log, _ := newLog()
			stop, enabled := telemetrytest.Setup(t, "sundial-test", log)
			if enabled {
				t.Fatal("tracing on")
			}
			_, span := otel.Tracer("test").Start(context.Background(), "op")
			span.End()
			stop()
			if n := r.Requests(); n != 0 {
				t.Fatalf("receiver got %d requests", n)
			}
		})
	}
}

func TestSetupExports(t *testing.T) {
	r := telemetrytest.NewReceiver(t)
	telemetrytest.Env(t, r)
	const secret = "s3cret-token-value"
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer "+secret)
	log, logs := newLog()
	stop, enabled := telemetrytest.Setup(t, "sundial-test", log)
	if !enabled {
		t.Fatal("tracing off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	_, span := otel.Tracer("test").Start(context.Background(), "op")
	span.End()
	stop() // flushes
	spans := r.Find(func(s telemetrytest.Span) bool { return s.Name == "op" })
	if len(spans) != 1 {
		t.Fatalf("received %+v, want one span named op", r.Spans())
	}
	if s := spans[0]; s.Service != "sundial-test" || s.Kind != tracepb.Span_SPAN_KIND_INTERNAL || s.Scope != "test" {
		t.Errorf("span %+v: want service sundial-test, kind internal, scope test", s)
	}
	if got := r.Header("Authorization"); got != "Bearer "+secret {
		t.Errorf("receiver got Authorization %q: OTEL_EXPORTER_OTLP_HEADERS not applied", got)
	}
	out := logs.String()
	if !strings.Contains(out, "tracing on") || !strings.Contains(out, r.URL()) {
		t.Errorf("log lacks the start line with the endpoint: %s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("a header value reached the log: %s", out)
	}
}

func TestSetupServiceNameFromEnv(t *testing.T) {
	r := telemetrytest.NewReceiver(t)
	telemetrytest.Env(t, r)
	t.Setenv("OTEL_SERVICE_NAME", "billing-workers")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
	log, _ := newLog()
	stop, _ := telemetrytest.Setup(t, "sundial-test", log)
	_, span := otel.Tracer("test").Start(context.Background(), "op")
	span.End()
	stop()
	spans := r.Spans()
	if len(spans) != 1 || spans[0].Service != "billing-workers" {
		t.Fatalf("received %+v, want one span of service billing-workers", spans)
	}
}

func TestSetupRefuses(t *testing.T) {
	for _, kv := range [][2]string{{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, {"OTEL_TRACES_EXPORTER", "zipkin"}, {"OTEL_SDK_DISABLED", "maybe"}} {
		t.Run(kv[0], func(t *testing.T) {
			telemetrytest.ClearEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(kv[0], kv[1])
			stop, enabled, err := telemetry.Setup(context.Background(), "sundial-test", slog.New(slog.DiscardHandler))
			stop()
			if err == nil || enabled || !strings.Contains(err.Error(), kv[0]) {
				t.Fatalf("Setup with %s=%s: enabled=%v err=%v, want an error naming the variable", kv[0], kv[1], enabled, err)
			}
		})
	}
}

// TestSetupGRPC: the grpc protocol makes an exporter (which connects
// lazily) and shuts down cleanly.
func TestSetupGRPC(t *testing.T) {
	telemetrytest.ClearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "100")
	log, _ := newLog()
	stop, enabled := telemetrytest.Setup(t, "sundial-test", log)
	if !enabled {
		t.Fatal("tracing off")
	}
	stop()
}
