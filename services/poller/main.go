// Command poller keeps time for Sundial: it promotes due jobs, reclaims
// expired leases and prunes finished jobs, for every known queue, and fires
// recurring schedules (one poller leads; the others stand by), and writes
// every job event to the MongoDB history (SUNDIAL_HISTORY=on).
package main

import (
	"context"
	"fmt"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
	"golang.org/x/sync/errgroup"
)

func main() {
	service.Main("poller", func(ctx context.Context, env *service.Env) error {
		c := env.Config
		opts := env.EngineOptions()
		q := queue.New(env.Redis, opts)
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			return poller.New(q, poller.Config{Retention: c.JobRetention, Logger: env.Log}).Run(ctx)
		})
		g.Go(func() error {
			fire := schedule.FireClient(env.Redis, opts)
			return schedule.NewScheduler(q, schedule.SchedulerConfig{Fire: fire, Logger: env.Log}).Run(ctx)
		})
		if c.History {
			mc, err := history.Connect(c.MongoURI)
			if err != nil {
				return fmt.Errorf("SUNDIAL_MONGO_URI: %w", err)
			}
			defer mc.Disconnect(context.WithoutCancel(ctx))
			store := history.NewStore(mc.Database(c.MongoDB), history.StoreOptions{Retention: c.HistoryRetention, Logger: env.Log})
			g.Go(func() error {
				return history.NewWriter(q, store, history.WriterConfig{Logger: env.Log}).Run(ctx)
			})
		}
		return g.Wait()
	})
}
