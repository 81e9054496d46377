package sundialpg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/outbox"
)

// rowsPerInsert bounds one INSERT (3 parameters a row, 65,535 at most).
const rowsPerInsert = 1000

// SubmitTx writes jobs (sundial.Job values or typed jobs) into the outbox
// inside tx and returns their job ids, in order. Nothing reaches Redis until tx commits; then the relay
// submits each job exactly once, with the id returned here (Client.Get
// and Client.Wait find it once relayed; before that they answer
// ErrNotFound). A validation error is a *job.FieldError, as
// Client.SubmitMany's. Jobs may not set IdempotencyKey or DependsOn (see
// docs/outbox.md).
func SubmitTx(ctx context.Context, tx pgx.Tx, jobs ...sundial.Args) ([]string, error) {
	return submit(ctx, func(ctx context.Context, q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	}, jobs)
}

// SubmitSQLTx is SubmitTx for a database/sql transaction, whatever the
// PostgreSQL driver (pgx's stdlib, lib/pq).
func SubmitSQLTx(ctx context.Context, tx *sql.Tx, jobs ...sundial.Args) ([]string, error) {
	return submit(ctx, func(ctx context.Context, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}, jobs)
}

func submit(ctx context.Context, exec func(ctx context.Context, q string, args ...any) error, jobs []sundial.Args) ([]string, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	built, err := outbox.Prepare(jobs, sundial.Build)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(built))
	for start := 0; start < len(built); start += rowsPerInsert {
		chunk := built[start:min(start+rowsPerInsert, len(built))]
		var q strings.Builder
		q.WriteString("INSERT INTO " + Table + " (queue, job_id, job) VALUES ")
		args := make([]any, 0, 3*len(chunk))
		for i, j := range chunk {
			b, err := outbox.Encode(j)
			if err != nil {
				return nil, fmt.Errorf("sundialpg: %w", err)
			}
			if i > 0 {
				q.WriteByte(',')
			}
			n := len(args)
			fmt.Fprintf(&q, "($%d,$%d,$%d)", n+1, n+2, n+3)
			args = append(args, j.Queue, j.ID, string(b))
			ids[start+i] = j.ID
		}
		if err := exec(ctx, q.String(), args...); err != nil {
			return nil, fmt.Errorf("sundialpg: insert into the outbox: %w", explain(err))
		}
	}
	return ids, nil
}

// explain adds what to do to a missing table's error.
func explain(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return fmt.Errorf("%w (run sundialpg.Migrate or schema.sql first)", err)
	}
	return err
}

// Wait waits until the job with id (as SubmitTx returned it) is relayed
// and then until it ends, or until ctx ends, and returns the ended job.
// Before the relay, Client.Wait answers ErrNotFound; this waits through
// that, so it waits until ctx ends for a job whose transaction rolled back.
func Wait(ctx context.Context, c *sundial.Client, id string) (*sundial.Record, error) {
	return outbox.Wait(ctx, c, id)
}
