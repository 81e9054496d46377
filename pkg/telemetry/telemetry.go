// Package telemetry sets up OpenTelemetry for a Sundial service from the
// standard OTEL_* environment variables: tracing (Setup) and the export of
// the service's Prometheus metrics over OTLP (SetupMetrics). Each is off
// unless an OTLP exporter is asked for; when off, the global tracer
// provider is the no-op one and nothing is exported.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The protocols of OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL that Setup exports
// with.
const (
	protoHTTP = "http/protobuf"
	protoGRPC = "grpc"
)

// FlushTimeout bounds how long stop waits for the last spans to be
// exported.
const FlushTimeout = 5 * time.Second

// settings is what the environment asks for.
type settings struct {
	enabled  bool
	protocol string // protoHTTP or protoGRPC when enabled
	endpoint string // for the log line only; the exporter reads it itself
}

// fromEnv applies the rules of the OTEL_* variables for traces:
//
//   - OTEL_SDK_DISABLED=true turns tracing off, whatever else is set;
//   - OTEL_TRACES_EXPORTER=none turns it off, =otlp turns it on, and any
//     other exporter name is an error;
//   - with OTEL_TRACES_EXPORTER unset, OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turns it on;
//   - the protocol (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
//     OTEL_EXPORTER_OTLP_PROTOCOL) is http/protobuf (the default) or grpc.
func fromEnv(getenv func(string) string) (settings, error) {
	return signalFromEnv(getenv, "TRACES")
}

// signalFromEnv applies those rules to one signal, TRACES or METRICS: its
// OTEL_<signal>_EXPORTER, OTEL_EXPORTER_OTLP_<signal>_ENDPOINT and
// OTEL_EXPORTER_OTLP_<signal>_PROTOCOL. For metrics, the exporter name
// prometheus is accepted and means no OTLP export (the /metrics endpoint
// is served either way).
func signalFromEnv(getenv func(string) string, signal string) (settings, error) {
	var s settings
	disabled := strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))
	switch strings.ToLower(disabled) {
	case "true":
		return s, nil
	case "", "false":
	default:
		return s, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", disabled)
	}
	endpoint := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"))
	if endpoint == "" {
		endpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	exporterVar := "OTEL_" + signal + "_EXPORTER"
	switch exp := strings.ToLower(strings.TrimSpace(getenv(exporterVar))); exp {
	case "none":
		return s, nil
	case "prometheus":
		if signal != "METRICS" {
			return s, fmt.Errorf("%s=%q is not supported: use otlp or none", exporterVar, exp)
		}
		return s, nil
	case "otlp":
		s.enabled = true
	case "":
		s.enabled = endpoint != ""
	default:
		return s, fmt.Errorf("%s=%q is not supported: use otlp or none", exporterVar, exp)
	}
	if !s.enabled {
		return s, nil
	}
	protoVar := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	proto := strings.TrimSpace(getenv(protoVar))
	if proto == "" {
		protoVar = "OTEL_EXPORTER_OTLP_PROTOCOL"
		proto = strings.TrimSpace(getenv(protoVar))
	}
	switch strings.ToLower(proto) {
	case "", protoHTTP:
		s.protocol = protoHTTP
	case protoGRPC:
		s.protocol = protoGRPC
	default:
		return settings{}, fmt.Errorf("%s=%q is not supported: use http/protobuf or grpc", protoVar, proto)
	}
	s.endpoint = endpoint
	return s, nil
}

// newResource is the resource of a service's spans and metrics: its
// service.name (serviceName, unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise), the SDK and the host.
func newResource(ctx context.Context, serviceName string, log *slog.Logger) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if err != nil {
		// A partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES entry)
		// is still usable; say so and go on.
		log.Warn("telemetry resource is incomplete", "err", err)
	}
	return res, nil
}

// Setup configures tracing for the service named serviceName (the default
// of service.name; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override
// it) from the OTEL_* environment variables, and installs the global tracer
// provider and propagator. It returns stop, which flushes the spans not yet
// exported and stops the exporter, for at most FlushTimeout (call it at
// exit; it logs a failure), and whether tracing is on.
//
// When tracing is off, the global tracer provider is the no-op one and the
// propagator is left alone. When on, spans go through a batch span
// processor (OTEL_BSP_*) to an OTLP exporter that reads the
// OTEL_EXPORTER_OTLP_* variables itself; the sampler follows
// OTEL_TRACES_SAMPLER; the propagator is W3C trace context and baggage.
// Exporter errors go to log; neither headers nor endpoint credentials are
// ever logged.
func Setup(ctx context.Context, serviceName string, log *slog.Logger) (stop func(), enabled bool, err error) {
	if log == nil {
		log = slog.Default()
	}
	off := func() {}
	s, err := fromEnv(os.Getenv)
	if err != nil {
		return off, false, err
	}
	if !s.enabled {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return off, false, nil
	}
	res, err := newResource(ctx, serviceName, log)
	if err != nil {
		return off, false, err
	}
	var exp sdktrace.SpanExporter
	switch s.protocol {
	case protoGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return off, false, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing", "err", err)
	}))
	log.Info("tracing on", "protocol", s.protocol, "endpoint", redact(s.endpoint))
	stop = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not flushed at exit", "err", err)
		}
	}
	return stop, true, nil
}

// redact returns the endpoint for a log line: without user info, query or
// fragment, which may hold credentials. An empty endpoint is the exporter's
// default.
func redact(endpoint string) string {
	if endpoint == "" {
		return "default"
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "(unparsed)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
