// Command api serves Sundial's HTTP API (docs/api.md): the REST routes,
// the live websocket stream, /metrics and the live view, on
// SUNDIAL_HTTP_ADDR, over the Redis of SUNDIAL_REDIS_URL.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/httpapi"
	"github.com/sundialhq/sundial/pkg/queue"
)

func main() {
	cfg, err := config.Load(nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sundial api: %v\n", err)
		os.Exit(2)
	}
	log := cfg.Logger(os.Stderr).With("service", "api")
	slog.SetDefault(log)
	log.Info("starting", cfg.Effective(nil)...)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("exiting", "err", err)
		os.Exit(1)
	}
	log.Info("exited cleanly")
}

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	rdb, err := config.NewRedis(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("SUNDIAL_REDIS_URL: %w", err)
	}
	defer rdb.Close()

	// The history store (MongoDB) is wired in here once pkg/history has
	// its Store; while History is nil, GET /v1/jobs and a job's events
	// answer 503 and /readyz reports it as not configured.
	var hist history.Reader

	shutdown := cfg.ShutdownTimeout
	if shutdown == 0 {
		shutdown = -1 // httpapi: no wait; its zero value means the default
	}
	api, err := httpapi.New(httpapi.Config{
		Queue:             queue.New(rdb, queue.Options{LeaseGrace: cfg.LeaseGrace, EventsMaxLen: cfg.EventsMaxLen}),
		History:           hist,
		APIKeys:           cfg.APIKeys,
		RateLimit:         cfg.RateLimit,
		AllowedOrigins:    cfg.AllowedOrigins,
		MaxBodyBytes:      cfg.MaxBodyBytes,
		MaxBatchBodyBytes: cfg.MaxBatchBodyBytes,
		ShutdownTimeout:   shutdown,
		WorkerMaxAge:      3 * cfg.HeartbeatInterval,
		Logger:            log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("SUNDIAL_HTTP_ADDR: %w", err)
	}
	log.Info("API listening", "url", "http://"+ln.Addr().String())
	return api.Run(ctx, ln)
}
