package queue

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated: the write reached the queue's Redis master but fewer
// replicas than Options.WaitReplicas acknowledged it within
// Options.WaitTimeout. The write may survive or be lost in a failover; the
// caller should retry with the same idempotency key.
var ErrNotReplicated = errors.New("write not acknowledged by enough Redis replicas")

// runReplicated runs script s on a connection of its own to the master of
// k's slot and then WAITs on that connection (WAIT counts the replicas that
// have every write of its own connection) for Options.WaitReplicas replicas.
// cmd is the call's command (Client.command), a submit of submitted jobs.
func (c *Client) runReplicated(ctx context.Context, s *script, k *queueKeys, cmd []any, submitted int) ([]string, error) {
	// A refused script wrote nothing: MOVED, ASK and TRYAGAIN (a shard
	// failed over, a slot is moving) and a refused connection (a dead
	// master still in the slot map) are retried on the slot's master, once
	// the cluster client reloaded its map.
	deadline := time.Now().Add(c.opts.WaitTimeout)
	for attempt := 1; ; attempt++ {
		res, err := c.runAndWait(ctx, s, k, cmd, submitted)
		cc, cluster := c.rdb.(*redis.ClusterClient)
		if err == nil || !cluster || !(isRedirect(err) || errors.Is(err, syscall.ECONNREFUSED)) || time.Now().After(deadline) {
			return res, err
		}
		cc.ReloadState(ctx)
		t := time.NewTimer(time.Duration(min(attempt, 10)) * 10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Client) runAndWait(ctx context.Context, s *script, k *queueKeys, cmd []any, submitted int) ([]string, error) {
	var node *redis.Client
	switch r := c.rdb.(type) {
	case *redis.Client: // one server, or Sentinel's failover client
		node = r
	case *redis.ClusterClient:
		m, err := r.MasterForKey(ctx, k.all[0])
		if err != nil {
			return nil, err
		}
		node = m
	default:
		return nil, fmt.Errorf("WaitReplicas needs a redis.Client or redis.ClusterClient, not %T", c.rdb)
	}
	conn := node.Conn()
	defer conn.Close()
	res, err := c.exec(ctx, conn, s, cmd).StringSlice()
	if err != nil {
		return nil, err
	}
	if len(res) > 0 && (res[0] == "err" || res[0] == "guard") {
		return res, nil // refused: nothing was written
	}
	if dup := (len(res) - 1) / 2; dup > 0 && dup == submitted {
		// Every job was a duplicate: the script wrote nothing, and WAIT
		// waits for this connection's last write, which may be long
		// acknowledged while the earlier submit of these jobs is still on
		// the master only (a retry after ErrNotReplicated). A write now
		// comes after it in the replication stream, so WAIT confirms it.
		if err := conn.Set(ctx, k.tag+"replicated", "1", time.Minute).Err(); err != nil {
			return nil, err
		}
	}
	acked, err := conn.Wait(ctx, c.opts.WaitReplicas, c.opts.WaitTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	}
	if int(acked) < c.opts.WaitReplicas {
		return nil, fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acked, c.opts.WaitReplicas, c.opts.WaitTimeout)
	}
	return res, nil
}
