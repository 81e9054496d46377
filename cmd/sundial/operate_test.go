package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// kill makes n jobs of type typ in queue q dead with reason why, as a
// worker would, and returns their ids.
func (s *server) kill(t *testing.T, q, typ string, n int, why string) []string {
	t.Helper()
	// The API registers the engine client as a reader before it serves:
	// once it answers, the client may be used directly.
	s.cli(t, "", args("queues")).want(t, exitOK)
	ctx := context.Background()
	var jobs []*job.Job
	for range n {
		spec := job.Spec{Queue: q, Type: typ}
		j, err := spec.Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	if _, err := s.q.Submit(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	leases, err := s.q.Claim(ctx, q, n, "test-worker")
	if err != nil || len(leases) != n {
		t.Fatalf("claim: %d %v", len(leases), err)
	}
	var outs []queue.Outcome
	var ids []string
	for _, l := range leases {
		outs = append(outs, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeDead, Error: why, WorkerID: "test-worker"})
		ids = append(ids, l.Job.ID)
	}
	if _, err := s.q.Complete(ctx, q, outs); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestOperateCommands: jobs list, jobs bulk, queues pause|resume|forget
// and workers against a real API.
func TestOperateCommands(t *testing.T) {
	s := startServer(t)
	s.kill(t, "mail", "email.send", 12, "smtp: 451 try later")
	s.kill(t, "mail", "email.send", 3, "tls handshake")
	s.kill(t, "mail", "report.build", 5, "smtp: 451 try later")
	s.cli(t, "", args("jobs submit --type email.send --queue mail")).want(t, exitOK)

	r := s.cli(t, "", args("jobs list mail --state dead --type email.send --limit 10")).want(t, exitOK, "ID", "email.send", "more: --cursor ")
	if n := strings.Count(r.stdout, "email.send"); n != 10 {
		t.Fatalf("listed %d jobs, want 10:\n%s", n, r.stdout)
	}
	cursor := strings.TrimSpace(strings.SplitN(r.stdout, "more: --cursor ", 2)[1])
	r = s.cli(t, "", args("jobs list mail --state dead --type email.send --cursor "+cursor)).want(t, exitOK)
	if n := strings.Count(r.stdout, "email.send"); n != 5 || strings.Contains(r.stdout, "more:") {
		t.Fatalf("second page:\n%s", r.stdout)
	}
	s.cli(t, "", args("jobs list mail")).want(t, exitOK, "email.send", "normal")
	s.cli(t, "", args("jobs list mail --state finished")).want(t, exitError, "field state")
	s.cli(t, "", args("jobs list")).want(t, exitUsage, "queue name")

	// The on-call recipe: the 12 failed email.send jobs with the smtp error, in one call.
	s.cli(t, "", args("jobs bulk retry mail --type email.send --error-contains smtp --since 1h")).
		want(t, exitOK, "retried 12 jobs of 12 selected in mail")
	s.cli(t, "", args("jobs bulk delete mail")).want(t, exitUsage, "--yes")
	s.cli(t, "", args("jobs bulk move mail --type report.build --to reports")).want(t, exitOK, "moved 5 jobs of 5 selected from mail to reports")
	s.cli(t, "", args("jobs bulk cancel mail --state queued --type email.send --json")).want(t, exitOK, `"count": 13`)
	s.cli(t, "", args("jobs bulk explode mail")).want(t, exitUsage, "unknown action")
	s.cli(t, "", args("jobs bulk retry mail --since yesterday")).want(t, exitUsage, "--since")
	s.cli(t, "", args("jobs bulk delete mail --yes")).want(t, exitOK, "deleted 3 jobs of 3 selected in mail")

	s.cli(t, "", args("queues pause mail")).want(t, exitOK, "paused queue mail")
	s.cli(t, "", args("queues mail --json")).want(t, exitOK, `"paused": true`)
	s.cli(t, "", args("queues resume mail")).want(t, exitOK, "resumed queue mail")
	s.cli(t, "", args("queues forget mail")).want(t, exitError, "conflict")
	s.cli(t, "", args("queues pause fresh")).want(t, exitOK)
	s.cli(t, "", args("queues resume fresh")).want(t, exitOK)
	s.cli(t, "", args("queues forget fresh")).want(t, exitOK, "forgot queue fresh")
	s.cli(t, "", args("queues fresh")).want(t, exitNotFound)

	if err := s.q.Heartbeat(context.Background(), queue.WorkerInfo{ID: "host-1-1", Hostname: "host", PID: 1, Queues: []string{"mail"}, Concurrency: 4,
		StartedAt: time.Now(), LastSeenAt: time.Now(), Types: []string{"email.send"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	s.cli(t, "", args("workers")).want(t, exitOK, "host-1-1", "mail", "email.send", "0/4")
	s.cli(t, "", args("workers --json")).want(t, exitOK, `"id": "host-1-1"`)
}

// TestJobsWait: jobs wait returns once the job ends, with exit 0 when it
// succeeded and 1 when it ended otherwise or --for ran out.
func TestJobsWait(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	r := s.cli(t, "", args("jobs submit --type t --queue w")).want(t, exitOK)
	id := strings.Fields(strings.SplitN(r.stdout, "submitted job ", 2)[1])[0]
	s.cli(t, "", args("jobs wait "+id+" --for 200ms")).want(t, exitError, "still queued")

	out := &logbuf.Buffer{}
	done := make(chan result, 1)
	go func() { done <- s.cliCtx(ctx, t, "", args("jobs wait "+id+" --for 20s"), out) }()
	leases, err := s.q.Claim(ctx, "w", 1, "test-worker")
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := s.q.Complete(ctx, "w", []queue.Outcome{{ID: id, Token: leases[0].Token, Kind: queue.OutcomeSucceeded, Result: []byte(`{"ok":true}`), WorkerID: "test-worker"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		r.want(t, exitOK, "succeeded", `{"ok":true}`)
	case <-time.After(15 * time.Second):
		t.Fatal("jobs wait did not return after the job succeeded")
	}
	dead := s.kill(t, "w", "t", 1, "boom")
	s.cli(t, "", args("jobs wait "+dead[0])).want(t, exitError, "ended dead", "boom")
	s.cli(t, "", args("jobs wait nosuchjob")).want(t, exitNotFound)
}

// TestJobsSignal: a signal for a durable job by id and by key, a
// duplicate, a refusal, bad input; jobs get shows what the job recorded.
func TestJobsSignal(t *testing.T) {
	s := startServer(t)
	ids := s.kill(t, "orders", "order", 1, "x") // a job that exists (dead: ended)
	s.cli(t, "", args("jobs signal "+ids[0]+" shipped")).want(t, exitError, "ended")
	s.cli(t, "", args("queues")).want(t, exitOK)
	spec := job.Spec{Queue: "orders", Type: "order"}
	j, _ := spec.Build(time.Now())
	if _, err := s.q.Submit(context.Background(), []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	s.cli(t, "", []string{"jobs", "signal", j.ID, "shipped", `"ups"`, "--idempotency-key", "k1"}).want(t, exitOK, "delivered (job "+j.ID+")")
	s.cli(t, "", []string{"jobs", "signal", j.ID, "shipped", `"ups"`, "--idempotency-key", "k1"}).want(t, exitOK, "duplicate")
	s.cli(t, "", []string{"jobs", "signal", j.ID, "shipped", `"dhl"`}).want(t, exitError, "signal of this name already")
	s.cli(t, "", []string{"jobs", "signal", j.ID, "shipped", "ups"}).want(t, exitUsage, "not JSON")
	s.cli(t, "", args("jobs signal --queue orders --key order-7 paid")).want(t, exitOK, "pending")
	s.cli(t, "", args("jobs signal --key order-7 paid")).want(t, exitUsage, "--queue")
	s.cli(t, "", args("jobs get "+j.ID)).want(t, exitOK, `Signal:`, `shipped "ups"`)
}
