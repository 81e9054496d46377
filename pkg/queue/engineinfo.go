package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// What the metrics read from the engine at a scrape, each in a bounded
// number of commands: the next job of each priority list, and Redis' own
// INFO counters.

// OldestQueued returns, for each of queues, when the longest-waiting due
// job of its priority lists became due (job.DueAt): the zero time for a
// queue with no queued job. It reads the claim end of each list (the next
// job a claim takes; for a fairness group's marker, that group's next
// job), then those jobs' times: O(1) per queue in at most three pipelined
// round trips, no scans. Jobs held back by a limit or parked for a worker
// that handles their type are not in the lists, and not counted. A queue
// whose keys cannot be read (a key of the wrong type) is left out.
func (c *Client) OldestQueued(ctx context.Context, queues []string) (map[string]time.Time, error) {
	type head struct {
		queue, prio, id string
		k               *queueKeys
	}
	prios := [...]struct {
		name string
		key  int
	}{{"high", kHigh}, {"normal", kNormal}, {"low", kLow}}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, 0, 3*len(queues))
	for _, q := range queues {
		k := c.keysFor(q)
		for _, p := range prios {
			cmds = append(cmds, pipe.LIndex(ctx, k.key(p.key), -1))
		}
	}
	if len(cmds) == 0 {
		return map[string]time.Time{}, nil
	}
	failed := map[string]bool{}
	if _, err := pipe.Exec(ctx); err != nil && !isCommandError(err) {
		return nil, fmt.Errorf("oldest queued: %w", err)
	}
	var heads []head
	for i, cmd := range cmds {
		q := queues[i/3]
		id, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			failed[q] = true
			continue
		}
		heads = append(heads, head{queue: q, prio: prios[i%3].name, id: id, k: c.keysFor(q)})
	}
	// A group's marker stands for the group's next job (lua/lib.lua).
	pipe = c.rdb.Pipeline()
	groups := map[int]*redis.StringCmd{}
	for i, h := range heads {
		if g, ok := strings.CutPrefix(h.id, "~"); ok {
			groups[i] = pipe.LIndex(ctx, h.k.tag+"grp:"+h.prio+":"+g, -1)
		}
	}
	if len(groups) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !isCommandError(err) {
			return nil, fmt.Errorf("oldest queued: %w", err)
		}
		for i, cmd := range groups {
			heads[i].id, _ = cmd.Result() // "" when the group emptied meanwhile
		}
	}
	pipe = c.rdb.Pipeline()
	fields := make([]*redis.SliceCmd, len(heads))
	for i, h := range heads {
		if h.id != "" {
			fields[i] = pipe.HMGet(ctx, h.k.job(h.id), "state", "created_at", "run_at")
		}
	}
	if len(heads) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !isCommandError(err) {
			return nil, fmt.Errorf("oldest queued: %w", err)
		}
	}
	out := make(map[string]time.Time, len(queues))
	for _, q := range queues {
		if !failed[q] {
			out[q] = time.Time{}
		}
	}
	for i, h := range heads {
		if fields[i] == nil || failed[h.queue] {
			continue
		}
		v, err := fields[i].Result()
		if err != nil || len(v) != 3 {
			continue
		}
		// A cancelled job's id waits in its list until a claim drops it:
		// only a queued job counts.
		if s, _ := v[0].(string); s != string(job.Queued) {
			continue
		}
		ms := func(x any) time.Time {
			s, _ := x.(string)
			n, _ := strconv.ParseInt(s, 10, 64)
			return msTime(n)
		}
		j := job.Job{CreatedAt: ms(v[1]), RunAt: ms(v[2])} // run_at absent (format 4): due at creation
		if due := j.DueAt(); out[h.queue].IsZero() || due.Before(out[h.queue]) {
			out[h.queue] = due
		}
	}
	return out, nil
}

// isCommandError reports whether a pipeline's error is one command's
// answer (a key of the wrong type, no key) rather than the connection's:
// the other commands' answers are then still good.
func isCommandError(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &re)
}

// RedisUsage is one Redis server's cost counters from INFO.
type RedisUsage struct {
	// Node is the server's address as the client dials it.
	Node string
	// CPUSeconds is the main process' CPU time, system plus user
	// (used_cpu_sys + used_cpu_user; not its forked children's).
	CPUSeconds float64
	// MemoryBytes is the memory Redis' allocator holds for data and
	// overheads (used_memory).
	MemoryBytes float64
	// Commands is total_commands_processed since the server started.
	Commands float64
}

// RedisUsage reads INFO cpu, memory and stats: from the one server, or
// from every master of a Redis Cluster (each a RedisUsage).
func (c *Client) RedisUsage(ctx context.Context) ([]RedisUsage, error) {
	read := func(ctx context.Context, rc *redis.Client) (RedisUsage, error) {
		s, err := rc.Info(ctx, "cpu", "memory", "stats").Result()
		if err != nil {
			return RedisUsage{}, err
		}
		return parseUsage(rc.Options().Addr, s), nil
	}
	switch rdb := c.rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var out []RedisUsage
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, rc *redis.Client) error {
			u, err := read(ctx, rc)
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, u)
			mu.Unlock()
			return nil
		})
		return out, err
	case *redis.Client:
		u, err := read(ctx, rdb)
		if err != nil {
			return nil, err
		}
		return []RedisUsage{u}, nil
	default:
		s, err := c.rdb.Info(ctx, "cpu", "memory", "stats").Result()
		if err != nil {
			return nil, err
		}
		return []RedisUsage{parseUsage("", s)}, nil
	}
}

// parseUsage reads the fields RedisUsage holds from INFO's "name:value"
// lines.
func parseUsage(node, info string) RedisUsage {
	u := RedisUsage{Node: node}
	for _, l := range strings.Split(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "used_cpu_sys", "used_cpu_user":
			u.CPUSeconds += f
		case "used_memory":
			u.MemoryBytes = f
		case "total_commands_processed":
			u.Commands = f
		}
	}
	return u
}
