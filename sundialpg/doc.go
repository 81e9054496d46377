// Package sundialpg submits Sundial jobs inside a PostgreSQL transaction:
// SubmitTx writes them into an outbox table with the caller's own rows, so
// a rolled-back transaction never makes a job and a committed one always
// makes exactly one. A Relay (run by services/poller when
// SUNDIAL_OUTBOX_POSTGRES_URL is set, or by a program of one's own) moves
// committed rows into Redis.
//
// Run Migrate (or schema.sql) once, then:
//
//	tx, _ := pool.Begin(ctx)
//	// … the caller's own writes …
//	ids, err := sundialpg.SubmitTx(ctx, tx, sundial.Job{Type: "email.send", Payload: order})
//	// store ids[0] beside the order if wanted; Client.Wait works on it once relayed
//	err = tx.Commit(ctx)
//
// See docs/outbox.md for the guarantees and their limits.
package sundialpg
