package sundialpg

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sundialhq/sundial/internal/outbox"
	"github.com/sundialhq/sundial/pkg/queue"
)

// RelayConfig tunes a Relay. Zero values take the documented defaults.
type RelayConfig struct {
	// ID names this relay in the leader lock and the logs. Default
	// "<hostname>-<pid>-<random>".
	ID string
	// LockKey is the Redis key of the leader lock: one relay per outbox
	// runs at a time. Default "sundial:outbox:postgres:leader"; relays of
	// two different databases into one Redis need two keys.
	LockKey string
	// LockTTL is how long a dead relay blocks the others at most. Default 3 s.
	LockTTL time.Duration
	// PollInterval is the longest the relay sleeps between two reads when
	// no notification comes. Default 1 s.
	PollInterval time.Duration
	// Batch is how many rows one pass reads. Default 1000.
	Batch int
	// Logger receives the relay's logs. Default slog.Default().
	Logger *slog.Logger
}

// Relay moves committed outbox rows into Redis, each exactly once (see
// docs/outbox.md). Run as many as wanted: a leader lock in Redis lets one
// relay at a time, and the job's idempotency key keeps even two at once
// from making a second job.
type Relay struct {
	r     *outbox.Relay
	store *store
}

// NewRelay returns a relay of pool's outbox into q (a sundial.Client's
// Engine(), or services/poller's engine). Run it with Run.
func NewRelay(pool *pgxpool.Pool, q *queue.Client, cfg RelayConfig) *Relay {
	s := &store{pool: pool, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	return &Relay{store: s, r: outbox.New(s, q, outbox.Config{
		ID: cfg.ID, LockKey: cfg.LockKey, LockTTL: cfg.LockTTL, PollInterval: cfg.PollInterval,
		Batch: cfg.Batch, Logger: cfg.Logger,
	})}
}

// Run relays until ctx ends, taking part in the leader election; it
// returns nil then. Database and Redis errors are logged and retried.
func (r *Relay) Run(ctx context.Context) error { return r.r.Run(ctx) }

// RelayOnce relays one batch of committed rows without the leader lock,
// and returns how many rows it relayed; for tests and tools.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) { return r.r.RelayOnce(ctx) }

// Leader reports whether this relay holds the leader lock right now.
func (r *Relay) Leader() bool { return r.r.Leader() }

// Lag returns the age of the oldest committed row not yet relayed (0 when
// none).
func (r *Relay) Lag(ctx context.Context) (time.Duration, error) { return r.r.Lag(ctx) }

// Collectors returns the relay's metrics: sundial_outbox_relayed_rows_total
// and sundial_outbox_lag_seconds, labelled store="postgres".
func (r *Relay) Collectors() []prometheus.Collector { return r.r.Collectors() }

// Ping checks that the database answers and the outbox table exists.
func (r *Relay) Ping(ctx context.Context) error {
	_, err := r.store.Oldest(ctx)
	return err
}

// store is the outbox table of one database.
type store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (s *store) Name() string { return "postgres" }

// readSQL reads rows whose transaction, and every transaction with a
// smaller xid, has ended: a row that commits later can then only sort
// after these, so relaying in (xid, id) order never passes over one.
const readSQL = `SELECT id, job FROM ` + Table + `
WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY xid, id LIMIT $1`

func (s *store) Read(ctx context.Context, n int) ([]outbox.Row, error) {
	rows, err := s.pool.Query(ctx, readSQL, n)
	if err != nil {
		return nil, explain(err)
	}
	defer rows.Close()
	var out []outbox.Row
	for rows.Next() {
		var id int64
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, err
		}
		j, err := outbox.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", id, err)
		}
		out = append(out, outbox.Row{ID: id, Job: j})
	}
	return out, rows.Err()
}

func (s *store) Delete(ctx context.Context, rows []outbox.Row) error {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID.(int64)
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM `+Table+` WHERE id = ANY($1)`, ids)
	return err
}

func (s *store) Oldest(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.pool.QueryRow(ctx, `SELECT created_at FROM `+Table+` ORDER BY xid, id LIMIT 1`).Scan(&t)
	if err == pgx.ErrNoRows {
		return time.Time{}, nil
	}
	return t, explain(err)
}

// Listen holds one connection of its own that LISTENs on the outbox's
// channel, reconnecting after errors, until ctx ends.
func (s *store) Listen(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		delay := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := s.listen(ctx, out)
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("outbox LISTEN failed; polling until it is back", "err", err, "in", delay.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 5*time.Second)
		}
	}()
	return out
}

func (s *store) listen(ctx context.Context, out chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	// Rows may have been committed before the LISTEN: one pass now.
	notify(out)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		notify(out)
	}
}

func notify(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}
