package job

import "time"

// DueAt is when the job became due to run: its run_at, or its created_at
// when that is later (a job submitted with a run_at in the past was due
// only from its submit). A retried job's run_at is its retry time, so an
// attempt's wait counts from the end of its backoff.
func (j *Job) DueAt() time.Time {
	if j.CreatedAt.After(j.RunAt) {
		return j.CreatedAt
	}
	return j.RunAt
}

// StartDelay is how long the attempt that started at started waited after
// the job became due (DueAt); never negative, whatever the clocks say.
func (j *Job) StartDelay(started time.Time) time.Duration {
	return max(started.Sub(j.DueAt()), 0)
}

// StartDelayBuckets are the buckets of the start-latency histograms
// (sundial_job_start_latency_seconds): 5 ms to an hour.
var StartDelayBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600}
