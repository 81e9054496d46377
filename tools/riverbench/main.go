// Command riverbench measures River's transactional insert (InsertTx,
// InsertManyTx) on a PostgreSQL, the way sundialpg's TestOutboxThroughput
// measures SubmitTx: producers commit jobs, one or ten to a transaction,
// and it reports jobs/s and the transaction's p50 and p99. A River job is
// available to workers at commit (no relay), so there is no lag to report.
// docs/outbox.md records the numbers. It has its own module so that River
// stays out of Sundial's.
//
//	go run . -postgres postgres://postgres@127.0.0.1:5432/bench
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// benchArgs is the job inserted.
type benchArgs struct {
	N int `json:"n"`
}

func (benchArgs) Kind() string { return "bench" }

func main() {
	url := flag.String("postgres", "", "PostgreSQL `URL` (a database River may migrate)")
	rows := flag.Int("rows", 100_000, "jobs per run")
	producers := flag.Int("producers", 16, "concurrent producers")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		log.Fatal(err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert only
	if err != nil {
		log.Fatal(err)
	}
	for _, perTx := range []int{1, 10} {
		if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
			log.Fatal(err)
		}
		per := *rows / *producers
		calls := make([][]time.Duration, *producers)
		start := time.Now()
		var wg sync.WaitGroup
		for p := range *producers {
			wg.Go(func() {
				for n := 0; n < per; n += perTx {
					params := make([]river.InsertManyParams, min(perTx, per-n))
					for k := range params {
						params[k] = river.InsertManyParams{Args: benchArgs{N: n + k}}
					}
					t0 := time.Now()
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						if len(params) == 1 {
							_, err := client.InsertTx(ctx, tx, params[0].Args, nil)
							return err
						}
						_, err := client.InsertManyTx(ctx, tx, params)
						return err
					})
					if err != nil {
						log.Fatal(err)
					}
					calls[p] = append(calls[p], time.Since(t0))
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		all := slices.Concat(calls...)
		slices.Sort(all)
		pct := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))].Round(100 * time.Microsecond) }
		fmt.Printf("river InsertTx, %d a transaction: %d jobs by %d producers in %v: %.0f jobs/s; transaction p50 %v p99 %v\n",
			perTx, per**producers, *producers, took.Round(time.Millisecond), float64(per**producers)/took.Seconds(), pct(0.5), pct(0.99))
	}
}
