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
// nothing new) and the jobs it waits for (DependsOn). SubmitMany stores
// several jobs of one queue at once, all or nothing; a job of the batch may
// depend on an earlier one as "#0", "#1"…
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
// sends the job to the dead set at once; Progress reports how far a long
// job got.
//
// In a larger deployment, services/poller keeps time (and writes the
// history to MongoDB) and RunnerConfig.ExternalPoller leaves those duties
// to it; services/api serves the HTTP API and the dashboard over the same
// Redis.
package sundial
