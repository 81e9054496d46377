package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/worker"
)

// sundialSys drives Sundial as peerbench's sundial driver does: jobs from
// job.Spec.Build, queue.New(rdb).Submit (one job, or a 1000-job batch when
// filling), a worker from pkg/worker to finish them.
type sundialSys struct {
	addr string
	rdb  *redis.Client
	c    *queue.Client
}

func newSundial(addr string) (system, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return &sundialSys{addr: addr, rdb: rdb, c: queue.New(rdb, queue.Options{})}, nil
}

func (s *sundialSys) build(state string, k int) ([]*job.Job, error) {
	now := time.Now()
	jobs := make([]*job.Job, k)
	for i := range jobs {
		due := now
		sp := job.Spec{Queue: queueName, Type: "noop"}
		switch state {
		case "scheduled":
			due = now.Add(time.Hour)
			sp.RunAt = &due
		case "dead":
			one := 1
			sp.MaxAttempts = &one
		}
		sp.Payload = payload(now, due)
		j, err := sp.Build(now)
		if err != nil {
			return nil, err
		}
		jobs[i] = j
	}
	return jobs, nil
}

func (s *sundialSys) Fill(ctx context.Context, state string, n int) (int, error) {
	for done := 0; done < n; done += fillBatch {
		jobs, err := s.build(state, min(fillBatch, n-done))
		if err != nil {
			return 0, err
		}
		if _, err := s.c.Submit(ctx, jobs); err != nil {
			return 0, err
		}
	}
	if state == "finished" || state == "dead" {
		target, err := s.count(ctx, state)
		if err != nil {
			return 0, err
		}
		q, err := s.count(ctx, "queued")
		if err != nil {
			return 0, err
		}
		target += q
		if err := s.work(ctx, state, target); err != nil {
			return 0, err
		}
	}
	return s.count(ctx, state)
}

// work runs one worker (concurrency 50, its own Redis client as a separate
// process would have) until state counts target jobs, then stops it.
func (s *sundialSys) work(ctx context.Context, state string, target int) error {
	wctx, cancel := context.WithCancel(ctx)
	wrdb := redis.NewClient(&redis.Options{Addr: s.addr})
	defer wrdb.Close()
	w := worker.New(wrdb, worker.Config{
		Queues:      []worker.Queue{{Name: queueName}},
		Concurrency: 50,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	w.HandleFunc("noop", func(context.Context, *job.Job) (any, error) {
		if state == "dead" {
			return nil, errors.New("peercost: fails on purpose")
		}
		return nil, nil
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(wctx) }()
	defer func() { cancel(); wg.Wait() }()
	return waitCount(ctx, func() (int, error) { return s.count(ctx, state) }, target)
}

func (s *sundialSys) count(ctx context.Context, state string) (int, error) {
	st, err := s.c.Stats(ctx, queueName)
	if err != nil {
		return 0, err
	}
	if len(st) == 0 {
		return 0, nil
	}
	q := st[0]
	switch state {
	case "queued":
		var t int64
		for _, v := range q.Queued {
			t += v
		}
		return int(t), nil
	case "scheduled":
		return int(q.Scheduled), nil
	case "finished":
		return int(q.SucceededTotal), nil // none pruned: retention 24 h, no poller
	case "dead":
		return int(q.Dead), nil
	}
	return 0, fmt.Errorf("unknown state %q", state)
}

func (s *sundialSys) Submit(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		now := time.Now()
		sp := job.Spec{Queue: queueName, Type: "noop", Payload: payload(now, now)}
		j, err := sp.Build(now)
		if err != nil {
			return 0, err
		}
		if _, err := s.c.Submit(ctx, []*job.Job{j}); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func (s *sundialSys) Close() error { return s.rdb.Close() }
