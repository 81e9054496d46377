// Command poller keeps time for Sundial: it promotes due jobs, reclaims
// expired leases and prunes ended jobs, for every known queue, and fires
// recurring schedules (one poller leads; the others stand by), and writes
// every job event to the MongoDB history (SUNDIAL_HISTORY=on), and relays
// the transactional outboxes of sundialpg and sundialmongo to Redis
// (SUNDIAL_OUTBOX_POSTGRES_URL, SUNDIAL_OUTBOX_MONGO_URI). It serves
// /metrics, /healthz and /readyz on SUNDIAL_METRICS_ADDR (auto: the first
// free port from 127.0.0.1:9091).
package main

import (
	"context"
	"fmt"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
	"github.com/sundialhq/sundial/pkg/telemetry"
	"golang.org/x/sync/errgroup"
)

// eventsCapWithoutHistory bounds each event stream when no history writer
// consumes it (SUNDIAL_EVENTS_MAXLEN=0, SUNDIAL_HISTORY=off).
const eventsCapWithoutHistory = 100_000

func main() {
	service.Main("poller", func(ctx context.Context, env *service.Env) error {
		stopTracing, _, err := telemetry.Setup(ctx, "sundial-poller", env.Log)
		if err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		defer stopTracing()
		c := env.Config
		opts := env.EngineOptions()
		q := queue.New(env.Redis, opts)
		pcfg := poller.Config{Retention: c.JobRetention, DeadRetention: c.DeadRetention, DeadMax: c.DeadMax, Logger: env.Log,
			UnhandledTimeout: c.UnhandledTimeout, WorkerMaxAge: 3 * c.HeartbeatInterval,
			BatchRecountAfter: c.BatchRecountAfter}
		if pcfg.DeadMax == 0 {
			pcfg.DeadMax = -1 // SUNDIAL_DEAD_MAX=0: no count bound
		}
		ops := service.NewOps()
		ops.Check("redis", env.RedisCheck)
		var writer *history.Writer
		if c.History {
			mc, err := history.Connect(c.MongoURI)
			if err != nil {
				return fmt.Errorf("SUNDIAL_MONGO_URI: %w", err)
			}
			defer mc.Disconnect(context.WithoutCancel(ctx))
			store := history.NewStore(mc.Database(c.MongoDB), history.StoreOptions{Retention: c.HistoryRetention, Logger: env.Log})
			writer = history.NewWriter(q, store, history.WriterConfig{MaxEvents: c.EventsMaxLen, Logger: env.Log})
			pcfg.RecordedBefore = writer.RecordedBefore
			ops.Register(writer.Collector())
			ops.Check("mongodb", func(ctx context.Context) error { return mc.Ping(ctx, nil) })
		} else {
			pcfg.TrimEvents = c.EventsMaxLen
			if pcfg.TrimEvents == 0 {
				pcfg.TrimEvents = eventsCapWithoutHistory
			}
		}
		p := poller.New(q, pcfg)
		ops.Register(p.Collectors()...)
		relays, closeRelays, err := startRelays(ctx, env, q, ops)
		if err != nil {
			return err
		}
		defer closeRelays()

		stopMetrics, _, err := telemetry.SetupMetrics(ctx, "sundial-poller", ops.Gatherer(), env.Log)
		if err != nil {
			return fmt.Errorf("metrics export: %w", err)
		}
		defer stopMetrics()

		ln, err := env.ListenOps(9091)
		if err != nil {
			return err
		}
		g, gctx := errgroup.WithContext(ctx)
		if ln != nil {
			g.Go(func() error { return ops.Serve(gctx, ln, env.Log) })
		}
		g.Go(func() error { return p.Run(gctx) })
		g.Go(func() error {
			fire := schedule.FireClient(env.Redis, opts)
			return schedule.NewScheduler(q, schedule.SchedulerConfig{Fire: fire, Logger: env.Log}).Run(gctx)
		})
		if writer != nil {
			g.Go(func() error { return writer.Run(gctx) })
		}
		for _, relay := range relays {
			g.Go(func() error { return relay(gctx) })
		}
		return g.Wait()
	})
}
