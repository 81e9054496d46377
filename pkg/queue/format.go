package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The storage format is the layout of what the engine keeps in Redis (job
// hashes, list entries, the active set). A release writes one format and
// reads a set of them; during a rolling upgrade the releases of both sides
// share one Redis, so a new format may be written only once no live
// process lacks it (docs/engine.md, "Storage format").
//
// Every long-running process (API, worker, poller) registers as a reader:
// it records the formats it reads in a registry kept in Redis, renewed
// every few seconds, and refuses to go on when the Redis holds a format it
// does not read (the marker, keyFormat). Registering checks the marker in
// the same script, so a process cannot register as a reader of format 1
// after the marker moved on. While registered, a process does engine work
// only as long as its registration is live by its own clock: one that
// could not renew for ReaderTTL stops running scripts until it renews,
// which makes a switch that waits ReaderTTL after moving the marker safe
// against processes whose registration Redis lost (a restart without
// persistence, a failover).
//
// Format 2 keeps a running attempt's token, number, worker and start in
// the queue's active record only: a claim writes nothing on the job hash.
// Format 3 is format 2 with a padding entry in the lease set and the
// active hash (lua/lib.lua, PAD), which an older release would count as a
// running job. Format 4 (this release's) is format 3 with compact job
// hashes: a submit leaves out the fields a reader knows without them (the
// id and queue, in the key; run_at equal to created_at; the defaults of
// lua/lib.lua's JOB_DEFAULTS), which an older release would read as empty.
// A process writes the newest format only once the
// gate opened: the marker moved to it (trySwitch, tried by every
// registered process while no live reader lacks the format and no worker
// of a release from before the registry is alive) and the marker's
// writable_at has passed, ReaderTTL after the move, so that every process
// of an older release has either renewed and been refused, or stopped
// running scripts by its own clock. Where no process of an older release
// was ever seen (a new deployment) the format is writable at once
// (lua/switch.lua). Until then a process writes the marker's format while
// that is writable, and keeps writing what it wrote while the marker moves
// on (every live process reads it); one whose first registration found no
// format writable writes format 1. A client that never registered writes
// the newest format once that is writable and format 1 otherwise
// (followMarker).
const (
	// WriteFormat is the newest storage format this release writes, once
	// the gate to it opened.
	WriteFormat = 4
	// ReaderTTL is how long a registration lasts unrenewed.
	ReaderTTL = 30 * time.Second
)

// readFormats are the storage formats this release reads.
var readFormats = []int{1, 2, 3, 4}

// ReadFormats returns the storage formats this release reads.
func ReadFormats() []int { return slices.Clone(readFormats) }

// Registration timing: a renewal every renewEvery, and after a failed
// attempt another one every retryEvery, so that a registration survives
// several failed attempts before it lapses.
var (
	readerTTL  = ReaderTTL // tests shorten it
	renewEvery = 5 * time.Second
	retryEvery = time.Second
)

// ErrNotRegistered is the error of an engine call made while the client's
// registration as a reader is not live: before its first registration
// succeeded, or after it could not be renewed for ReaderTTL (Redis
// unreachable). Calls succeed again once a renewal does.
var ErrNotRegistered = errors.New("queue: this process is not registered as a reader of the storage format (is Redis reachable?); engine calls resume once it is")

// FormatError says that the Redis holds jobs in a storage format this
// release does not read. A process that gets it stops: running on would
// misread the jobs. Run a release that reads the format.
type FormatError struct {
	Format string // the format marker's value
	Reads  []int  // the formats this release reads
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("this Redis holds jobs in storage format %s, and this release of Sundial reads format %s only: run a release that reads it (docs/deploy.md, \"Upgrades\")",
		e.Format, formatList(e.Reads))
}

// formatList lists formats as "1, 2".
func formatList(fs []int) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = strconv.Itoa(f)
	}
	return strings.Join(s, ", ")
}

// ReaderInfo is a process's entry in the registry of readers.
type ReaderInfo struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Hostname  string    `json:"hostname"`
	PID       int       `json:"pid"`
	Reads     []int     `json:"reads"`
	Writes    int       `json:"writes"`
	StartedAt time.Time `json:"started_at"`
	// ExpiresAt is when the registration lapses unless renewed (Redis'
	// clock). Storage fills it in from the registry's score; the JSON
	// entry a process stores holds the zero time.
	ExpiresAt time.Time `json:"expires_at"`
}

