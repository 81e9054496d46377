package httpapi

import (
	"encoding/json"

	"github.com/sundialhq/sundial/pkg/job"
)

// Answers with plain time.Time fields write them in job.TimeLayout, like
// every other time of the API (msTime).

// MarshalJSON writes e with its time in job.TimeLayout.
func (e eventView) MarshalJSON() ([]byte, error) {
	type plain eventView
	return json.Marshal(struct {
		plain
		At msTime `json:"at"`
	}{plain(e), msTime(e.At)})
}

// MarshalJSON writes p with its times in job.TimeLayout.
func (p schedulePreview) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Upcoming []msTime `json:"upcoming"`
	}{job.Times(p.Upcoming)})
}
