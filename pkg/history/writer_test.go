package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestEveryEventInOrder drives real transitions through the engine
// (success, a failure then success, dead, cancel, a delayed job, a retry
// by hand) and checks that every event of every job arrives in MongoDB in
// stream order, and that each job document matches the job in Redis.
func TestEveryEventInOrder(t *testing.T) {
	e := newEnv(t)
	const q = "inorder"
	zero := func(s *job.Spec) { s.Backoff = &job.Backoff{}; s.MaxAttempts = ptr(2) }
	e.startWriter(e.store, testWriterConfig())

	ok := e.submit(q, "t.ok", 5, zero, func(s *job.Spec) {
		s.Group, s.Traceparent = "tenant-1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	})
	e.complete(q, e.claim(q, 5), queue.OutcomeSucceeded, "")
	flaky := e.submit(q, "t.flaky", 3, zero)
	e.complete(q, e.claim(q, 3), queue.OutcomeFailed, "boom") // retried at once (backoff 0)
	e.complete(q, e.claim(q, 3), queue.OutcomeSucceeded, "")  // attempt 2 succeeds
	dead := e.submit(q, "t.dead", 2, zero)
	e.complete(q, e.claim(q, 2), queue.OutcomeDead, "no handler")
	if _, err := e.q.Retry(e.ctx, dead[0].ID); err != nil { // dead → queued again by hand
		t.Fatalf("retry: %v", err)
	}
	e.complete(q, e.claim(q, 1), queue.OutcomeSucceeded, "")
	cancelled := e.submit(q, "t.cancel", 2, zero)
	for _, j := range cancelled {
		if _, err := e.q.Cancel(e.ctx, j.ID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
	}
	later := e.submit(q, "t.later", 2, func(s *job.Spec) { s.DelaySeconds = ptr(3600.0) })
	// A durable job: a step and a signal, kept in the history's events
	// (their messages) and in its document (its records).
	durable := e.submit(q, "t.durable", 1, zero)
	ls := e.claim(q, 1)
	now := time.Now()
	if _, _, err := e.q.RecordStep(e.ctx, q, ls[0], queue.StepWrite{Seq: 1, Record: job.StepRecord(job.StepOK, "charge", now, now, `{"id":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.q.SendSignal(e.ctx, queue.Signal{Queue: q, ID: durable[0].ID, Name: "shipped", Value: json.RawMessage(`"ups"`)}); err != nil {
		t.Fatal(err)
	}
	e.complete(q, ls, queue.OutcomeSucceeded, "")

	all := append(append(append(append(append(ok, flaky...), dead...), cancelled...), later...), durable...)
	stream := e.entries(q)
	byJob := map[string][]job.Event{}
	for _, se := range stream {
		byJob[se.JobID] = append(byJob[se.JobID], se.Event)
	}
	waitFor(t, 30*time.Second, "every event recorded", func() bool {
		return e.count(e.db, EventsCollection) == int64(len(stream))
	})
	for _, j := range all {
		// In pages of two: each event on exactly one page, in order.
		var got []job.Event
		cursor := ""
		for {
			page, next, err := e.store.Events(e.ctx, j.ID, EventPage{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatalf("events of %s: %v", j.ID, err)
			}
			if len(page) > 2 || (next != "" && len(page) != 2) {
				t.Fatalf("a page of %d events, next %q", len(page), next)
			}
			got = append(got, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		if !reflect.DeepEqual(got, byJob[j.ID]) {
			t.Fatalf("events of %s (%s):\n got %+v\nwant %+v", j.ID, j.Type, got, byJob[j.ID])
		}
	}
	// Job documents catch up with Redis, payload and result included.
	for _, j := range all {
		live, err := e.q.Get(e.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var doc *job.Job
		waitFor(t, 10*time.Second, "job document of "+j.ID, func() bool {
			doc, err = e.store.Job(e.ctx, j.ID)
			return err == nil && doc.State == live.State
		})
		live.RunAt, doc.RunAt = time.Time{}, time.Time{} // the hash's run_at is read when the job is stored
		live.HeldBack = nil                              // said of a live job at read time, not stored
		if !reflect.DeepEqual(doc, live) {
			t.Fatalf("job %s (%s):\n mongo %+v\n redis %+v", j.ID, j.Type, doc, live)
		}
	}
	// The group is searchable.
	found, _, err := e.store.Search(e.ctx, Query{Queue: q, Group: "tenant-1"})
	if err != nil || len(found) != len(ok) {
		t.Fatalf("search by group: %d jobs, %v; want the %d of tenant-1", len(found), err, len(ok))
	}
	for _, j := range found {
		if j.Group != "tenant-1" || j.Type != "t.ok" {
			t.Fatalf("search by group found %s (%s, group %q)", j.ID, j.Type, j.Group)
		}
	}
	if _, err := e.store.Job(e.ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v, want ErrNotFound", err)
	}
	if _, _, err := e.store.Events(e.ctx, "nope", EventPage{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("events of unknown job: %v, want ErrNotFound", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A batch entry holds several jobs' events; the writer may record some now
// and hold others back. The entry must stay pending until the last of its
// events is recorded, or a writer dying in between would lose the rest.
func TestABatchEntryIsAcknowledgedOnlyWhenWhollyRecorded(t *testing.T) {
	e := newEnv(t)
	const q = "partial"
	e.submit(q, "t", 3) // one batch submit: one entry with three events
	key := queue.EventStreamKey(q)
	if err := e.rdb.XGroupCreateMkStream(e.ctx, key, DefaultGroup, "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.rdb.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "c", Streams: []string{key, ">"}, Block: -1}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 {
		t.Fatalf("read %v, %v; want one entry", res, err)
	}
	evs, err := parseEntry(key, q, res[0].Messages[0])
	if err != nil || len(evs) != 3 {
		t.Fatalf("entry holds %d events, %v; want 3", len(evs), err)
	}
	w := NewWriter(e.q, e.store, testWriterConfig())
	pending := func() int64 { return e.rdb.XPending(e.ctx, key, DefaultGroup).Val().Count }
	for i, part := range [][]*streamEvent{{evs[0]}, {evs[2], evs[0]}, {evs[1]}} {
		if err := w.ack(e.ctx, part); err != nil {
			t.Fatal(err)
		}
		want := int64(1)
		if i == 2 {
			want = 0
		}
		if got := pending(); got != want {
			t.Fatalf("after recording part %d: %d entries pending, want %d", i, got, want)
		}
	}
	if len(w.partial) != 0 {
		t.Fatalf("%d partial entries remembered after the last part", len(w.partial))
	}
}

// An entry delivered to another consumer of the group while this writer
// already reads the queue (both believed they owned it, as after a Redis
// restart rolled ownership back) is claimed again once it is stale, and
// recorded: no take-over would ever pick it up.
func TestAStalePendingEntryIsClaimedAgain(t *testing.T) {
	e := newEnv(t)
	cfg := testWriterConfig()
	cfg.StaleAfter = time.Second
	j, key := e.recordOne("stale", cfg)
	// A ghost consumer gets the job's next event; the writer never sees it.
	e.deliverUnseen(key, j, "ghost")
	if n := e.rdb.XPending(e.ctx, key, DefaultGroup).Val().Count; n != 1 {
		t.Fatalf("%d entries pending after the ghost's read, want 1", n)
	}
	waitFor(t, 30*time.Second, "the ghost's entry recorded and acknowledged", func() bool {
		return e.rdb.XPending(e.ctx, key, DefaultGroup).Val().Count == 0
	})
	doc, err := e.jobDoc(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if doc.State != string(job.Active) || doc.Attempt != 1 {
		t.Fatalf("job document = state %s, attempt %d; want the ghost's started event applied", doc.State, doc.Attempt)
	}
}

// A read whose reply is lost (the connection dropped after Redis delivered
// the entries) leaves them pending under the writer's own name; after the
// failed read the writer takes back what it does not hold at once, not
// only after StaleAfter.
func TestEntriesOfALostReadAreTakenBack(t *testing.T) {
	e := newEnv(t)
	cfg := testWriterConfig()
	cfg.Consumer, cfg.StaleAfter = "me", time.Hour
	j, key := e.recordOne("lostread", cfg)
	// Redis delivers the next entry to "me", but the writer never sees it.
	e.deliverUnseen(key, j, "me")
	// Then its connection drops: its blocked read fails.
	if err := e.rdb.Do(e.ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the lost entry recorded and acknowledged", func() bool {
		return e.rdb.XPending(e.ctx, key, DefaultGroup).Val().Count == 0
	})
	if doc, err := e.jobDoc(j.ID); err != nil || doc.State != string(job.Active) {
		t.Fatalf("job document = %+v, %v; want the lost started event applied", doc, err)
	}
}

// recordOne submits one job to q and runs a writer with cfg until the job
// is recorded and its entry acknowledged; it returns the job and q's
// stream key. The writer stops with the test.
func (e *env) recordOne(q string, cfg WriterConfig) (*job.Job, string) {
	e.t.Helper()
	key := queue.EventStreamKey(q)
	j := e.submit(q, "t", 1)[0]
	_, stop := e.startWriter(e.store, cfg)
	e.t.Cleanup(stop)
	waitFor(e.t, 30*time.Second, "the job recorded", func() bool {
		return e.count(e.db, JobsCollection) == 1 && e.rdb.XPending(e.ctx, key, DefaultGroup).Val().Count == 0
	})
	return j, key
}

// deliverUnseen adds j's started event to the stream at key and delivers
// it to consumer in one transaction, so that a writer blocked on the
// stream never sees it.
func (e *env) deliverUnseen(key string, j *job.Job, consumer string) {
	e.t.Helper()
	_, err := e.rdb.TxPipelined(e.ctx, func(p redis.Pipeliner) error {
		p.XAdd(e.ctx, &redis.XAddArgs{Stream: key, Values: []any{"job_id", j.ID, "queue", j.Queue, "type", j.Type,
			"event", "started", "state", "active", "attempt", "1", "worker_id", "w", "error", "",
			"at", strconv.FormatInt(time.Now().UnixMilli(), 10)}})
		p.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: consumer, Streams: []string{key, ">"}, Count: 1, Block: -1})
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// jobDoc reads job id's document.
func (e *env) jobDoc(id string) (jobDoc, error) {
	var doc jobDoc
	err := e.db.Collection(JobsCollection).FindOne(e.ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	return doc, err
}

// The writer copies a job's log lines into the history on its log events:
// all of them, once each, readable after the job left Redis.
func TestLogLinesAreCopied(t *testing.T) {
	e := newEnv(t)
	const q = "logcopy"
	e.startWriter(e.store, testWriterConfig())
	j := e.submit(q, "t.chatty", 1, func(s *job.Spec) { s.MaxAttempts = ptr(1) })[0]
	ls := e.claim(q, 1)
	for b := range 3 {
		lines := make([]queue.LogEntry, 40)
		for i := range lines {
			lines[i] = queue.LogEntry{Level: "info", Message: fmt.Sprintf("line %d", b*40+i+1), Fields: map[string]string{"batch": fmt.Sprint(b)}}
		}
		if _, err := e.q.AppendLogs(e.ctx, q, ls[0], lines); err != nil {
			t.Fatal(err)
		}
	}
	e.complete(q, ls, queue.OutcomeSucceeded, "")
	waitFor(t, 30*time.Second, "every line copied", func() bool { return e.count(e.db, LogsCollection) == 120 })
	// The job leaves Redis (pruned); the history answers.
	if err := e.q.Redis().Del(e.ctx, queue.LogKey(q, j.ID), queue.JobKey(q, j.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Logs(e.ctx, j.ID, 100, 1000)
	if err != nil || len(got) != 20 || got[0].Seq != 101 || got[0].Message != "line 101" || got[19].Fields["batch"] != "2" {
		t.Fatalf("lines after 100: %d %v (first %+v)", len(got), err, got)
	}
}
