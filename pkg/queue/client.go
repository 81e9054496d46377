// Package queue is Sundial's Redis engine: it stores jobs and moves them
// between states with one Lua script per transition, so that at every
// instant a job is in exactly one place and a crash between two commands
// can neither drop nor duplicate it.
package queue

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors returned by the engine. Callers test them with errors.Is.
var (
	// ErrNotFound: no job with that id in any known queue.
	ErrNotFound = errors.New("job not found")
	// ErrConflict: the job is not in a state that allows the operation.
	ErrConflict = errors.New("job is in a conflicting state")
)

// ConflictError says which state refused an operation, and why when the
// state alone does not tell. It matches ErrConflict.
type ConflictError struct{ State, Why string }

func (e *ConflictError) Error() string {
	if e.Why != "" {
		return "job is " + e.State + "; " + e.Why
	}
	return "job is " + e.State
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// WaitReplicasAuto is Options.WaitReplicas' "every replica there is": a
// submit waits for as many replicas as the queue's master reports
// connected (INFO replication, read at most once a second per master), so
// that whichever one a failover promotes has the job (waiting for one of
// two lost jobs when the other, lagging, was promoted); a master without
// replicas waits for none, having none to lose jobs to in a failover.
const WaitReplicasAuto = -1

// Options tune a Client. The zero value is usable: New fills in defaults.
type Options struct {
	// LeaseTTL is how long a claim's lease lasts without renewal: the
	// holder renews it every LeaseTTL/3 while the job runs (Extend), so a
	// job whose worker died comes back after at most this long, whatever
	// the job's timeout. Default 15 s.
	LeaseTTL time.Duration
	// LeaseGrace is how long past a job's timeout its worker keeps the
	// lease, so a handler that honours its deadline can still report; a
	// handler still running after that loses the lease and the job is
	// retried. Default 5 s.
	LeaseGrace time.Duration
	// LeaseClock replaces Redis' own TIME as the clock of lease expiry.
	// Tests only: in production every lease is judged by the one Redis
	// clock, so hosts whose clocks disagree cannot expire each other's
	// leases. Default nil (Redis' TIME).
	LeaseClock func() time.Time
	// IdempotencyWindow is how long an idempotency key names its job. Default 24 h.
	IdempotencyWindow time.Duration
	// LogCap is how many log lines a job keeps (AppendLogs), the oldest
	// dropped first. Default DefaultLogCap.
	LogCap int
	// WaitReplicas, when above 0, makes every submit wait (Redis WAIT, on
	// the connection that wrote the jobs) until that many replicas of the
	// queue's master acknowledge the write, up to WaitTimeout; fewer in
	// time fail the submit with ErrNotReplicated. WaitReplicasAuto waits
	// for every replica the queue's master has connected. Default 0:
	// a submit returns once the master has the jobs (see
	// docs/operations.md); the binaries default to WaitReplicasAuto.
	WaitReplicas int
	// WaitTimeout bounds WaitReplicas' wait. Default 1 s.
	WaitTimeout time.Duration
	// Now is the clock; tests may replace it. Default time.Now.
	Now func() time.Time
}

func (o *Options) fill() {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.LeaseGrace <= 0 {
		o.LeaseGrace = 5 * time.Second
	}
	if o.IdempotencyWindow <= 0 {
		o.IdempotencyWindow = 24 * time.Hour
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Client runs the engine's operations against one Redis deployment
// (standalone, Sentinel or Cluster through go-redis' universal client). It is
// safe for concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	opts    Options
	scripts *scripts
	mode    scriptMode
	fence   fence    // see Register
	follow  follower // what an unregistered client writes (followMarker)
	// customClock: the caller set Options.Now or LeaseClock, so every
	// script call carries the caller's clock (see WaitAndClaim).
	customClock bool
	// customNow: the caller set Options.Now (a test's clock): reclaims
	// then trust the lease clock alone (see Reclaim).
	customNow bool
	// afterForgetScript, when set (tests), runs in Forget between its
	// script and the removal of the queue's listing.
	afterForgetScript func()

	replicaMu   sync.Mutex
	replicaSeen map[string]replicaCount // master address → replicas to wait for
	replicaMost map[string]int          // master address and replication id → the most replicas seen

	mu         sync.Mutex
	keys       map[string]*queueKeys
	known      map[string]time.Time // queue → when it was last registered
	coalescers map[string]*coalescer
	randMu     sync.Mutex
	rng        *rand.Rand
	typeDefs   typeDefsCache // see ApplyTypeDefaults
}

// New returns a Client over rdb.
func New(rdb redis.UniversalClient, opts Options) *Client {
	custom := opts.Now != nil || opts.LeaseClock != nil
	customNow := opts.Now != nil
	opts.fill()
	c := &Client{
		customClock: custom,
		customNow:   customNow,
		rdb:         rdb,
		opts:        opts,
		scripts:     loadScripts(),
		keys:        map[string]*queueKeys{},
		known:       map[string]time.Time{},
		coalescers:  map[string]*coalescer{},
		rng:         rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	c.fence.born = time.Now()
	c.fence.writes.Store(1)
	return c
}

// Redis returns the underlying Redis client.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Options returns the options in effect, defaults filled in.
func (c *Client) Options() Options { return c.opts }

// Now returns the engine's clock reading.
func (c *Client) Now() time.Time { return c.opts.Now() }

func (c *Client) keysFor(queue string) *queueKeys {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.keys[queue]
	if !ok {
		k = keysFor(queue)
		c.keys[queue] = k
	}
	return k
}

// registered reports whether this client registered queue in the last minute.
func (c *Client) registered(queue string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.known[queue]
	return ok && c.opts.Now().Sub(last) < time.Minute
}

// register adds queue to the set of known queues, at most once a minute
// per process.
func (c *Client) register(ctx context.Context, queue string) error {
	now := c.opts.Now()
	c.mu.Lock()
	last, ok := c.known[queue]
	c.mu.Unlock()
	if ok && now.Sub(last) < time.Minute {
		return nil
	}
	if err := c.rdb.SAdd(ctx, keyQueues, queue).Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.known[queue] = now
	c.mu.Unlock()
	return nil
}

// run calls script s over queue's keys with the standard ARGV prefix.
func (c *Client) run(ctx context.Context, s *script, k *queueKeys, now time.Time, args ...any) *redis.Cmd {
	return c.exec(ctx, c.rdb, s, append(c.command(s, k, now, len(args)), args...))
}

// command starts the command of a call of script s over queue keys k:
// FCALL, the function, the keys and the standard ARGV prefix (lib.lua:
// the queue's prefixes, now, the lease clock, the queue's name), with
// room for n more arguments, which the caller appends before exec runs
// it. A zero now sends an empty string (the script then reads Redis'
// clock). Everything but the clocks is boxed once per queue
// (queueKeys.head), so a call allocates one slice for its whole command.
func (c *Client) command(s *script, k *queueKeys, now time.Time, n int) []any {
	cmd := make([]any, 0, len(s.fcall)+len(k.head)+3+n)
	cmd = append(cmd, s.fcall[:]...)
	cmd = append(cmd, k.head...)
	var nowArg any = ""
	if !now.IsZero() {
		nowArg = now.UnixMilli()
	}
	leaseClock := ""
	if c.opts.LeaseClock != nil {
		leaseClock = itoa(c.opts.LeaseClock().UnixMilli())
	}
	return append(cmd, nowArg, leaseClock, k.nameArg)
}

func (c *Client) random() float64 {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return c.rng.Float64()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// ErrInvalidCursor: a paging cursor that this engine did not produce.
var ErrInvalidCursor = errors.New("invalid cursor")
