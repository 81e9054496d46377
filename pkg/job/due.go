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

// StartDelayHelp is the help text of sundial_job_start_latency_seconds,
// the histogram of StartDelay that workers serve and the API serves too
// (for the claims of the HTTP worker protocol).
const StartDelayHelp = "Time from when a job became due (its run_at, or created_at when later) to the start of an attempt, by queue: observed by the process that claimed it (a worker; the API for the HTTP worker protocol's claims)."

// StartDelayBuckets are that histogram's buckets: 5 ms to an hour.
var StartDelayBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600}
