// Package sundial is the Go entry point to Sundial, a distributed job
// scheduler on Redis: a Client submits and inspects jobs, and a Runner runs
// them. Everything here is a thin layer over the building blocks in pkg/
// (pkg/queue, the engine; pkg/worker; pkg/poller; pkg/schedule), which stay
// available for whoever needs more control.
//
// # Submitting jobs
//
// A Client needs only a go-redis client (standalone, Sentinel or Cluster):
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	c := sundial.NewClient(rdb)
//	sub, err := c.Submit(ctx, sundial.Job{
//		Type:    "email.send",
//		Payload: Email{To: "ada@example.com"}, // any value; sent as JSON
//	})
//
// A Job's optional fields choose its queue, Priority, when it runs (RunAt
// or Delay), how often it is tried (MaxAttempts, Backoff), its Timeout, an
// IdempotencyKey (the same key in the same queue within 24 hours submits
// nothing new; SetUniqueness changes the window) and the jobs it waits for
// (DependsOn, in any queue). SubmitMany stores
// several jobs of one queue at once, all or nothing; a job of the batch may
// depend on an earlier one as "#0", "#1"…
//
// A Workflow is a DAG of named steps in any queues, validated whole and
// submitted in one call; a step runs once the steps it comes After
// succeeded (docs/workflows.md).
//
// Get, Cancel and Retry act on a job by id; QueueInfo tells how a queue is
// doing in one round trip to Redis.
//
// # Running jobs
//
// A Runner is a worker: it claims jobs of its queues in priority order and
// runs the handler registered for each job's type. By default it also does
// the poller's duties in the same process (making delayed and retried jobs
// due, bringing back jobs whose worker died, pruning, firing recurring
// schedules), so a small deployment needs nothing else:
//
//	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"emails"}})
//	sundial.HandleJSON(r, "email.send", func(ctx context.Context, e Email) (any, error) {
//		return nil, send(ctx, e) // an error retries with backoff
//	})
//	err := r.Run(ctx) // until ctx ends, then a graceful shutdown
//
// Handlers may run more than once for one job (a worker killed mid-job is
// retried), so they should be idempotent. An error wrapped with NoRetry
// sends the job to the dead set at once; RetryAfter picks the retry's
// delay, Snooze runs the job again later without spending an attempt, and
// Cancel ends it cancelled. Progress reports how far a long job got, and
// LeaseOf gives the attempt's fencing token.
//
// A Runner claims only the types it has handlers for: a job of another
// type waits for a worker that handles it, so producers can be deployed
// before their workers (docs/workers.md, "Types").
//
// # Typed jobs
//
// A payload type that names its job type (Args, with Kind) is submitted as
// it is and handled with Handle, so a submit and its handler cannot
// disagree; Handle's Defaults (queue, priority, attempts, timeout,
// backoff) apply to every submit of the type that leaves them out, from Go
// and over REST:
//
//	type Welcome struct{ To string }
//	func (Welcome) Kind() string { return "email.welcome" }
//
//	sundial.Handle(r, func(ctx context.Context, w Welcome) (any, error) { … }, sundial.Defaults{Queue: "mail"})
//	c.Submit(ctx, Welcome{To: "ada@example.com"})
//
// # Following and testing
//
// Wait blocks until a job ends; Subscribe yields a queue's or a job's live
// events, resumable from an event's ID. UseSubmit adds submit middleware,
// RunnerConfig.AfterAttempt a hook after each attempt. Package sundialtest
// runs handlers in unit tests without Redis, checks what code submitted,
// and drains a queue in a test on a clock that jumps ahead.
//
// In a larger deployment, services/poller keeps time (and writes the
// history to MongoDB) and RunnerConfig.ExternalPoller leaves those duties
// to it; services/api serves the HTTP API and the dashboard over the same
// Redis.
package sundial
