package telemetry

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// NewMeterProvider is SetupMetrics' provider, for the benchmark to export
// on demand (ForceFlush); nil when the environment leaves the export off.
func NewMeterProvider(ctx context.Context, serviceName string, g prometheus.Gatherer) (*sdkmetric.MeterProvider, error) {
	mp, _, err := newMeterProvider(ctx, serviceName, g, slog.Default())
	return mp, err
}
