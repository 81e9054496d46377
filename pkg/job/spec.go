package job

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Limits and defaults of submitted jobs.
const (
	DefaultQueue          = "default"
	DefaultMaxAttempts    = 3
	DefaultTimeoutSeconds = 30
	MaxMaxAttempts        = 100
	MaxTimeoutSeconds     = 86400
	MaxDependencies       = 100
	MaxIdempotencyKeyLen  = 256
	// MaxDelay bounds run_at and delay_seconds: a job due more than a year
	// from now is almost always a unit mistake (milliseconds for seconds).
	// It bounds start_by and deadline too.
	MaxDelay = 366 * 24 * time.Hour
	// MaxTags bounds a job's tags; MaxOptionKeyLen a sequence's or a
	// debounce's key; MaxDebounceSeconds a debounce's window and max wait.
	MaxTags            = 10
	MaxOptionKeyLen    = 256
	MaxDebounceSeconds = 86400
)

// DefaultBackoff is used when a job does not set its own.
var DefaultBackoff = Backoff{BaseSeconds: 5, MaxSeconds: 3600}

// FieldError is a validation error that names the input field at fault,
// using the API's JSON names ("priority", "backoff.base_seconds").
type FieldError struct {
	Field   string
	Message string
}

// Error returns the message, which already names the field.
func (e *FieldError) Error() string { return e.Message }

// Prefix returns a copy of e with its field placed under prefix, so that a
// batch can report "jobs[3].priority".
func (e *FieldError) Prefix(prefix string) *FieldError {
	field := prefix
	if e.Field != "" {
		field = prefix + "." + e.Field
	}
	return &FieldError{Field: field, Message: field + strings.TrimPrefix(e.Message, e.Field)}
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
}

// Spec is what a client submits. Optional fields are pointers so that an
// explicit zero can be told apart from "not set".
type Spec struct {
	Queue          string          `json:"queue,omitempty"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Priority       Priority        `json:"priority,omitempty"`
	MaxAttempts    *int            `json:"max_attempts,omitempty"`
	TimeoutSeconds *int            `json:"timeout_seconds,omitempty"`
	Backoff        *Backoff        `json:"backoff,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	DelaySeconds   *float64        `json:"delay_seconds,omitempty"`
	DependsOn      []string        `json:"depends_on,omitempty"`
	// OnDependencyFailure is "cancel" (the default: the job is cancelled
	// when a dependency ends dead or cancelled) or "run" (it runs anyway).
	OnDependencyFailure string `json:"on_dependency_failure,omitempty"`
	IdempotencyKey      string `json:"idempotency_key,omitempty"`
	// Group is the job's fairness group (a tenant): within one priority
	// of a queue, groups take turns (see docs/flow-control.md).
	Group string `json:"group,omitempty"`
	// Traceparent is a W3C trace context the job's handler span continues.
	Traceparent string `json:"traceparent,omitempty"`
	// StartBy (or ExpiresInSeconds from now): the job ends dead, expired,
	// unless its first attempt started by then.
	StartBy          *time.Time `json:"start_by,omitempty"`
	ExpiresInSeconds *float64   `json:"expires_in_seconds,omitempty"`
	// Deadline (or DeadlineInSeconds from now): no attempt starts at or
	// after it, a running one's timeout ends at it, no retry past it.
	Deadline          *time.Time `json:"deadline,omitempty"`
	DeadlineInSeconds *float64   `json:"deadline_in_seconds,omitempty"`
	// Debounce makes a burst of submits with one key one job.
	Debounce *Debounce `json:"debounce,omitempty"`
	// Sequence runs the job after the earlier jobs of its key, one at a time.
	Sequence *Sequence `json:"sequence,omitempty"`
	// Tags label the job (at most MaxTags, each [A-Za-z0-9_.:=/-]{1,64}).
	Tags []string `json:"tags,omitempty"`
}

// Build validates s and returns the job it describes, with an id, defaults
// filled in and run_at resolved against now. The error, if any, is a
// *FieldError. Dependencies are checked for form only; whether they exist is
// up to the engine.
func (s *Spec) Build(now time.Time) (*Job, error) { return s.build(now, true) }

// BuildDecoded is Build for a Spec that a JSON decoder filled in: its
// payload, a json.RawMessage the decoder read out of a document it
// checked, is valid JSON already and is not checked again (the API
// decodes each job once; a second check of a large payload cost as much
// as decoding it).
func (s *Spec) BuildDecoded(now time.Time) (*Job, error) { return s.build(now, false) }

