package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated: the write reached the queue's Redis master but fewer
// replicas than Options.WaitReplicas acknowledged it within
// Options.WaitTimeout. The write may survive or be lost in a failover; the
// caller should retry with the same idempotency key.
var ErrNotReplicated = errors.New("write not acknowledged by enough Redis replicas")

// masterOf returns the client of the master of key's slot.
func (c *Client) masterOf(ctx context.Context, key string) (*redis.Client, error) {
	switch r := c.rdb.(type) {
	case *redis.Client: // one server, or Sentinel's failover client
		return r, nil
	case *redis.ClusterClient:
		return r.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("WaitReplicas needs a redis.Client or redis.ClusterClient, not %T", c.rdb)
}

// replicasToWait is how many replicas a submit to the queue of keys k
// waits for (Options.WaitReplicas; for WaitReplicasAuto, every replica the
// master had: the most it was seen with under its replication id, kept in
// the queue's slot in the hash sundial:{q}:replicas, or more if it reports
// more connected now). A replica cut off (a partition, a crash) still
// counts: the master reports it gone, and a submit acknowledged without it
// would be lost if a failover promoted it. Such submits answer
// ErrNotReplicated until it is back (docs/operations.md, "Redis
// failover"). A replica promoted by a failover has a replication id of its
// own, so it counts from the replicas it has.
func (c *Client) replicasToWait(ctx context.Context, k *queueKeys) int {
	return c.replicasFor(ctx, k.all[0], k.tag)
}

// replicasFor is replicasToWait for the slot of key, whose keys begin
// with tag (a queue's, or a batch's).
func (c *Client) replicasFor(ctx context.Context, key, tag string) int {
	if c.opts.WaitReplicas != WaitReplicasAuto {
		return c.opts.WaitReplicas
	}
	switch c.rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		// A client WAIT cannot run on (a pipeliner, a ring): submits
		// through it wait for none, as before auto was the default.
		return 0
	}
	node, err := c.masterOf(ctx, key)
	if err != nil {
		return 1 // the submit finds out
	}
	addr := node.Options().Addr
	now := time.Now()
	c.replicaMu.Lock()
	seen, ok := c.replicaSeen[addr]
	c.replicaMu.Unlock()
	if ok && now.Sub(seen.at) < time.Second {
		return seen.n
	}
	info, err := node.Info(ctx, "replication").Result()
	n := 0
	if err != nil {
		n = 1 // unknown: wait, as if it had one
	} else if v, err := strconv.Atoi(infoField(info, "connected_slaves")); err == nil {
		n = min(max(v, 0), 16)
	}
	if err == nil {
		n = c.mostReplicasSeen(ctx, node, tag, infoField(info, "master_replid"), n)
	}
	c.replicaMu.Lock()
	if c.replicaSeen == nil {
		c.replicaSeen = map[string]replicaCount{}
	}
	c.replicaSeen[addr] = replicaCount{n: n, at: now}
	c.replicaMu.Unlock()
	return n
}

// mostReplicasSeen returns the most replicas the master of k's slot was
// seen with under its replication id replid: by this client, and, for a
// queue's slot (tag not ""), by any (the hash sundial:{q}:replicas, which
// outlives a restart of the process). A batch's slot has no such key (it
// would be one more per batch): its writes wait for what this process saw. On an error it answers connected, or 1 when that is 0 (the
// submit finds out).
func (c *Client) mostReplicasSeen(ctx context.Context, node *redis.Client, tag, replid string, connected int) int {
	if replid == "" {
		return connected
	}
	mem := node.Options().Addr + " " + replid
	c.replicaMu.Lock()
	if c.replicaMost == nil {
		c.replicaMost = map[string]int{}
	}
	most := max(c.replicaMost[mem], connected)
	c.replicaMost[mem] = most
	c.replicaMu.Unlock()
	if tag == "" {
		return most
	}
	key := tag + "replicas"
	seen, err := node.HGet(ctx, key, replid).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return max(most, 1)
	}
	if most > seen {
		_ = node.HSet(ctx, key, replid, most).Err() // not kept: the next read tries again
		return most
	}
	return seen
}

// replicaCount is what replicasToWait last read of a master.
type replicaCount struct {
	n  int
	at time.Time
}

// infoField returns field's value in an INFO answer, or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// runReplicated runs script s on a connection of its own to the master of
// k's slot and then WAITs on that connection (WAIT counts the replicas that
// have every write of its own connection) for Options.WaitReplicas replicas.
// cmd is the call's command (Client.command), a submit of submitted jobs.
func (c *Client) runReplicated(ctx context.Context, s *script, k *queueKeys, cmd []any, submitted, replicas int) ([]string, error) {
	// A refused script wrote nothing: MOVED, ASK and TRYAGAIN (a shard
	// failed over, a slot is moving) and a refused connection (a dead
	// master still in the slot map) are retried on the slot's master, once
	// the cluster client reloaded its map.
	deadline := time.Now().Add(c.opts.WaitTimeout)
	for attempt := 1; ; attempt++ {
		res, err := c.runAndWait(ctx, s, k, cmd, submitted, replicas)
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

func (c *Client) runAndWait(ctx context.Context, s *script, k *queueKeys, cmd []any, submitted, replicas int) ([]string, error) {
	node, err := c.masterOf(ctx, k.all[0])
	if err != nil {
		return nil, err
	}
	conn := node.Conn()
	defer conn.Close()
	res, err := c.exec(ctx, conn, s, cmd).StringSlice()
	if err != nil {
		return nil, err
	}
	if len(res) > 0 && (res[0] == "err" || res[0] == "guard" || res[0] == "forgotten") {
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
	if err := c.waitFor(ctx, conn, replicas); err != nil {
		return nil, err
	}
	return res, nil
}

// waitFor WAITs on conn for n replicas to have every write of conn, within
// Options.WaitTimeout; ErrNotReplicated when fewer acknowledged.
func (c *Client) waitFor(ctx context.Context, conn *redis.Conn, n int) error {
	acked, err := conn.Wait(ctx, n, c.opts.WaitTimeout).Result()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	}
	if int(acked) < n {
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acked, n, c.opts.WaitTimeout)
	}
	return nil
}

// replicated runs write on a connection of its own to the master of key's
// slot (keys beginning with tag, "" for a slot that is not a queue's) and then, with Options.WaitReplicas, WAITs
// there for the replicas a submit waits for: a batch's creation, members
// and seal are acknowledged only once they would survive a failover, as
// its members' submits are (ErrNotReplicated otherwise).
func (c *Client) replicated(ctx context.Context, key, tag string, write func(conn *redis.Conn) error) error {
	n := 0
	if c.opts.WaitReplicas != 0 {
		n = c.replicasFor(ctx, key, tag)
	}
	if n == 0 {
		return write(nil)
	}
	node, err := c.masterOf(ctx, key)
	if err != nil {
		return err
	}
	conn := node.Conn()
	defer conn.Close()
	if err := write(conn); err != nil {
		return err
	}
	return c.waitFor(ctx, conn, n)
}
