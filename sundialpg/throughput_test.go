package sundialpg_test

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/sundialpg"
)

// TestOutboxThroughput (SUNDIAL_OUTBOX_BENCH=1; SUNDIAL_OUTBOX_BENCH_ROWS,
// default 100000) measures 16 producers submitting jobs three ways: plain
// Submit to Redis, SubmitTx of one job per transaction, and SubmitTx of
// ten, with a relay running; rows/s until every job is in Redis, and the
// lag from each commit to its job's submitted event (p50, p99).
// docs/outbox.md records the numbers.
func TestOutboxThroughput(t *testing.T) {
	if os.Getenv("SUNDIAL_OUTBOX_BENCH") != "1" {
		t.Skip("set SUNDIAL_OUTBOX_BENCH=1 to measure")
	}
	rows := 100_000
	if v, err := strconv.Atoi(os.Getenv("SUNDIAL_OUTBOX_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	const producers = 16
	for _, mode := range []struct {
		name  string
		perTx int // 0: plain Submit
	}{{"submit", 0}, {"submittx-1", 1}, {"submittx-10", 10}} {
		t.Run(mode.name, func(t *testing.T) {
			e := setup(t)
			if mode.perTx > 0 {
				e.relay(t, sundialpg.RelayConfig{})
			}
			c := sundial.NewClient(e.redis.Client())
			per := rows / producers
			done := make([][]time.Time, producers) // when each job's submit or commit returned
			ids := make([][]string, producers)
			calls := make([][]time.Duration, producers) // each Submit call or transaction
			start := time.Now()
			var wg sync.WaitGroup
			for p := range producers {
				wg.Go(func() {
					step := max(mode.perTx, 1)
					for n := 0; n < per; n += step {
						jobs := make([]sundial.Args, min(step, per-n))
						for k := range jobs {
							jobs[k] = sundial.Job{Type: "bench", Payload: n + k}
						}
						var got []string
						t0 := time.Now()
						if mode.perTx == 0 {
							s, err := c.Submit(e.ctx, jobs[0])
							if err != nil {
								t.Error(err)
								return
							}
							got = []string{s.Job.ID}
						} else {
							err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error {
								var err error
								got, err = sundialpg.SubmitTx(e.ctx, tx, jobs...)
								return err
							})
							if err != nil {
								t.Error(err)
								return
							}
						}
						now := time.Now()
						calls[p] = append(calls[p], now.Sub(t0))
						for _, id := range got {
							ids[p] = append(ids[p], id)
							done[p] = append(done[p], now)
						}
					}
				})
			}
			wg.Wait()
			produced := time.Since(start)
			if mode.perTx > 0 {
				e.awaitRelayed(t, 10*time.Minute)
			}
			total := time.Since(start)
			at := e.submittedAt(t, "default")
			var lags []time.Duration
			for p := range producers {
				for i, id := range ids[p] {
					lags = append(lags, max(at[id].Sub(done[p][i]), 0))
				}
			}
			if len(at) != producers*per {
				t.Fatalf("%d jobs in Redis, want %d", len(at), producers*per)
			}
			call := slices.Concat(calls...)
			pct := func(d []time.Duration, q float64) time.Duration {
				slices.Sort(d)
				return d[int(q*float64(len(d)-1))].Round(100 * time.Microsecond)
			}
			t.Logf("%s: %d jobs by %d producers: produced in %v, all in Redis after %v: %.0f jobs/s; call (Submit or transaction) p50 %v p99 %v; commit→Redis lag (ms resolution) p50 %v p99 %v max %v",
				mode.name, producers*per, producers, produced.Round(time.Millisecond), total.Round(time.Millisecond),
				float64(producers*per)/total.Seconds(), pct(call, 0.5), pct(call, 0.99), pct(lags, 0.5), pct(lags, 0.99), pct(lags, 1))
		})
	}
}

// submittedAt returns when each job of queue q was submitted (its
// submitted event's time, from Redis' clock).
func (e *env) submittedAt(t testing.TB, q string) map[string]time.Time {
	t.Helper()
	msgs, err := e.q.Redis().XRange(e.ctx, queue.EventStreamKey(q), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, m := range msgs {
		evs, err := queue.ParseEvents(q, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Event == job.EventSubmitted {
				out[ev.JobID] = ev.At
			}
		}
	}
	return out
}
