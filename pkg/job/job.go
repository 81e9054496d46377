// Package job defines Sundial's job model: the Job record, its states and
// events, and the validation of what clients submit. It does no I/O, so every
// other package (the Redis engine, the worker, the HTTP API, the history
// writer) can share one definition of what a valid job is.
package job

import (
	"encoding/json"
	"time"
)

// Priority orders jobs inside one queue. Priorities are strict: no Normal job
// starts while a High one is due, and no Low while a Normal one is due.
type Priority string

// The three priorities, highest first.
const (
	High   Priority = "high"
	Normal Priority = "normal"
	Low    Priority = "low"
)

// Priorities lists the priorities in claim order.
var Priorities = []Priority{High, Normal, Low}

// Valid reports whether p is one of the three priorities.
func (p Priority) Valid() bool { return p == High || p == Normal || p == Low }

// State is where a job is in its lifecycle.
type State string

// The job states. Succeeded, Dead and Cancelled are final.
const (
	Waiting   State = "waiting"   // on dependencies
	Scheduled State = "scheduled" // due later, or waiting for a retry
	Queued    State = "queued"    // due, in a priority list
	Active    State = "active"    // leased by a worker
	Succeeded State = "succeeded"
	Dead      State = "dead" // attempts exhausted, not retryable, or no handler
	Cancelled State = "cancelled"
)

// Final reports whether no further transition happens on its own from s.
func (s State) Final() bool { return s == Succeeded || s == Dead || s == Cancelled }

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	switch s {
	case Waiting, Scheduled, Queued, Active, Succeeded, Dead, Cancelled:
		return true
	}
	return false
}

// EventType names a transition recorded in a queue's event stream.
type EventType string

// The event types of api.md.
const (
	EventSubmitted    EventType = "submitted"
	EventScheduled    EventType = "scheduled"
	EventQueued       EventType = "queued"
	EventStarted      EventType = "started"
	EventSucceeded    EventType = "succeeded"
	EventFailed       EventType = "failed"
	EventDead         EventType = "dead"
	EventCancelled    EventType = "cancelled"
	EventRetried      EventType = "retried"
	EventLeaseExpired EventType = "lease_expired"
	EventWaiting      EventType = "waiting"
	// EventSnoozed: the handler asked to run again later; the attempt is
	// given back (max_attempts grows by one).
	EventSnoozed EventType = "snoozed"
	// EventParked: a durable job's attempt ended to wait (a sleep, a
	// signal) without holding a worker; Error says what it waits for.
	EventParked EventType = "parked"
	// EventStep: a durable job recorded a step; Message is "<seq> <name>
	// <status>", Error the step's error when it failed.
	EventStep EventType = "step"
	// EventSignal: a signal was delivered to a durable job; Message names it.
	EventSignal EventType = "signal"
	// EventProgress: a running attempt reported progress (at most one
	// event a second per job; the latest value is on the job).
	EventProgress EventType = "progress"
	// EventDebounced: a submit with the job's debounce key updated it
	// (its payload, or its run time).
	EventDebounced EventType = "debounced"
	// EventLog: the running attempt logged lines; Message is how many.
	EventLog EventType = "log"
)

// Backoff is the retry delay policy: the delay before retry n is random in
// [0, min(MaxSeconds, BaseSeconds·2^(n-1))] ("full jitter").
type Backoff struct {
	BaseSeconds float64 `json:"base_seconds"`
	MaxSeconds  float64 `json:"max_seconds"`
}

// Delay returns the delay before the retry that follows failed attempt n
// (n ≥ 1), given a uniform random number r in [0, 1).
func (b Backoff) Delay(n int, r float64) time.Duration {
	ceiling := b.BaseSeconds
	for i := 1; i < n && ceiling < b.MaxSeconds; i++ {
		ceiling *= 2
	}
	if ceiling > b.MaxSeconds {
		ceiling = b.MaxSeconds
	}
	return time.Duration(r * ceiling * float64(time.Second))
}

