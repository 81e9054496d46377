package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// A claim in storage format 2 writes nothing on the job hash: the attempt's
// token, number, worker and start live in the queue's active record, and
// every reader (Get here) shows the job active from it. When the attempt
// ends, the hash gets them.
func TestFormat2ClaimLeavesTheJobHash(t *testing.T) {
	e := newEnv(t) // writes format 2
	j := e.submit(t, job.Spec{Type: "t"})[0]
	rdb := e.srv.Client()
	key := queue.JobKey("default", j.ID)
	before := rdb.HGetAll(e.ctx, key).Val()
	l := e.claim(t, "default", 1)
	if len(l) != 1 || l[0].Job.Attempt != 1 {
		t.Fatalf("claim = %+v", l)
	}
	if after := rdb.HGetAll(e.ctx, key).Val(); !maps.Equal(before, after) {
		t.Fatalf("the claim wrote on the job hash:\nbefore %v\nafter  %v", before, after)
	}
	got := e.get(t, j.ID)
	if got.State != job.Active || got.Attempt != 1 || got.WorkerID != "w1" || got.StartedAt == nil || !got.StartedAt.Equal(e.clock.Now()) {
		t.Fatalf("running job = %+v, want active, attempt 1 on w1 since %v", got, e.clock.Now())
	}
	e.clock.Advance(3 * time.Second)
	e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded, Result: json.RawMessage(`1`), WorkerID: "w1"})
	h := rdb.HGetAll(e.ctx, key).Val()
	if h["state"] != "succeeded" || h["attempt"] != "1" || h["worker_id"] != "w1" || h["started_at"] != fmt.Sprint(e.clock.Now().Add(-3*time.Second).UnixMilli()) {
		t.Fatalf("finished job hash = %v", h)
	}
}

// A job id found in a priority list while its job runs (a claim of format
// 2 leaves the hash saying queued) is not claimed a second time.
func TestClaimPassesOverARunningJobsID(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Type: "t"})[0]
	l := e.claim(t, "default", 1)
	if len(l) != 1 {
		t.Fatal("not claimed")
	}
	e.srv.Client().LPush(e.ctx, queue.QueueKey("default", "normal"), j.ID)
	if again := e.claim(t, "default", 5); len(again) != 0 {
		t.Fatalf("a running job was claimed again: %+v", again[0].Job)
	}
	// The same through the one-at-a-time path of a claim by type.
	e.srv.Client().LPush(e.ctx, queue.QueueKey("default", "normal"), j.ID)
	if again, err := e.q.Claim(e.ctx, "default", 5, "w2", "t"); err != nil || len(again) != 0 {
		t.Fatalf("claim by type = %v, %v; want nothing", again, err)
	}
	if st := e.complete(t, "default", queue.Outcome{ID: j.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"}); st[0] != queue.StatusSucceeded {
		t.Fatalf("status = %v", st)
	}
}

