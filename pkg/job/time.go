package job

import "time"

// TimeLayout is the one format of every time in Sundial's JSON (the HTTP
// API, the stream, the CLI's --json): RFC 3339 with milliseconds, in UTC,
// e.g. "2026-11-23T21:06:41.123Z". Milliseconds are the precision Redis
// keeps, so a job reads the same in the answer to its submission and in a
// later GET.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is a time.Time that marshals to JSON in TimeLayout. Types with
// plain time.Time fields write them through it in their MarshalJSON.
type Time time.Time

// MarshalJSON writes t in TimeLayout.
func (t Time) MarshalJSON() ([]byte, error) {
	return appendTime(make([]byte, 0, len(TimeLayout)+2), time.Time(t)), nil
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var v time.Time
	if err := v.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = Time(v)
	return nil
}

// TimePtr converts an optional time; nil stays nil.
func TimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// Times converts a list of times.
func Times(ts []time.Time) []Time {
	if ts == nil {
		return nil
	}
	out := make([]Time, len(ts))
	for i, t := range ts {
		out[i] = Time(t)
	}
	return out
}
