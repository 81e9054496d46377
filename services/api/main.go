// Command api serves Sundial's HTTP API (docs/api.md): the REST routes,
// the live websocket stream, /metrics and the live view, on
// SUNDIAL_HTTP_ADDR, over the Redis of SUNDIAL_REDIS_URL.
package main

import (
	"context"
	"fmt"
	"net"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/httpapi"
	"github.com/sundialhq/sundial/pkg/queue"
)

func main() {
	service.Main("api", func(ctx context.Context, env *service.Env) error {
		c := env.Config
		// The history store (MongoDB) is wired in here once pkg/history has
		// its Store; while History is nil, GET /v1/jobs and a job's events
		// answer 503 and /readyz reports it as not configured.
		var hist history.Reader

		shutdown := c.ShutdownTimeout
		if shutdown == 0 {
			shutdown = -1 // no wait; httpapi's zero value means its default
		}
		api, err := httpapi.New(httpapi.Config{
			Queue:             queue.New(env.Redis, queue.Options{LeaseGrace: c.LeaseGrace, EventsMaxLen: c.EventsMaxLen}),
			History:           hist,
			APIKeys:           c.APIKeys,
			RateLimit:         c.RateLimit,
			AllowedOrigins:    c.AllowedOrigins,
			MaxBodyBytes:      c.MaxBodyBytes,
			MaxBatchBodyBytes: c.MaxBatchBodyBytes,
			ShutdownTimeout:   shutdown,
			WorkerMaxAge:      3 * c.HeartbeatInterval,
			Logger:            env.Log,
		})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", c.HTTPAddr)
		if err != nil {
			return fmt.Errorf("SUNDIAL_HTTP_ADDR: %w", err)
		}
		env.Log.Info("API listening", "url", "http://"+ln.Addr().String())
		return api.Run(ctx, ln)
	})
}
