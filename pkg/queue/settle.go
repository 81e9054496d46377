package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// Dependencies across queues. A job may depend on jobs of other queues,
// which on a Redis Cluster live on other slots, where no script can read
// them. Submit writes such a dependency as the entry "<queue>|<id>" of the
// job's pending set and lists the job in its queue's QK..'rwait' set; the
// poller (SettleRemoteDeps) reads how those dependencies ended, from their
// own queues, and settles each edge with settle.lua in the dependent's
// queue: idempotent per edge, so a crash between the read and the write,
// or a second poller, settles each edge once.

// qualifyRemoteDeps rewrites each dependency of jobs that is not in queue
// but in another one as "<queue>|<id>", for submit.lua, and returns what
// puts the plain ids back. A dependency found in no queue is left as it
// is: the script refuses it (not_found).
func (c *Client) qualifyRemoteDeps(ctx context.Context, queue string, jobs []*job.Job) (func(), error) {
	noop := func() {}
	inBatch := map[string]bool{}
	for _, j := range jobs {
		inBatch[j.ID] = true
	}
	var ids []string
	for _, j := range jobs {
		for _, d := range j.DependsOn {
			if !inBatch[d] {
				ids = append(ids, d)
			}
		}
	}
	if len(ids) == 0 {
		return noop, nil
	}
	k := c.keysFor(queue)
	pipe := c.rdb.Pipeline()
	here := make([]*redis.IntCmd, len(ids))
	for i, d := range ids {
		here[i] = pipe.Exists(ctx, k.job(d))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("submit: dependencies: %w", err)
	}
	remote := map[string]string{}
	for i, d := range ids {
		if here[i].Val() == 1 || !validID(d) {
			continue
		}
		q, err := c.QueueOf(ctx, d)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("submit: dependencies: %w", err)
		case q != queue:
			remote[d] = q
		}
	}
	if len(remote) == 0 {
		return noop, nil
	}
	saved := make([][]string, len(jobs))
	for i, j := range jobs {
		for n, d := range j.DependsOn {
			if q, ok := remote[d]; ok {
				if saved[i] == nil {
					saved[i] = j.DependsOn
					j.DependsOn = append([]string(nil), j.DependsOn...)
				}
				j.DependsOn[n] = q + "|" + d
			}
		}
	}
	return func() {
		for i, s := range saved {
			if s != nil {
				jobs[i].DependsOn = s
			}
		}
	}, nil
}

// SettleRemoteDeps settles up to limit of queue's waiting jobs' dependencies
// on jobs of other queues that ended: a success lets the job start once
// nothing else is pending, a dead, cancelled or vanished dependency cancels
// it (or, with on_dependency_failure "run", counts as done). It returns how
// many jobs it started or cancelled. The poller calls it every pass.
func (c *Client) SettleRemoteDeps(ctx context.Context, queue string, limit int) (int, error) {
	k := c.keysFor(queue)
	waiting, err := c.rdb.SRandMemberN(ctx, k.tag+"rwait", int64(limit)).Result()
	if err != nil || len(waiting) == 0 {
		return 0, err
	}
	pipe := c.rdb.Pipeline()
	deps := make([]*redis.StringSliceCmd, len(waiting))
	for i, id := range waiting {
		deps[i] = pipe.SMembers(ctx, k.tag+"deps:"+id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	type edge struct{ id, dep string }
	var edges []edge
	pipe = c.rdb.Pipeline()
	var states []*redis.StringCmd
	for i, id := range waiting {
		for _, dep := range deps[i].Val() {
			q, pid, remote := strings.Cut(dep, "|")
			if !remote {
				continue
			}
			edges = append(edges, edge{id, dep})
			states = append(states, pipe.HGet(ctx, c.keysFor(q).job(pid), "state"))
		}
	}
	if len(edges) == 0 {
		// Jobs whose remote edges were all settled: settle.lua takes them
		// off the set on their next pass; a pass with none is free.
		return 0, c.rdb.SRem(ctx, k.tag+"rwait", anySlice(waiting)...).Err()
	}
	// On a Cluster one shard may be failing over: the edges whose state
	// was read are settled, the others wait for the next pass.
	_, _ = pipe.Exec(ctx)
	args := []any{0}
	for i, e := range edges {
		st, err := states[i].Result()
		var ended string
		switch {
		case err == redis.Nil:
			ended = "missing"
		case err != nil:
			continue
		case st == string(job.Succeeded) || st == string(job.Dead) || st == string(job.Cancelled):
			ended = st
		default:
			continue // still running, queued, waiting…
		}
		args = append(args, e.id, e.dep, ended)
	}
	n := (len(args) - 1) / 3
	if n == 0 {
		return 0, nil
	}
	args[0] = n
	changed, err := c.run(ctx, c.scripts.settle, k, c.opts.Now(), args...).Int()
	if err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	return changed, nil
}

// anySlice is s as []any, for variadic Redis arguments.
func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
