package sundialmongo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/sundialmongo"
)

func TestMain(m *testing.M) {
	code := mongotest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

type env struct {
	ctx   context.Context
	db    *mongo.Database
	redis *queuetest.Server
	q     *queue.Client
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	_, db := mongotest.Client(t)
	srv := queuetest.Start(t)
	return &env{ctx: ctx, db: db, redis: srv, q: queue.New(srv.Client(), queue.Options{})}
}

func (e *env) insert(t testing.TB, jobs ...sundial.Args) []string {
	t.Helper()
	ids, err := sundialmongo.InsertNoTx(e.ctx, e.db, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (e *env) docs(t testing.TB) int64 {
	t.Helper()
	n, err := e.db.Collection(sundialmongo.Collection).CountDocuments(e.ctx, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

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

// FerretDB has no transactions: CheckTransactions says so (the poller
// refuses to start on it), and SubmitTx refuses a context without one.
func TestFerretDBRefused(t *testing.T) {
	e := setup(t)
	err := sundialmongo.CheckTransactions(e.ctx, e.db)
	if !errors.Is(err, sundialmongo.ErrNoTransactions) || !strings.Contains(err.Error(), "FerretDB") {
		t.Errorf("CheckTransactions = %v", err)
	}
	if _, err := sundialmongo.SubmitTx(e.ctx, e.db, sundial.Job{Type: "a"}); !errors.Is(err, sundialmongo.ErrNoTransaction) {
		t.Errorf("SubmitTx without a transaction = %v", err)
	}
	if n := e.docs(t); n != 0 {
		t.Errorf("%d documents written", n)
	}
}

// The relay moves each document into Redis once, in order, with the id
// the insert returned; several relays at once still make one job each.
func TestRelay(t *testing.T) {
	e := setup(t)
	ids := e.insert(t, sundial.Job{Type: "a", Payload: 1}, sundial.Job{Type: "b", Queue: "other"})
	r := sundialmongo.NewRelay(e.db, e.q, sundialmongo.RelayConfig{})
	if lag, err := r.Lag(e.ctx); err != nil || lag <= 0 {
		t.Errorf("Lag = %v, %v", lag, err)
	}
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 2 {
		t.Fatalf("RelayOnce = %d, %v", n, err)
	}
	j, err := e.q.Get(e.ctx, ids[0])
	if err != nil || string(j.Payload) != "1" || j.IdempotencyKey != "outbox:"+ids[0] {
		t.Fatalf("Get = %+v, %v", j, err)
	}
	if got := e.submitted(t, "other"); len(got) != 1 || got[0] != ids[1] {
		t.Errorf("other: %v", got)
	}

	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	for i := range 3 {
		r := sundialmongo.NewRelay(e.db, e.q, sundialmongo.RelayConfig{ID: fmt.Sprint(i), Batch: 25, PollInterval: 20 * time.Millisecond, LockTTL: time.Second})
		wg.Go(func() { _ = r.Run(ctx) })
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = r.RelayOnce(ctx)
			}
		})
	}
	var more []string
	for i := range 30 {
		jobs := make([]sundial.Args, 10)
		for k := range jobs {
			jobs[k] = sundial.Job{Type: "c", Payload: i*10 + k}
		}
		more = append(more, e.insert(t, jobs...)...)
	}
	queuetest.Eventually(t, 60*time.Second, "the outbox to empty", func() bool { return e.docs(t) == 0 })
	cancel()
	wg.Wait()
	got := e.submitted(t, "default")
	if len(got) != 1+len(more) {
		t.Fatalf("%d jobs submitted, want %d", len(got), 1+len(more))
	}
	for i, id := range more {
		if got[i+1] != id {
			t.Fatalf("job %d is %s, want %s (in order, once)", i, got[i+1], id)
		}
	}
}

// A poller told to relay a FerretDB outbox refuses to start, and says why.
func TestPollerRefusesFerretDB(t *testing.T) {
	e := setup(t)
	uri, _ := mongotest.Start(t)
	p := proctest.Start(t, proctest.Binary(t, "poller"), "SUNDIAL_REDIS_URL="+e.redis.URL(), "SUNDIAL_HISTORY=off",
		"SUNDIAL_METRICS_ADDR=off", "SUNDIAL_OUTBOX_MONGO_URI="+uri)
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the poller did not stop")
	}
	if p.ExitCode() == 0 || !strings.Contains(p.Output(), "FerretDB") || !strings.Contains(p.Output(), "no transactions") {
		t.Errorf("exit %d, output:\n%s", p.ExitCode(), p.Output())
	}
}

// The relay reads with read concern "majority" (and deletes with write
// concern "majority"): a commit that a failover rolls back must not have
// been relayed. The commands it sends say so.
func TestRelayReadsMajority(t *testing.T) {
	uri, dbName := mongotest.Start(t)
	var mu sync.Mutex
	concerns := map[string]string{}
	mon := &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName != "find" && ev.CommandName != "delete" {
			return
		}
		key := "readConcern"
		if ev.CommandName == "delete" {
			key = "writeConcern"
		}
		level := ""
		if v, err := ev.Command.LookupErr(key); err == nil {
			doc, _ := v.Document().Elements()
			for _, el := range doc {
				if el.Key() == "level" || el.Key() == "w" {
					level = el.Value().String()
				}
			}
		}
		mu.Lock()
		concerns[ev.CommandName] = level
		mu.Unlock()
	}}
	mc, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Disconnect(context.Background()) })
	srv := queuetest.Start(t)
	e := &env{ctx: context.Background(), db: mc.Database(dbName), redis: srv, q: queue.New(srv.Client(), queue.Options{})}
	e.insert(t, sundial.Job{Type: "a"})
	r := sundialmongo.NewRelay(e.db, e.q, sundialmongo.RelayConfig{})
	if n, err := r.RelayOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RelayOnce = %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(concerns["find"], "majority") || !strings.Contains(concerns["delete"], "majority") {
		t.Fatalf("the relay's concerns: find %q, delete %q; want majority", concerns["find"], concerns["delete"])
	}
}
