package sundialtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/worker"
	"github.com/sundialhq/sundial/sundialtest"
)

// Invoice is the typed job of these tests.
type Invoice struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

func (Invoice) Kind() string { return "invoice.send" }

// sendInvoice is a handler under test: it reports progress, refuses bad
// input for good, asks to wait for a rate limit, and submits a receipt.
func sendInvoice(c *sundial.Client) func(ctx context.Context, inv Invoice) (any, error) {
	return func(ctx context.Context, inv Invoice) (any, error) {
		switch {
		case inv.Cents <= 0:
			return nil, sundial.NoRetry(errors.New("nothing to bill"))
		case inv.Customer == "busy":
			return nil, sundial.RetryAfter(errors.New("429"), 30*time.Second)
		case inv.Customer == "gone":
			return nil, sundial.Cancel(errors.New("customer deleted"))
		}
		if err := sundial.Progress(ctx, 50, "rendered"); err != nil {
			return nil, err
		}
		if c != nil {
			if _, err := c.Submit(ctx, sundial.Job{Type: "receipt.mail", Payload: inv, Queue: "mail"}); err != nil {
				return nil, err
			}
		}
		lease, _ := sundial.LeaseOf(ctx)
		return map[string]any{"job": sundial.JobFrom(ctx).ID, "token": lease.Token}, nil
	}
}

func TestWorkRunsAHandlerWithoutRedis(t *testing.T) {
	ctx := context.Background()
	h := sendInvoice(nil)
	ok := sundialtest.WorkArgs(ctx, t, h, Invoice{Customer: "ada", Cents: 100}, sundialtest.WorkOptions{Token: "tok-1", Attempt: 2})
	if ok.Outcome != sundialtest.Succeeded || ok.Job.Attempt != 2 || len(ok.Progress) != 1 || ok.Progress[0].Percent != 50 {
		t.Fatalf("success: %+v", ok)
	}
	if v := ok.Value.(map[string]any); v["job"] != ok.Job.ID || v["token"] != "tok-1" {
		t.Fatalf("JobFrom and LeaseOf in the handler gave %v", v)
	}
	for _, c := range []struct {
		inv   Invoice
		want  sundialtest.Outcome
		delay time.Duration
	}{
		{Invoice{Customer: "ada"}, sundialtest.Dead, 0},
		{Invoice{Customer: "busy", Cents: 1}, sundialtest.Failed, 30 * time.Second},
		{Invoice{Customer: "gone", Cents: 1}, sundialtest.Cancelled, 0},
	} {
		r := sundialtest.WorkArgs(ctx, t, h, c.inv)
		if r.Outcome != c.want || r.Delay != c.delay {
			t.Errorf("%+v: outcome %s delay %v, want %s %v", c.inv, r.Outcome, r.Delay, c.want, c.delay)
		}
	}
	lost := sundialtest.WorkArgs(ctx, t, h, Invoice{Customer: "ada", Cents: 1}, sundialtest.WorkOptions{ProgressErr: worker.ErrLeaseLost})
	if lost.Outcome != sundialtest.Failed || !errors.Is(lost.Err, worker.ErrLeaseLost) {
		t.Fatalf("a lost lease: %+v", lost)
	}
	snooze := sundialtest.Work(ctx, t, sundial.HandlerFunc(func(context.Context, *sundial.Record) (any, error) {
		return nil, sundial.Snooze(time.Minute)
	}), sundial.Job{Type: "later"})
	if snooze.Outcome != sundialtest.Snoozed || snooze.Delay != time.Minute {
		t.Fatalf("snooze: %+v", snooze)
	}
}

