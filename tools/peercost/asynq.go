package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// asynqSys drives asynq as its README and peerbench's asynq driver do:
// Client.Enqueue (asynq has no bulk call: filling uses 16 concurrent
// producers), a Server with a ServeMux to finish jobs.
type asynqSys struct {
	opt    asynq.RedisClientOpt
	client *asynq.Client
	insp   *asynq.Inspector
}

// asynqRetention: asynq deletes a task as soon as it succeeds unless the
// task has a Retention; with one it keeps it that long as "completed".
const asynqRetention = 24 * time.Hour

func newAsynq(addr string) (system, error) {
	opt := asynq.RedisClientOpt{Addr: addr}
	return &asynqSys{opt: opt, client: asynq.NewClient(opt), insp: asynq.NewInspector(opt)}, nil
}

func (s *asynqSys) enqueue(ctx context.Context, state string) error {
	now := time.Now()
	due := now
	opts := []asynq.Option{asynq.Queue(queueName)}
	switch state {
	case "scheduled":
		due = now.Add(time.Hour)
		opts = append(opts, asynq.ProcessAt(due))
	case "finished":
		opts = append(opts, asynq.Retention(asynqRetention))
	case "dead":
		opts = append(opts, asynq.MaxRetry(0))
	}
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask("noop", payload(now, due)), opts...)
	return err
}

func (s *asynqSys) Fill(ctx context.Context, state string, n int) (int, error) {
	if err := parallel(n, fillProducers, func() error { return s.enqueue(ctx, state) }); err != nil {
		return 0, err
	}
	if state == "finished" || state == "dead" {
		if err := s.work(ctx, state); err != nil {
			return 0, err
		}
	}
	return s.count(state)
}

func (s *asynqSys) work(ctx context.Context, state string) error {
	srv := asynq.NewServer(s.opt, asynq.Config{
		Concurrency: 50,
		Queues:      map[string]int{queueName: 1},
		LogLevel:    asynq.ErrorLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(context.Context, *asynq.Task) error {
		if state == "dead" {
			return errors.New("peercost: fails on purpose")
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	defer srv.Shutdown()
	// Until nothing is pending, active or waiting for a retry: every task
	// has then succeeded or failed for good (the archive's own count cannot
	// say: asynq keeps only the newest 9,999 archived tasks, deleting the rest).
	return waitCount(ctx, func() (int, error) {
		q, err := s.count("queued")
		return -q, err
	}, 0)
}

func (s *asynqSys) count(state string) (int, error) {
	qi, err := s.insp.GetQueueInfo(queueName)
	if err != nil {
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return 0, nil
		}
		return 0, err
	}
	switch state {
	case "queued":
		return qi.Pending + qi.Active + qi.Retry, nil
	case "scheduled":
		return qi.Scheduled, nil
	case "finished":
		return qi.Completed, nil
	case "dead":
		return qi.Archived, nil
	}
	return 0, fmt.Errorf("unknown state %q", state)
}

func (s *asynqSys) Submit(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		now := time.Now()
		if _, err := s.client.EnqueueContext(ctx, asynq.NewTask("noop", payload(now, now)), asynq.Queue(queueName)); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func (s *asynqSys) Close() error {
	s.insp.Close()
	return s.client.Close()
}

// parallel runs fn n times from p goroutines and returns the first error.
func parallel(n, p int, fn func() error) error {
	var (
		mu   sync.Mutex
		next int
		ferr error
		wg   sync.WaitGroup
	)
	for g := 0; g < p; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= n || ferr != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				if err := fn(); err != nil {
					mu.Lock()
					if ferr == nil {
						ferr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return ferr
}
