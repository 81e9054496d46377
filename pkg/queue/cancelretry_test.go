package queue_test

import (
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestCancelThenRetryWaitsForTheLease: an operator cancels a running job
// and retries it at once. The worker that runs it hears only at its next
// renewal, so the retried job must not be claimable while the cancelled
// attempt's lease could still be trusted: it is scheduled for that lease's
// expiry, not queued.
func TestCancelThenRetryWaitsForTheLease(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Queue: "cr", Type: "t"})[0]
	l := e.claim(t, "cr", 1)[0]
	e.clock.Advance(2 * time.Second) // the lease (11 s) has 9 s left
	if _, err := e.q.Cancel(e.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.q.Retry(e.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != job.Scheduled {
		t.Fatalf("retried right after its cancel: %s, want scheduled until the cancelled lease expires", got.State)
	}
	if n, _, _ := e.q.Promote(e.ctx, "cr", 100); n != 0 {
		t.Fatalf("promoted %d before the lease's expiry", n)
	}
	if ls := e.claim(t, "cr", 1); len(ls) != 0 {
		t.Fatalf("a second worker claimed the job while the first may still run it (token %s)", l.Token)
	}
	// At the lease's expiry it runs again.
	e.clock.Advance(9*time.Second + time.Millisecond)
	if n, _, _ := e.q.Promote(e.ctx, "cr", 100); n != 1 {
		t.Fatalf("promoted %d at the lease's expiry, want 1", n)
	}
	if ls := e.claim(t, "cr", 1); len(ls) != 1 {
		t.Fatal("the retried job was not claimable after the cancelled lease expired")
	}
}

// TestCancelThenRetryAcknowledged: once the cancelled holder hears (its
// renewal refused), the retried job is due at once.
func TestCancelThenRetryAcknowledged(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Queue: "ca", Type: "t"})[0]
	l := e.claim(t, "ca", 1)[0]
	if _, err := e.q.Cancel(e.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := e.q.Retry(e.ctx, j.ID); err != nil || got.State != job.Scheduled {
		t.Fatalf("retry: %v %v, want scheduled", got, err)
	}
	held, err := e.q.Extend(e.ctx, "ca", []queue.Lease{l})
	if err != nil || held[0] {
		t.Fatalf("the cancelled holder's renewal: %v %v, want refused", held, err)
	}
	if n, _, _ := e.q.Promote(e.ctx, "ca", 100); n != 1 {
		t.Fatalf("promoted %d after the holder acknowledged, want 1", n)
	}
	if ls := e.claim(t, "ca", 1); len(ls) != 1 || ls[0].Token == l.Token {
		t.Fatal("the retried job was not claimable once its cancelled holder acknowledged")
	}
	// A job cancelled while queued (no lease) is queued again at once.
	k := e.submit(t, job.Spec{Queue: "ca", Type: "t"})[0]
	if _, err := e.q.Cancel(e.ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := e.q.Retry(e.ctx, k.ID); err != nil || got.State != job.Queued {
		t.Fatalf("retry of a job cancelled while queued: %v %v, want queued", got, err)
	}
}

// The same through a batch: CancelBatch then RetryBatch of a batch whose
// member runs leaves the member waiting for its cancelled lease.
func TestBatchCancelThenRetryWaitsForTheLease(t *testing.T) {
	e := newEnv(t)
	members := e.newBatch(t, "bcr", 1, []string{"bcrq"}, false, true, false)
	l := e.claim(t, "bcrq", 1)
	if len(l) != 1 {
		t.Fatal("the member was not claimed")
	}
	if _, err := e.q.CancelBatch(e.ctx, "bcr"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.RetryBatch(e.ctx, "bcr"); err != nil {
		t.Fatal(err)
	}
	wantState(t, e.get(t, members[0].ID), job.Scheduled)
	if ls := e.claim(t, "bcrq", 1); len(ls) != 0 {
		t.Fatal("a second worker claimed the member while its cancelled attempt may still run")
	}
}
