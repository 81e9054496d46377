package queue

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// The engine's two record formats are decoded here and only here: the job
// hash (written by submit.lua and the transitions) and the event stream
// entry (written by emit in lua/lib.lua).

// DecodeJob turns the job hash of job id in queue (JobKey), or the fields
// of it that were read, into a Job. It returns nil when the hash is gone
// (no "type" field, which every format writes). A field that storage
// format 4 leaves out reads as that format's default (lua/lib.lua,
// JOB_DEFAULTS): the id and queue are the key's, run_at is created_at,
// and the rest are job.DefaultMaxAttempts, job.DefaultTimeoutSeconds,
// job.DefaultBackoff, priority normal and attempt 0.
func DecodeJob(queue, id string, h map[string]string) *job.Job {
	if h["type"] == "" {
		return nil
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	f64 := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	ts := func(s string) time.Time { n, _ := strconv.ParseInt(s, 10, 64); return msTime(n) }
	opt := func(s string) *time.Time {
		if s == "" {
			return nil
		}
		t := ts(s)
		return &t
	}
	j := &job.Job{
		ID:             id,
		Queue:          queue,
		Type:           h["type"],
		Priority:       job.Normal,
		State:          job.State(h["state"]),
		Attempt:        atoi(h["attempt"]),
		MaxAttempts:    job.DefaultMaxAttempts,
		TimeoutSeconds: job.DefaultTimeoutSeconds,
		Backoff:        job.DefaultBackoff,
		IdempotencyKey: h["idempotency_key"],
		Group:          h["group"],
		Traceparent:    h["traceparent"],
		Batch:          h["batch"],
		StartedAt:      opt(h["started_at"]),
		FinishedAt:     opt(h["finished_at"]),
		WorkerID:       h["worker_id"],
		LastError:      h["last_error"],
	}
	if s := h["priority"]; s != "" {
		j.Priority = job.Priority(s)
	}
	if s := h["max_attempts"]; s != "" {
		j.MaxAttempts = atoi(s)
	}
	if s := h["timeout"]; s != "" {
		j.TimeoutSeconds = atoi(s)
	}
	if s := h["backoff_base"]; s != "" {
		j.Backoff.BaseSeconds = f64(s)
	}
	if s := h["backoff_max"]; s != "" {
		j.Backoff.MaxSeconds = f64(s)
	}
	if s := h["created_at"]; s != "" {
		j.CreatedAt = ts(s)
	}
	j.RunAt = j.CreatedAt
	if s := h["run_at"]; s != "" {
		j.RunAt = ts(s)
	}
	if p := h["payload"]; p != "" {
		j.Payload = json.RawMessage(p)
	}
	if r := h["result"]; r != "" {
		j.Result = json.RawMessage(r)
	}
	if p := h["parked"]; p != "" && j.State == job.Queued {
		if l, _, _ := strings.Cut(p, "|"); l != NoHandlerLimit { // a slot: "<limit>|<key>"
			j.ThrottledBy = l
		}
	}
	if d := h["depends_on"]; d != "" {
		j.DependsOn = strings.Split(d, ",")
		for i, dep := range j.DependsOn {
			if _, id, remote := strings.Cut(dep, "|"); remote { // "<queue>|<id>": a job of another queue
				j.DependsOn[i] = id
			}
		}
	}
	j.OnDependencyFailure = h["on_dependency_failure"]
	if p := h["progress"]; p != "" && j.State == job.Active && h["progress_attempt"] == h["attempt"] {
		j.Progress = &job.Progress{Percent: atoi(p), Message: h["progress_message"], At: ts(h["progress_at"])}
	}
	j.Durable = decodeDurable(j, h)
	j.StartBy, j.Deadline = opt(h["start_by"]), opt(h["deadline"])
	j.DebounceKey = h["debounce"]
	if k := h["sequence"]; k != "" {
		// A sequence's rule is its on_dependency_failure (job.Spec).
		j.Sequence = &job.Sequence{Key: k, OnFailure: job.SequenceCancel}
		if j.OnDependencyFailure == job.DependencyRun {
			j.Sequence.OnFailure = job.SequenceContinue
		}
	}
	if t := h["tags"]; t != "" {
		j.Tags = strings.Split(t, ",")
	}
	if n := h["log_lines"]; n != "" {
		j.Logs = &job.LogCounts{Lines: int64(atoi(n)), Dropped: int64(atoi(h["log_dropped"]))}
	}
	return j
}

// activeRecord is a job's entry in its queue's active hash, the record of
// its running attempt (parse_active in lua/lib.lua reads the same):
// "<token> <attempt> <type>[ <slots>]" in storage format 1, and
// "<token> <attempt> <type> <slots> <started ms> <worker>" in formats 2 to 4.
type activeRecord struct {
	Token, Attempt, Type, Slots string
	// Format2 says the record holds the attempt's start and worker, which
	// a format-1 claim wrote on the job hash instead.
	Format2         bool
	Started, Worker string
}

// parseActive reads an active-hash entry; ok is false for one too short.
func parseActive(rec string) (r activeRecord, ok bool) {
	f := strings.SplitN(rec, " ", 6)
	if len(f) < 3 {
		return r, false
	}
	r.Token, r.Attempt, r.Type = f[0], f[1], f[2]
	if len(f) > 3 {
		r.Slots = f[3]
	}
	if len(f) == 6 {
		r.Format2, r.Started, r.Worker = true, f[4], f[5]
	}
	return r, true
}

// overlayActive puts what a job's active record says of its running
// attempt over the fields of its hash: a claim in storage format 2 writes
// the attempt, worker and start in the record only, and leaves the hash as
// it was.
func overlayActive(h map[string]string, rec string) {
	r, ok := parseActive(rec)
	if !ok || h["type"] == "" {
		return
	}
	h["state"] = string(job.Active)
	if r.Format2 {
		h["attempt"], h["started_at"], h["worker_id"] = r.Attempt, r.Started, r.Worker
	}
}

// ParseEvents decodes an entry of a queue's event stream (EventStreamKey)
// into its events. A plain entry holds one event (job_id, type, attempt);
// a batch entry holds the events of several jobs that share event, state,
// worker and error (field jobs: "id type attempt" per job, comma-separated;
// see emit in lua/lib.lua). The event at index i of a batch entry has the
// id "<entry id>.<i>"; a plain entry's event has the entry's id. queue names
// the stream's queue, in case the entry lacks it. An entry without job or
// event is an error; a missing time falls back on the entry id's, which
// Redis took from its clock.
func ParseEvents(queue string, m redis.XMessage) ([]job.Event, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	e := job.Event{
		ID: m.ID, JobID: str("job_id"), Queue: str("queue"), Type: str("type"),
		Event: job.EventType(str("event")), State: job.State(str("state")),
		WorkerID: str("worker_id"), Error: str("error"),
	}
	if e.Queue == "" {
		e.Queue = queue
	}
	ms, err := strconv.ParseInt(str("at"), 10, 64)
	if err != nil {
		ms, _ = strconv.ParseInt(strings.SplitN(m.ID, "-", 2)[0], 10, 64)
	}
	e.At = msTime(ms)
	jobs := str("jobs")
	if (e.JobID == "" && jobs == "") || e.Event == "" {
		return nil, fmt.Errorf("stream entry %s lacks a job or the event", m.ID)
	}
	if jobs == "" {
		if e.Attempt, err = parseAttempt(m.ID, str("attempt")); err != nil {
			return nil, err
		}
		if p := str("progress"); p != "" {
			n, _ := strconv.Atoi(p)
			e.Progress, e.Message = &n, str("message")
		} else {
			e.Message = str("message") // a step's or a signal's (durable jobs)
		}
		return []job.Event{e}, nil
	}
	out := make([]job.Event, 0, strings.Count(jobs, ",")+1)
	for i, rec := range strings.Split(jobs, ",") {
		id, rest, ok1 := strings.Cut(rec, " ")
		typ, attempt, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || id == "" {
			return nil, fmt.Errorf("stream entry %s: bad job record %q", m.ID, rec)
		}
		ev := e
		ev.ID, ev.JobID, ev.Type = m.ID+"."+strconv.Itoa(i), id, typ
		if ev.Attempt, err = parseAttempt(m.ID, attempt); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func parseAttempt(entry, a string) (int, error) {
	if a == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(a)
	if err != nil {
		return 0, fmt.Errorf("stream entry %s: bad attempt %q", entry, a)
	}
	return n, nil
}
