package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// Submitted is the outcome of submitting one job.
type Submitted struct {
	Job *job.Job
	// Duplicate is true when the idempotency key named a job submitted
	// earlier; Job is then that earlier job and nothing new was created.
	Duplicate bool
	// Debounced is true when the job's debounce key named a pending job,
	// which the submit updated (its payload, or its run time); Job is
	// then that job and nothing new was created.
	Debounced bool
}

// DependencyError says that dependency Dep of job Index in a submission
// cannot be used. Reason is "not_found", "other_queue", "forward" or
// "failed".
type DependencyError struct {
	Index, Dep int
	Reason     string
	Detail     string
}

func (e *DependencyError) Error() string {
	switch e.Reason {
	case "not_found":
		return fmt.Sprintf("job %s not found in any queue", e.Detail)
	case "other_queue":
		return "dependencies must be in the same queue"
	case "forward":
		return "may only name an earlier job of the batch"
	case "failed":
		return "dependency already ended " + e.Detail
	}
	return e.Reason
}

// Field returns the input field at fault, e.g. "jobs[3].depends_on[0]".
func (e *DependencyError) Field(batch bool) string {
	f := fmt.Sprintf("depends_on[%d]", e.Dep)
	if batch {
		f = fmt.Sprintf("jobs[%d].%s", e.Index, f)
	}
	return f
}

// MixedBatchError says that job Index of a batch is in another queue than
// job 0: a batch is written by one script in its queue's slot, which is
// what makes it all or nothing, so it must stay in one queue.
type MixedBatchError struct {
	Index        int
	Queue, First string
}

func (e *MixedBatchError) Error() string {
	return fmt.Sprintf("a batch must target one queue: job 0 is in %q, this one in %q", e.First, e.Queue)
}

