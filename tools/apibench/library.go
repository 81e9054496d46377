package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// library runs the submit and batch loads through the Go library
// (queue.Client.Submit with jobs from job.Spec.Build) against the Redis at
// -redis, with the same jobs, connections and report as the REST modes, so
// that the REST path's cost shows as a ratio of runs on the same machine.
func (b *bench) library() error {
	if b.o.mode != "lib-submit" && b.o.mode != "lib-batch" {
		return errors.New("-mode " + b.o.mode + ": want lib-submit or lib-batch")
	}
	if b.o.redis == "" {
		return errors.New("-mode " + b.o.mode + " needs -redis host:port")
	}
	host, _, err := net.SplitHostPort(b.o.redis)
	if err != nil {
		return fmt.Errorf("-redis %q: want host:port", b.o.redis)
	}
	if !b.o.allowRemote && !loopback(host) {
		return errors.New("-redis is not on loopback; pass -allow-remote to load it anyway")
	}
	rdb := redis.NewClient(&redis.Options{Addr: b.o.redis})
	defer rdb.Close()
	q := queue.New(rdb, queue.Options{})
	var spec job.Spec
	if err := json.Unmarshal(b.jobBody(), &spec); err != nil {
		return err
	}
	n := 1
	if b.o.mode == "lib-batch" {
		n = b.o.batch
	}
	return b.closedLoop(func(ctx context.Context) error {
		now := time.Now()
		jobs := make([]*job.Job, n)
		for i := range jobs {
			j, err := spec.Build(now)
			if err != nil {
				return err
			}
			jobs[i] = j
		}
		_, err := q.Submit(ctx, jobs)
		return err
	}, n)
}
