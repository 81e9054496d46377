// Command poller keeps time for Sundial: it promotes due jobs, reclaims
// expired leases and prunes finished jobs, for every known queue.
package main

import (
	"context"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/poller"
	"github.com/sundialhq/sundial/pkg/queue"
	"golang.org/x/sync/errgroup"
)

func main() {
	service.Main("poller", func(ctx context.Context, env *service.Env) error {
		c := env.Config
		q := queue.New(env.Redis, queue.Options{LeaseGrace: c.LeaseGrace, EventsMaxLen: c.EventsMaxLen})
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			return poller.New(q, poller.Config{Retention: c.JobRetention, Logger: env.Log}).Run(ctx)
		})
		return g.Wait()
	})
}
