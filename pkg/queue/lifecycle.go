package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// ClockStepTolerance is how far Redis' clock (the lease clock) may run
// ahead of a reclaiming poller's before the poller's clock bounds what
// counts as expired: a forward step of Redis' clock (an NTP step, a VM
// restored) would otherwise expire every lease at once while its holders
// still trust them. A poller whose clock lags Redis' by more reclaims that
// much later (docs/operations.md, "Leases").
const ClockStepTolerance = 2 * time.Second

// Lease is a claimed job and the fencing token that proves ownership.
type Lease struct {
	Job   *job.Job
	Token string
}

// Claim leases up to n jobs of queue for workerID, highest priority first.
// It returns no leases when the queue is paused or has no due job.
// types, when given, are the only job types the caller runs: a queued job
// of another type is parked for a worker that runs it, and the claim goes
// on behind it (claim.lua), so workers that handle different types share a
// queue and each takes its own types in priority order.
func (c *Client) Claim(ctx context.Context, queue string, n int, workerID string, types ...string) ([]Lease, error) {
	k := c.keysFor(queue)
	now := c.opts.Now()
	cmd := c.claimArgs(ctx, c.command(c.scripts.claim, k, now, claimArgsLen), n, workerID, strings.Join(types, ","))
	res, err := c.exec(ctx, c.rdb, c.scripts.claim, cmd).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return parseLeases(res, queue, workerID, now), nil
}

// claimArgsLen is how many arguments claimArgs appends.
const claimArgsLen = 6

// claimArgs appends claim.lua's own arguments to cmd: how many jobs, the
// worker, the lease TTL, the types, the storage format and the fencing
// tokens' random tags (next_token in claim.lua).
func (c *Client) claimArgs(ctx context.Context, cmd []any, n int, workerID, types string) []any {
	return append(cmd, n, workerID, c.opts.LeaseTTL.Milliseconds(), types, c.claimFormat(ctx), tokenTags(n))
}

// tokenTags returns n tags of 12 random hex digits, one after another.
func tokenTags(n int) []byte {
	b := make([]byte, 0, 12*max(n, 0))
	for range n {
		b = strconv.AppendUint(b, rand.Uint64()>>16|1<<47, 16)
	}
	return b
}

// parseLeases decodes claim.lua's answer: groups of 12 fields per job.
func parseLeases(res []string, queue, workerID string, now time.Time) []Lease {
	const stride = 12
	out := make([]Lease, 0, len(res)/stride)
	for i := 0; i+stride <= len(res); i += stride {
		r := res[i : i+stride]
		attempt, _ := strconv.Atoi(r[4])
		maxAttempts, _ := strconv.Atoi(r[5])
		timeout, _ := strconv.Atoi(r[6])
		created, _ := strconv.ParseInt(r[8], 10, 64)
		runAt, _ := strconv.ParseInt(r[9], 10, 64)
		started := now.UTC()
		j := &job.Job{
			ID: r[0], Queue: queue, Type: r[2], Priority: job.Priority(r[7]), State: job.Active,
			Attempt: attempt, MaxAttempts: maxAttempts, TimeoutSeconds: timeout,
			CreatedAt: msTime(created), RunAt: msTime(runAt), StartedAt: &started, WorkerID: workerID,
			Group: r[10], Traceparent: r[11],
		}
		if r[3] != "" {
			j.Payload = json.RawMessage(r[3])
		}
		out = append(out, Lease{Job: j, Token: r[1]})
	}
	return out
}

// OutcomeKind is how an attempt ended.
type OutcomeKind string

// The outcomes a worker reports.
const (
	OutcomeSucceeded OutcomeKind = "ok"   // the handler returned a result
	OutcomeFailed    OutcomeKind = "fail" // retry with backoff while attempts remain
	OutcomeDead      OutcomeKind = "dead" // do not retry
	// OutcomeSnoozed: run again after Delay without spending an attempt
	// (max_attempts grows by one to give it back).
	OutcomeSnoozed OutcomeKind = "snooze"
	// OutcomeCancelled: the handler cancelled its job; it ends cancelled,
	// with Error as the reason.
	OutcomeCancelled OutcomeKind = "cancel"
)

