package queue_test

import (
	"context"
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// In storage format 4 a submit leaves out of the job hash what a reader
// knows without it: the id and queue (in the key), run_at when it equals
// created_at, and every field at the format's default. Readers take them
// back (Get, a claim's lease, a failed attempt's backoff, promotion), and a
// field that differs from its default is written. A client writing format
// 3 (the gate to 4 not yet open) still writes every field.
func TestFormat4WritesCompactJobHashes(t *testing.T) {
	e := newEnv(t) // writes format 4
	rdb := e.srv.Client()
	trace := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	specs := []job.Spec{
		// Every default, as most jobs are submitted.
		{Type: "plain", Payload: json.RawMessage(`{"n":1}`)},
		// The defaults given explicitly: the same hash.
		{Type: "plain", MaxAttempts: ptr(3), TimeoutSeconds: ptr(30), Priority: job.Normal, Backoff: &job.Backoff{BaseSeconds: 5, MaxSeconds: 3600}},
		// Nothing at its default.
		{Type: "full", Priority: job.High, MaxAttempts: ptr(5), TimeoutSeconds: ptr(10),
			Backoff: &job.Backoff{BaseSeconds: 1, MaxSeconds: 60}, DelaySeconds: ptr(2.0), Group: "g", Traceparent: trace, IdempotencyKey: "k"},
		// One field off its default each.
		{Type: "low", Priority: job.Low},
		{Type: "max", Backoff: &job.Backoff{BaseSeconds: 5, MaxSeconds: 7200}},
	}
	jobs := e.submit(t, specs...)
	want := [][]string{
		{"state", "type", "payload", "created_at"},
		{"state", "type", "payload", "created_at"},
		{"state", "type", "payload", "created_at", "priority", "max_attempts", "timeout", "backoff_base", "backoff_max", "run_at",
			"idempotency_key", "group", "traceparent"},
		{"state", "type", "payload", "created_at", "priority"},
		{"state", "type", "payload", "created_at", "backoff_max"},
	}
	for i, j := range jobs {
		fields := rdb.HKeys(e.ctx, queue.JobKey("default", j.ID)).Val()
		slices.Sort(fields)
		w := slices.Clone(want[i])
		slices.Sort(w)
		if !slices.Equal(fields, w) {
			t.Errorf("job %d (%s) hash fields %v, want %v", i, j.Type, fields, w)
		}
		got := e.get(t, j.ID)
		if got.ID != j.ID || got.Queue != "default" || got.Priority != j.Priority || got.MaxAttempts != j.MaxAttempts ||
			got.TimeoutSeconds != j.TimeoutSeconds || got.Backoff != j.Backoff || !got.RunAt.Equal(j.RunAt) ||
			!got.CreatedAt.Equal(j.CreatedAt) || got.Attempt != 0 || got.Group != j.Group || got.Traceparent != j.Traceparent ||
			got.IdempotencyKey != j.IdempotencyKey || string(got.Payload) != string(j.Payload) {
			t.Errorf("job %d read back as %+v, submitted %+v", i, got, j)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// A claim's leases carry the defaults (high first, then normal, then low).
	leases := e.claim(t, "default", 10)
	if len(leases) != 4 {
		t.Fatalf("claimed %d, want the 4 due jobs", len(leases))
	}
	for _, l := range leases {
		i := slices.IndexFunc(jobs, func(j *job.Job) bool { return j.ID == l.Job.ID })
		j := jobs[i]
		if l.Job.Attempt != 1 || l.Job.MaxAttempts != j.MaxAttempts || l.Job.TimeoutSeconds != j.TimeoutSeconds ||
			l.Job.Priority != j.Priority || !l.Job.RunAt.Equal(j.RunAt) || !l.Job.CreatedAt.Equal(j.CreatedAt) {
			t.Errorf("lease of job %d: %+v, submitted %+v", i, l.Job, j)
		}
	}
	// A failed attempt of a job at every default backs off by the default
	// (5 s at most for the first retry) and counts against 3 attempts.
	first := leases[0]
	if first.Job.ID != jobs[0].ID {
		t.Fatalf("first lease %s, want job 0", first.Job.ID)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		st := e.complete(t, "default", queue.Outcome{ID: first.Job.ID, Token: first.Token, Kind: queue.OutcomeFailed, Error: "boom", WorkerID: "w1"})
		got := e.get(t, first.Job.ID)
		if attempt == 3 {
			if st[0] != queue.StatusDead || got.State != job.Dead {
				t.Fatalf("after attempt 3 of 3: %v, state %s; want dead", st, got.State)
			}
			break
		}
		if got.State != job.Scheduled || got.RunAt.After(e.clock.Now().Add(time.Duration(5<<(attempt-1))*time.Second)) {
			t.Fatalf("after attempt %d: state %s, run_at %v; want scheduled within the default backoff", attempt, got.State, got.RunAt)
		}
		e.clock.Advance(time.Minute)
		if _, _, err := e.q.Promote(e.ctx, "default", 100); err != nil {
			t.Fatal(err)
		}
		next, err := e.q.Claim(e.ctx, "default", 1, "w1", "plain") // not the delayed "full", due now
		if err != nil || len(next) != 1 || next[0].Job.ID != first.Job.ID || next[0].Job.Attempt != attempt+1 {
			t.Fatalf("claim after attempt %d = %+v, %v", attempt, next, err)
		}
		first = next[0]
	}

	// Before the gate to format 4 opened, every field is written.
	queue.SetWriteFormat(e.q, 3)
	old := e.submit(t, job.Spec{Type: "plain"})[0]
	h := rdb.HGetAll(e.ctx, queue.JobKey("default", old.ID)).Val()
	if h["id"] != old.ID || h["queue"] != "default" || h["max_attempts"] != "3" || h["priority"] != "normal" || h["run_at"] != h["created_at"] {
		t.Fatalf("a format-3 submit wrote %v", h)
	}
}

// scripts/expand-job-hashes.sh, the step of a rollback past format 4
// (docs/engine.md), writes on each compact job hash exactly the fields a
// submit in format 3 writes, whatever the job, and changes nothing the
// second time.
func TestExpandJobHashesScriptWritesFormat3Hashes(t *testing.T) {
	e := newEnv(t)
	rdb := e.srv.Client()
	three := queue.New(rdb, queue.Options{Now: e.clock.Now})
	queue.SetWriteFormat(three, 3)
	specs := []job.Spec{
		{Type: "plain", Payload: json.RawMessage(`{"n":1}`)},
		{Type: "full", Queue: "other", Priority: job.High, MaxAttempts: ptr(5), TimeoutSeconds: ptr(10),
			Backoff: &job.Backoff{BaseSeconds: 1, MaxSeconds: 60}, DelaySeconds: ptr(2.0), Group: "g"},
		{Type: "low", Priority: job.Low},
	}
	var compact, full []*job.Job
	for _, s := range specs {
		compact = append(compact, e.submit(t, s)...)
		j := e.build(t, s)
		if _, err := three.Submit(e.ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
		full = append(full, j)
	}
	// A job that ran and succeeded: its attempt fields are the run's.
	l := e.claim(t, "default", 1)
	e.complete(t, "default", queue.Outcome{ID: l[0].Job.ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"})

	expand := func() string {
		host, port, _ := strings.Cut(e.srv.Addr(), ":")
		out, err := exec.Command("bash", "../../scripts/expand-job-hashes.sh", "-h", host, "-p", port).CombinedOutput()
		if err != nil {
			t.Fatalf("expand-job-hashes.sh: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := expand(); out != "expanded 3 job hashes" {
		t.Fatalf("first run said %q, want 3 expanded (the format-3 hashes left alone)", out)
	}
	for i := range specs {
		a := rdb.HGetAll(e.ctx, queue.JobKey(compact[i].Queue, compact[i].ID)).Val()
		b := rdb.HGetAll(e.ctx, queue.JobKey(full[i].Queue, full[i].ID)).Val()
		if a["id"] != compact[i].ID || a["queue"] != compact[i].Queue {
			t.Fatalf("job %d expanded with id %q queue %q", i, a["id"], a["queue"])
		}
		if l[0].Job.ID == compact[i].ID {
			if a["state"] != "succeeded" || a["attempt"] != "1" || a["worker_id"] != "w1" {
				t.Fatalf("the finished job's hash after expanding: %v", a)
			}
			continue
		}
		delete(a, "id")
		delete(b, "id")
		if !maps.Equal(a, b) {
			t.Errorf("job %d (%s): expanded %v, format 3 wrote %v", i, specs[i].Type, a, b)
		}
	}
	if out := expand(); out != "expanded 0 job hashes" {
		t.Fatalf("second run said %q, want nothing expanded", out)
	}
}

// A client that never registered (a producer using the library) follows
// the marker: in a new deployment its first submit moves the marker to the
// newest format and is compact; while a live reader lacks the format it
// writes every field, and once that reader is gone it moves the marker
// itself and writes the newest format when the move settled. Not parallel:
// it shortens the package's registration timing.
func TestUnregisteredClientFollowsTheMarker(t *testing.T) {
	ctx := context.Background()
	compact := func(rdb *redis.Client, q *queue.Client) bool {
		t.Helper()
		j, _ := (&job.Spec{Type: "t"}).Build(time.Now())
		if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
		return rdb.HExists(ctx, queue.JobKey("default", j.ID), "id").Val() == false
	}

	rdb, q := gateRedis(t)
	if !compact(rdb, q) || q.Writing() != queue.WriteFormat {
		t.Fatalf("the first submit on a new Redis wrote every field (writes %d)", q.Writing())
	}
	if got := rdb.HGet(ctx, formatKey, "format").Val(); got != strconv.Itoa(queue.WriteFormat) {
		t.Fatalf("marker %q after the first submit", got)
	}

	rdb, q = gateRedis(t)
	old := olderRelease(ctx, rdb, "old", "[1,2,3]")
	old(true)
	for range 5 {
		if compact(rdb, q) {
			t.Fatal("a compact job hash while a reader of formats 1 to 3 is alive")
		}
		time.Sleep(60 * time.Millisecond) // past a renewal interval: the client looks again
	}
	old(false)
	queuetest.Eventually(t, 10*time.Second, "the client to write compact job hashes", func() bool { return compact(rdb, q) })
}
