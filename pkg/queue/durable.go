package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// Durable execution's engine part (docs/durable.md). A durable job's
// steps are recorded in its hash, field "st:<seq>" (job.StepRecord), by
// lua/step.lua under the running attempt's fencing token: an attempt that
// lost its lease records nothing, and a step recorded once is never
// recorded again (a call sent twice answers the first record). Signals
// are kept in the hash too, field "sg:<name>" (lua/signal.lua), and a job
// waiting for one is parked: its attempt ends with OutcomeParked, which
// schedules it until its deadline with the attempt given back, and a
// signal for it queues it at once. Everything lives in the job's hash, in
// its queue's slot, and goes when the job is pruned.

// Limits of durable jobs.
const (
	// MaxSteps is how many steps (sleeps and waits included) one job may
	// record.
	MaxSteps = 1000
	// MaxStepBytes bounds a step's result or error, and a signal's value.
	MaxStepBytes = 256 << 10
	// MaxJobStepBytes bounds what one job's steps hold together.
	MaxJobStepBytes = 4 << 20
	// MaxPendingSignals bounds, per queue, the signals kept for keys no
	// job chose yet (SendSignal by key before the job's wait began).
	MaxPendingSignals = 100_000
)

// OutcomeParked ends an attempt of a durable job that waits (a sleep, a
// signal): Error says what it waits for ("sleep" or "signal:<name>"), and
// it is scheduled Delay from now with the attempt given back, or queued at
// once when the signal it waits for arrived meanwhile.
const OutcomeParked OutcomeKind = "park"

// Errors of durable jobs.
var (
	// ErrLeaseLost: the attempt no longer holds the job's lease (it
	// expired and the job was claimed again, or it was cancelled), so it
	// may record nothing.
	ErrLeaseLost = errors.New("the attempt's lease is lost")
	// ErrTooManySteps: the job recorded MaxSteps steps already.
	ErrTooManySteps = fmt.Errorf("a job records at most %d steps", MaxSteps)
	// ErrStepsTooLarge: the job's steps would hold more than
	// MaxJobStepBytes together.
	ErrStepsTooLarge = fmt.Errorf("a job's steps hold at most %d bytes together", MaxJobStepBytes)
)

// StepWrite is a step to record (RecordStep).
type StepWrite struct {
	Seq    int    // its place in the handler's order, from 1
	Record string // job.StepRecord
	// Signal names the signal a wait waits for; RecordStep then returns
	// the signal when one arrived.
	Signal string
	// Key is the key a wait for a signal chose (signals may then be sent
	// to the key); "" for none.
	Key string
}

// RecordStep records a step of lease's attempt (docs/durable.md) and
// returns the step's record as it now stands: the one given, or the one
// recorded before (a record is never replaced, except a wait's by its
// end). For a wait, signal is the signal's record when one arrived ("" if
// none). ErrLeaseLost when the attempt no longer holds the lease.
func (c *Client) RecordStep(ctx context.Context, queue string, l Lease, w StepWrite) (rec, signal string, err error) {
	s := c.scripts.step
	cmd := append(c.command(s, c.keysFor(queue), c.opts.Now(), 8), l.Job.ID, l.Token, w.Seq, w.Record, MaxSteps, w.Signal, w.Key, MaxJobStepBytes)
	res, err := c.exec(ctx, c.rdb, s, cmd).StringSlice()
	if err != nil {
		return "", "", fmt.Errorf("record step: %w", err)
	}
	switch res[0] {
	case "stale":
		return "", "", ErrLeaseLost
	case "too_many":
		return "", "", ErrTooManySteps
	case "too_big":
		return "", "", ErrStepsTooLarge
	}
	return res[1], res[2], nil
}

// Recorded returns the steps (seq → job.StepRecord) and signals (name →
// record) job id of queue holds: what a new attempt replays.
func (c *Client) Recorded(ctx context.Context, queue, id string) (steps map[int]string, signals map[string]string, err error) {
	h, err := c.rdb.HGetAll(ctx, c.keysFor(queue).job(id)).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read steps: %w", err)
	}
	steps, signals = map[int]string{}, map[string]string{}
	for f, v := range h {
		if n, ok := strings.CutPrefix(f, "st:"); ok {
			if seq, err := strconv.Atoi(n); err == nil {
				steps[seq] = v
			}
		} else if name, ok := strings.CutPrefix(f, "sg:"); ok {
			signals[name] = v
		}
	}
	return steps, signals, nil
}

// SignalStatus is what SendSignal did.
type SignalStatus string

