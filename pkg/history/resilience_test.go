package history

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// load submits, claims and completes jobs in rounds, perRound jobs per
// queue every 20 ms, until stop is called, and counts the jobs it finished.
// A round is never cut short, so every job it submitted succeeded.
type load struct {
	done    atomic.Int64
	stopped atomic.Bool
	wg      sync.WaitGroup
	failure atomic.Value
}

func (e *env) startLoad(queues []string, perRound int) *load {
	l := &load{}
	for _, q := range queues {
		l.wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for ; !l.stopped.Load(); <-tick.C {
				if err := e.round(q, perRound); err != nil {
					l.failure.Store(err)
					return
				}
				l.done.Add(int64(perRound))
			}
		})
	}
	return l
}

// round runs n jobs of q from submission to success.
func (e *env) round(q string, n int) error {
	jobs := make([]*job.Job, n)
	for i := range jobs {
		jobs[i], _ = (&job.Spec{Queue: q, Type: "t.load", Payload: []byte(`{"x":1}`)}).Build(time.Now())
	}
	if _, err := e.q.Submit(e.ctx, jobs); err != nil {
		return err
	}
	leases, err := e.q.Claim(e.ctx, q, n, "w-load")
	if err != nil {
		return err
	}
	if len(leases) != n {
		return fmt.Errorf("claimed %d of %d jobs", len(leases), n)
	}
	out := make([]queue.Outcome, len(leases))
	for i, ls := range leases {
		out[i] = queue.Outcome{ID: ls.Job.ID, Token: ls.Token, Kind: queue.OutcomeSucceeded, Result: []byte(`1`), WorkerID: "w-load"}
	}
	_, err = e.q.Complete(e.ctx, q, out)
	return err
}

// stop ends the load and returns how many jobs it finished (each left
// three events: submitted, started, succeeded).
func (l *load) stop(t *testing.T) int64 {
	t.Helper()
	l.stopped.Store(true)
	l.wg.Wait()
	if err := l.failure.Load(); err != nil {
		t.Fatalf("load: %v", err)
	}
	return l.done.Load()
}

// waitRecorded waits until db holds exactly the given numbers of events
// and job documents, every job succeeded.
func (e *env) waitRecorded(db *mongo.Database, events, jobs int64, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := db.Collection(JobsCollection).CountDocuments(e.ctx, bson.D{{Key: fState, Value: "succeeded"}})
		if err == nil && n == jobs && e.count(db, EventsCollection) == events {
			break
		}
		if time.Now().After(deadline) {
			e.dumpStreams()
			e.t.Fatalf("timed out after %v: %d of %d events and %d of %d succeeded jobs recorded",
				timeout, e.count(db, EventsCollection), events, n, jobs)
		}
		time.Sleep(25 * time.Millisecond)
	}
	if n := e.count(db, EventsCollection); n != events { // exactly once: never more
		e.t.Fatalf("%d events recorded, want %d", n, events)
	}
	if n := e.count(db, JobsCollection); n != jobs {
		e.t.Fatalf("%d job documents, want %d", n, jobs)
	}
}

