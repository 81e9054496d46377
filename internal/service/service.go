// Package service holds what every Sundial binary's main does the same way:
// read and print the configuration, build the logger and the Redis client,
// and run until SIGTERM or SIGINT.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/buildinfo"
	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Env is what a binary's run function receives.
type Env struct {
	Config *config.Config
	Log    *slog.Logger
	Redis  redis.UniversalClient
}

// EngineOptions returns the Redis engine's options from the configuration.
func (e *Env) EngineOptions() queue.Options {
	return queue.Options{LeaseTTL: e.Config.LeaseTTL, LeaseGrace: e.Config.LeaseGrace, LogCap: e.Config.JobLogLines,
		WaitReplicas: e.Config.RedisWaitReplicas, WaitTimeout: e.Config.RedisWaitTimeout}
}

// ListenOps binds the binary's operations endpoint as SUNDIAL_METRICS_ADDR
// says (ListenOps, the package function): nil when it is off; auto takes
// the first free port from 127.0.0.1:base. It logs where auto landed when
// that is not base, as the next worker on a host does.
func (e *Env) ListenOps(base int) (net.Listener, error) {
	ln, err := ListenOps(e.Config.MetricsAddr, base)
	if err != nil {
		return nil, fmt.Errorf("SUNDIAL_METRICS_ADDR: %w", err)
	}
	if ln != nil && ln.Addr().(*net.TCPAddr).Port != base && (e.Config.MetricsAddr == "auto" || e.Config.MetricsAddr == "") {
		e.Log.Info("operations endpoint: default port taken, took the next free one", "default", base, "addr", ln.Addr().String())
	}
	return ln, nil
}

// RedisCheck is the readiness check of the Redis connection.
func (e *Env) RedisCheck(ctx context.Context) error { return e.Redis.Ping(ctx).Err() }

// Main loads the configuration (exiting with status 2 and a clear message
// when it is invalid), logs it with secrets masked, connects to Redis, and
// starts the profiling endpoint when SUNDIAL_PPROF_ADDR names one, and
// calls run with a context cancelled by SIGTERM or SIGINT. It exits 1 when
// run returns an error and 0 otherwise.
func Main(name string, run func(ctx context.Context, env *Env) error) {
	if buildinfo.IsVersionFlag(os.Args[1:]) {
		fmt.Println(buildinfo.String(name))
		return
	}
	cfg, err := config.Load(nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sundial %s: %v\n", name, err)
		os.Exit(2)
	}
	logs := newLogBuffer(os.Stderr)
	defer logs.Flush()
	log := slog.New(flushOnWarn{cfg.Logger(logs).Handler(), logs}).With("service", name)
	slog.SetDefault(log)
	gc := tuneGC(os.LookupEnv)
	log.Info("starting", append([]any{"version", buildinfo.Version}, append(cfg.Effective(nil), "gogc", gc)...)...)
	rdb, err := config.NewRedis(cfg.RedisURL)
	if err != nil {
		logs.Flush()
		fmt.Fprintf(os.Stderr, "sundial %s: SUNDIAL_REDIS_URL: %v\n", name, err)
		os.Exit(2)
	}
	defer rdb.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.PprofAddr != "off" && cfg.PprofAddr != "" {
		if err := startPprof(ctx, cfg.PprofAddr, log); err != nil {
			log.Error("exiting", "err", fmt.Errorf("SUNDIAL_PPROF_ADDR: %w", err))
			os.Exit(1) // the error line flushed what came before it
		}
	}
	if err := run(ctx, &Env{Config: cfg, Log: log, Redis: rdb}); err != nil {
		log.Error("exiting", "err", err)
		os.Exit(1)
	}
	log.Info("exited cleanly")
}

// DefaultGCPercent is the services' garbage-collection target (Go's GOGC)
// when GOGC is not set. Go's default, 100, collects once the heap grows
// by its live size; the API's live heap is a few MB while a 1000-job
// batch request allocates about as much, so at 100 it collected every
// few requests: at 200 the API spent 5.0 instead of 7.0 ms of CPU per
// 1000-job request (28 % less) for 6 MB more peak memory
// (docs/benchmarks/2026-11.md, "The REST submit path").
const DefaultGCPercent = 200

// tuneGC sets the garbage-collection target to DefaultGCPercent unless
// GOGC is set (lookup reads the environment), and returns the target in
// effect, as GOGC would spell it.
func tuneGC(lookup func(string) (string, bool)) string {
	if v, ok := lookup("GOGC"); ok {
		return v
	}
	debug.SetGCPercent(DefaultGCPercent)
	return strconv.Itoa(DefaultGCPercent)
}