// Releases of both formats share a queue during a rolling upgrade, and an
// attempt begun in one format may end through a process of the other (or
// of this release, which writes either): every way an attempt ends works
// on attempts of every format, read and finished by a client that writes
// another one. In format 4 the job was submitted compact (its
// max_attempts, 3, is the default and stays off its hash).
func TestFormatsMixInOneQueue(t *testing.T) {
	t.Parallel()
	type end struct {
		name string
		// run ends the attempt of l through q; the job must then be in
		// state, with attempt and worker as given ("" worker: none).
		run     func(t *testing.T, e *env, q *queue.Client, l queue.Lease)
		state   job.State
		attempt int
		worker  string
	}
	ok := func(kind queue.OutcomeKind) func(*testing.T, *env, *queue.Client, queue.Lease) {
		return func(t *testing.T, e *env, q *queue.Client, l queue.Lease) {
			st, err := q.Complete(e.ctx, "default", []queue.Outcome{{ID: l.Job.ID, Token: l.Token, Kind: kind, Error: "boom", WorkerID: "w1"}})
			if err != nil || st[0] == queue.StatusStale {
				t.Fatalf("complete = %v, %v", st, err)
			}
		}
	}
	ends := []end{
		{"succeed", ok(queue.OutcomeSucceeded), job.Succeeded, 1, "w1"},
		{"fail and retry", ok(queue.OutcomeFailed), job.Queued, 1, "w1"},
		{"dead", ok(queue.OutcomeDead), job.Dead, 1, "w1"},
		{"cancel", func(t *testing.T, e *env, q *queue.Client, l queue.Lease) {
			if _, err := q.Cancel(e.ctx, l.Job.ID); err != nil {
				t.Fatal(err)
			}
			st, err := q.Complete(e.ctx, "default", []queue.Outcome{{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"}})
			if err != nil || st[0] != queue.StatusStale {
				t.Fatalf("the outcome of a cancelled attempt = %v, %v; want stale", st, err)
			}
		}, job.Cancelled, 1, "w1"},
		{"release", func(t *testing.T, e *env, q *queue.Client, l queue.Lease) {
			if n, err := q.Release(e.ctx, "default", []queue.Lease{l}); err != nil || n != 1 {
				t.Fatalf("release = %d, %v", n, err)
			}
		}, job.Queued, 0, ""},
		{"lease expires", func(t *testing.T, e *env, q *queue.Client, l queue.Lease) {
			e.clock.Advance(time.Minute)
			if n, _, err := q.Reclaim(e.ctx, "default", 10); err != nil || n != 1 {
				t.Fatalf("reclaim = %d, %v", n, err)
			}
		}, job.Queued, 1, "w1"},
		{"progress", func(t *testing.T, e *env, q *queue.Client, l queue.Lease) {
			held, _, err := q.Progress(e.ctx, "default", l, queue.ProgressReport{Percent: 40, Message: "half"})
			if err != nil || !held {
				t.Fatalf("progress = %v, %v", held, err)
			}
			j, err := q.Get(e.ctx, l.Job.ID)
			if err != nil || j.Progress == nil || j.Progress.Percent != 40 {
				t.Fatalf("a running job's progress = %+v, %v", j, err)
			}
		}, job.Active, 1, "w1"},
	}
	// An attempt of format 1 whose active record is gone stands for one
	// claimed by a release from before the active hash: the job hash
	// alone says it runs.
	for _, c := range []struct {
		name     string
		claimed  int
		noRecord bool
	}{{"format 1", 1, false}, {"format 2", 2, false}, {"format 3", 3, false}, {"format 4", 4, false}, {"format 1 before the active hash", 1, true}} {
		claimed := c.claimed
		for _, en := range ends {
			t.Run(c.name+"/"+en.name, func(t *testing.T) {
				e := newEnv(t)
				other := queue.New(e.srv.Client(), queue.Options{Now: e.clock.Now, LeaseClock: e.clock.Now, LeaseTTL: 11 * time.Second, LeaseGrace: time.Second})
				queue.SetWriteFormat(e.q, claimed)
				queue.SetWriteFormat(other, map[int]int{1: queue.WriteFormat, 2: 1, 3: 1, 4: 1}[claimed])
				j := e.submit(t, job.Spec{Type: "t", MaxAttempts: ptr(3), Backoff: &job.Backoff{}})[0]
				l := e.claim(t, "default", 1)
				if len(l) != 1 {
					t.Fatal("not claimed")
				}
				if c.noRecord {
					e.srv.Client().HDel(e.ctx, "sundial:{default}:active", j.ID)
				}
				if h := e.srv.Client().HGet(e.ctx, queue.JobKey("default", j.ID), "state").Val(); (h == "active") != (claimed == 1) {
					t.Fatalf("format %d claim left the hash state %q", claimed, h)
				}
				if got, err := other.Get(e.ctx, j.ID); err != nil || got.State != job.Active || got.Attempt != 1 || got.WorkerID != "w1" || got.StartedAt == nil {
					t.Fatalf("the running job read by the other format's client = %+v, %v", got, err)
				}
				en.run(t, e, other, l[0])
				got, err := other.Get(e.ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != en.state || got.Attempt != en.attempt || got.WorkerID != en.worker && en.worker != "" {
					t.Fatalf("job = state %s attempt %d worker %q, want %s %d %q", got.State, got.Attempt, got.WorkerID, en.state, en.attempt, en.worker)
				}
				n, err := queue.ActiveRecords(e.ctx, e.srv.Client(), "default")
				if wantRunning := en.state == job.Active && !c.noRecord; err != nil || (n == 1) != wantRunning {
					t.Fatalf("%d active records left (%v)", n, err)
				}
				if en.state == job.Queued {
					// The next attempt counts on from the last, in either format.
					next, err := other.Claim(e.ctx, "default", 1, "w2")
					if err != nil || len(next) != 1 || next[0].Job.Attempt != en.attempt+1 {
						t.Fatalf("the next claim = %+v, %v; want attempt %d", next, err, en.attempt+1)
					}
				}
				// Every event of the job carries the attempt it belongs to.
				for _, ev := range e.events(t, "default") {
					if ev.Event == job.EventStarted && ev.Attempt < 1 || strings.Contains(string(ev.Event), "fail") && ev.Attempt != 1 {
						t.Fatalf("event %s with attempt %d", ev.Event, ev.Attempt)
					}
				}
			})
		}
	}
}

// The gate: a process writes the newest format only once no live process
// lacks it. A Redis where no older release was ever seen opens at once,
// jobs or not; a Redis with a registered reader of format 1 keeps it shut,
// and once that reader is gone the marker moves and the format becomes
// writable one registration lifetime later. Not parallel: it shortens the
// package's registration timing.
func TestStorageFormatGateOpens(t *testing.T) {
	defer queue.SetRegistrationTiming(time.Second, 50*time.Millisecond, 50*time.Millisecond)()
	ctx := context.Background()
	newest := strconv.Itoa(queue.WriteFormat)

	// A new deployment, whose producer submitted before any worker started.
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{})
	if err := submitOne(ctx, q); err != nil {
		t.Fatal(err)
	}
	_, reg := q.Register(ctx, "worker", nil)
	if q.Writing() != queue.WriteFormat {
		t.Fatalf("on a new Redis the first registration writes format %d, want %d", q.Writing(), queue.WriteFormat)
	}
	if st, _ := q.Storage(ctx, time.Minute); st.Format != newest || len(st.Readers) != 1 || st.Readers[0].Writes != queue.WriteFormat {
		t.Fatalf("storage = %+v", st)
	}
	reg.Close()

	// An upgrade: a release that reads only format 1 runs, and has jobs.
	srv = queuetest.Start(t)
	rdb := srv.Client()
	q = queue.New(rdb, queue.Options{})
	old := olderRelease(ctx, rdb, "old", "[1]")
	old(true)
	if err := submitOne(ctx, q); err != nil {
		t.Fatal(err)
	}
	_, reg = q.Register(ctx, "worker", nil)
	defer reg.Close()
	heldBack(t, q, reg, "1", 1, "a reader of format 1 alive")
	old(false) // it stopped without removing its entry: it lapsed
	settles(t, q, rdb, 1)
}

// olderRelease returns a function that registers (live) or lapses (not
// live) a process of an older release that reads the formats in reads (a
// JSON list), as its registration would.
func olderRelease(ctx context.Context, rdb *redis.Client, id, reads string) func(live bool) {
	return func(live bool) {
		exp := time.Now().Add(time.Hour)
		if !live {
			exp = time.Now().Add(-time.Second)
		}
		rdb.ZAdd(ctx, readersKey, redis.Z{Score: float64(exp.UnixMilli()), Member: id})
		rdb.HSet(ctx, "sundial:{.storage}:reader-info", id, `{"id":"`+id+`","reads":`+reads+`,"writes":1}`)
	}
}

// settles waits for the marker to move to the newest format, and asserts
// that q goes on writing format before until one registration lifetime
// (1 s here) later, then writes the newest.
func settles(t *testing.T, q *queue.Client, rdb *redis.Client, before int) {
	t.Helper()
	ctx := context.Background()
	queuetest.Eventually(t, 10*time.Second, "the marker to move to the newest format", func() bool {
		return rdb.HGet(ctx, formatKey, "format").Val() == strconv.Itoa(queue.WriteFormat)
	})
	moved := time.Now()
	if q.Writing() != before {
		t.Fatalf("the process writes format %d once the marker moved, want %d until the move settles", q.Writing(), before)
	}
	queuetest.Eventually(t, 10*time.Second, "the process to write the newest format", func() bool { return q.Writing() == queue.WriteFormat })
	if waited := time.Since(moved); waited < 900*time.Millisecond {
		t.Fatalf("format %d was written %v after the marker moved, want the registration lifetime (1s)", queue.WriteFormat, waited)
	}
}

// gateRedis starts a Redis for a test of the gate, with the package's
// registration timing shortened (1 s lifetime, 50 ms renewals) until the
// test ends, and a client of it that has not registered. Tests that call
// it must not run in parallel with others that register.
func gateRedis(t *testing.T) (*redis.Client, *queue.Client) {
	t.Helper()
	t.Cleanup(queue.SetRegistrationTiming(time.Second, 50*time.Millisecond, 50*time.Millisecond))
	rdb := queuetest.Start(t).Client()
	return rdb, queue.New(rdb, queue.Options{})
}

// The step from format 2: while a release that reads formats 1 and 2 runs,
// a process of this one writes format 2 (the marker's, writable), not 1;
// once that release is gone the marker moves on, format 2 goes on until
// the move settles, then format 3 is written.
func TestStorageFormatGateStepsFromFormat2(t *testing.T) {
	ctx := context.Background()
	rdb, q := gateRedis(t)
	// What the release before left: format 2, writable long ago.
	rdb.HSet(ctx, formatKey, "format", "2", "moved_at", "1", "writable_at", "1", "held_back_at", "1")
	old := olderRelease(ctx, rdb, "previous", "[1,2]")
	old(true)
	_, reg := q.Register(ctx, "worker", nil)
	defer reg.Close()
	heldBack(t, q, reg, "2", 2, "a reader of formats 1 and 2 alive")
	old(false)
	settles(t, q, rdb, 2)
}

// A Redis that lost its data (no persistence, a restart) has no marker;
// a release that reads format 1 only may register there again, so a
// process writing the newest format steps down to format 1.
func TestStorageFormatStepsDownWhenTheMarkerIsGone(t *testing.T) {
	ctx := context.Background()
	rdb, q := gateRedis(t)
	_, reg := q.Register(ctx, "worker", nil)
	defer reg.Close()
	if q.Writing() != queue.WriteFormat {
		t.Fatalf("writes format %d on a new Redis, want %d", q.Writing(), queue.WriteFormat)
	}
	rdb.FlushAll(ctx)
	olderRelease(ctx, rdb, "old", "[1]")(true)
	queuetest.Eventually(t, 10*time.Second, "the process to write format 1", func() bool { return q.Writing() == 1 })
	heldBack(t, q, reg, "1", 1, "a reader of format 1 alive")
}

// Workers of a release from before the registry heartbeat but never
// register: while one is alive the marker does not move.
func TestStorageFormatGateWaitsForUnregisteredWorkers(t *testing.T) {
	ctx := context.Background()
	rdb, q := gateRedis(t)
	w := queue.WorkerInfo{ID: "ancient", Hostname: "elsewhere", PID: 7, Queues: []string{"default"}, ActiveJobs: []string{}, StartedAt: time.Now()}
	if err := q.Heartbeat(ctx, w, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, reg := q.Register(ctx, "poller", nil)
	defer reg.Close()
	heldBack(t, q, reg, "1", 1, "an unregistered worker alive")
	if err := q.Unregister(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 10*time.Second, "the marker to move once the worker is gone", func() bool {
		return rdb.HGet(ctx, formatKey, "format").Val() == strconv.Itoa(queue.WriteFormat)
	})
}

// heldBack asserts that the gate stays shut (the marker at marker, q
// writing format writes) over five renewals of reg, each of which tried to
// move the marker.
func heldBack(t *testing.T, q *queue.Client, reg *queue.Registration, marker string, writes int, why string) {
	t.Helper()
	ctx := context.Background()
	renewals := map[time.Time]bool{}
	queuetest.Eventually(t, 10*time.Second, "five renewals", func() bool {
		st, err := q.Storage(ctx, time.Minute)
		if err != nil {
			return false
		}
		if st.Format != marker || q.Writing() != writes {
			t.Fatalf("with %s the marker is %q and the process writes %d", why, st.Format, q.Writing())
		}
		for _, r := range st.Readers {
			if r.ID == reg.ID() {
				renewals[r.ExpiresAt] = true
			}
		}
		return len(renewals) >= 5
	})
}

// Format 3 keeps a padding entry in the lease set and the active hash, so
// that both stay in Redis' hash-table encodings at any number of running
// jobs; nothing that counts or reclaims leases sees it, and it stays when
// the last job ends (the keys would be deleted, and come back small).
func TestFormat3PadsTheLeaseSetAndTheActiveHash(t *testing.T) {
	e := newEnv(t)
	rdb := e.srv.Client()
	leases, active := queue.QueueKey("default", "leases"), queue.QueueKey("default", "active")
	e.submit(t, job.Spec{Type: "t"}, job.Spec{Type: "t"}, job.Spec{Type: "t"})
	ls := e.claim(t, "default", 3)
	if len(ls) != 3 {
		t.Fatalf("claimed %d", len(ls))
	}
	if enc := rdb.ObjectEncoding(e.ctx, leases).Val(); enc != "skiplist" {
		t.Fatalf("lease set of 3 running jobs encoded as %q, want skiplist", enc)
	}
	if enc := rdb.ObjectEncoding(e.ctx, active).Val(); enc != "hashtable" {
		t.Fatalf("active hash of 3 running jobs encoded as %q, want hashtable", enc)
	}
	st, err := e.q.Stats(e.ctx, "default")
	if err != nil || st[0].Active != 3 {
		t.Fatalf("stats count %+v active (%v), want 3", st, err)
	}
	// A lease clock an hour on: every lease expired, the padding not.
	e.clock.Advance(time.Hour)
	n, next, err := e.q.Reclaim(e.ctx, "default", 10)
	if err != nil || n != 3 || !next.IsZero() {
		t.Fatalf("reclaim = %d, next %v, %v; want 3 and no next expiry", n, next, err)
	}
	ls = e.claim(t, "default", 3)
	outs := make([]queue.Outcome, len(ls))
	for i, l := range ls {
		outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded}
	}
	for i, s := range e.complete(t, "default", outs...) {
		if s != queue.StatusSucceeded {
			t.Fatalf("job %d: %s", i, s)
		}
	}
	if st, _ := e.q.Stats(e.ctx, "default"); st[0].Active != 0 {
		t.Fatalf("stats count %d active jobs after every job ended", st[0].Active)
	}
	if _, next, _ := e.q.Reclaim(e.ctx, "default", 10); !next.IsZero() {
		t.Fatalf("reclaim reports a next expiry %v with no lease", next)
	}
	if rdb.ZCard(e.ctx, leases).Val() != 1 || rdb.HLen(e.ctx, active).Val() != 1 {
		t.Fatal("the padding did not stay when the last job ended")
	}
}
