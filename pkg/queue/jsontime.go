package queue

import (
	"encoding/json"

	"github.com/sundialhq/sundial/pkg/job"
)

// The engine's JSON types write their times in job.TimeLayout, as the rest
// of the API does.

// MarshalJSON writes w with its times in job.TimeLayout.
func (w WorkerInfo) MarshalJSON() ([]byte, error) {
	type plain WorkerInfo
	return json.Marshal(struct {
		plain
		StartedAt  job.Time `json:"started_at"`
		LastSeenAt job.Time `json:"last_seen_at"`
	}{plain(w), job.Time(w.StartedAt), job.Time(w.LastSeenAt)})
}

// MarshalJSON writes m with its minute in job.TimeLayout.
func (m MinuteCount) MarshalJSON() ([]byte, error) {
	type plain MinuteCount
	return json.Marshal(struct {
		plain
		Minute job.Time `json:"minute"`
	}{plain(m), job.Time(m.Minute)})
}

// MarshalJSON writes r with its times in job.TimeLayout.
func (r ReaderInfo) MarshalJSON() ([]byte, error) {
	type plain ReaderInfo
	return json.Marshal(struct {
		plain
		StartedAt job.Time `json:"started_at"`
		ExpiresAt job.Time `json:"expires_at"`
	}{plain(r), job.Time(r.StartedAt), job.Time(r.ExpiresAt)})
}

// MarshalJSON writes b with its times in job.TimeLayout.
func (b BatchInfo) MarshalJSON() ([]byte, error) {
	type plain BatchInfo
	var cancelled *job.Time
	if b.Cancelled != nil {
		t := job.Time(*b.Cancelled)
		cancelled = &t
	}
	return json.Marshal(struct {
		plain
		CreatedAt job.Time  `json:"created_at"`
		Cancelled *job.Time `json:"cancelled_at,omitempty"`
	}{plain(b), job.Time(b.CreatedAt), cancelled})
}