// TestKill9WriterMidBatch runs a writer in another process, kills it with
// SIGKILL while it holds a batch it has not acknowledged, and checks that a
// second writer takes the queue over and records every event exactly once.
func TestKill9WriterMidBatch(t *testing.T) {
	e := newEnv(t)
	const q = "crash"
	uri, _ := mongotest.Start(t)
	const consumer = "child-writer"
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1",
		childEnv+"_REDIS="+e.redis.Addr(), childEnv+"_MONGO="+uri, childEnv+"_DB="+e.db.Name(),
		childEnv+"_CONSUMER="+consumer, childEnv+"_BATCH=200", childEnv+"_OWNER_TTL=1s")
	var stderr bytes.Buffer
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("child writer's log:\n%s", stderr.String())
		}
	})

	l := e.startLoad([]string{q}, 10)
	key := queue.EventStreamKey(q)
	// Kill it while it holds unacknowledged entries, after it wrote some.
	waitFor(t, 60*time.Second, "the child writer records events", func() bool {
		return e.count(e.db, EventsCollection) >= 1000
	})
	poll(t, time.Millisecond, 30*time.Second, "the child writer holds a batch", func() bool {
		p, err := e.rdb.XPending(e.ctx, key, DefaultGroup).Result()
		return err == nil && p.Consumers[consumer] > 0
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	pending, err := e.rdb.XPendingExt(e.ctx, &redis.XPendingExtArgs{Stream: key, Group: DefaultGroup, Start: "-", End: "+", Count: 100_000, Consumer: consumer}).Result()
	if err != nil || len(pending) == 0 {
		t.Fatalf("the killed writer held no batch (pending %d, %v)", len(pending), err)
	}
	t.Logf("killed the writer holding %d unacknowledged events, %d events recorded", len(pending), e.count(e.db, EventsCollection))

	done := l.done.Load() // the load goes on without any writer for a moment
	waitFor(t, 30*time.Second, "jobs run without a writer", func() bool { return l.done.Load() > done+500 })
	jobs := l.stop(t)
	e.startWriter(e.store, testWriterConfig())
	e.waitRecorded(e.db, 3*jobs, jobs, 60*time.Second)
	if p, _ := e.rdb.XPending(e.ctx, key, DefaultGroup).Result(); p != nil && p.Consumers[consumer] > 0 {
		t.Fatalf("the dead writer's entries are still pending: %+v", p)
	}
}

// TestMongoDownUnderLoad stops MongoDB while jobs flow, checks that the
// queue keeps working and the backlog shows, restarts it and checks that
// every event arrives.
func TestMongoDownUnderLoad(t *testing.T) {
	e := newEnv(t)
	srv := mongotest.NewServer(t)
	client, err := Connect(srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.WithoutCancel(e.ctx)) })
	db := client.Database(mongotest.DBName(t))
	store := NewStore(db, StoreOptions{Logger: quietLog(), OpTimeout: 5 * time.Second})
	w, _ := e.startWriter(store, testWriterConfig())

	queues := []string{"down-a", "down-b"}
	l := e.startLoad(queues, 5)
	waitFor(t, 60*time.Second, "events recorded before the outage", func() bool { return e.count(db, EventsCollection) > 500 })

	srv.Stop()
	before := l.done.Load()
	waitFor(t, 30*time.Second, "jobs keep running while MongoDB is down", func() bool { return l.done.Load() > before+1000 })
	waitFor(t, 30*time.Second, "the backlog shows", func() bool {
		b := w.Backlog()
		return b.Events > 1000 && b.Lag > time.Second
	})
	if counterValue(t, w.metrics.errors) == 0 {
		t.Fatal("no write error counted while MongoDB was down")
	}
	srv.Start()
	jobs := l.stop(t)
	e.waitRecorded(db, 3*jobs, jobs, 120*time.Second)
	waitFor(t, 10*time.Second, "the backlog drains", func() bool { return w.Backlog().Events == 0 })
	// What was acknowledged is trimmed (approximately: whole stream nodes
	// of at most 100 entries).
	waitFor(t, 10*time.Second, "acknowledged events trimmed", func() bool {
		for _, q := range queues {
			if e.rdb.XLen(e.ctx, queue.EventStreamKey(q)).Val() > 100 {
				return false
			}
		}
		return true
	})
}

// TestWritersShareAndTakeOver runs two writers over four queues under load;
// one stops (giving its queues up) and starts again, the other is killed
// without giving up its queues (its ownership expires). Every event is
// recorded exactly once.
func TestWritersShareAndTakeOver(t *testing.T) {
	e := newEnv(t)
	queues := []string{"share-a", "share-b", "share-c", "share-d"}
	cfgA, cfgB := testWriterConfig(), testWriterConfig()
	cfgA.Consumer, cfgB.Consumer = "writer-a", "writer-b"
	a, stopA := e.startWriter(e.store, cfgA)
	b, stopB := e.startWriter(e.store, cfgB)
	l := e.startLoad(queues, 3)
	waitFor(t, 60*time.Second, "events recorded", func() bool { return e.count(e.db, EventsCollection) > 1000 })
	stopA() // gives its queues up at once
	waitFor(t, 10*time.Second, "writer b owns every queue", func() bool { return len(b.own.owned()) == len(queues) })
	a, stopA = e.startWriter(e.store, cfgA)
	// b dies without giving its queues up: as after a crash, its ownership
	// keys stay until they expire, then a takes over.
	stopB()
	for _, q := range queues {
		e.rdb.Set(e.ctx, ownerKey(q), "writer-b/crashed", cfgB.OwnerTTL)
	}
	waitFor(t, 10*time.Second, "writer a takes over every queue", func() bool { return len(a.own.owned()) == len(queues) })
	jobs := l.stop(t)
	e.waitRecorded(e.db, 3*jobs, jobs, 60*time.Second)
	stopA()
}

// dumpStreams logs the state of every queue's stream and consumer group.
func (e *env) dumpStreams() {
	qs, _ := e.q.Queues(e.ctx)
	for _, q := range qs {
		key := queue.EventStreamKey(q)
		groups, _ := e.rdb.XInfoGroups(e.ctx, key).Result()
		pending, _ := e.rdb.XPending(e.ctx, key, DefaultGroup).Result()
		owner, _ := e.rdb.Get(e.ctx, ownerKey(q)).Result()
		e.t.Logf("queue %s: xlen %d, groups %+v, pending %+v, owner %q", q, e.rdb.XLen(e.ctx, key).Val(), groups, pending, owner)
	}
}