// StorageInfo is the storage format of a Redis and its live readers.
type StorageInfo struct {
	// Format is the format marker: the format written there ("1" when
	// no release ever moved it).
	Format string `json:"format"`
	// WritableAt is when the marker's format became (or becomes) writable
	// (Redis' clock; see the gate in the package comment); nil while the
	// marker was never moved.
	WritableAt *time.Time   `json:"writable_at,omitempty"`
	Readers    []ReaderInfo `json:"readers"`
	// HeldBackBy are the ids of the live readers that lack WriteFormat:
	// while there are any, the marker does not move to it.
	HeldBackBy []string `json:"held_back_by"`
	// Unregistered are the ids of live workers (in the worker registry)
	// with no registration of the same host and pid: processes of a
	// release from before the storage format, which a new format must
	// not be written beside. HTTP workers are left out (the API that
	// serves them is the reader). APIs and pollers of such releases leave
	// no trace and cannot be listed.
	Unregistered []string `json:"unregistered_workers"`
}

// Storage reports the format marker and the live registrations, and the
// workers seen within workerMaxAge that are not registered.
func (c *Client) Storage(ctx context.Context, workerMaxAge time.Duration) (*StorageInfo, error) {
	st, err := c.readers(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := c.Workers(ctx, workerMaxAge)
	if err != nil {
		return nil, err
	}
	type proc struct {
		host string
		pid  int
	}
	registered := map[proc]bool{}
	for _, r := range st.Readers {
		registered[proc{r.Hostname, r.PID}] = true
	}
	st.Unregistered = []string{}
	for _, w := range ws {
		if !strings.HasPrefix(w.Hostname, HTTPWorkerHost) && !registered[proc{w.Hostname, w.PID}] {
			st.Unregistered = append(st.Unregistered, w.ID)
		}
	}
	return st, nil
}

// readers reads the format marker and the live registrations.
func (c *Client) readers(ctx context.Context) (*StorageInfo, error) {
	marker, err := c.rdb.HMGet(ctx, keyFormat, "format", "writable_at").Result()
	if err != nil {
		return nil, err
	}
	format, _ := marker[0].(string)
	if format == "" {
		format = "1"
	}
	var writableAt *time.Time
	if at, _ := marker[1].(string); at != "" {
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
			t := msTime(ms)
			writableAt = &t
		}
	}
	now := time.Now()
	live, err := c.rdb.ZRangeByScoreWithScores(ctx, keyReaders, &redis.ZRangeBy{Min: "(" + itoa(now.UnixMilli()), Max: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	out := &StorageInfo{Format: format, WritableAt: writableAt, Readers: []ReaderInfo{}, HeldBackBy: []string{}}
	if len(live) == 0 {
		return out, nil
	}
	ids := make([]string, len(live))
	for i, z := range live {
		ids[i] = z.Member.(string)
	}
	infos, err := c.rdb.HMGet(ctx, keyReadersInfo, ids...).Result()
	if err != nil {
		return nil, err
	}
	for i, v := range infos {
		r := ReaderInfo{ID: ids[i]}
		if s, ok := v.(string); ok {
			_ = json.Unmarshal([]byte(s), &r) // an unreadable entry still counts, by id
		}
		r.ExpiresAt = msTime(int64(live[i].Score))
		out.Readers = append(out.Readers, r)
		if !slices.Contains(r.Reads, WriteFormat) {
			out.HeldBackBy = append(out.HeldBackBy, r.ID)
		}
	}
	return out, nil
}

// fence keeps a client's script calls to the times its registration is
// live (see the package comment above). A client that never registered is
// not fenced: short-lived tools and tests use the engine without it.
type fence struct {
	born    time.Time    // the clock origin (monotonic)
	regs    atomic.Int32 // open registrations
	until   atomic.Int64 // live until born+until (ns)
	refused atomic.Pointer[FormatError]
	// writes is the storage format the client's claims write: the
	// newest one a renewal found writable, 1 before (and on a client that
	// never registered).
	writes atomic.Int32
}

// claimFormat is claim.lua's format argument: the format this client writes.
func (c *Client) claimFormat(ctx context.Context) string {
	c.followMarker(ctx)
	return strconv.Itoa(c.Writing())
}

// submitFormat is submit.lua's format argument: "4" once this client
// writes format 4 (compact job hashes), else "" (every field).
func (c *Client) submitFormat(ctx context.Context) string {
	c.followMarker(ctx)
	if c.Writing() >= 4 {
		return "4"
	}
	return ""
}

// follower keeps what a client that never registered writes in step with
// the marker (see followMarker).
type follower struct {
	mu     sync.Mutex
	next   atomic.Int64 // when to look again: since(fence.born), ns
	pinned atomic.Bool  // the format was set by hand (tests)
}

// followMarker decides what a client that never registered writes: the
// newest format once the marker is at it and it is writable, after trying
// to move the marker there as a registered process's renewal does
// (trySwitch: only while no live reader lacks it and no worker of a
// release from before the registry is alive), else format 1. A new
// deployment's producers then write compact job hashes from their first
// submit. It looks again every renewal interval: the first caller past it
// looks while the others go on with what the client wrote so far.
func (c *Client) followMarker(ctx context.Context) {
	if c.fence.regs.Load() > 0 || c.follow.pinned.Load() || time.Since(c.fence.born) < time.Duration(c.follow.next.Load()) {
		return
	}
	if !c.follow.mu.TryLock() {
		return
	}
	defer c.follow.mu.Unlock()
	if time.Since(c.fence.born) < time.Duration(c.follow.next.Load()) {
		return
	}
	w := int32(1)
	if c.trySwitch(ctx, slog.Default()) {
		w = WriteFormat
	}
	c.fence.writes.Store(w)
	c.follow.next.Store(int64(time.Since(c.fence.born) + renewEvery))
}

// Writing returns the storage format the client's claims and submits
// write now: 1 until its registration (or, never registered, its look at
// the marker: followMarker) found a newer one writable.
func (c *Client) Writing() int { return int(c.fence.writes.Load()) }

// check returns why a script may not run now, or nil.
func (f *fence) check() error { return f.checkFor(0) }

// checkFor returns why a script may not run now and for at least d more
// (a call that Redis runs only after a blocking command ahead of it ends),
// or nil.
func (f *fence) checkFor(d time.Duration) error {
	if e := f.refused.Load(); e != nil {
		return e
	}
	if f.regs.Load() == 0 || time.Since(f.born)+d < time.Duration(f.until.Load()) {
		return nil
	}
	return ErrNotRegistered
}

// extend makes the registration live until at least since(born) = until.
func (f *fence) extend(until time.Duration) {
	for {
		cur := f.until.Load()
		if int64(until) <= cur || f.until.CompareAndSwap(cur, int64(until)) {
			return
		}
	}
}

// Registration is a process's entry in the registry of readers, renewed in
// the background until Close.
type Registration struct {
	c      *Client
	info   ReaderInfo
	log    *slog.Logger
	fail   context.CancelCauseFunc // ends the context Register returned
	stop   context.CancelFunc      // ends the renewals
	done   chan struct{}
	first  chan struct{}
	err    *FormatError // set before done closes
	closed sync.Once
}

// Register records this process (role: "api", "worker", "poller"…) as a
// reader of the formats this release reads, and renews the registration
// until Close. It returns once the first attempt ended (go-redis' own
// timeouts bound it), so that a process does not start its work
// unregistered on a slow machine; Redis being unreachable is no refusal: the attempts go on, and the client's
// engine calls fail with ErrNotRegistered until one succeeds. When the
// Redis holds a format this release does not read, now or later, the
// returned context ends with a *FormatError as its cause
// (context.Cause), every engine call of the client fails with it from then
// on, and Close returns it. log (nil: slog.Default()) gets the failed
// attempts.
func (c *Client) Register(ctx context.Context, role string, log *slog.Logger) (context.Context, *Registration) {
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	r := &Registration{
		c: c, log: log,
		info: ReaderInfo{
			ID:   role + "-" + host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:]),
			Role: role, Hostname: host, PID: os.Getpid(), Reads: readFormats, Writes: WriteFormat,
			StartedAt: time.Now().UTC().Truncate(time.Millisecond),
		},
		done: make(chan struct{}), first: make(chan struct{}),
	}
	out, fail := context.WithCancelCause(ctx)
	renewals, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.fail, r.stop = fail, stop
	c.fence.regs.Add(1)
	go r.renew(renewals)
	select {
	case <-r.first:
	case <-ctx.Done():
	}
	return out, r
}

