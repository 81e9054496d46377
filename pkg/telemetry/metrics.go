package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// SetupMetrics exports the metrics g gathers (the service's Prometheus
// registry, the one /metrics serves) over OTLP, when the OTEL_* variables
// ask for it: OTEL_METRICS_EXPORTER=otlp, or unset with
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT set;
// =none (or =prometheus) and OTEL_SDK_DISABLED=true keep it off. The
// protocol is OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc.
//
// The metrics are not instrumented twice: OpenTelemetry's Prometheus
// bridge reads g at each export (every OTEL_METRIC_EXPORT_INTERVAL ms,
// default 60000) and converts what it gathers, counters to cumulative
// sums, gauges to gauges, histograms to explicit-bucket histograms, with
// the same names and labels (as attributes). The resource is the traces'
// (service.name serviceName unless OTEL_SERVICE_NAME says otherwise).
//
// It returns stop, which exports once more and stops the exporter, for at
// most FlushTimeout (call it at exit; it logs a failure), and whether the
// export is on. Exporter errors go to log, through OpenTelemetry's global
// error handler (which tracing's errors share).
func SetupMetrics(ctx context.Context, serviceName string, g prometheus.Gatherer, log *slog.Logger) (stop func(), enabled bool, err error) {
	if log == nil {
		log = slog.Default()
	}
	off := func() {}
	mp, s, err := newMeterProvider(ctx, serviceName, g, log)
	if err != nil || mp == nil {
		return off, false, err
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry export", "err", err)
	}))
	log.Info("metrics export on", "protocol", s.protocol, "endpoint", redact(s.endpoint))
	stop = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
		defer cancel()
		if err := mp.Shutdown(ctx); err != nil {
			log.Warn("metrics: last export at exit failed", "err", err)
		}
	}
	return stop, true, nil
}

// newMeterProvider is SetupMetrics' provider, or nil when the environment
// leaves the export off.
func newMeterProvider(ctx context.Context, serviceName string, g prometheus.Gatherer, log *slog.Logger) (*sdkmetric.MeterProvider, settings, error) {
	s, err := signalFromEnv(os.Getenv, "METRICS")
	if err != nil || !s.enabled {
		return nil, s, err
	}
	res, err := newResource(ctx, serviceName, log)
	if err != nil {
		return nil, s, err
	}
	var exp sdkmetric.Exporter
	switch s.protocol {
	case protoGRPC:
		exp, err = otlpmetricgrpc.New(ctx)
	default:
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, s, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	return sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp,
			sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(g))))),
		sdkmetric.WithResource(res),
	), s, nil
}
