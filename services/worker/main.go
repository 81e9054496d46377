// Command worker runs Sundial jobs: it serves the queues of SUNDIAL_QUEUES
// with SUNDIAL_CONCURRENCY jobs at once and the built-in job types, and
// serves /metrics, /healthz and /readyz on SUNDIAL_METRICS_ADDR (auto: the
// first free port from 127.0.0.1:9092), which its registry entry shows.
package main

import (
	"context"
	"fmt"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/telemetry"
	"github.com/sundialhq/sundial/pkg/worker"
	"github.com/sundialhq/sundial/pkg/worker/builtin"
	"golang.org/x/sync/errgroup"
)

func main() {
	service.Main("worker", func(ctx context.Context, env *service.Env) error {
		stopTracing, _, err := telemetry.Setup(ctx, "sundial-worker", env.Log)
		if err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		defer stopTracing()
		c := env.Config
		queues := make([]worker.Queue, len(c.Queues))
		for i, q := range c.Queues {
			queues[i] = worker.Queue{Name: q.Name, Weight: q.Weight}
		}
		// Bound first, so that the registry shows where the metrics are.
		ln, err := env.ListenOps(9092)
		if err != nil {
			return err
		}
		metricsURL := ""
		if ln != nil {
			metricsURL = service.MetricsURL(ln)
		}
		w := worker.New(env.Redis, worker.Config{
			Queues:            queues,
			Concurrency:       c.Concurrency,
			ID:                c.WorkerID,
			ShutdownTimeout:   c.ShutdownTimeout,
			HeartbeatInterval: c.HeartbeatInterval,
			Engine:            env.EngineOptions(),
			Logger:            env.Log,
			MetricsURL:        metricsURL,
			Encryption:        worker.Encryption{Keyring: c.Keyring},
		})
		builtin.RegisterWith(w, builtin.Config{HTTPAllow: c.HTTPJobAllow})
		// The metrics are exported over OTLP when asked for, whether or
		// not /metrics is served (SUNDIAL_METRICS_ADDR=off).
		ops := service.NewOps(w.Collectors()...)
		ops.Check("redis", env.RedisCheck)
		stopMetrics, _, err := telemetry.SetupMetrics(ctx, "sundial-worker", ops.Gatherer(), env.Log)
		if err != nil {
			return fmt.Errorf("metrics export: %w", err)
		}
		defer stopMetrics()
		g, gctx := errgroup.WithContext(ctx)
		if ln != nil {
			g.Go(func() error { return ops.Serve(gctx, ln, env.Log) })
		}
		// The worker stops on the signal (ctx), not when the endpoint fails
		// to start: gctx ends then, and so does Run, gracefully.
		g.Go(func() error { return w.Run(gctx) })
		return g.Wait()
	})
}
