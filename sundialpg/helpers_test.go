package sundialpg_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/sundialpg"
)

func TestMain(m *testing.M) {
	code := mongotest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

// env is one test's PostgreSQL database (migrated) and Redis.
type env struct {
	ctx   context.Context
	url   string
	pool  *pgxpool.Pool
	redis *queuetest.Server
	q     *queue.Client
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	url := mongotest.PostgresURL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := sundialpg.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	srv := queuetest.Start(t)
	return &env{ctx: ctx, url: url, pool: pool, redis: srv, q: queue.New(srv.Client(), queue.Options{})}
}

// commit runs SubmitTx of jobs in one transaction and commits it.
func (e *env) commit(t testing.TB, jobs ...sundial.Args) []string {
	t.Helper()
	var ids []string
	err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		ids, err = sundialpg.SubmitTx(e.ctx, tx, jobs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// rows returns how many rows the outbox holds.
func (e *env) rows(t testing.TB) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT count(*) FROM sundial_outbox").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// relay runs a relay until the test ends.
func (e *env) relay(t *testing.T, cfg sundialpg.RelayConfig) *sundialpg.Relay {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.LockTTL == 0 {
		cfg.LockTTL = time.Second
	}
	r := sundialpg.NewRelay(e.pool, e.q, cfg)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	return r
}

// submitted returns the ids of the jobs queue's event stream says were
// submitted, in the stream's order (which is the order they were stored).
func (e *env) submitted(t testing.TB, q string) []string {
	t.Helper()
	msgs, err := e.q.Redis().XRange(e.ctx, queue.EventStreamKey(q), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		evs, err := queue.ParseEvents(q, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Event == job.EventSubmitted {
				ids = append(ids, ev.JobID)
			}
		}
	}
	return ids
}

// awaitRelayed waits until the outbox is empty.
func (e *env) awaitRelayed(t testing.TB, timeout time.Duration) {
	t.Helper()
	queuetest.Eventually(t, timeout, "the outbox to empty", func() bool { return e.rows(t) == 0 })
}

// exactlyOnce fails t unless each of ids was submitted exactly once to
// queue q and nothing else was.
func (e *env) exactlyOnce(t testing.TB, q string, ids []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range e.submitted(t, q) {
		seen[id]++
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
		if seen[id] != 1 {
			t.Errorf("job %s was submitted %d times, want 1", id, seen[id])
		}
	}
	for id, n := range seen {
		if !want[id] {
			t.Errorf("job %s (submitted %d times) came from no committed row", id, n)
		}
	}
}

func payload(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