// Submit stores jobs built by job.Spec.Build, all or nothing, in one
// script call: every job must be in the same queue (MixedBatchError
// otherwise). A dependency may name an earlier job of the same call as
// "#n". Concurrent single-job submits to one queue share script calls (see
// coalescer). The jobs returned are the ones given, but for duplicates
// (see UnchangedBySubmit).
func (c *Client) Submit(ctx context.Context, jobs []*job.Job) ([]Submitted, error) {
	if len(jobs) == 1 && len(jobs[0].DependsOn) == 0 {
		if err := c.register(ctx, jobs[0].Queue); err != nil {
			return nil, err
		}
		s, err := c.submitOne(ctx, jobs[0])
		if err != nil {
			return nil, err
		}
		return []Submitted{s}, nil
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	idx := make([]int, len(jobs))
	for i, j := range jobs {
		if j.Queue != jobs[0].Queue {
			return nil, &MixedBatchError{Index: i, Queue: j.Queue, First: jobs[0].Queue}
		}
		idx[i] = i
	}
	if err := resolveBatchRefs(jobs); err != nil {
		return nil, err
	}
	restore, err := c.qualifyRemoteDeps(ctx, jobs[0].Queue, jobs)
	if err != nil {
		return nil, err
	}
	defer restore()
	return c.submitQueue(ctx, jobs[0].Queue, jobs, idx, false)
}

// UnchangedBySubmit reports whether Submit stores and returns jobs exactly
// as given: it writes to a job only to resolve "#n" dependencies, and it
// answers with another job only for a duplicate, which needs an
// idempotency key. Jobs without either may then be read while Submit runs
// (the API encodes a batch's answer meanwhile).
func UnchangedBySubmit(jobs []*job.Job) bool {
	for _, j := range jobs {
		if j.IdempotencyKey != "" || len(j.DependsOn) > 0 {
			return false
		}
	}
	return true
}

// hasStoredDeps reports whether a job of idx depends on a job outside the
// batch, which the submit script may find unusable.
func hasStoredDeps(jobs []*job.Job, idx []int) bool {
	inBatch := map[string]bool{}
	for _, i := range idx {
		inBatch[jobs[i].ID] = true
	}
	for _, i := range idx {
		for _, d := range jobs[i].DependsOn {
			if !inBatch[d] {
				return true
			}
		}
	}
	return false
}

// resolveBatchRefs replaces "#n" dependencies with the id of job n.
func resolveBatchRefs(jobs []*job.Job) error {
	for i, j := range jobs {
		for d, dep := range j.DependsOn {
			if !strings.HasPrefix(dep, "#") {
				continue
			}
			n, err := strconv.Atoi(dep[1:])
			if err != nil || n < 0 || n >= i {
				return &DependencyError{Index: i, Dep: d, Reason: "forward"}
			}
			if jobs[n].Queue != j.Queue {
				return &DependencyError{Index: i, Dep: d, Reason: "other_queue"}
			}
			j.DependsOn[d] = jobs[n].ID
		}
	}
	return nil
}

// Guard makes a submit conditional on a compare-and-set: the jobs are
// written only while Member's score in the sorted set Key equals Expect, and
// in the same script the score becomes Next (or the member is removed when
// Remove is set) and Fields are written to the hash Record. Key and Record
// must be keys of the jobs' queue (see QueueKey), so that the whole change
// is one atomic script, in Redis Cluster too.
type Guard struct {
	Key, Member  string
	Expect, Next int64
	Remove       bool
	Record       string
	Fields       []string // field, value, field, value…
}

// ErrGuardMismatch: a guarded submit found another score than expected and
// wrote nothing.
var ErrGuardMismatch = errors.New("guard mismatch: someone else moved it")

// SubmitGuarded submits jobs, all of one queue, under g. It returns
// ErrGuardMismatch when the guard did not hold.
func (c *Client) SubmitGuarded(ctx context.Context, g Guard, jobs []*job.Job) ([]Submitted, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if err := resolveBatchRefs(jobs); err != nil {
		return nil, err
	}
	idx := make([]int, len(jobs))
	for i, j := range jobs {
		if j.Queue != jobs[0].Queue {
			return nil, fmt.Errorf("guarded submit: jobs of more than one queue")
		}
		idx[i] = i
	}
	return c.submitQueueGuarded(ctx, jobs[0].Queue, jobs, idx, false, &g)
}

// QueueKey returns a key named suffix in queue's cluster slot, for data that
// must change atomically with the queue's jobs (e.g. schedules).
func QueueKey(queue, suffix string) string { return keysFor(queue).tag + suffix }

func (c *Client) submitQueue(ctx context.Context, queue string, jobs []*job.Job, idx []int, dryRun bool) ([]Submitted, error) {
	return c.submitQueueGuarded(ctx, queue, jobs, idx, dryRun, nil)
}

func (c *Client) submitQueueGuarded(ctx context.Context, queue string, jobs []*job.Job, idx []int, dryRun bool, g *Guard) ([]Submitted, error) {
	k := c.keysFor(queue)
	// Register the queue before writing to it: pollers and writers find
	// queues through this set, so a job must never exist in an unlisted
	// queue (a crash right after the script would strand it). A submit the
	// script may refuse (dependencies on existing jobs) is checked first,
	// so that a rejected submit leaves no new queue behind.
	if !dryRun {
		if g == nil && !c.registered(queue) && hasStoredDeps(jobs, idx) {
			if _, err := c.submitQueueGuarded(ctx, queue, jobs, idx, true, nil); err != nil {
				return nil, err
			}
		}
		if err := c.register(ctx, queue); err != nil {
			return nil, err
		}
	}
	args := c.submitCommand(k, jobs, idx, dryRun, g, c.submitFormat(ctx))
	var res []string
	var err error
	for try := 1; ; try++ {
		if n := c.replicasToWait(ctx, k); n > 0 && !dryRun {
			res, err = c.runReplicated(ctx, c.scripts.submit, k, args, len(idx), n)
		} else {
			res, err = c.exec(ctx, c.rdb, c.scripts.submit, args).StringSlice()
		}
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		if res[0] != "forgotten" {
			break
		}
		// The queue was forgotten (Forget) since this client registered
		// it: list it again, then lift the marker; a forget in between
		// makes the next try find the marker again.
		if try == 3 {
			return nil, fmt.Errorf("submit: queue %q is being forgotten; try again", queue)
		}
		if err := c.unforget(ctx, queue); err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
	}
	if res[0] == "guard" {
		return nil, ErrGuardMismatch
	}
	if res[0] == "err" {
		i, _ := strconv.Atoi(res[1])
		d, _ := strconv.Atoi(res[2])
		return nil, &DependencyError{Index: idx[i], Dep: d, Reason: res[3], Detail: res[4]}
	}
	if dryRun {
		return nil, nil
	}

	out := make([]Submitted, len(idx))
	for n, i := range idx {
		out[n] = Submitted{Job: jobs[i]}
	}
	// The reply names only the duplicates: index, then the earlier job's id.
	for r := 1; r+1 < len(res); r += 2 {
		n, err := strconv.Atoi(res[r])
		if err != nil || n < 0 || n >= len(idx) {
			return nil, fmt.Errorf("submit: unexpected reply %q", res[r])
		}
		// '~': a debounce updated the pending job of its key (submit.lua).
		id, debounced := strings.CutPrefix(res[r+1], "~")
		prev, err := c.getIn(ctx, k, id)
		if err != nil {
			return nil, err
		}
		if debounced {
			prev.Debounced = true
			out[n] = Submitted{Job: prev, Debounced: true}
			continue
		}
		out[n] = Submitted{Job: prev, Duplicate: true}
	}
	if err := c.sequencedStates(ctx, k, out); err != nil {
		return nil, err
	}
	return out, nil
}

// sequencedStates reads back the state of each new job of a sequence: the
// script decided whether it waits for the one ahead (a job built to be
// queued may be waiting). One round trip, for calls with such jobs only.
func (c *Client) sequencedStates(ctx context.Context, k *queueKeys, out []Submitted) error {
	var pipe redis.Pipeliner
	cmds := map[int]*redis.StringCmd{}
	for i, s := range out {
		if s.Job.Sequence != nil && !s.Duplicate && !s.Debounced && s.Job.State != job.Waiting {
			if pipe == nil {
				pipe = c.rdb.Pipeline()
			}
			cmds[i] = pipe.HGet(ctx, k.job(s.Job.ID), "state")
		}
	}
	if pipe == nil {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fmt.Errorf("submit: %w", err)
	}
	for i, cmd := range cmds {
		if st := job.State(cmd.Val()); st != "" {
			out[i].Job.State = st
		}
	}
	return nil
}

// submitCommand builds the submit script's call (submit.lua) of
// jobs[idx...] to queue keys k, writing storage format.
func (c *Client) submitCommand(k *queueKeys, jobs []*job.Job, idx []int, dryRun bool, g *Guard, format string) []any {
	// Room for the fixed arguments (10 and the guard's fields), one
	// profile (9) and 4 per job: a call of one profile never grows it.
	args := c.command(c.scripts.submit, k, c.opts.Now(), 19+len(g.fields())+4*len(idx))
	dry := "0"
	if dryRun {
		dry = "1"
	}
	args = append(args, len(idx), c.opts.IdempotencyWindow.Milliseconds(), dry, format)
	if g == nil {
		args = append(args, "", "", 0, "", "", 0)
	} else {
		next := strconv.FormatInt(g.Next, 10)
		if g.Remove {
			next = ""
		}
		args = append(args, g.Key, g.Member, g.Expect, next, g.Record, len(g.fields())/2)
		for _, f := range g.fields() {
			args = append(args, f)
		}
	}
	return appendJobArgs(args, jobs, idx)
}

// fields returns the guard's record fields, whole pairs only (none for a nil guard).
func (g *Guard) fields() []string {
	if g == nil {
		return nil
	}
	return g.Fields[:len(g.Fields)/2*2]
}

// profile is what jobs of one submit call may share, sent once per call
// (submit.lua): a batch built at one instant has a single profile.
type profile struct {
	typ                     string
	priority                job.Priority
	maxAttempts, timeout    int
	backoffBase, backoffMax float64
	createdMS, runAtMS      int64
}

// appendJobArgs appends the submit script's profiles and jobs (see
// submit.lua) for jobs[idx...].
func appendJobArgs(args []any, jobs []*job.Job, idx []int) []any {
	var profiles []profile
	num := make([]int, len(idx)) // each job's profile, 1-based
	var seen map[profile]int
	for n, i := range idx {
		j := jobs[i]
		p := profile{j.Type, j.Priority, j.MaxAttempts, j.TimeoutSeconds, j.Backoff.BaseSeconds, j.Backoff.MaxSeconds,
			j.CreatedAt.UnixMilli(), j.RunAt.UnixMilli()}
		// Most calls have one profile: compare with the last first.
		if len(profiles) > 0 && profiles[len(profiles)-1] == p {
			num[n] = len(profiles)
			continue
		}
		if seen == nil {
			seen = map[profile]int{}
		}
		if k, ok := seen[p]; ok {
			num[n] = k
			continue
		}
		profiles = append(profiles, p)
		seen[p] = len(profiles)
		num[n] = len(profiles)
	}
	args = append(args, len(profiles))
	for _, p := range profiles {
		args = append(args, p.typ, string(p.priority), p.maxAttempts, p.timeout, p.backoffBase, p.backoffMax, p.createdMS, p.runAtMS)
	}
	for n, i := range idx {
		j := jobs[i]
		// The payload as []byte: sent as it is, not copied into a string.
		args = append(args, j.ID, []byte(j.Payload), num[n])
		opts := jobOptions(j)
		if j.IdempotencyKey == "" && len(j.DependsOn) == 0 && j.Group == "" && j.Traceparent == "" && j.Batch == "" && opts == "" {
			args = append(args, "")
			continue
		}
		deps := strings.Join(j.DependsOn, ",")
		if j.OnDependencyFailure == job.DependencyRun {
			deps = "!" + deps // submit.lua: runs when a dependency fails
		}
		if opts != "" {
			args = append(args, "3", j.IdempotencyKey, deps, j.Group, j.Traceparent, j.Batch, opts)
			continue
		}
		if j.Batch != "" {
			args = append(args, "2", j.IdempotencyKey, deps, j.Group, j.Traceparent, j.Batch)
			continue
		}
		args = append(args, "1", j.IdempotencyKey, deps, j.Group, j.Traceparent)
	}
	return args
}

// jobOptions encodes j's expiry, deadline, tags, sequence and debounce for
// submit.lua (submit_options in lua/lib.lua): one line per option, a
// letter and its value. "" when it has none: a job without options
// costs the script nothing more.
func jobOptions(j *job.Job) string {
	if j.StartBy == nil && j.Deadline == nil && len(j.Tags) == 0 && j.Sequence == nil && j.Debounce == nil {
		return ""
	}
	var b []byte
	line := func(code byte, v string) {
		b = append(b, code)
		b = append(b, v...)
		b = append(b, '\n')
	}
	if j.StartBy != nil {
		line('s', strconv.FormatInt(j.StartBy.UnixMilli(), 10))
	}
	if j.Deadline != nil {
		line('d', strconv.FormatInt(j.Deadline.UnixMilli(), 10))
	}
	if len(j.Tags) > 0 {
		line('t', strings.Join(j.Tags, ","))
	}
	if j.Sequence != nil {
		line('q', j.Sequence.Key)
	}
	if d := j.Debounce; d != nil {
		line('k', d.Key)
		line('w', strconv.FormatInt(int64(d.WindowSeconds*1000), 10))
		line('x', strconv.FormatInt(int64(d.MaxWaitSeconds*1000), 10))
		if d.Mode == job.DebounceExtend {
			line('m', "e")
		}
	}
	return string(b)
}