func (s *Spec) build(now time.Time, checkPayload bool) (*Job, error) {
	j := &Job{
		Queue:          s.Queue,
		Type:           s.Type,
		Payload:        s.Payload,
		Priority:       s.Priority,
		State:          Queued,
		MaxAttempts:    DefaultMaxAttempts,
		TimeoutSeconds: DefaultTimeoutSeconds,
		Backoff:        DefaultBackoff,
		RunAt:          now,
		IdempotencyKey: s.IdempotencyKey,
		Group:          s.Group,
		Traceparent:    s.Traceparent,
		CreatedAt:      now,
	}
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	if !ValidQueue(j.Queue) {
		return nil, fieldErr("queue", "must match [a-z0-9_-]{1,64}")
	}
	if s.Type == "" {
		return nil, fieldErr("type", "is required")
	}
	if !ValidType(s.Type) {
		return nil, fieldErr("type", "must match [A-Za-z0-9_.:-]{1,128}")
	}
	if checkPayload && len(j.Payload) > 0 && !json.Valid(j.Payload) {
		return nil, fieldErr("payload", "must be valid JSON")
	}
	if j.Priority == "" {
		j.Priority = Normal
	}
	if !j.Priority.Valid() {
		return nil, fieldErr("priority", "must be one of high, normal, low")
	}
	if s.MaxAttempts != nil {
		if *s.MaxAttempts < 1 || *s.MaxAttempts > MaxMaxAttempts {
			return nil, fieldErr("max_attempts", "must be between 1 and %d", MaxMaxAttempts)
		}
		j.MaxAttempts = *s.MaxAttempts
	}
	if s.TimeoutSeconds != nil {
		if *s.TimeoutSeconds < 1 || *s.TimeoutSeconds > MaxTimeoutSeconds {
			return nil, fieldErr("timeout_seconds", "must be between 1 and %d", MaxTimeoutSeconds)
		}
		j.TimeoutSeconds = *s.TimeoutSeconds
	}
	if s.Backoff != nil {
		b := *s.Backoff
		switch {
		case b.BaseSeconds < 0 || b.BaseSeconds > MaxTimeoutSeconds:
			return nil, fieldErr("backoff.base_seconds", "must be between 0 and %d", MaxTimeoutSeconds)
		case b.MaxSeconds < 0 || b.MaxSeconds > 7*MaxTimeoutSeconds:
			return nil, fieldErr("backoff.max_seconds", "must be between 0 and %d", 7*MaxTimeoutSeconds)
		case b.MaxSeconds < b.BaseSeconds:
			return nil, fieldErr("backoff.max_seconds", "must not be less than base_seconds")
		}
		j.Backoff = b
	}
	switch {
	case s.RunAt != nil && s.DelaySeconds != nil:
		return nil, fieldErr("delay_seconds", "cannot be combined with run_at")
	case s.RunAt != nil:
		if s.RunAt.After(now.Add(MaxDelay)) {
			return nil, fieldErr("run_at", "must be within 366 days from now")
		}
		if s.RunAt.After(now) {
			j.RunAt = s.RunAt.UTC().Truncate(time.Millisecond)
		}
	case s.DelaySeconds != nil:
		d := *s.DelaySeconds
		if d < 0 || d > MaxDelay.Seconds() || d != d {
			return nil, fieldErr("delay_seconds", "must be between 0 and %d", int(MaxDelay.Seconds()))
		}
		j.RunAt = now.Add(time.Duration(d * float64(time.Second)))
	}
	switch s.OnDependencyFailure {
	case "", DependencyCancel:
	case DependencyRun:
		if len(s.DependsOn) > 0 {
			j.OnDependencyFailure = DependencyRun
		}
	default:
		return nil, fieldErr("on_dependency_failure", "must be cancel or run")
	}
	if len(s.DependsOn) > MaxDependencies {
		return nil, fieldErr("depends_on", "may name at most %d jobs", MaxDependencies)
	}
	seen := make(map[string]bool, len(s.DependsOn))
	for i, d := range s.DependsOn {
		f := fmt.Sprintf("depends_on[%d]", i)
		if d == "" || len(d) > 64 {
			return nil, fieldErr(f, "must be a job id or #n")
		}
		if seen[d] {
			return nil, fieldErr(f, "names %q twice", d)
		}
		seen[d] = true
	}
	j.DependsOn = s.DependsOn
	if len(s.IdempotencyKey) > MaxIdempotencyKeyLen {
		return nil, fieldErr("idempotency_key", "must be at most %d bytes", MaxIdempotencyKeyLen)
	}
	if s.Group != "" && !ValidGroup(s.Group) {
		return nil, fieldErr("group", "must match [A-Za-z0-9_.:@-]{1,128}")
	}
	if s.Traceparent != "" && !ValidTraceparent(s.Traceparent) {
		return nil, fieldErr("traceparent", "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>")
	}
	if err := s.buildOptions(j, now); err != nil {
		return nil, err
	}
	j.RunAt = j.RunAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	if j.RunAt.After(now) {
		j.State = Scheduled
	}
	if len(j.DependsOn) > 0 {
		j.State = Waiting
	}
	j.ID = NewID(now)
	return j, nil
}

// The policies of Spec.OnDependencyFailure.
const (
	DependencyCancel = "cancel" // the job is cancelled with its failed dependency
	DependencyRun    = "run"    // the job runs anyway
)