// ID returns the registration's id in the registry.
func (r *Registration) ID() string { return r.info.ID }

// renew registers, then renews until ctx ends or the format is refused.
func (r *Registration) renew(ctx context.Context) {
	defer close(r.done)
	args := []any{r.info.ID, readerTTL.Milliseconds(), nil}
	for _, f := range r.info.Reads {
		args = append(args, f)
	}
	keys := []string{keyFormat, keyReaders, keyReadersInfo}
	var firstOnce sync.Once
	delay := time.Duration(0)
	failing := false // in a streak of failed attempts: logged once, at its start
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		start := time.Since(r.c.fence.born)
		r.info.Writes = r.c.Writing()
		args[2], _ = json.Marshal(r.info)
		res, err := r.c.call(ctx, r.c.rdb, r.c.scripts.register, keys, args).Slice()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil || len(res) != 3:
			if !failing {
				r.log.Warn("registering as a reader of the storage format failed; retrying every second", "err", err)
			}
			failing, delay = true, retryEvery
		case res[0] == int64(0):
			format, _ := res[1].(string)
			r.err = &FormatError{Format: format, Reads: r.info.Reads}
			r.c.fence.refused.Store(r.err)
			r.log.Error("refusing to run", "err", r.err)
			r.fail(r.err)
			firstOnce.Do(func() { close(r.first) })
			return
		default:
			r.c.fence.extend(start + readerTTL)
			if failing {
				r.log.Info("registered as a reader of the storage format again")
			}
			failing, delay = false, renewEvery
			format, _ := res[1].(string)
			marker, _ := strconv.Atoi(format)
			writable := res[2] == int64(1)
			if marker != WriteFormat && r.c.trySwitch(ctx, r.log) {
				marker, writable = WriteFormat, true
			}
			if r.setWrites(marker, writable) {
				delay = 0 // renew at once: the registry shows the format written
				continue
			}
		}
		firstOnce.Do(func() { close(r.first) })
	}
}

