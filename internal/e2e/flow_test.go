package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// Flow control across worker processes (docs/flow-control.md).

// streamEvent is an event of a queue's stream with the Redis time of its
// entry (ms), which orders and times what the scripts did.
type streamEvent struct {
	JobID, Type string
	Event       job.EventType
	ms          int64
}

func streamEvents(t *testing.T, rdb *redis.Client, q string) []streamEvent {
	t.Helper()
	xs, err := rdb.XRange(context.Background(), queue.EventStreamKey(q), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []streamEvent
	for _, x := range xs {
		evs, err := queue.ParseEvents(q, x)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := strconv.ParseInt(strings.SplitN(x.ID, "-", 2)[0], 10, 64)
		for _, e := range evs {
			out = append(out, streamEvent{e.JobID, e.Type, e.Event, ms})
		}
	}
	return out
}

// waitQueueDone waits until queue q holds no unfinished job and has taken n.
func waitQueueDone(t *testing.T, q *queue.Client, name string, n int, timeout time.Duration) {
	t.Helper()
	queuetest.Eventually(t, timeout, "every job of "+name+" in a final state", func() bool {
		s, err := q.Counts(context.Background(), name)
		return err == nil && s.Queued["high"]+s.Queued["normal"]+s.Queued["low"]+s.Throttled+s.Scheduled+s.Active+s.Waiting == 0 &&
			s.SubmittedTotal == int64(n)
	})
}

// TestLimitsAcrossWorkerProcesses runs three worker processes against a
// queue with a concurrency limit of 4 on one type and a rate of 20 per
// second on another, kills one worker with SIGKILL while it holds slots,
// and checks: never more than 4 of the limited type active (sampled
// continuously from Redis, and replayed from the event stream), never more
// than 20 starts in any second, the dead worker's slots come back (every
// job succeeds, nothing is held at the end).
func TestLimitsAcrossWorkerProcesses(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	const conc, rate = 4, 20
	if _, _, err := q.SetLimit(ctx, "flow", queue.Limit{Name: "slow", Types: []string{"sundial.sleep"}, Concurrency: conc}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.SetLimit(ctx, "flow", queue.Limit{Name: "api", Types: []string{"sundial.echo"}, Rate: &queue.Rate{Limit: rate, PeriodSeconds: 1}}); err != nil {
		t.Fatal(err)
	}
	env := func(id string) []string {
		return serviceEnv(srv, "SUNDIAL_QUEUES=flow", "SUNDIAL_CONCURRENCY=10", "SUNDIAL_WORKER_ID="+id)
	}
	t.Cleanup(func() { // what the queue and the workers looked like, when it failed
		if t.Failed() {
			c, err := q.Counts(ctx, "flow")
			t.Logf("queue: %+v %v", c, err)
			ws, err := q.Workers(ctx, time.Minute)
			for _, w := range ws {
				t.Logf("worker %s: %d active, %d processed, last seen %v", w.ID, len(w.ActiveJobs), w.Processed, w.LastSeenAt)
			}
			t.Logf("workers: %d %v", len(ws), err)
		}
	})
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_QUEUES=flow")...)
	workers := map[string]*proctest.Proc{}
	for _, id := range []string{"w1", "w2", "w3"} {
		workers[id] = startProc(t, binary(t, "worker"), env(id)...)
	}

	var specs []job.Spec
	// Sleeps long enough that the worker killed for holding one still
	// holds it when the kill lands.
	const sleeps, echoes = 100, 50
	for i := range sleeps {
		specs = append(specs, job.Spec{Queue: "flow", Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":250}`),
			MaxAttempts: ptr(10), Backoff: &job.Backoff{}, TimeoutSeconds: ptr(1)})
		if i%2 == 0 {
			specs = append(specs, job.Spec{Queue: "flow", Type: "sundial.echo", Payload: json.RawMessage(`{}`)})
		}
	}
	jobs := submit(t, q, specs)

	// Sample the active jobs of the limited type from Redis while it runs,
	// and the rate limiter's log of starts (member → start on its clock,
	// Redis TIME; each entry stays a period, and the sampler looks far
	// more often).
	var maxSeen, samples atomic.Int64
	var logMu sync.Mutex
	rateLog := map[string]float64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs, err := rdb.HGetAll(ctx, queue.QueueKey("flow", "active")).Result()
			if err != nil {
				continue
			}
			n := int64(0)
			for id, r := range recs {
				if runs(id, r, "sundial.sleep") {
					n++
				}
			}
			zs, err := rdb.ZRangeWithScores(ctx, queue.QueueKey("flow", "rate:api|"), 0, -1).Result()
			if err == nil {
				logMu.Lock()
				for _, z := range zs {
					rateLog[z.Member.(string)] = z.Score
				}
				logMu.Unlock()
			}
			samples.Add(1)
			if n > maxSeen.Load() {
				maxSeen.Store(n)
			}
		}
	}()

	// Kill a worker while it runs a limited job (whichever has one): its
	// slots must come back when its leases expire.
	var victim string
	queuetest.Eventually(t, 30*time.Second, "a worker running a limited job", func() bool {
		recs, _ := rdb.HGetAll(ctx, queue.QueueKey("flow", "active")).Result()
		for id, r := range recs {
			if runs(id, r, "sundial.sleep") {
				// The running attempt's worker: in the active record since
				// storage format 2, which Get reads.
				if j, err := q.Get(ctx, id); err == nil {
					victim = j.WorkerID
				}
				if workers[victim] != nil {
					return true
				}
			}
		}
		return false
	})
	workers[victim].Kill()
	waitQueueDone(t, q, "flow", len(jobs), 90*time.Second)
	close(stop)
	wg.Wait()

	if maxSeen.Load() > conc {
		t.Fatalf("sampled %d sundial.sleep jobs active at once, limit %d", maxSeen.Load(), conc)
	}
	if maxSeen.Load() < 2 || samples.Load() < 50 {
		t.Fatalf("sampling saw at most %d active in %d samples: the test did not load the limit", maxSeen.Load(), samples.Load())
	}
	for _, j := range jobs {
		got, err := q.Get(ctx, j.ID)
		if err != nil || got.State != job.Succeeded {
			t.Fatalf("job %s: %v %v", j.ID, got, err)
		}
	}
	st, _ := q.Limits(ctx, "flow")
	for _, l := range st {
		if l.Active != 0 || l.Throttled != 0 {
			t.Fatalf("limit %s holds %d active and %d throttled after the drain", l.Name, l.Active, l.Throttled)
		}
	}

	// Replay the stream: the limited type's active count after every event.
	evs := streamEvents(t, rdb, "flow")
	running := map[string]bool{}
	most, expired, echoExpired := 0, 0, 0
	var starts []int64
	for _, e := range evs {
		switch {
		case e.Type == "sundial.echo" && e.Event == job.EventStarted:
			starts = append(starts, e.ms)
		case e.Type == "sundial.echo" && e.Event == job.EventLeaseExpired:
			echoExpired++
		case e.Type != "sundial.sleep":
		case e.Event == job.EventStarted:
			running[e.JobID] = true
		case e.Event == job.EventLeaseExpired:
			expired++
			delete(running, e.JobID)
		case e.Event == job.EventSucceeded, e.Event == job.EventFailed, e.Event == job.EventDead,
			e.Event == job.EventCancelled, e.Event == job.EventQueued:
			delete(running, e.JobID)
		}
		most = max(most, len(running))
	}
	if most > conc || len(running) != 0 {
		t.Fatalf("replayed from the events: %d active at most (limit %d), %d at the end", most, conc, len(running))
	}
	if expired == 0 {
		t.Fatal("no lease expired: the kill did not hit a limited job")
	}
	// Starts of the rate-limited type: one per job and one per expired
	// lease in the events, each one in the limiter's log, and at most 20 in
	// any window of one second on the limiter's clock.
	if len(starts) != echoes+echoExpired || len(rateLog) != len(starts) {
		t.Fatalf("%d starts of sundial.echo in the events and %d in the limiter's log, want %d", len(starts), len(rateLog), echoes+echoExpired)
	}
	var times []float64
	for _, ms := range rateLog {
		times = append(times, ms)
	}
	slices.Sort(times)
	worst := 0
	for i := range times {
		n := 0
		for _, s := range times[i:] {
			if s-times[i] >= 1000 {
				break
			}
			n++
		}
		worst = max(worst, n)
	}
	if worst > rate {
		t.Fatalf("%d starts of sundial.echo within one second, limit %d: %v", worst, rate, times)
	}
	slices.Sort(starts)
	t.Logf("sampled %d times, at most %d sleep jobs active (limit %d); replayed max %d; %d leases expired; at most %d echo starts per second over %.1f s",
		samples.Load(), maxSeen.Load(), conc, most, expired, worst, float64(starts[len(starts)-1]-starts[0])/1000)
}

