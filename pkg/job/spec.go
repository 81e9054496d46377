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
	MaxDelay = 366 * 24 * time.Hour
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