// Outcome is the end of one attempt, reported by the lease holder.
type Outcome struct {
	ID       string
	Token    string
	Kind     OutcomeKind
	Result   json.RawMessage // for OutcomeSucceeded
	Error    string          // for OutcomeFailed and OutcomeDead; the reason of OutcomeSnoozed and OutcomeCancelled
	WorkerID string
	// Delay is, for OutcomeFailed, the retry's delay when the handler chose
	// one (0: the job's backoff), and for OutcomeSnoozed, how long to wait.
	Delay time.Duration
}

// Status is the state a job reached after an outcome, or StatusStale when
// the outcome was refused because the lease was lost (expired, cancelled).
type Status string

// Statuses returned by Complete.
const (
	StatusSucceeded Status = "succeeded"
	StatusScheduled Status = "scheduled"
	StatusQueued    Status = "queued"
	StatusDead      Status = "dead"
	StatusCancelled Status = "cancelled"
	StatusStale     Status = "stale"
)

// Complete records the outcomes of attempts of queue's jobs in one script
// call and returns one Status per outcome.
func (c *Client) Complete(ctx context.Context, queue string, outcomes []Outcome) ([]Status, error) {
	if len(outcomes) == 0 {
		return nil, nil
	}
	s := c.scripts.complete
	cmd := c.outcomeArgs(c.command(s, c.keysFor(queue), c.opts.Now(), outcomeArgsLen(len(outcomes))), outcomes)
	res, err := c.exec(ctx, c.rdb, s, cmd).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	return statuses(res), nil
}

// outcomeArgsLen is how many arguments outcomeArgs appends for n outcomes.
func outcomeArgsLen(n int) int { return 1 + 6*n }

// outcomeArgs appends complete.lua's arguments for outcomes to args, whose
// capacity the caller sized with outcomeArgsLen.
func (c *Client) outcomeArgs(args []any, outcomes []Outcome) []any {
	args = append(args, len(outcomes))
	for _, o := range outcomes {
		var detail any = o.Error
		if o.Kind == OutcomeSucceeded {
			detail = string(o.Result) // Redis reads no result from "" (complete.lua)
		}
		// Only a failure that may be retried draws its backoff's jitter,
		// unless its handler chose the delay ("+<ms>", complete.lua).
		var r any = 0
		switch {
		case o.Kind == OutcomeSnoozed || o.Kind == OutcomeParked:
			r = max(o.Delay, 0).Milliseconds()
		case o.Kind == OutcomeFailed && o.Delay > 0:
			r = "+" + strconv.FormatInt(o.Delay.Milliseconds(), 10)
		case o.Kind == OutcomeFailed:
			r = c.random()
		}
		args = append(args, o.ID, o.Token, kindArg(o.Kind), detail, o.WorkerID, r)
	}
	return args
}

// kindArg is an outcome kind as an argument; the known ones without
// allocating (a constant's interface value is static).
func kindArg(k OutcomeKind) any {
	switch k {
	case OutcomeSucceeded:
		return string(OutcomeSucceeded)
	case OutcomeFailed:
		return string(OutcomeFailed)
	case OutcomeDead:
		return string(OutcomeDead)
	}
	return string(k)
}

func statuses(res []string) []Status {
	out := make([]Status, len(res))
	for i, s := range res {
		out[i] = Status(s)
	}
	return out
}

// CompleteAndClaim records outcomes of queue's jobs like Complete, then
// claims up to n of its jobs like Claim, in one script call: a worker that
// serves one queue takes new jobs for the slots its finished jobs freed in
// the round trip that reports them. types are Claim's.
func (c *Client) CompleteAndClaim(ctx context.Context, queue string, outcomes []Outcome, n int, workerID string, types ...string) ([]Status, []Lease, error) {
	now := c.opts.Now()
	s := c.scripts.cycle
	cmd := c.claimArgs(ctx, c.command(s, c.keysFor(queue), now, claimArgsLen+outcomeArgsLen(len(outcomes))), n, workerID, strings.Join(types, ","))
	res, err := c.exec(ctx, c.rdb, s, c.outcomeArgs(cmd, outcomes)).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("complete and claim: %w", err)
	}
	if len(res) != 2 {
		return nil, nil, fmt.Errorf("complete and claim: %d parts in the answer, want 2", len(res))
	}
	part := func(v any) []string {
		l, _ := v.([]any)
		out := make([]string, len(l))
		for i, x := range l {
			out[i], _ = x.(string)
		}
		return out
	}
	return statuses(part(res[0])), parseLeases(part(res[1]), queue, workerID, now), nil
}

