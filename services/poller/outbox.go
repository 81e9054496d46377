package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/sundialmongo"
	"github.com/sundialhq/sundial/sundialpg"
)

// startRelays connects to the outboxes the configuration names
// (SUNDIAL_OUTBOX_POSTGRES_URL, SUNDIAL_OUTBOX_MONGO_URI), creates their
// schema if missing, and returns their relays' Run functions, with their
// metrics, readiness checks and lag details on ops; close releases the
// connections. A PostgreSQL that cannot be reached does not stop the
// poller (its other duties need only Redis): the relay creates the schema
// and starts once it answers, and /readyz says unavailable until then. A
// MongoDB that cannot be reached, or has no transactions, stops the poller
// at startup.
func startRelays(ctx context.Context, env *service.Env, q *queue.Client, ops *service.Ops) (runs []func(context.Context) error, close func(), err error) {
	c := env.Config
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if c.OutboxPostgresURL != "" {
		pool, err := pgxpool.New(ctx, c.OutboxPostgresURL)
		if err != nil {
			return nil, nil, fmt.Errorf("SUNDIAL_OUTBOX_POSTGRES_URL: %w", err)
		}
		closers = append(closers, pool.Close)
		r := sundialpg.NewRelay(pool, q, sundialpg.RelayConfig{Logger: env.Log})
		ops.Register(r.Collectors()...)
		ops.Check("outbox_postgres", r.Ping)
		ops.Detail("outbox_postgres_lag_seconds", func(ctx context.Context) (any, error) {
			d, err := r.Lag(ctx)
			return d.Seconds(), err
		})
		runs = append(runs, func(ctx context.Context) error {
			if !migrate(ctx, env.Log, pool) {
				return nil
			}
			return r.Run(ctx)
		})
	}
	if c.OutboxMongoURI != "" {
		mc, err := sundialmongo.Connect(ctx, c.OutboxMongoURI)
		if err != nil {
			return nil, nil, fmt.Errorf("SUNDIAL_OUTBOX_MONGO_URI: %w", err)
		}
		closers = append(closers, func() { _ = mc.Disconnect(context.WithoutCancel(ctx)) })
		db := mc.Database(c.OutboxMongoDB)
		if err := sundialmongo.CheckTransactions(ctx, db); err != nil {
			return nil, nil, fmt.Errorf("SUNDIAL_OUTBOX_MONGO_URI: %w", err)
		}
		r := sundialmongo.NewRelay(db, q, sundialmongo.RelayConfig{Logger: env.Log})
		ops.Register(r.Collectors()...)
		ops.Check("outbox_mongodb", r.Ping)
		ops.Detail("outbox_mongodb_lag_seconds", func(ctx context.Context) (any, error) {
			d, err := r.Lag(ctx)
			return d.Seconds(), err
		})
		runs = append(runs, r.Run)
	}
	return runs, closeAll, nil
}

// migrate runs sundialpg.Migrate until it succeeds (true) or ctx ends
// (false), logging each failure.
func migrate(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool) bool {
	delay := 500 * time.Millisecond
	for {
		err := sundialpg.Migrate(ctx, pool)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Warn("outbox: cannot create the PostgreSQL schema; the relay waits", "err", err, "in", delay.String())
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}
