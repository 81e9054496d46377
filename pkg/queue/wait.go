package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// WaitForWork blocks until a job may have arrived in one of queues, timeout
// passes, or ctx ends. It returns true when woken by a signal. Idle workers
// call it after a claim came back empty (which cleared the signal lists), so
// a submit after that claim always wakes one of them.
//
// On one Redis (or Sentinel) it is one BLPOP over every queue's signal list.
// On Redis Cluster one BLPOP cannot span slots, so it blocks on every slot
// at once, one BLPOP per slot on that slot's master: the first wake wins and
// the other BLPOPs are ended with CLIENT UNBLOCK, so each call returns its
// connections to the pool before it returns. A shard that fails ends only
// its own BLPOP; the call fails when every shard does.
func (c *Client) WaitForWork(ctx context.Context, queues []string, timeout time.Duration) (bool, error) {
	keys := make([]string, len(queues))
	for i, q := range queues {
		keys[i] = c.keysFor(q).key(kSignal)
	}
	cc, cluster := c.rdb.(*redis.ClusterClient)
	if !cluster {
		return blpop(ctx, c.rdb, timeout, keys...)
	}
	groups := groupBySlot(keys)
	if len(groups) == 1 {
		ok, err := blpop(ctx, c.rdb, timeout, keys...)
		return movedIsWake(ctx, cc, ok, err)
	}
	return waitSlots(ctx, cc, groups, timeout)
}