// Extend renews leases of queue's jobs held by their caller for another
// LeaseTTL, in one script call, and returns for each whether it is still
// held (false: the lease was lost — reclaimed, cancelled or finished — and
// the caller must stop the job).
func (c *Client) Extend(ctx context.Context, queue string, leases []Lease) ([]bool, error) {
	held, _, err := c.extend(ctx, queue, leases, nil)
	return held, err
}

// ProgressReport is a running job's progress, 0..100, and a short message.
type ProgressReport struct {
	Percent int
	Message string
}

// Progress renews one lease like Extend and records the job's progress: on
// the job (GET /v1/jobs/{id}) and as a 'progress' event, at most one a
// second per job. It returns whether the lease is still held and when it
// now expires (on Redis' clock).
func (c *Client) Progress(ctx context.Context, queue string, l Lease, p ProgressReport) (bool, time.Time, error) {
	held, exp, err := c.extend(ctx, queue, []Lease{l}, []*ProgressReport{&p})
	if err != nil {
		return false, time.Time{}, err
	}
	return held[0], exp, nil
}

func (c *Client) extend(ctx context.Context, queue string, leases []Lease, progress []*ProgressReport) ([]bool, time.Time, error) {
	if len(leases) == 0 {
		return nil, time.Time{}, nil
	}
	args := make([]any, 0, 3+3*len(leases))
	args = append(args, c.opts.LeaseTTL.Milliseconds(), c.opts.LeaseGrace.Milliseconds(), len(leases))
	for i, l := range leases {
		p := ""
		if i < len(progress) && progress[i] != nil {
			pr := progress[i]
			p = strconv.Itoa(min(max(pr.Percent, 0), 100)) + "|" + pr.Message
		}
		args = append(args, l.Job.ID, l.Token, p)
	}
	res, err := c.run(ctx, c.scripts.extend, c.keysFor(queue), c.opts.Now(), args...).StringSlice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("extend: %w", err)
	}
	out := make([]bool, len(leases))
	for i := range leases {
		out[i] = res[i] == "ok"
	}
	exp, _ := strconv.ParseInt(res[len(leases)], 10, 64)
	return out, msTime(exp), nil
}

// Release gives leases back at once, for a worker that shuts down before
// its jobs finish: each job returns to the head of its priority list and the
// interrupted attempt does not count. It returns how many were released.
func (c *Client) Release(ctx context.Context, queue string, leases []Lease) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 1+2*len(leases))
	args = append(args, len(leases))
	for _, l := range leases {
		args = append(args, l.Job.ID, l.Token)
	}
	n, err := c.run(ctx, c.scripts.release, c.keysFor(queue), c.opts.Now(), args...).Int()
	if err != nil {
		return 0, fmt.Errorf("release: %w", err)
	}
	return n, nil
}

// Promote moves up to limit scheduled jobs that are due into their priority
// lists. It returns how many moved and the earliest remaining due time (the
// zero time when none is scheduled).
func (c *Client) Promote(ctx context.Context, queue string, limit int) (int, time.Time, error) {
	res, err := c.run(ctx, c.scripts.promote, c.keysFor(queue), c.opts.Now(), limit).Slice()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("promote: %w", err)
	}
	return countAndNext(res)
}

// Reclaim puts back up to limit jobs whose lease has expired, each counted
// as a failed attempt ("lease expired"). It returns how many and the
// earliest remaining lease expiry (zero when no lease is held).
func (c *Client) Reclaim(ctx context.Context, queue string, limit int) (int, time.Time, error) {
	args := make([]any, 0, 2+limit)
	args = append(args, limit)
	for i := 0; i < limit; i++ {
		args = append(args, c.random())
	}
	// The clock-step guard (reclaim.lua): no lease counts as expired
	// before the caller's clock says it could be, give or take
	// ClockStepTolerance. Off with a test's clock (Options.Now).
	if c.customNow {
		args = append(args, "")
	} else {
		args = append(args, ClockStepTolerance.Milliseconds())
	}
	res, err := c.run(ctx, c.scripts.reclaim, c.keysFor(queue), c.opts.Now(), args...).Slice()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("reclaim: %w", err)
	}
	return countAndNext(res)
}

