package sundial_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
)

// A program that submits a job and runs it: a Runner (worker and poller in
// one) and a Client over the same Redis.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr}) // e.g. "127.0.0.1:6379"

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"greetings"}})
	sundial.HandleJSON(r, "greet", func(ctx context.Context, name string) (any, error) {
		return "hello " + name, nil
	})
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	sub, err := c.Submit(ctx, sundial.Job{Type: "greet", Queue: "greetings", Payload: "Ada"})
	if err != nil {
		panic(err)
	}
	done, err := c.Wait(ctx, sub.Job.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State, string(done.Result))
	// Output: succeeded "hello Ada"
}

// Typed payloads: HandleJSON decodes each job's JSON payload into the
// handler's parameter type; JobFrom gives the rest of the job.
func ExampleHandleJSON() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})

	type Email struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
	}
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"emails"}})
	sundial.HandleJSON(r, "email.send", func(ctx context.Context, e Email) (any, error) {
		j := sundial.JobFrom(ctx)
		if j.Attempt < 2 {
			return nil, errors.New("smtp: try again") // retried with backoff
		}
		return map[string]any{"to": e.To, "attempt": j.Attempt}, nil
	})
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	sub, err := c.Submit(ctx, sundial.Job{
		Type:    "email.send",
		Queue:   "emails",
		Payload: Email{To: "ada@example.com", Subject: "Welcome"},
		Backoff: &sundial.Backoff{BaseSeconds: 0.05, MaxSeconds: 0.05},
	})
	if err != nil {
		panic(err)
	}
	done, _ := c.Wait(ctx, sub.Job.ID)
	fmt.Println(done.State, string(done.Result), done.LastError)
	// Output: succeeded {"attempt":2,"to":"ada@example.com"} smtp: try again
}

