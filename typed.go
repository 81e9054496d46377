package sundial

import (
	"context"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// Args is a typed job: a payload type that names its job type. Submit a
// value as it is (Client.Submit(ctx, EmailArgs{…})) and register its
// handler with Handle[EmailArgs]: the compiler ties the two together, and
// the type's name lives in one place. Kind must work on the type's zero
// value (use a struct, not a pointer, receiver). Job is an Args too.
type Args interface {
	Kind() string
}

// Kind is the job's Type: a Job is an Args, so Submit takes it as it
// takes a typed job.
func (j Job) Kind() string { return j.Type }

// ArgsWithDefaults is an Args that also declares its submit defaults
// (River's InsertOpts): a typed submit that leaves a field out takes them.
type ArgsWithDefaults interface {
	Args
	Defaults() Defaults
}

// Defaults are a job type's submit defaults: a submit of the type that
// leaves a field out takes these, in any process and over REST, once a
// Runner that handles the type declared them (Handle's defaults,
// Runner.SetDefaults) and within queue.TypeDefaultsRefresh (2 s) of it.
// Zero fields declare nothing.
type Defaults struct {
	Queue       string
	Priority    Priority
	MaxAttempts int
	// Timeout is in whole seconds, rounded up.
	Timeout time.Duration
	Backoff *Backoff
}

// engine turns d into the engine's form.
func (d Defaults) engine() job.Defaults {
	return job.Defaults{Queue: d.Queue, Priority: d.Priority, MaxAttempts: d.MaxAttempts,
		TimeoutSeconds: wholeSeconds(d.Timeout), Backoff: d.Backoff}
}

// wholeSeconds is d in whole seconds, rounded up (0 for 0).
func wholeSeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// asJob returns the Job that a submits: a Job as it is; a typed job as
// the payload of a Job of its Kind, with its defaults when it declares
// some (ArgsWithDefaults).
func asJob(a Args) Job {
	switch v := a.(type) {
	case Job:
		return v
	case *Job:
		return *v
	}
	j := Job{Type: a.Kind(), Payload: a}
	if d, ok := a.(ArgsWithDefaults); ok {
		def := d.Defaults()
		j.Queue, j.Priority, j.MaxAttempts, j.Timeout, j.Backoff = def.Queue, def.Priority, def.MaxAttempts, def.Timeout, def.Backoff
	}
	return j
}

// Handle registers f for the typed jobs of T (their Kind), decoding each
// job's payload into a T first, as HandleJSON does. defaults, when given,
// are the type's submit defaults, declared in Redis when the Runner starts
// (see Defaults). JobFrom(ctx) gives f the rest of the job.
func Handle[T Args](r *Runner, f func(ctx context.Context, args T) (any, error), defaults ...Defaults) {
	var zero T
	kind := zero.Kind()
	HandleJSON(r, kind, f)
	if len(defaults) > 0 {
		r.SetDefaults(kind, defaults[0])
	} else if d, ok := any(zero).(ArgsWithDefaults); ok {
		r.SetDefaults(kind, d.Defaults())
	}
}

// Build returns the job a submit of a would store — validated, the type's
// declared defaults not applied, the engine's filled in, with a fresh id —
// without storing anything: for tests (package sundialtest) and dry runs.
// The error is a *job.FieldError naming the field at fault.
func Build(a Args) (*Record, error) {
	s, err := asJob(a).spec()
	if err != nil {
		return nil, err
	}
	return s.Build(time.Now())
}