// WaitAndClaim is WaitForWork on one queue followed by Claim, in one round
// trip where it can: the claim is pipelined behind a BLPOP of the queue's
// signal list, and Redis runs it the moment the BLPOP ends (a submit's
// wake-up, or the timeout), so a woken worker does not first hear of the
// job and then ask for it. Such a claim takes its clock from Redis (TIME),
// since its caller cannot know when it runs. It makes the two calls
// instead on a Redis Cluster, with a clock of the caller's
// (Options.Now, Options.LeaseClock), with EVALSHA scripts, for a timeout
// under a second (BLPOP counts whole seconds) or not a second inside the
// client's read timeout, and when the registration (see Register) might
// lapse before the wait ends.
//
// It returns the leases claimed: none when the wait timed out or the queue
// is paused. The claim runs even when ctx ends during the wait; its leases
// are returned then too, and the caller owns them (a stopping worker gives
// them back with Release). types are Claim's.
func (c *Client) WaitAndClaim(ctx context.Context, queue string, n int, workerID string, timeout time.Duration, types ...string) ([]Lease, error) {
	if !c.canPipelineWait(timeout) {
		if _, err := c.WaitForWork(ctx, []string{queue}, timeout); err != nil {
			return nil, err
		}
		return c.Claim(ctx, queue, n, workerID, types...)
	}
	k := c.keysFor(queue)
	// A zero now: the claim reads Redis' TIME (lib.lua, begin).
	cmd := c.claimArgs(ctx, c.command(c.scripts.claim, k, time.Time{}, claimArgsLen), n, workerID, strings.Join(types, ","))
	pipe := c.rdb.Pipeline()
	pipe.BLPop(ctx, timeout.Truncate(time.Second), k.key(kSignal))
	claim := fcallCmd(ctx, cmd)
	_ = pipe.Process(ctx, claim)
	_, _ = pipe.Exec(ctx) // a timed-out BLPOP's redis.Nil is no failure; the claim's own error decides
	res, err := claim.StringSlice()
	switch {
	case err == nil:
		return parseLeases(res, queue, workerID, time.Now()), nil
	case isNoFunction(err):
		// The server lacks the library (restarted without persistence) or
		// functions: the ordinary call loads it, or falls back to EVALSHA.
		return c.Claim(ctx, queue, n, workerID, types...)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("claim: %w", err)
}

// canPipelineWait tells whether WaitAndClaim may send its claim behind a
// BLPOP of timeout (see there).
func (c *Client) canPipelineWait(timeout time.Duration) bool {
	rc, ok := c.rdb.(*redis.Client) // one Redis, or Sentinel's failover client
	if !ok || c.customClock || c.mode.eval.Load() || timeout < time.Second {
		return false
	}
	if rt := rc.Options().ReadTimeout; rt > 0 && timeout+time.Second > rt {
		return false
	}
	return c.fence.checkFor(timeout+time.Second) == nil
}

// waiter is one slot's BLPOP in a cluster-wide wait.
type waiter struct {
	node *redis.Client
	id   int64 // CLIENT ID of the blocked connection; 0 until known
	done chan struct{}
	ok   bool
	err  error
}

// waitSlots runs one BLPOP per slot group concurrently and returns at the
// first wake, error, timeout or end of ctx, after ending every other BLPOP.
func waitSlots(ctx context.Context, cc *redis.ClusterClient, groups [][]string, timeout time.Duration) (bool, error) {
	var (
		mu      sync.Mutex
		stopped bool
		first   = make(chan *waiter, len(groups))
	)
	ws := make([]*waiter, len(groups))
	for i, keys := range groups {
		w := &waiter{done: make(chan struct{})}
		ws[i] = w
		go func() {
			defer close(w.done)
			defer func() { first <- w }()
			node, err := cc.MasterForKey(ctx, keys[0])
			if err != nil {
				w.err = err
				return
			}
			conn := node.Conn()
			defer conn.Close()
			id, err := conn.ClientID(ctx).Result()
			if err != nil {
				w.err = err
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			w.node, w.id = node, id
			mu.Unlock()
			w.ok, w.err = blpop(ctx, conn, timeout, keys...)
		}()
	}

	// A slot whose master fails (its shard is failing over) does not end
	// the wait: the other shards can still wake it.
	var win *waiter
	var firstErr error
	finished, failed := 0, 0
wait:
	for finished < len(ws) {
		select {
		case w := <-first:
			finished++
			if w.ok || (w.err != nil && isRedirect(w.err)) {
				win = w
				break wait
			}
			if w.err != nil {
				failed++
				firstErr = cmp.Or(firstErr, w.err)
			}
		case <-ctx.Done():
			break wait
		}
	}

	// End the BLPOPs still blocked. An UNBLOCK can reach the server before
	// its BLPOP does (then it answers 0): repeat until each waiter is done.
	mu.Lock()
	stopped = true
	mu.Unlock()
	unblockCtx := context.WithoutCancel(ctx)
	for _, w := range ws {
		for {
			select {
			case <-w.done:
			default:
				mu.Lock()
				node, id := w.node, w.id
				mu.Unlock()
				if node != nil {
					node.ClientUnblock(unblockCtx, id)
				}
				select {
				case <-w.done:
				case <-time.After(5 * time.Millisecond):
					continue
				}
			}
			break
		}
	}

	switch {
	case win != nil:
		return movedIsWake(ctx, cc, win.ok, win.err)
	case ctx.Err() != nil:
		return false, ctx.Err()
	case failed == len(ws):
		return false, firstErr
	}
	return false, nil
}

// movedIsWake turns a MOVED, ASK or TRYAGAIN answer (a slot is migrating or
// its shard failed over) into a wake after refreshing the cluster map: the
// caller's next claim goes to the slot's new owner.
func movedIsWake(ctx context.Context, cc *redis.ClusterClient, ok bool, err error) (bool, error) {
	if err == nil {
		return ok, nil
	}
	if ctx.Err() == nil && isRedirect(err) {
		cc.ReloadState(ctx)
		return true, nil
	}
	return ok, err
}

func isRedirect(err error) bool { return isReply(err, "MOVED ", "ASK ", "TRYAGAIN") }

// isReply tells whether err is an error reply of Redis (not a network or
// client error) whose message starts with one of prefixes.
func isReply(err error, prefixes ...string) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range prefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func blpop(ctx context.Context, rdb redis.Cmdable, timeout time.Duration, keys ...string) (bool, error) {
	err := rdb.BLPop(ctx, timeout, keys...).Err()
	switch {
	case err == nil:
		return true, nil
	case err == redis.Nil:
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, err
}

// groupBySlot groups keys by their Redis Cluster slot, keeping the order in
// which each slot first appears.
func groupBySlot(keys []string) [][]string {
	index := map[int]int{}
	var out [][]string
	for _, k := range keys {
		s := Slot(k)
		i, seen := index[s]
		if !seen {
			i = len(out)
			index[s] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], k)
	}
	return out
}

// Slot returns the Redis Cluster slot of key: CRC16 of its hash tag (the
// part between the first "{" and the next "}", when not empty) or of the
// whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