// Jobs that wait for others: in one SubmitMany call (one queue, all or
// nothing) a job names an earlier one as "#n". Each report runs only once
// the export succeeded.
func ExampleClient_SubmitMany() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"pipeline"}, Concurrency: 1})
	r.HandleFunc("export", func(ctx context.Context, j *sundial.Record) (any, error) { return "rows.csv", nil })
	r.HandleFunc("report", func(ctx context.Context, j *sundial.Record) (any, error) { return "report.pdf", nil })

	c := sundial.NewClient(rdb)
	subs, err := c.SubmitMany(ctx, []sundial.Job{
		{Type: "export", Queue: "pipeline"},
		{Type: "report", Queue: "pipeline", DependsOn: []string{"#0"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("before any worker runs:", subs[0].Job.State, subs[1].Job.State)

	go r.Run(ctx)
	report, _ := c.Wait(ctx, subs[1].Job.ID)
	export, _ := c.Get(ctx, subs[0].Job.ID)
	fmt.Println("export", export.State, "at", !export.FinishedAt.After(*report.StartedAt))
	fmt.Println("report", report.State)
	// Output:
	// before any worker runs: queued waiting
	// export succeeded at true
	// report succeeded
}

// Submit options: a priority, a delay, fewer attempts and an idempotency
// key, so that a repeated submit (a retried HTTP request, say) creates
// nothing new.
func ExampleClient_Submit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	c := sundial.NewClient(rdb)

	j := sundial.Job{
		Type:           "invoice.send",
		Queue:          "billing",
		Payload:        map[string]int{"invoice": 1042},
		Priority:       sundial.High,
		Delay:          time.Hour,
		MaxAttempts:    5,
		IdempotencyKey: "invoice-1042",
	}
	first, err := c.Submit(ctx, j)
	if err != nil {
		panic(err)
	}
	again, _ := c.Submit(ctx, j)
	fmt.Println(first.Job.State, first.Job.Priority, first.Job.MaxAttempts)
	fmt.Println("duplicate:", again.Duplicate, again.Job.ID == first.Job.ID)

	_, err = c.Submit(ctx, sundial.Job{Type: "invoice.send", Priority: "urgent"})
	fmt.Println(err)
	// Output:
	// scheduled high 5
	// duplicate: true true
	// priority must be one of high, normal, low
}

// QueueInfo costs one round trip: a cheap health check of one queue.
func ExampleClient_QueueInfo() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	c := sundial.NewClient(rdb)

	for range 3 {
		if _, err := c.Submit(ctx, sundial.Job{Type: "thumbnail", Queue: "images", Priority: sundial.Low}); err != nil {
			panic(err)
		}
	}
	sub, _ := c.Submit(ctx, sundial.Job{Type: "thumbnail", Queue: "images"})
	if _, err := c.Cancel(ctx, sub.Job.ID); err != nil {
		panic(err)
	}
	info, err := c.QueueInfo(ctx, "images")
	if err != nil {
		panic(err)
	}
	fmt.Println("queued:", info.Queued[sundial.Low], info.Queued[sundial.Normal], "submitted:", info.Submitted)

	_, err = c.Cancel(ctx, sub.Job.ID)
	fmt.Println(errors.Is(err, sundial.ErrConflict))
	// Output:
	// queued: 3 0 submitted: 4
	// true
}

// WelcomeEmail is a typed job: its Kind names its type, so a submit and its
// handler cannot disagree on it.
type WelcomeEmail struct {
	To string `json:"to"`
}

func (WelcomeEmail) Kind() string { return "email.welcome" }

// Typed jobs: Handle[WelcomeEmail] registers the handler for the type's
// Kind, with defaults that any submit of the type takes (here its queue and
// attempts), and Submit takes a WelcomeEmail as it is.
func ExampleHandle() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"welcome"}})
	sundial.Handle(r, func(ctx context.Context, e WelcomeEmail) (any, error) {
		return "sent to " + e.To, nil
	}, sundial.Defaults{Queue: "welcome", MaxAttempts: 7})
	if err := r.DeclareDefaults(ctx); err != nil { // Run does it too; here before the submit
		panic(err)
	}
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	sub, err := c.Submit(ctx, WelcomeEmail{To: "ada@example.com"})
	if err != nil {
		panic(err)
	}
	done, _ := c.Wait(ctx, sub.Job.ID)
	fmt.Println(done.Type, done.Queue, done.MaxAttempts, done.State, string(done.Result))
	// Output: email.welcome welcome 7 succeeded "sent to ada@example.com"
}

// A handler says what happened beyond success and failure: Snooze runs the
// job again later without spending an attempt, Cancel ends it cancelled
// (not dead), RetryAfter picks the retry's delay (a 429's Retry-After).
func ExampleSnooze() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"outcomes"}})
	r.HandleFunc("report.ready", func(ctx context.Context, j *sundial.Record) (any, error) {
		if j.Attempt == 1 {
			return nil, sundial.Snooze(10 * time.Millisecond) // not ready yet
		}
		return "ready", nil
	})
	r.HandleFunc("order.ship", func(ctx context.Context, j *sundial.Record) (any, error) {
		return nil, sundial.Cancel(errors.New("order was deleted"))
	})
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	ready, _ := c.Submit(ctx, sundial.Job{Type: "report.ready", Queue: "outcomes", MaxAttempts: 1})
	ship, _ := c.Submit(ctx, sundial.Job{Type: "order.ship", Queue: "outcomes"})
	a, _ := c.Wait(ctx, ready.Job.ID)
	b, _ := c.Wait(ctx, ship.Job.ID)
	fmt.Println(a.State, a.Attempt, a.MaxAttempts)
	fmt.Println(b.State, b.LastError)
	// Output:
	// succeeded 2 2
	// cancelled order was deleted
}

