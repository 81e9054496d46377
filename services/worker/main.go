// Command worker runs Sundial jobs: it serves the queues of SUNDIAL_QUEUES
// with SUNDIAL_CONCURRENCY jobs at once and the built-in job types.
package main

import (
	"context"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/worker"
	"github.com/sundialhq/sundial/pkg/worker/builtin"
)

func main() {
	service.Main("worker", func(ctx context.Context, env *service.Env) error {
		c := env.Config
		queues := make([]worker.Queue, len(c.Queues))
		for i, q := range c.Queues {
			queues[i] = worker.Queue{Name: q.Name, Weight: q.Weight}
		}
		w := worker.New(env.Redis, worker.Config{
			Queues:            queues,
			Concurrency:       c.Concurrency,
			ID:                c.WorkerID,
			ShutdownTimeout:   c.ShutdownTimeout,
			HeartbeatInterval: c.HeartbeatInterval,
			Engine:            env.EngineOptions(),
			Logger:            env.Log,
		})
		builtin.Register(w)
		return w.Run(ctx)
	})
}
