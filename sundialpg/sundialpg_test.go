package sundialpg_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/sundialpg"
)

// A rolled-back transaction leaves no row and makes no job, ever; a
// committed one makes exactly one job, with the id SubmitTx returned, as
// given, and Client.Wait finds it.
func TestRollbackNoJobCommitOneJob(t *testing.T) {
	e := setup(t)
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := sundialpg.SubmitTx(e.ctx, tx, sundial.Job{Type: "email.send", Queue: "orders", Payload: "rolled back"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.relay(t, sundialpg.RelayConfig{})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	ids := e.commit(t,
		sundial.Job{Type: "email.send", Queue: "orders", Payload: map[string]int{"order": 7}, Priority: job.High, MaxAttempts: 5, Group: "acme"},
		sundial.Job{Type: "email.later", Queue: "orders", RunAt: at})
	if len(ids) != 2 || len(gone) != 1 {
		t.Fatalf("ids %v, %v", ids, gone)
	}

	c := sundial.NewClient(e.redis.Client())
	var j *sundial.Record
	queuetest.Eventually(t, 10*time.Second, "the committed job in Redis", func() bool {
		j, err = c.Get(e.ctx, ids[1])
		return err == nil
	})
	first, err := c.Get(e.ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Payload) != `{"order":7}` || first.Priority != job.High || first.MaxAttempts != 5 || first.Group != "acme" || first.State != job.Queued {
		t.Errorf("job = %+v", first)
	}
	if first.IdempotencyKey != "outbox:"+ids[0] {
		t.Errorf("idempotency key %q", first.IdempotencyKey)
	}
	if j.State != job.Scheduled || !j.RunAt.Equal(at) {
		t.Errorf("delayed job: state %s run_at %v, want scheduled at %v", j.State, j.RunAt, at)
	}
	if _, err := c.Get(e.ctx, gone[0]); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("rolled-back job: %v, want ErrNotFound", err)
	}
	e.awaitRelayed(t, 10*time.Second)
	e.exactlyOnce(t, "orders", ids)

	// Wait works on the returned id; sundialpg.Wait on a rolled-back one
	// waits until its context ends.
	if _, err := c.Cancel(e.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if w, err := c.Wait(ctx, ids[0]); err != nil || w.State != job.Cancelled {
		t.Fatalf("Wait = %v, %v", w, err)
	}
	short, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	if w, err := sundialpg.Wait(short, c, gone[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait for a rolled-back job = %v, %v", w, err)
	}
	// A job Wait finds before the relay has moved it.
	later := e.commit(t, sundial.Job{Type: "later", Queue: "orders"})
	done := make(chan error, 1)
	go func() {
		j, err := sundialpg.Wait(ctx, c, later[0])
		if err == nil && j.State != job.Cancelled {
			err = fmt.Errorf("state %s", j.State)
		}
		done <- err
	}()
	queuetest.Eventually(t, 10*time.Second, "the later job relayed and cancelled", func() bool {
		_, err := c.Cancel(e.ctx, later[0])
		return err == nil
	})
	if err := <-done; err != nil {
		t.Fatalf("sundialpg.Wait = %v", err)
	}
}

// welcome is a typed job (sundial.Args).
type welcome struct {
	To string `json:"to"`
}

func (welcome) Kind() string { return "welcome" }

// database/sql (pgx's stdlib driver) works the same, and typed jobs too.
func TestSubmitSQLTx(t *testing.T) {
	e := setup(t)
	db, err := sql.Open("pgx", e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := sundialpg.SubmitSQLTx(e.ctx, tx, sundial.Job{Type: "a"}, welcome{To: "ada@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := sundialpg.NewRelay(e.pool, e.q, sundialpg.RelayConfig{})
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 2 {
		t.Fatalf("RelayOnce = %d, %v", n, err)
	}
	if got := e.submitted(t, "default"); strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("submitted %v, want %v in order", got, ids)
	}
	if j, err := e.q.Get(e.ctx, ids[1]); err != nil || j.Type != "welcome" || string(j.Payload) != `{"to":"ada@example.com"}` {
		t.Errorf("typed job = %+v, %v", j, err)
	}
}

// What SubmitTx refuses, it refuses before writing, naming the field.
func TestSubmitTxValidation(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		jobs  []sundial.Args
		field string
	}{
		{[]sundial.Args{sundial.Job{}}, "type"},
		{[]sundial.Args{sundial.Job{Type: "a", IdempotencyKey: "k"}}, "idempotency_key"},
		{[]sundial.Args{sundial.Job{Type: "a"}, sundial.Job{Type: "b", DependsOn: []string{"#0"}}}, "jobs[1].depends_on"},
		{[]sundial.Args{sundial.Job{Type: "a", Queue: "Bad Queue"}}, "queue"},
	} {
		err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error {
			_, err := sundialpg.SubmitTx(e.ctx, tx, tc.jobs...)
			return err
		})
		var fe *job.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: err %v, want a FieldError on %s", tc.jobs, err, tc.field)
		}
	}
	if n := e.rows(t); n != 0 {
		t.Errorf("%d rows written", n)
	}
}

// Without the migration, SubmitTx says what to do.
func TestSubmitTxWithoutTable(t *testing.T) {
	e := setup(t)
	if _, err := e.pool.Exec(e.ctx, "DROP TABLE sundial_outbox"); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error {
		_, err := sundialpg.SubmitTx(e.ctx, tx, sundial.Job{Type: "a"})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "sundialpg.Migrate") {
		t.Fatalf("err = %v", err)
	}
	if err := sundialpg.Migrate(e.ctx, e.pool); err != nil {
		t.Fatal(err)
	}
	if err := sundialpg.Migrate(e.ctx, e.pool); err != nil { // twice is harmless
		t.Fatal(err)
	}
}

// A transaction still open holds back the rows of transactions that began
// writing after it, so that order is kept: its rows go first once it
// commits. Its lag shows.
func TestOpenTransactionKeepsOrder(t *testing.T) {
	e := setup(t)
	r := sundialpg.NewRelay(e.pool, e.q, sundialpg.RelayConfig{})
	slow, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := sundialpg.SubmitTx(e.ctx, slow, sundial.Job{Type: "first"})
	if err != nil {
		t.Fatal(err)
	}
	second := e.commit(t, sundial.Job{Type: "second"})
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 0 {
		t.Fatalf("RelayOnce with an older transaction open = %d, %v; want 0", n, err)
	}
	if lag, err := r.Lag(e.ctx); err != nil || lag <= 0 {
		t.Errorf("Lag = %v, %v; want > 0", lag, err)
	}
	if err := slow.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 2 {
		t.Fatalf("RelayOnce = %d, %v", n, err)
	}
	if got := e.submitted(t, "default"); len(got) != 2 || got[0] != first[0] || got[1] != second[0] {
		t.Errorf("order %v, want %v then %v", got, first, second)
	}
	if lag, err := r.Lag(e.ctx); err != nil || lag != 0 {
		t.Errorf("Lag = %v, %v; want 0", lag, err)
	}
}

// Two relays that both believe they lead (RelayOnce takes no lock), plus
// two that elect a leader, over the same rows: each row makes one job.
func TestTwoRelaysAtOnce(t *testing.T) {
	e := setup(t)
	e.relay(t, sundialpg.RelayConfig{ID: "a", Batch: 50})
	e.relay(t, sundialpg.RelayConfig{ID: "b", Batch: 50})
	var ids []string
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(e.ctx)
	for i := range 2 {
		r := sundialpg.NewRelay(e.pool, e.q, sundialpg.RelayConfig{Batch: 30 + 20*i})
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := r.RelayOnce(ctx); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 100 {
		jobs := make([]sundial.Args, 20)
		for k := range jobs {
			jobs[k] = sundial.Job{Type: "t", Payload: i*100 + k}
		}
		ids = append(ids, e.commit(t, jobs...)...)
	}
	e.awaitRelayed(t, 30*time.Second)
	stop()
	wg.Wait()
	e.exactlyOnce(t, "default", ids)
}

// Redis down: rows wait in the outbox; when Redis is back, each makes one
// job.
func TestRedisRestart(t *testing.T) {
	e := setup(t)
	r := e.relay(t, sundialpg.RelayConfig{})
	ids := e.commit(t, sundial.Job{Type: "before"})
	e.awaitRelayed(t, 10*time.Second)
	queuetest.Eventually(t, 10*time.Second, "the relay to lead", r.Leader)
	e.redis.Kill()
	for i := range 20 {
		ids = append(ids, e.commit(t, sundial.Job{Type: "during", Payload: i}, sundial.Job{Type: "during", Payload: -i})...)
	}
	if n := e.rows(t); n != 40 {
		t.Fatalf("%d rows wait, want 40", n)
	}
	e.redis.Restart()
	e.awaitRelayed(t, 30*time.Second)
	e.exactlyOnce(t, "default", ids)
}

// Many producers, many queues: every committed row is relayed once, and
// each producer's jobs reach their queue in the order it committed them.
func TestManyProducers(t *testing.T) {
	e := setup(t)
	producers, perProducer, perTx := 16, manyRows/16, 10
	queues := 4
	start := time.Now()
	e.relay(t, sundialpg.RelayConfig{})
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for n := 0; n < perProducer; n += perTx {
				jobs := make([]sundial.Args, perTx)
				for k := range jobs {
					jobs[k] = sundial.Job{Type: "t", Queue: fmt.Sprintf("q%d", p%queues), Payload: payload([2]int{p, n + k})}
				}
				err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error {
					_, err := sundialpg.SubmitTx(e.ctx, tx, jobs...)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	committed := time.Since(start)
	e.awaitRelayed(t, 5*time.Minute)
	total := time.Since(start)
	t.Logf("%d rows by %d producers: committed in %v, all relayed after %v (%.0f rows/s)",
		producers*perProducer, producers, committed.Round(time.Millisecond), total.Round(time.Millisecond),
		float64(producers*perProducer)/total.Seconds())

	for qn := range queues {
		q := fmt.Sprintf("q%d", qn)
		ids := e.submitted(t, q)
		if want := producers / queues * perProducer; len(ids) != want {
			t.Errorf("%s: %d jobs submitted, want %d", q, len(ids), want)
		}
		seen := map[string]bool{}
		next := map[int]int{} // producer → next sequence number expected
		for start := 0; start < len(ids); start += 1000 {
			for _, id := range ids[start:min(start+1000, len(ids))] {
				if seen[id] {
					t.Fatalf("%s: job %s submitted twice", q, id)
				}
				seen[id] = true
			}
		}
		// Each producer's payloads, in stream order, count up.
		for _, id := range ids {
			j, err := e.q.Get(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var pn [2]int
			if err := json.Unmarshal(j.Payload, &pn); err != nil {
				t.Fatal(err)
			}
			if pn[1] != next[pn[0]] {
				t.Fatalf("%s: producer %d's job %d came when %d was next", q, pn[0], pn[1], next[pn[0]])
			}
			next[pn[0]]++
		}
	}
}

// A row read again after its job ended (a relay that died between its
// submit and its delete, restarting late) makes no second job, even in a
// queue whose uniqueness frees idempotency keys once their job ends.
func TestRelayAgainAfterTheJobEnded(t *testing.T) {
	e := setup(t)
	if err := e.q.SetUniqueness(e.ctx, "uq", queue.Uniqueness{UntilFinished: true, Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	ids := e.commit(t, sundial.Job{Type: "once", Queue: "uq"})
	var row string
	if err := e.pool.QueryRow(e.ctx, "SELECT job::text FROM sundial_outbox").Scan(&row); err != nil {
		t.Fatal(err)
	}
	r := sundialpg.NewRelay(e.pool, e.q, sundialpg.RelayConfig{})
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RelayOnce = %d, %v", n, err)
	}
	if _, err := e.q.Cancel(e.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	// The row as a relay that died before its delete leaves it.
	if _, err := e.pool.Exec(e.ctx, "INSERT INTO sundial_outbox (queue, job_id, job) VALUES ('uq', $1, $2)", ids[0], row); err != nil {
		t.Fatal(err)
	}
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RelayOnce again = %d, %v", n, err)
	}
	e.exactlyOnce(t, "uq", ids)
	if j, err := e.q.Get(e.ctx, ids[0]); err != nil || j.State != job.Cancelled {
		t.Errorf("job = %+v, %v; want it still cancelled", j, err)
	}
	if n := e.rows(t); n != 0 {
		t.Errorf("%d rows left", n)
	}
}