// Submit middleware sees every job before it is stored: here it stamps the
// tenant's group on each job and refuses jobs for a queue nobody serves.
func ExampleClient_UseSubmit() {
	ctx := context.Background()
	c := sundial.NewClient(redis.NewClient(&redis.Options{Addr: redisAddr}))
	c.UseSubmit(func(ctx context.Context, j *sundial.Job) error {
		if j.Queue == "legacy" {
			return errors.New("queue legacy is retired")
		}
		j.Group = "tenant-42"
		return nil
	})
	sub, _ := c.Submit(ctx, sundial.Job{Type: "report.build", Queue: "reports"})
	_, err := c.Submit(ctx, sundial.Job{Type: "report.build", Queue: "legacy"})
	fmt.Println(sub.Job.Group)
	fmt.Println(err)
	// Output:
	// tenant-42
	// queue legacy is retired
}

// Subscribe follows a job's events as they happen; an event's ID resumes a
// subscription after it (here from the oldest event the stream holds).
func ExampleClient_Subscribe() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"follow"}})
	r.HandleFunc("resize", func(ctx context.Context, j *sundial.Record) (any, error) { return "ok", nil })
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	sub, _ := c.Submit(ctx, sundial.Job{Type: "resize", Queue: "follow"})
	for ev, err := range c.Subscribe(ctx, sundial.SubscribeOptions{JobID: sub.Job.ID, After: "0"}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(ev.Event, ev.State)
		if ev.State.Final() {
			break
		}
	}
	// Output:
	// submitted queued
	// started active
	// succeeded succeeded
}

// AfterAttempt hears every attempt's end once it is stored: a hook for
// metrics, audit logs or alerts beside the handlers.
func ExampleRunnerConfig_afterAttempt() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	ended := make(chan sundial.AttemptEnd, 4)
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"hooks"}, AfterAttempt: func(e sundial.AttemptEnd) { ended <- e }})
	r.HandleFunc("charge", func(ctx context.Context, j *sundial.Record) (any, error) {
		return nil, sundial.NoRetry(errors.New("card declined"))
	})
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	if _, err := c.Submit(ctx, sundial.Job{Type: "charge", Queue: "hooks"}); err != nil {
		panic(err)
	}
	e := <-ended
	fmt.Println(e.Job.Type, e.Outcome, e.State, e.Error)
	// Output: charge dead dead card declined
}

// A queue's uniqueness rules: here an idempotency key names its job only
// until that job ends, so a sync can be asked for again once the last one
// finished, but never twice at once.
func ExampleClient_SetUniqueness() {
	ctx := context.Background()
	c := sundial.NewClient(redis.NewClient(&redis.Options{Addr: redisAddr}))
	if err := c.SetUniqueness(ctx, "sync", sundial.Uniqueness{UntilFinished: true}); err != nil {
		panic(err)
	}
	j := sundial.Job{Type: "account.sync", Queue: "sync", IdempotencyKey: "account-7"}
	first, _ := c.Submit(ctx, j)
	again, _ := c.Submit(ctx, j)
	fmt.Println("while the first waits:", again.Duplicate)
	if _, err := c.Cancel(ctx, first.Job.ID); err != nil {
		panic(err)
	}
	later, _ := c.Submit(ctx, j)
	fmt.Println("once it ended:", later.Duplicate, later.Job.ID != first.Job.ID)
	// Output:
	// while the first waits: true
	// once it ended: false true
}

// ConfigFromEnv reads a Runner's settings from the SUNDIAL_* variables the
// services read, with their checks, and opens the Redis they name.
func ExampleConfigFromEnv() {
	os.Setenv("SUNDIAL_REDIS_URL", "redis://"+redisAddr)
	os.Setenv("SUNDIAL_QUEUES", "critical:5,default")
	os.Setenv("SUNDIAL_CONCURRENCY", "20")
	defer func() {
		for _, v := range []string{"SUNDIAL_REDIS_URL", "SUNDIAL_QUEUES", "SUNDIAL_CONCURRENCY"} {
			os.Unsetenv(v)
		}
	}()
	cfg, rdb, err := sundial.ConfigFromEnv()
	if err != nil {
		panic(err)
	}
	defer rdb.Close()
	cfg.QueueSettings["default"] = sundial.QueueSettings{MaxConcurrency: 5} // default may take at most 5 of the 20 slots
	r := sundial.NewRunner(rdb, cfg)
	_ = r
	fmt.Println(cfg.Queues, cfg.QueueSettings["critical"].Weight, cfg.Concurrency)
	// Output: [critical default] 5 20
}

