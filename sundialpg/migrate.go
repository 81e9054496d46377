package sundialpg

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema is the outbox's SQL (schema.sql): the table, its index and the
// trigger that notifies the relay. Running it again changes nothing.
//
//go:embed schema.sql
var Schema string

// Table is the outbox table's name, in the connection's search path.
const Table = "sundial_outbox"

// channel is the LISTEN/NOTIFY channel the trigger notifies on commit.
const channel = "sundial_outbox"

// migrateLock is the advisory lock key Migrate holds, so that processes
// starting at once do not race on the trigger's DROP and CREATE.
const migrateLock = 0x73756e6469616c // "sundial"

// Migrate creates the outbox table, index and trigger if they do not
// exist (it runs Schema in one transaction).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("sundialpg: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return fmt.Errorf("sundialpg: migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("sundialpg: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("sundialpg: migrate: %w", err)
	}
	return nil
}