// TestDrainAndRequireSubmitted: against a private redis-server, Drain runs
// every job of the queue, delayed ones and retries on a clock that jumps,
// and the assertions see what the handler submitted.
func TestDrainAndRequireSubmitted(t *testing.T) {
	ctx := context.Background()
	rdb := queuetest.Start(t).Client()
	c := sundial.NewClient(rdb)
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"billing"}})
	sundial.Handle(r, sendInvoice(c))
	attempts := map[string]int{}
	r.HandleFunc("flaky", func(_ context.Context, j *sundial.Record) (any, error) {
		attempts[j.ID]++
		if j.Attempt < 3 {
			return nil, errors.New("not yet")
		}
		return "done", nil
	})
	hour := &sundial.Backoff{BaseSeconds: 3600, MaxSeconds: 3600}
	for _, j := range []sundial.Job{
		{Payload: Invoice{Customer: "ada", Cents: 100}, Queue: "billing"},
		{Payload: Invoice{Customer: "bob", Cents: 250}, Queue: "billing", Delay: 24 * time.Hour},
		{Type: "flaky", Queue: "billing", Backoff: hour, MaxAttempts: 3},
	} {
		if _, err := c.Submit(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	sundialtest.RequireNotSubmitted(ctx, t, c, "receipt.mail", nil)

	now := sundialtest.Drain(ctx, t, r, "billing", sundialtest.DrainOptions{Now: true})
	if len(now) != 2 || now[0].Outcome != sundialtest.Succeeded || now[1].State != sundial.Scheduled {
		t.Fatalf("drain of what is due now: %+v", now)
	}
	all := sundialtest.Drain(ctx, t, r, "billing")
	var outcomes []string
	for _, a := range all {
		outcomes = append(outcomes, a.Job.Type+":"+string(a.Outcome))
	}
	// The flaky job's retries (an hour apart) and the invoice due tomorrow,
	// in the order they come due.
	if got := strings.Join(outcomes, " "); got != "flaky:failed flaky:succeeded invoice.send:succeeded" {
		t.Fatalf("drain with the clock jumping: %s", got)
	}
	mails := sundialtest.RequireSubmitted(ctx, t, c, "receipt.mail", func(j *sundial.Record) bool { return j.Queue == "mail" })
	if len(mails) != 2 {
		t.Fatalf("receipts submitted: %d, want 2", len(mails))
	}
	if invs := sundialtest.Submitted[Invoice](ctx, t, c); len(invs) != 2 || invs[1].Customer != "bob" {
		t.Fatalf("invoices submitted: %+v", invs)
	}
}

// Drain does the poller's part too: a batch's callback fires once its
// members ended (and runs when its queue is drained), and a workflow step
// waiting on a step of another queue is released once that step ended.
func TestDrainRunsCallbacksAndCrossQueueSteps(t *testing.T) {
	ctx := context.Background()
	rdb := queuetest.Start(t).Client()
	c := sundial.NewClient(rdb)
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"etl", "reports"}})
	r.HandleFunc("part", func(context.Context, *sundial.Record) (any, error) { return "ok", nil })
	r.HandleFunc("all.done", func(context.Context, *sundial.Record) (any, error) { return "notified", nil })
	r.HandleFunc("extract", func(context.Context, *sundial.Record) (any, error) { return "rows", nil })
	r.HandleFunc("report", func(context.Context, *sundial.Record) (any, error) { return "sent", nil })

	if _, err := c.SubmitBatch(ctx, sundial.Batch{ID: "parts", Jobs: []sundial.Args{
		sundial.Job{Type: "part", Queue: "etl"}, sundial.Job{Type: "part", Queue: "etl"},
	}, OnComplete: sundial.Job{Type: "all.done", Queue: "reports"}}); err != nil {
		t.Fatal(err)
	}
	wf := sundial.NewWorkflow()
	extract := wf.Step("extract", sundial.Job{Type: "extract", Queue: "etl"})
	wf.Step("report", sundial.Job{Type: "report", Queue: "reports"}, sundial.After(extract))
	if _, err := wf.Submit(ctx, c); err != nil {
		t.Fatal(err)
	}

	types := func(as []sundialtest.Attempt) string {
		var out []string
		for _, a := range as {
			out = append(out, a.Job.Type+":"+string(a.State))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := types(sundialtest.Drain(ctx, t, r, "etl")); got != "extract:succeeded part:succeeded part:succeeded" {
		t.Fatalf("etl: %s", got)
	}
	if got := types(sundialtest.Drain(ctx, t, r, "reports")); got != "all.done:succeeded report:succeeded" {
		t.Fatalf("reports: %s", got)
	}
}