// Job is a unit of work as stored and as returned by the API.
type Job struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Priority       Priority        `json:"priority"`
	State          State           `json:"state"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Backoff        Backoff         `json:"backoff"`
	RunAt          time.Time       `json:"run_at"`
	DependsOn      []string        `json:"depends_on,omitempty"`
	// OnDependencyFailure is what happens when a dependency ends dead or
	// cancelled: "" (cancel: the job is cancelled too) or "run".
	OnDependencyFailure string `json:"on_dependency_failure,omitempty"`
	IdempotencyKey      string `json:"idempotency_key,omitempty"`
	Group               string `json:"group,omitempty"`
	Traceparent         string `json:"traceparent,omitempty"`
	// Batch is the id of the batch the job belongs to (docs/workflows.md,
	// "Batches"): as a member, or as one of its callbacks.
	Batch      string          `json:"batch,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	WorkerID   string          `json:"worker_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
	// Progress is what the running attempt last reported (0..100 and a
	// message); nil when it reported none.
	Progress *Progress `json:"progress,omitempty"`
	// ThrottledBy names the limit a queued job waits for (see
	// docs/flow-control.md); empty when none holds it back.
	ThrottledBy string `json:"throttled_by,omitempty"`
	// HeldBack says what keeps a job that has not ended from running now;
	// nil when nothing does (it runs, or is due and waits for a worker).
	// For an active job: set only when its worker stopped heartbeating.
	HeldBack *HeldBack `json:"held_back,omitempty"`
	// Durable is what a durable job recorded: steps, signals, its wait
	// (docs/durable.md); nil for a job that recorded none.
	Durable *Durable `json:"durable,omitempty"`
	// StartBy is when the job expires unless its first attempt started:
	// it then ends dead, its last_error starting "expired" (docs/concepts.md,
	// "Expiry and deadlines"); nil for none.
	StartBy *time.Time `json:"start_by,omitempty"`
	// Deadline is when the job must be done: no attempt starts at or
	// after it, a running attempt's timeout ends at it, no retry is
	// scheduled past it; nil for none.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Debounce is a submit's debounce (docs/concepts.md, "Debounce"); on a
	// job read back only DebounceKey is set.
	Debounce    *Debounce `json:"-"`
	DebounceKey string    `json:"debounce_key,omitempty"`
	// Debounced is true on a submit's answer when the submit updated the
	// pending job of its debounce key instead of making one.
	Debounced bool `json:"debounced,omitempty"`
	// Sequence puts the job in line behind the earlier jobs of its key
	// (docs/concepts.md, "Sequences"); nil for none.
	Sequence *Sequence `json:"sequence,omitempty"`
	// Tags are short labels to find the job by (at most MaxTags).
	Tags []string `json:"tags,omitempty"`
	// Logs counts the lines the job's handler logged (docs/concepts.md,
	// "Job logs"); nil when it logged none.
	Logs *LogCounts `json:"logs,omitempty"`
}

// Debounce turns a burst of submits with one key into one job.
type Debounce struct {
	Key string `json:"key"`
	// WindowSeconds: the job runs this long after the first submit
	// (replace) or after the last (extend).
	WindowSeconds float64 `json:"window_seconds"`
	// Mode is DebounceReplace (the pending job takes each new payload) or
	// DebounceExtend (each submit moves it a window later).
	Mode string `json:"mode,omitempty"`
	// MaxWaitSeconds bounds how long after the first submit the job may
	// be moved (extend).
	MaxWaitSeconds float64 `json:"max_wait_seconds,omitempty"`
}

// The modes of Debounce.
const (
	DebounceReplace = "replace"
	DebounceExtend  = "extend"
)

// Sequence is a job's place in its key's line: the jobs of one queue with
// one key run one at a time, in submit order.
type Sequence struct {
	Key string `json:"key"`
	// OnFailure is what the jobs behind one that ended dead or cancelled
	// do: SequenceContinue (run, in order) or SequenceCancel (are
	// cancelled).
	OnFailure string `json:"on_failure,omitempty"`
}

// The policies of Sequence.OnFailure.
const (
	SequenceContinue = "continue"
	SequenceCancel   = "cancel"
)

// LogCounts are how many log lines a job keeps and how many it dropped
// (the oldest, past the cap).
type LogCounts struct {
	Lines   int64 `json:"lines"`
	Dropped int64 `json:"dropped"`
}

// The reasons of HeldBack.
const (
	HeldDependencies = "dependencies"    // waiting for the jobs it depends on
	HeldScheduled    = "scheduled"       // due later (delay, run_at, a retry's backoff, a snooze)
	HeldLimit        = "limit"           // a limit of the queue has no room (docs/flow-control.md)
	HeldNoHandler    = "no_handler"      // the workers that claimed it do not handle its type
	HeldPaused       = "paused"          // its queue is paused
	HeldWorkerGone   = "worker_gone"     // active, but its worker stopped heartbeating: it runs again once the lease expires
	HeldSleeping     = "sleeping"        // a durable job parked in a sleep (docs/durable.md)
	HeldSignal       = "awaiting_signal" // a durable job parked until a signal arrives (or its wait's deadline)
)

// HeldBack is why a job is not running: a reason (HeldDependencies, …)
// for programs and a sentence for people.
type HeldBack struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Progress is a running job's reported progress.
type Progress struct {
	Percent int       `json:"percent"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// Timeout returns the job's timeout as a duration.
func (j *Job) Timeout() time.Duration { return time.Duration(j.TimeoutSeconds) * time.Second }

// Event is one transition of one job, as written to a queue's event stream
// and, from there, to the history store and the live stream.
type Event struct {
	ID       string    `json:"id,omitempty"` // place in the stream: entry id, or "<entry id>.<i>" in a batch entry; unique per queue
	JobID    string    `json:"job_id"`
	Queue    string    `json:"queue"`
	Type     string    `json:"type"`
	Event    EventType `json:"event"`
	State    State     `json:"state"`
	Attempt  int       `json:"attempt"`
	WorkerID string    `json:"worker_id,omitempty"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
	// Progress and Message are set on progress events only.
	Progress *int   `json:"progress,omitempty"`
	Message  string `json:"message,omitempty"`
}

// MarshalJSON writes e with its time in TimeLayout.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	return json.Marshal(struct {
		plain
		At Time `json:"at"`
	}{plain(e), Time(e.At)})
}
