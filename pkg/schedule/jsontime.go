package schedule

import (
	"encoding/json"

	"github.com/sundialhq/sundial/pkg/job"
)

// MarshalJSON writes s with its times in job.TimeLayout (milliseconds,
// UTC), as every time of the API is written; Timezone tells the zone its
// cron expression is read in.
func (s Schedule) MarshalJSON() ([]byte, error) {
	type plain Schedule
	return json.Marshal(struct {
		plain
		NextRunAt *job.Time  `json:"next_run_at"`
		LastRunAt *job.Time  `json:"last_run_at"`
		Upcoming  []job.Time `json:"upcoming"`
		CreatedAt job.Time   `json:"created_at"`
		UpdatedAt job.Time   `json:"updated_at"`
	}{plain(s), job.TimePtr(s.NextRunAt), job.TimePtr(s.LastRunAt), job.Times(s.Upcoming), job.Time(s.CreatedAt), job.Time(s.UpdatedAt)})
}
