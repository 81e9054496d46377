package job

import "time"

// Defaults are a job type's submit defaults, declared where its handler is
// registered: a submit of that type that leaves a field out takes the
// type's value instead of the engine's. Zero fields declare nothing.
type Defaults struct {
	Queue          string   `json:"queue,omitempty"`
	Priority       Priority `json:"priority,omitempty"`
	MaxAttempts    int      `json:"max_attempts,omitempty"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
	Backoff        *Backoff `json:"backoff,omitempty"`
}

// IsZero tells whether d declares nothing.
func (d Defaults) IsZero() bool { return d == Defaults{} }

// Check validates d with the rules of a submit; the error is a *FieldError.
func (d Defaults) Check() error {
	s := Spec{Type: "x"}
	s.Apply(&d)
	_, err := s.Build(time.Now())
	return err
}

// Apply fills the fields s leaves out from d (nil: nothing).
func (s *Spec) Apply(d *Defaults) {
	if d == nil {
		return
	}
	if s.Queue == "" {
		s.Queue = d.Queue
	}
	if s.Priority == "" {
		s.Priority = d.Priority
	}
	if s.MaxAttempts == nil && d.MaxAttempts != 0 {
		n := d.MaxAttempts
		s.MaxAttempts = &n
	}
	if s.TimeoutSeconds == nil && d.TimeoutSeconds != 0 {
		n := d.TimeoutSeconds
		s.TimeoutSeconds = &n
	}
	if s.Backoff == nil && d.Backoff != nil {
		b := *d.Backoff
		s.Backoff = &b
	}
}