// TestGroupsTakeTurnsAcrossWorkers: with a backlog of 4000 jobs of one
// tenant, the 10 jobs another tenant submits after it start within a few
// claims, not after the backlog; a high job submitted later still starts
// before any further normal job (strict priority).
func TestGroupsTakeTurnsAcrossWorkers(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()

	var specs []job.Spec
	for range 4000 {
		specs = append(specs, job.Spec{Queue: "fair", Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":2}`), Group: "big"})
	}
	big := submit(t, q, specs)
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_QUEUES=fair")...)
	for _, id := range []string{"w1", "w2"} {
		startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_QUEUES=fair", "SUNDIAL_CONCURRENCY=8", "SUNDIAL_WORKER_ID="+id)...)
	}
	queuetest.Eventually(t, 20*time.Second, "the big tenant's jobs running", func() bool {
		s, err := q.Counts(ctx, "fair")
		return err == nil && s.SucceededTotal > 200
	})
	specs = specs[:0]
	for range 10 {
		specs = append(specs, job.Spec{Queue: "fair", Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":2}`), Group: "small"})
	}
	small := submit(t, q, specs)
	high := submit(t, q, []job.Spec{{Queue: "fair", Type: "sundial.echo", Priority: job.High}})[0]
	waitQueueDone(t, q, "fair", len(big)+len(small)+1, 120*time.Second)

	isSmall := map[string]bool{}
	for _, j := range small {
		isSmall[j.ID] = true
	}
	evs := streamEvents(t, rdb, "fair")
	// Count the big tenant's starts from the small tenant's first submit
	// until its last start.
	submittedAt := -1
	bigStarts, smallLeft := 0, len(small)
	var firstMS, lastMS int64
	highSubmitted, highStarted := false, false
	for i, e := range evs {
		if isSmall[e.JobID] && e.Event == job.EventSubmitted && submittedAt < 0 {
			submittedAt, firstMS = i, e.ms
		}
		if e.JobID == high.ID && e.Event == job.EventSubmitted {
			highSubmitted = true
		}
		if e.Event != job.EventStarted {
			continue
		}
		if e.JobID == high.ID {
			highStarted = true
		} else if highSubmitted && !highStarted {
			t.Fatalf("job %s (normal) started while the high job %s was queued", e.JobID, high.ID)
		}
		if submittedAt < 0 || smallLeft == 0 {
			continue
		}
		if isSmall[e.JobID] {
			smallLeft--
			lastMS = e.ms
		} else if e.JobID != high.ID {
			bigStarts++
		}
	}
	// Taking turns, the small tenant's 10 jobs start among about 10 of the
	// big tenant's; the claims already under way (2 workers × 8 slots) may
	// add one batch each. In submission order they would wait for ~3700.
	if smallLeft != 0 || bigStarts > 10+2*8+5 {
		t.Fatalf("the big tenant started %d jobs while the small one's 10 waited (%d never started)", bigStarts, smallLeft)
	}
	t.Logf("the small tenant's 10 jobs started within %d ms of their submit, among %d of the big tenant's (backlog %d)", lastMS-firstMS, bigStarts, len(big))
}

// runs tells whether the entry id → rec of a queue's active hash is a
// running job of type jtype: "<token> <attempt> <type> …" (docs/engine.md).
// Storage format 3's padding entry is no job.
func runs(id, rec, jtype string) bool {
	f := strings.Fields(rec)
	return !queue.IsPadding(id) && len(f) >= 3 && f[2] == jtype
}