func countAndNext(res []any) (int, time.Time, error) {
	n, _ := res[0].(int64)
	s, _ := res[1].(string)
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || ms < 0 {
		return int(n), time.Time{}, nil
	}
	return int(n), msTime(int64(ms)), nil
}

// Cancel cancels the job with id: a waiting, scheduled or queued job is
// removed; an active job loses its lease and its worker is told to stop the
// handler. It returns the job as it is afterwards.
func (c *Client) Cancel(ctx context.Context, id string) (*job.Job, error) {
	k, err := c.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	res, err := c.run(ctx, c.scripts.cancel, k, c.opts.Now(), id).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("cancel: %w", err)
	}
	if err := statusErr(res); err != nil {
		return nil, err
	}
	return c.getIn(ctx, k, id)
}

// Retry requeues one dead or cancelled job with its attempts reset.
func (c *Client) Retry(ctx context.Context, id string) (*job.Job, error) {
	k, err := c.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	res, err := c.run(ctx, c.scripts.retry, k, c.opts.Now(), "any", 1, id).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	if err := statusErr(res); err != nil {
		return nil, err
	}
	return c.getIn(ctx, k, id)
}

func statusErr(res []string) error {
	switch res[0] {
	case "not_found":
		return ErrNotFound
	case "conflict":
		e := &ConflictError{State: res[1]}
		if len(res) > 2 {
			e.Why = res[2]
		}
		return e
	}
	return nil
}

// batchSize bounds how many ids one maintenance script handles.
const batchSize = 500

// RetryDead requeues the given dead jobs of queue, or every dead job when
// ids is empty, and returns how many were requeued.
func (c *Client) RetryDead(ctx context.Context, queue string, ids []string) (int, error) {
	return c.overDead(ctx, queue, ids, func(k *queueKeys, chunk []string) (int, error) {
		args := append([]any{"dead", len(chunk)}, toAny(chunk)...)
		res, err := c.run(ctx, c.scripts.retry, k, c.opts.Now(), args...).Slice()
		if err != nil {
			return 0, fmt.Errorf("retry dead: %w", err)
		}
		if len(res) < 2 {
			return 0, nil
		}
		s, _ := res[1].(string)
		n, _ := strconv.Atoi(s)
		return n, nil
	})
}

// PurgeDead deletes the given dead jobs of queue, or every dead job when ids
// is empty, and returns how many were deleted.
func (c *Client) PurgeDead(ctx context.Context, queue string, ids []string) (int, error) {
	return c.overDead(ctx, queue, ids, func(k *queueKeys, chunk []string) (int, error) {
		args := append([]any{len(chunk)}, toAny(chunk)...)
		n, err := c.run(ctx, c.scripts.purge, k, c.opts.Now(), args...).Int()
		if err != nil {
			return 0, fmt.Errorf("purge dead: %w", err)
		}
		return n, nil
	})
}