// buildOptions checks and sets j's expiry, deadline, debounce, sequence
// and tags (docs/concepts.md), after the rest of j is built.
func (s *Spec) buildOptions(j *Job, now time.Time) error {
	var err *FieldError
	if j.StartBy, err = instant(now, s.StartBy, s.ExpiresInSeconds, "start_by", "expires_in_seconds"); err != nil {
		return err
	}
	if j.Deadline, err = instant(now, s.Deadline, s.DeadlineInSeconds, "deadline", "deadline_in_seconds"); err != nil {
		return err
	}
	if len(s.Tags) > MaxTags {
		return fieldErr("tags", "may hold at most %d tags", MaxTags)
	}
	for i, t := range s.Tags {
		if !ValidTag(t) {
			return fieldErr(fmt.Sprintf("tags[%d]", i), "must match [A-Za-z0-9_.:=/-]{1,64}")
		}
		for _, u := range s.Tags[:i] {
			if u == t {
				return fieldErr(fmt.Sprintf("tags[%d]", i), "repeats %q", t)
			}
		}
	}
	j.Tags = s.Tags
	if q := s.Sequence; q != nil {
		if !ValidOptionKey(q.Key) {
			return fieldErr("sequence.key", "must be 1 to %d printable characters", MaxOptionKeyLen)
		}
		seq := &Sequence{Key: q.Key, OnFailure: q.OnFailure}
		switch q.OnFailure {
		case "", SequenceContinue:
			seq.OnFailure = SequenceContinue
			if s.OnDependencyFailure == DependencyCancel {
				return fieldErr("on_dependency_failure", "must be run (or unset) with sequence.on_failure continue")
			}
			j.OnDependencyFailure = DependencyRun
		case SequenceCancel:
			if s.OnDependencyFailure == DependencyRun {
				return fieldErr("on_dependency_failure", "must be cancel (or unset) with sequence.on_failure cancel")
			}
			j.OnDependencyFailure = ""
		default:
			return fieldErr("sequence.on_failure", "must be continue or cancel")
		}
		j.Sequence = seq
	}
	d := s.Debounce
	if d == nil {
		return nil
	}
	switch {
	case !ValidOptionKey(d.Key):
		return fieldErr("debounce.key", "must be 1 to %d printable characters", MaxOptionKeyLen)
	case !(d.WindowSeconds > 0 && d.WindowSeconds <= MaxDebounceSeconds):
		return fieldErr("debounce.window_seconds", "must be above 0 and at most %d", MaxDebounceSeconds)
	case s.RunAt != nil || s.DelaySeconds != nil:
		return fieldErr("debounce", "cannot be combined with run_at or delay_seconds: the window sets the run time")
	case s.IdempotencyKey != "":
		return fieldErr("debounce", "cannot be combined with idempotency_key")
	case len(s.DependsOn) > 0 || s.Sequence != nil:
		return fieldErr("debounce", "cannot be combined with depends_on or sequence")
	}
	deb := *d
	switch deb.Mode {
	case "", DebounceReplace:
		deb.Mode = DebounceReplace
		if deb.MaxWaitSeconds == 0 {
			deb.MaxWaitSeconds = deb.WindowSeconds
		}
	case DebounceExtend:
		if deb.MaxWaitSeconds == 0 {
			deb.MaxWaitSeconds = min(10*deb.WindowSeconds, MaxDebounceSeconds)
		}
	default:
		return fieldErr("debounce.mode", "must be replace or extend")
	}
	if !(deb.MaxWaitSeconds >= deb.WindowSeconds && deb.MaxWaitSeconds <= MaxDebounceSeconds) {
		return fieldErr("debounce.max_wait_seconds", "must be at least window_seconds and at most %d", MaxDebounceSeconds)
	}
	j.Debounce = &deb
	j.DebounceKey = deb.Key
	j.RunAt = now.Add(seconds(deb.WindowSeconds))
	return nil
}

// instant resolves an optional time given as an instant (at, field name
// atName) or as seconds from now (in, inName); nil when neither is set.
func instant(now time.Time, at *time.Time, in *float64, atName, inName string) (*time.Time, *FieldError) {
	switch {
	case at != nil && in != nil:
		return nil, fieldErr(inName, "cannot be combined with %s", atName)
	case at != nil:
		if !at.After(now) || at.After(now.Add(MaxDelay)) {
			return nil, fieldErr(atName, "must be in the future, within 366 days")
		}
		t := at.UTC().Truncate(time.Millisecond)
		return &t, nil
	case in != nil:
		if !(*in > 0 && *in <= MaxDelay.Seconds()) {
			return nil, fieldErr(inName, "must be above 0 and at most %d", int(MaxDelay.Seconds()))
		}
		t := now.Add(seconds(*in)).UTC().Truncate(time.Millisecond)
		return &t, nil
	}
	return nil, nil
}

// seconds converts a number of seconds to a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
