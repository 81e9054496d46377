package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
)

// submitCalls watches a client's submit script calls: it holds each one
// until a second is in flight (the first waits at most 5 s), and records the
// most that were in flight at once.
type submitCalls struct {
	mu        sync.Mutex
	now, most int
	two       chan struct{} // closed once two calls were in flight
	once      sync.Once
	calls     atomic.Int64
}

func (s *submitCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *submitCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (s *submitCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || !strings.HasSuffix(fmt.Sprint(args[1]), "_submit") {
			return next(ctx, cmd)
		}
		s.calls.Add(1)
		s.mu.Lock()
		s.now++
		s.most = max(s.most, s.now)
		if s.now >= 2 {
			s.once.Do(func() { close(s.two) })
		}
		s.mu.Unlock()
		select {
		case <-s.two:
		case <-time.After(5 * time.Second): // none came: let every call go
			s.once.Do(func() { close(s.two) })
		}
		err := next(ctx, cmd)
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
		return err
	}
}

// Concurrent single submits to one queue keep two shared script calls in
// flight, never more, and every caller's job is stored once.
func TestSingleSubmitsKeepTwoCallsInFlight(t *testing.T) {
	e := newEnv(t)
	watch := &submitCalls{two: make(chan struct{})}
	e.q.Redis().(*redis.Client).AddHook(watch)
	const producers, each = 16, 30
	errs := make(chan error, producers)
	for p := range producers {
		go func() {
			for i := range each {
				j := e.build(t, job.Spec{Type: fmt.Sprintf("p%d-%d", p, i)})
				res, err := e.q.Submit(e.ctx, []*job.Job{j})
				if err == nil && res[0].Job.ID != j.ID {
					err = fmt.Errorf("caller got job %s back, submitted %s", res[0].Job.ID, j.ID)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	watch.mu.Lock()
	most := watch.most
	watch.mu.Unlock()
	if most != 2 {
		t.Fatalf("at most %d submit calls were in flight at once, want 2", most)
	}
	st, _ := e.q.Stats(e.ctx, "default")
	if st[0].SubmittedTotal != producers*each || st[0].Queued["normal"] != producers*each {
		t.Fatalf("submitted %d, queued %d; want %d", st[0].SubmittedTotal, st[0].Queued["normal"], producers*each)
	}
	if n := watch.calls.Load(); n >= producers*each {
		t.Fatalf("%d submit calls for %d jobs: not shared", n, producers*each)
	}
}
