package sundial_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func newClient(t *testing.T) (*sundial.Client, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	return sundial.NewClient(rdb), rdb
}

func TestSubmitOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	runAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	sub, err := c.Submit(ctx, sundial.Job{
		Type: "opts", Queue: "opts", RunAt: runAt, Timeout: 1500 * time.Millisecond,
		Payload: json.RawMessage(`{"raw":true}`), DependsOn: nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	j := sub.Job
	if j.State != sundial.Scheduled || !j.RunAt.Equal(runAt) || j.TimeoutSeconds != 2 || string(j.Payload) != `{"raw":true}` {
		t.Fatalf("job %+v", j)
	}
	got, err := c.Get(ctx, j.ID)
	if err != nil || got.ID != j.ID || got.State != sundial.Scheduled {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := c.Get(ctx, "01NOSUCHJOB"); !errors.Is(err, sundial.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := c.Retry(ctx, j.ID); !errors.Is(err, sundial.ErrConflict) {
		t.Fatalf("retry of a scheduled job: %v", err)
	}
	cancelled, err := c.Cancel(ctx, j.ID)
	if err != nil || cancelled.State != sundial.Cancelled {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}
	retried, err := c.Retry(ctx, j.ID)
	if err != nil || retried.State == sundial.Cancelled {
		t.Fatalf("retry: %+v %v", retried, err)
	}
}

func TestSubmitErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	var fe *job.FieldError
	_, err := c.Submit(ctx, sundial.Job{Type: "x", RunAt: time.Now().Add(time.Minute), Delay: time.Minute})
	if !errors.As(err, &fe) || fe.Field != "delay_seconds" {
		t.Fatalf("run_at and delay: %v", err)
	}
	_, err = c.SubmitMany(ctx, []sundial.Job{{Type: "x"}, {Type: "x", MaxAttempts: 1000}})
	if !errors.As(err, &fe) || fe.Field != "jobs[1].max_attempts" {
		t.Fatalf("batch: %v", err)
	}
	_, err = c.Submit(ctx, sundial.Job{Type: "x", Payload: make(chan int)})
	if err == nil || !strings.Contains(err.Error(), "payload") {
		t.Fatalf("unmarshalable payload: %v", err)
	}
	_, err = c.SubmitMany(ctx, []sundial.Job{{Type: "x", Queue: "a"}, {Type: "x", Queue: "b"}})
	if err == nil {
		t.Fatal("a batch over two queues was accepted")
	}
}

// A payload that does not decode into the handler's type fails the job at
// once, without retries; a context outside a handler has no job.
func TestHandleJSONBadPayload(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, rdb := newClient(t)
	if sundial.JobFrom(ctx) != nil {
		t.Fatal("JobFrom of a plain context")
	}
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"typed"}, ExternalPoller: true})
	calls := 0
	sundial.HandleJSON(r, "typed", func(ctx context.Context, p struct{ N int }) (any, error) {
		calls++
		return p.N, nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	sub, err := c.Submit(ctx, sundial.Job{Type: "typed", Queue: "typed", Payload: map[string]string{"N": "not a number"}, MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Wait(ctx, sub.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != sundial.Dead || j.Attempt != 1 || calls != 0 || !strings.Contains(j.LastError, "payload of typed") {
		t.Fatalf("job %+v, %d calls", j, calls)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// Wait returns when its context ends.
func TestWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	sub, err := c.Submit(context.Background(), sundial.Job{Type: "never", Queue: "waiting-room"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, sub.Job.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
}

// TestLimitsThroughTheClient sets a limit, submits grouped jobs it holds
// back, and deletes it.
func TestLimitsThroughTheClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	if _, err := c.SetLimit(ctx, "lim", sundial.Limit{Name: "one", Types: []string{"t"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Submit(ctx, sundial.Job{Type: "t", Queue: "lim", Group: "tenant-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if ls, err := c.Engine().Claim(ctx, "lim", 5, "w"); err != nil || len(ls) != 1 || ls[0].Job.Group != "tenant-1" {
		t.Fatalf("claim: %v %v", ls, err)
	}
	info, err := c.QueueInfo(ctx, "lim")
	if err != nil || info.Throttled != 2 || info.Queued[sundial.Normal] != 0 {
		t.Fatalf("queue info: %+v %v", info, err)
	}
	if ls, err := c.Limits(ctx, "lim"); err != nil || len(ls) != 1 || ls[0].Active != 1 || ls[0].Throttled != 2 {
		t.Fatalf("limits: %+v %v", ls, err)
	}
	if err := c.DeleteLimit(ctx, "lim", "one"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteLimit(ctx, "lim", "one"); !errors.Is(err, sundial.ErrLimitNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if info, _ := c.QueueInfo(ctx, "lim"); info.Throttled != 0 || info.Queued[sundial.Normal] != 2 {
		t.Fatalf("after the delete: %+v", info)
	}
}

// A handler reads its attempt's fencing token and whether its lease is
// still trusted; the result carries them out here.
func TestLeaseOfInAHandler(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, rdb := newClient(t)
	if _, ok := sundial.LeaseOf(ctx); ok {
		t.Fatal("LeaseOf of a plain context")
	}
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"fenced"}, ExternalPoller: true})
	sundial.HandleJSON(r, "fenced", func(ctx context.Context, _ struct{}) (any, error) {
		l, ok := sundial.LeaseOf(ctx)
		return map[string]any{"ok": ok, "token": l.Token, "held": l.Held(time.Now())}, nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	sub, err := c.Submit(ctx, sundial.Job{Type: "fenced", Queue: "fenced", Payload: struct{}{}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Wait(ctx, sub.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		OK    bool   `json:"ok"`
		Token string `json:"token"`
		Held  bool   `json:"held"`
	}
	if err := json.Unmarshal(j.Result, &got); err != nil || !got.OK || !got.Held || !strings.Contains(got.Token, "-") {
		t.Fatalf("the handler saw %s (%v)", j.Result, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestConfigFromEnv: the SUNDIAL_* variables become a RunnerConfig with
// the services' parser; a bad value names its variable.
func TestConfigFromEnv(t *testing.T) {
	t.Setenv("SUNDIAL_REDIS_URL", "redis://"+redisAddr)
	t.Setenv("SUNDIAL_QUEUES", "mail:3,default")
	t.Setenv("SUNDIAL_CONCURRENCY", "7")
	t.Setenv("SUNDIAL_WORKER_ID", "env-worker")
	t.Setenv("SUNDIAL_LEASE_TTL", "20s")
	cfg, rdb, err := sundial.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if strings.Join(cfg.Queues, ",") != "mail,default" || cfg.QueueSettings["mail"].Weight != 3 || cfg.Concurrency != 7 ||
		cfg.WorkerID != "env-worker" || cfg.LeaseTTL != 20*time.Second {
		t.Fatalf("config %+v", cfg)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the Redis it opened: %v", err)
	}
	t.Setenv("SUNDIAL_CONCURRENCY", "lots")
	if _, _, err := sundial.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "SUNDIAL_CONCURRENCY") {
		t.Fatalf("bad SUNDIAL_CONCURRENCY: %v", err)
	}
}

// TestSubscribeResumes: Subscribe yields a queue's events in order, a
// job's only with JobID, and resumes after any event's ID, inside a batch
// entry too, without missing or repeating one.
func TestSubscribeResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sundial.NewClient(redis.NewClient(&redis.Options{Addr: redisAddr}))
	subs, err := c.SubmitMany(ctx, []sundial.Job{{Type: "a", Queue: "sub"}, {Type: "b", Queue: "sub"}, {Type: "c", Queue: "sub"}})
	if err != nil {
		t.Fatal(err)
	}
	var all []sundial.Event
	for ev, err := range c.Subscribe(ctx, sundial.SubscribeOptions{Queue: "sub", After: "0"}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
		if len(all) == 3 {
			break
		}
	}
	for i, ev := range all {
		if ev.JobID != subs[i].Job.ID || ev.Event != "submitted" {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	// Resume after the first event of the batch: the other two, then what
	// comes next (a cancel of the last job).
	if _, err := c.Cancel(ctx, subs[2].Job.ID); err != nil {
		t.Fatal(err)
	}
	var rest []sundial.Event
	for ev, err := range c.Subscribe(ctx, sundial.SubscribeOptions{Queue: "sub", After: all[0].ID}) {
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, ev)
		if len(rest) == 3 {
			break
		}
	}
	if rest[0].ID != all[1].ID || rest[1].ID != all[2].ID || rest[2].JobID != subs[2].Job.ID || rest[2].Event != "cancelled" {
		t.Fatalf("resumed: %+v", rest)
	}
	// One job's events only: after the last event read, the next of job 1
	// is its cancel (job 0's comes first and is left out).
	for _, j := range subs[:2] {
		if _, err := c.Cancel(ctx, j.Job.ID); err != nil {
			t.Fatal(err)
		}
	}
	for ev, err := range c.Subscribe(ctx, sundial.SubscribeOptions{JobID: subs[1].Job.ID, After: rest[2].ID}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.JobID != subs[1].Job.ID || ev.Event != "cancelled" {
			t.Fatalf("job subscription yielded %+v", ev)
		}
		break
	}
}

// TestGetFallsBackToTheHistory: a job Redis no longer holds (pruned after
// its retention) is read from the history store by a Client made
// WithHistory, as GET /v1/jobs/{id} does; without one it is ErrNotFound.
func TestGetFallsBackToTheHistory(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	_, db := mongotest.Client(t)
	store := history.NewStore(db, history.StoreOptions{})
	if err := store.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	c := sundial.NewClient(rdb, sundial.WithHistory(store))
	sub, err := c.Submit(ctx, sundial.Job{Type: "archive", Queue: "histfallback"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, sub.Job.ID); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- history.NewWriter(c.Engine(), store, history.WriterConfig{DiscoverInterval: 50 * time.Millisecond}).Run(wctx)
	}()
	queuetest.Eventually(t, 20*time.Second, "the cancel recorded in the history", func() bool {
		j, err := store.Job(ctx, sub.Job.ID)
		return err == nil && j.State == sundial.Cancelled
	})
	stop()
	<-done
	// Pruned from Redis.
	if err := rdb.Del(ctx, "sundial:job:{histfallback}:"+sub.Job.ID).Err(); err != nil {
		t.Fatal(err)
	}
	j, err := c.Get(ctx, sub.Job.ID)
	if err != nil || j.State != sundial.Cancelled || j.Type != "archive" {
		t.Fatalf("Get with history = %+v, %v", j, err)
	}
	if _, err := sundial.NewClient(rdb).Get(ctx, sub.Job.ID); !errors.Is(err, sundial.ErrNotFound) {
		t.Fatalf("Get without history = %v, want ErrNotFound", err)
	}
	if _, err := c.Get(ctx, "01M8G0000000000000000000ZZ"); !errors.Is(err, sundial.ErrNotFound) {
		t.Fatalf("Get of an unknown id with history = %v, want ErrNotFound", err)
	}
}
