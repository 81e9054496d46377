package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// UpcomingCount is how many future fire times a Schedule lists in Upcoming.
const UpcomingCount = 5

var idRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// ValidID reports whether id is a valid schedule id.
func ValidID(id string) bool { return idRe.MatchString(id) }

// Errors of the store. Callers test them with errors.Is.
var (
	// ErrNotFound: no schedule with that id.
	ErrNotFound = errors.New("schedule not found")
	// ErrBusy: another request is changing the same schedule right now and
	// did not finish in time; the request may be retried.
	ErrBusy = errors.New("schedule is being changed by another request; try again")
)

// Schedule is a recurring schedule: it submits a job built from Job at
// every fire time of its timing (Cron xor EverySeconds, in Timezone). It is
// both what a client writes (PUT) and what the store returns; on input the
// read-only fields (NextRunAt, LastRunAt, LastJobID, Upcoming, CreatedAt,
// UpdatedAt) are ignored, so that a schedule read with GET can be edited and
// written back as it is.
type Schedule struct {
	// ID is chosen by the client: [A-Za-z0-9_.:-]{1,128}.
	ID string `json:"id"`
	// Cron and EverySeconds: see Spec. Exactly one is set.
	Cron         string `json:"cron,omitempty"`
	EverySeconds *int   `json:"every_seconds,omitempty"`
	// Timezone is the IANA zone Cron is read in; default (and shown as) UTC.
	Timezone string `json:"timezone,omitempty"`
	// Job is the template of the submitted jobs.
	Job JobTemplate `json:"job"`
	// Enabled is true unless set to false; a disabled schedule keeps its
	// definition but does not fire. Always set on output.
	Enabled *bool `json:"enabled,omitempty"`
	// Misfire says what to do about fire times missed while no scheduler
	// ran; default run_once. Always set on output.
	Misfire MisfirePolicy `json:"misfire,omitempty"`

	// NextRunAt is the next fire time, nil while disabled. It may lie in
	// the past while no scheduler runs.
	NextRunAt *time.Time `json:"next_run_at"`
	// LastRunAt is the fire time the last submitted job stands for, and
	// LastJobID that job's id.
	LastRunAt *time.Time `json:"last_run_at"`
	LastJobID string     `json:"last_job_id,omitempty"`
	// Upcoming lists the next UpcomingCount fire times starting at
	// NextRunAt; empty while disabled.
	Upcoming  []time.Time `json:"upcoming"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// JobTemplate is the job a schedule submits at each fire time: the fields
// of job.Spec that make sense for a recurring job. Each fire builds a new
// job with a new id; its run_at is the fire time it stands for.
type JobTemplate struct {
	Queue          string          `json:"queue,omitempty"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Priority       job.Priority    `json:"priority,omitempty"`
	MaxAttempts    *int            `json:"max_attempts,omitempty"`
	TimeoutSeconds *int            `json:"timeout_seconds,omitempty"`
	Backoff        *job.Backoff    `json:"backoff,omitempty"`
}

// Spec returns the job.Spec the template stands for.
func (t JobTemplate) Spec() job.Spec {
	return job.Spec{
		Queue: t.Queue, Type: t.Type, Payload: t.Payload, Priority: t.Priority,
		MaxAttempts: t.MaxAttempts, TimeoutSeconds: t.TimeoutSeconds, Backoff: t.Backoff,
	}
}

// Build returns a new job of the template standing for fire time at: due
// at once, with run_at = at (when at is not after now).
func (t JobTemplate) Build(at, now time.Time) (*job.Job, error) {
	s := t.Spec()
	j, err := s.Build(now)
	if err != nil {
		return nil, err
	}
	if !at.After(now) {
		j.RunAt = at.UTC().Truncate(time.Millisecond)
	}
	return j, nil
}

// timing is the part of a stored schedule that decides its fire times.
func (r *record) spec() Spec {
	return Spec{
		Cron: r.Cron, EverySeconds: r.EverySeconds, Timezone: r.Timezone, Misfire: r.Misfire,
		Anchor: time.UnixMilli(r.AnchorMS),
	}
}

// sameTiming reports whether a and b fire at the same times.
func sameTiming(a, b *record) bool {
	ae, be := 0, 0
	if a.EverySeconds != nil {
		ae = *a.EverySeconds
	}
	if b.EverySeconds != nil {
		be = *b.EverySeconds
	}
	return a.Cron == b.Cron && ae == be && a.Timezone == b.Timezone && a.AnchorMS == b.AnchorMS
}

// record is a schedule as stored: the definition, without its run state
// (next run, last run), which live in their own keys.
type record struct {
	ID           string        `json:"id"`
	Cron         string        `json:"cron,omitempty"`
	EverySeconds *int          `json:"every_seconds,omitempty"`
	Timezone     string        `json:"timezone"`
	Job          JobTemplate   `json:"job"`
	Enabled      bool          `json:"enabled"`
	Misfire      MisfirePolicy `json:"misfire"`
	// AnchorMS aligns interval fire times (Spec.Anchor): the creation
	// time, in Unix ms, so that an interval counts from when the schedule
	// was created and schedules created at different times spread out.
	AnchorMS  int64     `json:"anchor_ms"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// validate checks s as written by a client and returns the record it
// stands for (without times) and its timetable. Errors are *FieldError;
// errors of the job template name "job.x".
func validate(s *Schedule, now time.Time) (*record, *Timetable, error) {
	if !ValidID(s.ID) {
		return nil, nil, fieldErr("id", "must match [A-Za-z0-9_.:-]{1,128}")
	}
	r := &record{
		ID: s.ID, Cron: s.Cron, EverySeconds: s.EverySeconds, Timezone: s.Timezone,
		Job: s.Job, Enabled: s.Enabled == nil || *s.Enabled, Misfire: s.Misfire,
	}
	if r.Timezone == "" {
		r.Timezone = "UTC"
	}
	if r.Misfire == "" {
		r.Misfire = MisfireRunOnce
	}
	if r.Job.Queue == "" {
		r.Job.Queue = job.DefaultQueue
	}
	if len(r.Job.Payload) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, r.Job.Payload) == nil {
			r.Job.Payload = b.Bytes()
		}
	}
	tt, err := r.spec().Compile()
	if err != nil {
		return nil, nil, err
	}
	if _, err := r.Job.Build(now, now); err != nil {
		var fe *job.FieldError
		if errors.As(err, &fe) {
			return nil, nil, fe.Prefix("job")
		}
		return nil, nil, err
	}
	return r, tt, nil
}

// view returns the schedule as the API shows it.
func (r *record) view(tt *Timetable, next, lastRun int64, lastJob string) *Schedule {
	enabled := r.Enabled
	s := &Schedule{
		ID: r.ID, Cron: r.Cron, EverySeconds: r.EverySeconds, Timezone: r.Timezone, Job: r.Job,
		Enabled: &enabled, Misfire: r.Misfire, LastJobID: lastJob, Upcoming: []time.Time{},
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	loc := time.UTC
	if tt != nil {
		loc = tt.loc
	}
	if lastRun > 0 {
		t := time.UnixMilli(lastRun).In(loc)
		s.LastRunAt = &t
	}
	if next > 0 && r.Enabled {
		t := time.UnixMilli(next).In(loc)
		s.NextRunAt = &t
		s.Upcoming = append(s.Upcoming, t)
		if tt != nil {
			s.Upcoming = append(s.Upcoming, tt.Upcoming(t, UpcomingCount-1)...)
		}
	}
	return s
}