// A workflow: a DAG of named steps in any queues, submitted in one call.
// Each step starts once the steps it comes After succeeded; a step may
// say it runs even when one of them failed. WithID makes a repeated
// Submit store nothing twice.
func ExampleWorkflow() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"nightly-etl", "nightly-reports"}})
	r.HandleFunc("extract", func(ctx context.Context, j *sundial.Record) (any, error) { return "rows", nil })
	r.HandleFunc("transform", func(ctx context.Context, j *sundial.Record) (any, error) { return "table", nil })
	r.HandleFunc("report", func(ctx context.Context, j *sundial.Record) (any, error) { return "report.pdf", nil })
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	wf := sundial.NewWorkflow(sundial.WithID("nightly-2026-11-28"))
	extract := wf.Step("extract", sundial.Job{Type: "extract", Queue: "nightly-etl"})
	transform := wf.Step("transform", sundial.Job{Type: "transform", Queue: "nightly-etl"}, sundial.After(extract))
	wf.Step("report", sundial.Job{Type: "report", Queue: "nightly-reports"}, sundial.After(transform))
	run, err := wf.Submit(ctx, c)
	if err != nil {
		panic(err)
	}
	again, _ := wf.Submit(ctx, c)
	fmt.Println("again:", again.Steps["report"].Duplicate, again.Steps["report"].Job.ID == run.Steps["report"].Job.ID)

	for _, name := range []string{"extract", "transform", "report"} {
		done, _ := c.Wait(ctx, run.Steps[name].Job.ID)
		fmt.Println(name, done.Queue, done.State, string(done.Result))
	}
	// Output:
	// again: true true
	// extract nightly-etl succeeded "rows"
	// transform nightly-etl succeeded "table"
	// report nightly-reports succeeded "report.pdf"
}

// A batch of jobs in two queues and a callback that sums their results
// once every one of them ended (fan-in).
func ExampleClient_SubmitBatch() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	c := sundial.NewClient(rdb)

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"squares-a", "squares-b", "squares-sum"}})
	sundial.HandleJSON(r, "square", func(ctx context.Context, n int) (any, error) { return n * n, nil })
	r.HandleFunc("sum", func(ctx context.Context, j *sundial.Record) (any, error) {
		var p struct{ Batch string }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, err
		}
		sum := 0
		for res, err := range c.BatchResults(ctx, p.Batch) {
			if err != nil {
				return nil, err
			}
			var n int
			_ = json.Unmarshal(res.Result, &n)
			sum += n
		}
		return sum, nil
	})
	go r.Run(ctx)

	info, err := c.SubmitBatch(ctx, sundial.Batch{
		Jobs: []sundial.Args{
			sundial.Job{Type: "square", Queue: "squares-a", Payload: 1},
			sundial.Job{Type: "square", Queue: "squares-b", Payload: 2},
			sundial.Job{Type: "square", Queue: "squares-a", Payload: 3},
		},
		OnComplete: sundial.Job{Type: "sum", Queue: "squares-sum"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Total, info.Sealed)
	// The poller fires the callback within about a second of the last end.
	tick, deadline := time.NewTicker(10*time.Millisecond), time.After(10*time.Second)
	defer tick.Stop()
	for info.OnComplete.JobID == "" {
		select {
		case <-tick.C:
		case <-deadline:
			panic("no callback")
		}
		info, _ = c.GetBatch(ctx, info.ID)
	}
	done, _ := c.Wait(ctx, info.OnComplete.JobID)
	fmt.Println(done.State, string(done.Result), done.Batch == info.ID, info.Counts.Succeeded)
	// Output:
	// 3 true
	// succeeded 14 true 3
}
