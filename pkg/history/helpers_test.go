package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// env is one test's world: a private redis-server, an engine over it and
// a MongoDB (FerretDB) database of the test's own.
type env struct {
	t     *testing.T
	ctx   context.Context
	redis *queuetest.Server
	rdb   *redis.Client
	q     *queue.Client
	db    *mongo.Database
	store *Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	_, db := mongotest.Client(t)
	e := &env{t: t, ctx: context.Background(), redis: srv, rdb: rdb, q: queue.New(rdb, queue.Options{}), db: db}
	e.store = NewStore(db, StoreOptions{Logger: quietLog()})
	if err := e.store.Setup(e.ctx); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return e
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testWriterConfig is a writer tuned for tests: quick take-over and
// discovery, small batches.
func testWriterConfig() WriterConfig {
	return WriterConfig{
		BatchSize: 100, OwnerTTL: time.Second, DiscoverInterval: 50 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond, Logger: quietLog(),
		Monitor: MonitorConfig{Interval: 50 * time.Millisecond},
	}
}

// startWriter runs a Writer until the returned stop is called (or the
// test ends) and waits for it to return.
func (e *env) startWriter(store *Store, cfg WriterConfig) (*Writer, func()) {
	e.t.Helper()
	w := NewWriter(e.q, store, cfg)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("writer: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return w, stop
}

// submit submits n jobs of type typ to queue q.
func (e *env) submit(q, typ string, n int, mutate ...func(*job.Spec)) []*job.Job {
	e.t.Helper()
	jobs := make([]*job.Job, n)
	for i := range jobs {
		s := job.Spec{Queue: q, Type: typ, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		for _, m := range mutate {
			m(&s)
		}
		j, err := s.Build(time.Now())
		if err != nil {
			e.t.Fatalf("build: %v", err)
		}
		jobs[i] = j
	}
	if _, err := e.q.Submit(e.ctx, jobs); err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return jobs
}

// claim leases up to n jobs of q.
func (e *env) claim(q string, n int) []queue.Lease {
	e.t.Helper()
	l, err := e.q.Claim(e.ctx, q, n, "w-test")
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return l
}

// complete reports one outcome kind for every lease.
func (e *env) complete(q string, leases []queue.Lease, kind queue.OutcomeKind, detail string) {
	e.t.Helper()
	if len(leases) == 0 {
		return
	}
	out := make([]queue.Outcome, len(leases))
	for i, l := range leases {
		out[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: kind, WorkerID: "w-test"}
		if kind == queue.OutcomeSucceeded {
			out[i].Result = json.RawMessage(`{"ok":"` + l.Job.ID + `"}`)
		} else {
			out[i].Error = detail
		}
	}
	if _, err := e.q.Complete(e.ctx, q, out); err != nil {
		e.t.Fatalf("complete: %v", err)
	}
}

// mixedStream submits n jobs of type t.a to q (one batch entry, no
// backoff), makes a third succeed, a third fail once (retried at once) and
// a sixth start, and returns q's event stream, parsed.
func (e *env) mixedStream(q string, n int) []*streamEvent {
	e.t.Helper()
	e.submit(q, "t.a", n, func(s *job.Spec) { s.Backoff = &job.Backoff{} })
	e.complete(q, e.claim(q, n/3), queue.OutcomeSucceeded, "")
	e.complete(q, e.claim(q, n/3), queue.OutcomeFailed, "again")
	e.claim(q, n/6)
	return e.entries(q)
}

// entries returns every entry of q's event stream, parsed.
func (e *env) entries(q string) []*streamEvent {
	e.t.Helper()
	key := queue.EventStreamKey(q)
	msgs, err := e.rdb.XRange(e.ctx, key, "-", "+").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*streamEvent
	for _, m := range msgs {
		evs, err := parseEntry(key, q, m)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, evs...)
	}
	return out
}

// count returns the number of documents of coll.
func (e *env) count(db *mongo.Database, coll string) int64 {
	e.t.Helper()
	n, err := db.Collection(coll).CountDocuments(e.ctx, bson.D{})
	if err != nil {
		e.t.Fatalf("count %s: %v", coll, err)
	}
	return n
}

// waitFor polls cond every 25 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	poll(t, 25*time.Millisecond, timeout, msg, cond)
}

// poll checks cond every interval until it holds or timeout passes.
func poll(t testing.TB, interval, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, msg)
		}
		time.Sleep(interval)
	}
}

// snapshot returns every document of the database's two collections,
// keyed by collection and _id, for before/after comparisons.
func (e *env) snapshot(db *mongo.Database) map[string]bson.M {
	e.t.Helper()
	out := map[string]bson.M{}
	for _, c := range []string{JobsCollection, EventsCollection} {
		cur, err := db.Collection(c).Find(e.ctx, bson.D{})
		if err != nil {
			e.t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(e.ctx, &docs); err != nil {
			e.t.Fatal(err)
		}
		for _, d := range docs {
			out[c+"/"+fmt.Sprint(d["_id"])] = d
		}
	}
	return out
}

// counterValue reads a counter.
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