// overDead applies fn to ids in chunks, or, when ids is empty, to the whole
// dead set, oldest first, until it is empty or a chunk changes nothing.
func (c *Client) overDead(ctx context.Context, queue string, ids []string, fn func(*queueKeys, []string) (int, error)) (int, error) {
	k := c.keysFor(queue)
	total := 0
	if len(ids) > 0 {
		for len(ids) > 0 {
			chunk := ids[:min(batchSize, len(ids))]
			ids = ids[len(chunk):]
			n, err := fn(k, chunk)
			total += n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	for {
		chunk, err := c.rdb.ZRange(ctx, k.key(kDead), 0, batchSize-1).Result()
		if err != nil {
			return total, err
		}
		if len(chunk) == 0 {
			return total, nil
		}
		n, err := fn(k, chunk)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// Prune deletes the hashes of up to limit jobs of queue that reached
// succeeded or cancelled at or before cutoff (PruneJobs with no floor).
func (c *Client) Prune(ctx context.Context, queue string, cutoff time.Time, limit int) (int, error) {
	return c.PruneJobs(ctx, queue, PruneOptions{Cutoff: cutoff, Limit: limit})
}

// PruneOptions says which ended jobs PruneJobs deletes.
type PruneOptions struct {
	// Dead selects the dead set; otherwise succeeded and cancelled jobs.
	Dead bool
	// Cutoff: jobs that ended at or before it are deleted.
	Cutoff time.Time
	// Keep bounds how many jobs the set keeps (0 = no bound): the oldest
	// beyond it are deleted whatever their age.
	Keep int
	// Floor, when set, protects every job that ended at or after it, age
	// and Keep notwithstanding: the poller passes the time before which
	// every event is recorded in the history, so a job hash is never
	// deleted while its last events still wait to be written.
	Floor time.Time
	// Limit bounds the jobs deleted by one call.
	Limit int
}

// PruneJobs deletes up to o.Limit ended jobs of queue (see PruneOptions)
// and returns how many it deleted.
func (c *Client) PruneJobs(ctx context.Context, queue string, o PruneOptions) (int, error) {
	set, floor := "finished", ""
	if o.Dead {
		set = "dead"
	}
	if !o.Floor.IsZero() {
		floor = itoa(o.Floor.UnixMilli())
	}
	n, err := c.run(ctx, c.scripts.prune, c.keysFor(queue), c.opts.Now(), o.Cutoff.UnixMilli(), max(o.Limit, 1), set, o.Keep, floor).Int()
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	return n, nil
}

// Pause stops workers from claiming queue's jobs; submitting and promoting go on.
func (c *Client) Pause(ctx context.Context, queue string) error {
	if err := c.register(ctx, queue); err != nil {
		return err
	}
	return c.rdb.Set(ctx, c.keysFor(queue).key(kPaused), "1", 0).Err()
}

// ErrQueueBusy is returned by Forget for a queue that is not empty and
// idle; the error's text says why.
var ErrQueueBusy = errors.New("queue is not empty and idle")

// Forget takes an empty queue off the set of known queues, so that pollers
// and job lookups stop visiting it: one that holds no job in Redis, is not
// paused, has no limits, and whose last event is older than idle. A later
// submit lists it again. Otherwise it returns an error matching
// ErrQueueBusy that says why, and changes nothing.
func (c *Client) Forget(ctx context.Context, queue string, idle time.Duration) error {
	res, err := c.run(ctx, c.scripts.forget, c.keysFor(queue), c.opts.Now(), idle.Milliseconds()).StringSlice()
	if err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	if res[0] != "ok" {
		return fmt.Errorf("%w: %s", ErrQueueBusy, res[1])
	}
	c.mu.Lock()
	delete(c.known, queue)
	c.mu.Unlock()
	if c.afterForgetScript != nil {
		c.afterForgetScript()
	}
	if err := c.rdb.SRem(ctx, keyQueues, queue).Err(); err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	// A submit may have found the marker and lifted it (unforget: the
	// marker goes first, then the queue is listed) between the script and
	// the SREM above, which then took its listing away: with the marker
	// gone, the queue is listed again, so that no job waits in a queue no
	// poller visits.
	n, err := c.rdb.Exists(ctx, c.keysFor(queue).tag+"forgotten").Result()
	if err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	if n == 0 {
		if err := c.rdb.SAdd(ctx, keyQueues, queue).Err(); err != nil {
			return fmt.Errorf("forget: %w", err)
		}
		return fmt.Errorf("%w: a job was submitted to it meanwhile", ErrQueueBusy)
	}
	return nil
}

// unforget lists a forgotten queue again and lifts its marker.
func (c *Client) unforget(ctx context.Context, queue string) error {
	c.mu.Lock()
	delete(c.known, queue)
	c.mu.Unlock()
	// The marker first, then the listing: a Forget that removes the
	// listing after this then finds the marker gone and lists it again.
	if err := c.rdb.Del(ctx, c.keysFor(queue).tag+"forgotten").Err(); err != nil {
		return err
	}
	return c.register(ctx, queue)
}

// Resume lets workers claim queue's jobs again and wakes idle ones.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.run(ctx, c.scripts.resume, c.keysFor(queue), c.opts.Now()).Err()
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