// The statuses of SendSignal.
const (
	SignalDelivered SignalStatus = "delivered" // kept on the job; a job parked for it was queued
	SignalDuplicate SignalStatus = "duplicate" // sent before with the same idempotency key
	SignalConflict  SignalStatus = "conflict"  // the job has a signal of that name already
	SignalFinished  SignalStatus = "finished"  // the job ended
	SignalMissing   SignalStatus = "missing"   // no such job
	SignalPending   SignalStatus = "pending"   // by key: no job chose the key yet; kept for the one that will
	SignalFull      SignalStatus = "full"      // by key: MaxPendingSignals kept already
)

// Signal is a signal to send (SendSignal): to job ID of Queue, or to the
// job of Queue that chose Key.
type Signal struct {
	Queue, ID, Key, Name string
	Value                json.RawMessage
	IdempotencyKey       string
}

// SendSignal delivers s (docs/durable.md) and returns what happened and
// the job's id ("" when sent by key to no job yet).
func (c *Client) SendSignal(ctx context.Context, s Signal) (SignalStatus, string, error) {
	sc := c.scripts.signal
	value := string(s.Value)
	if value == "" {
		value = "null"
	}
	// A call without an idempotency key gets one of its own, so that the
	// same call sent again (its reply lost, go-redis retrying) is known
	// as itself: answered as delivered, not refused as another sender's.
	idem, own := s.IdempotencyKey, s.IdempotencyKey == ""
	if own {
		idem = "~" + string(tokenTags(2))
	}
	k := c.keysFor(s.Queue)
	cmd := append(c.command(sc, k, c.opts.Now(), 6), s.ID, s.Key, s.Name, value, idem, MaxPendingSignals)
	var res []string
	// Acknowledged once it would survive a failover, as a submit is.
	err := c.replicated(ctx, k.all[kHigh], k.tag, func(conn *redis.Conn) error {
		var r scripter = c.rdb
		if conn != nil {
			r = conn
		}
		var err error
		res, err = c.exec(ctx, r, sc, cmd).StringSlice()
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("signal: %w", err)
	}
	st := SignalStatus(res[0])
	if own && st == SignalDuplicate {
		// Only this call had its key: it was this call, sent again.
		st = SignalDelivered
		if res[1] == "" {
			st = SignalPending
		}
	}
	return st, res[1], nil
}

// decodeDurable reads what a durable job recorded from its hash h (nil
// when it recorded nothing).
func decodeDurable(j *job.Job, h map[string]string) *job.Durable {
	var d *job.Durable
	get := func() *job.Durable {
		if d == nil {
			d = &job.Durable{}
		}
		return d
	}
	for f, v := range h {
		if n, ok := strings.CutPrefix(f, "st:"); ok {
			if seq, err := strconv.Atoi(n); err == nil {
				if s, ok := job.ParseStep(seq, v); ok {
					get().Steps = append(get().Steps, s)
				}
			}
		} else if name, ok := strings.CutPrefix(f, "sg:"); ok {
			if s, ok := job.ParseSignal(name, v); ok {
				get().Signals = append(get().Signals, s)
			}
		}
	}
	if k := h["signal_key"]; k != "" {
		get().SignalKey = k
	}
	if a := h["awaits"]; a != "" && j.State == job.Scheduled {
		at, what, _ := strings.Cut(a, " ")
		if n, err := strconv.ParseInt(at, 10, 64); err == nil && n == j.RunAt.UnixMilli() {
			w := &job.Awaiting{Kind: "sleep", Until: job.Time(j.RunAt)}
			if name, ok := strings.CutPrefix(what, "signal:"); ok {
				w.Kind, w.Signal = "signal", name
			}
			get().Awaiting = w
		}
	}
	if d != nil {
		slices.SortFunc(d.Steps, func(a, b job.Step) int { return a.Seq - b.Seq })
		slices.SortFunc(d.Signals, func(a, b job.Signal) int { return strings.Compare(a.Name, b.Name) })
	}
	return d
}

// awaitingHeld says what keeps a parked durable job from running (nil for
// a job that is not parked).
func awaitingHeld(j *job.Job) *job.HeldBack {
	if j.Durable == nil || j.Durable.Awaiting == nil {
		return nil
	}
	a := j.Durable.Awaiting
	until := time.Time(a.Until).UTC().Format(job.TimeLayout)
	if a.Kind == "signal" {
		return &job.HeldBack{Reason: job.HeldSignal, Message: fmt.Sprintf("waiting for signal %q (until %s)", a.Signal, until)}
	}
	return &job.HeldBack{Reason: job.HeldSleeping, Message: "sleeping until " + until}
}