// setWrites sets the format the client writes from the marker's format
// and whether it is writable, and tells whether that changed. A writable
// marker's format is written. While a move has not settled (the gate),
// the format written before goes on, being below the marker; a marker
// below what the client writes (a Redis that lost its data, where an
// older release may register again) brings it down to format 1, the one
// every release reads.
func (r *Registration) setWrites(marker int, writable bool) bool {
	w := int32(marker)
	if !writable {
		w = max(1, min(r.c.fence.writes.Load(), int32(marker-1)))
	}
	if r.c.fence.writes.Swap(w) == w {
		return false
	}
	r.log.Info("storage format written by this process", "format", w)
	return true
}

// trySwitch tries to move the format marker to WriteFormat (the gate of
// the package comment) and tells whether the format is writable now; log
// gets the move. It does nothing while a worker of a release from before
// the registry is alive (Storage's unregistered workers) or, in the
// script, while a live registration lacks the format. A registration's
// renewals and an unregistered client's followMarker both call it.
func (c *Client) trySwitch(ctx context.Context, log *slog.Logger) bool {
	st, err := c.Storage(ctx, unregisteredWorkerAge)
	if err != nil || len(st.Unregistered) > 0 {
		return false
	}
	res, err := c.call(ctx, c.rdb, c.scripts.switchFormat, []string{keyFormat, keyReaders, keyReadersInfo},
		[]any{WriteFormat, readerTTL.Milliseconds()}).Slice()
	if err != nil || len(res) != 3 {
		return false
	}
	if res[0] == int64(1) {
		at, _ := res[2].(int64)
		log.Info("moved the storage format marker: every live process reads the new format",
			"format", WriteFormat, "writable_at", msTime(at))
	}
	return res[1] == int64(1)
}

// unregisteredWorkerAge is how recent a worker's heartbeat must be for a
// worker without a registration to hold the storage format back.
const unregisteredWorkerAge = time.Minute

// Close stops the renewals and removes the entry (a process that stops is
// no reader), and returns the *FormatError that refused the registration,
// if any. The client's engine calls are no longer fenced by it.
func (r *Registration) Close() error {
	r.closed.Do(func() {
		r.stop()
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		pipe := r.c.rdb.Pipeline()
		pipe.ZRem(ctx, keyReaders, r.info.ID)
		pipe.HDel(ctx, keyReadersInfo, r.info.ID)
		if _, err := pipe.Exec(ctx); err != nil {
			r.log.Warn("removing the registration failed; it lapses by itself", "err", err, "after", readerTTL)
		}
		r.c.fence.regs.Add(-1)
		r.fail(context.Canceled)
	})
	if r.err != nil {
		return r.err
	}
	return nil
}
