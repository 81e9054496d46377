// Command outbox places orders in PostgreSQL and sends each order's
// confirmation email through Sundial in the same transaction
// (sundialpg.SubmitTx): an order that is rolled back sends nothing, and a
// committed one sends exactly once. The job id is known before the commit
// and stored on the order row. A relay (here in the program; in production
// the poller with SUNDIAL_OUTBOX_POSTGRES_URL) moves committed jobs to
// Redis. It places three orders, rolls one back, runs the jobs, prints how
// each order ended, and exits.
//
//	go run ./examples/go/outbox -redis 127.0.0.1:6379 -postgres postgres://localhost/shop
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/sundialpg"
)

// Confirmation is the payload of an email.confirm job.
type Confirmation struct {
	Order int64  `json:"order"`
	To    string `json:"to"`
}

// errOutOfStock stands in for a business rule that rolls an order back.
var errOutOfStock = errors.New("out of stock")

// placeOrder inserts an order and its confirmation job in one transaction
// and returns the order's id and the job's id. Any error rolls back both.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, customer, item string) (order int64, jobID string, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO orders (customer, item) VALUES ($1, $2) RETURNING id`, customer, item).Scan(&order); err != nil {
			return err
		}
		ids, err := sundialpg.SubmitTx(ctx, tx, sundial.Job{
			Type: "email.confirm", Queue: "emails",
			Payload: Confirmation{Order: order, To: customer},
		})
		if err != nil {
			return err
		}
		jobID = ids[0]
		if _, err := tx.Exec(ctx, `UPDATE orders SET email_job = $1 WHERE id = $2`, jobID, order); err != nil {
			return err
		}
		if item == "unobtainium" {
			return errOutOfStock // rolls back the order and its job
		}
		return nil
	})
	return order, jobID, err
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis `host:port`")
	pgURL := flag.String("postgres", "postgres://localhost/postgres", "PostgreSQL `URL`")
	flag.Parse()
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	quiet := slog.New(slog.NewTextHandler(log.Writer(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	pool, err := pgxpool.New(ctx, *pgURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := sundialpg.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text NOT NULL, item text NOT NULL, email_job text)`); err != nil {
		log.Fatal(err)
	}

	c := sundial.NewClient(rdb)
	// The Runner relays committed jobs from the outbox and runs them.
	relay := sundialpg.NewRelay(pool, c.Engine(), sundialpg.RelayConfig{Logger: quiet})
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"emails"}, Relays: []sundial.Relay{relay}, Logger: quiet})
	sundial.HandleJSON(r, "email.confirm", func(ctx context.Context, m Confirmation) (any, error) {
		return map[string]string{"sent_to": m.To}, nil // an SMTP client would go here
	})
	go r.Run(ctx)

	for _, o := range []struct{ customer, item string }{
		{"ada@example.com", "teapot"},
		{"grace@example.com", "unobtainium"},
		{"edsger@example.com", "kettle"},
	} {
		order, id, err := placeOrder(ctx, pool, o.customer, o.item)
		if errors.Is(err, errOutOfStock) {
			fmt.Printf("%-20s rolled back: %v; job %s never runs\n", o.customer, err, id)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		j, err := sundialpg.Wait(ctx, c, id) // through ErrNotFound until the relay has moved it
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-20s order %d: email job %s %s %s\n", o.customer, order, id, j.State, j.Result)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+sundialpg.Table).Scan(&left); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("outbox rows left: %d\n", left)
}
