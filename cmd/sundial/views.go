package main

import (
	"encoding/json"
	"fmt"
	"time"
)

// The API's answers, as far as the tables show them; --json prints the
// answers themselves.

type scheduleView struct {
	ID           string          `json:"id"`
	Cron         string          `json:"cron"`
	EverySeconds *int            `json:"every_seconds"`
	Timezone     string          `json:"timezone"`
	Job          jobTemplateView `json:"job"`
	Enabled      bool            `json:"enabled"`
	Misfire      string          `json:"misfire"`
	NextRunAt    *time.Time      `json:"next_run_at"`
	LastRunAt    *time.Time      `json:"last_run_at"`
	LastJobID    string          `json:"last_job_id"`
	Upcoming     []time.Time     `json:"upcoming"`
	CreatedAt    *time.Time      `json:"created_at"`
	UpdatedAt    *time.Time      `json:"updated_at"`
}

type jobTemplateView struct {
	Queue    string          `json:"queue"`
	Type     string          `json:"type"`
	Payload  json.RawMessage `json:"payload"`
	Priority string          `json:"priority"`
}

// timing describes when a schedule fires: its cron expression or interval.
func (s *scheduleView) timing() string {
	if s.EverySeconds != nil {
		return "every " + (time.Duration(*s.EverySeconds) * time.Second).String()
	}
	return s.Cron
}

func (s *scheduleView) state() string {
	if s.Enabled {
		return "enabled"
	}
	return "disabled"
}

type jobView struct {
	ID          string          `json:"id"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Priority    string          `json:"priority"`
	State       string          `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	RunAt       *time.Time      `json:"run_at"`
	CreatedAt   *time.Time      `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at"`
	FinishedAt  *time.Time      `json:"finished_at"`
	WorkerID    string          `json:"worker_id"`
	Result      json.RawMessage `json:"result"`
	LastError   string          `json:"last_error"`
	StartBy     *time.Time      `json:"start_by"`
	Deadline    *time.Time      `json:"deadline"`
	DebounceKey string          `json:"debounce_key"`
	Debounced   bool            `json:"debounced"`
	Sequence    *struct {
		Key       string `json:"key"`
		OnFailure string `json:"on_failure"`
	} `json:"sequence"`
	Tags     []string `json:"tags"`
	HeldBack *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"held_back"`
	Logs *struct {
		Lines   int `json:"lines"`
		Dropped int `json:"dropped"`
	} `json:"logs"`
	Durable *struct {
		Steps []struct {
			Seq    int             `json:"seq"`
			Name   string          `json:"name"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
			Error  string          `json:"error"`
		} `json:"steps"`
		Signals []struct {
			Name  string          `json:"name"`
			Value json.RawMessage `json:"value"`
		} `json:"signals"`
		Awaiting *struct {
			Kind   string     `json:"kind"`
			Signal string     `json:"signal"`
			Until  *time.Time `json:"until"`
		} `json:"awaiting"`
	} `json:"durable"`
}

func (j *jobView) attempts() string { return fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts) }

type queueView struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	Queued struct {
		High   int64 `json:"high"`
		Normal int64 `json:"normal"`
		Low    int64 `json:"low"`
	} `json:"queued"`
	Throttled          int64   `json:"throttled"`
	Unhandled          int64   `json:"unhandled"`
	Scheduled          int64   `json:"scheduled"`
	Active             int64   `json:"active"`
	Waiting            int64   `json:"waiting"`
	Dead               int64   `json:"dead"`
	SucceededTotal     int64   `json:"succeeded_total"`
	FailedTotal        int64   `json:"failed_total"`
	ProcessedPerSecond float64 `json:"processed_per_second"`
}

// show formats one of the schedule's times in its time zone (the API
// sends every time in UTC); in UTC when the zone is unknown here.
func (s *scheduleView) show(t *time.Time) string {
	if t == nil || t.IsZero() {
		return showTime(t)
	}
	if loc, err := time.LoadLocation(s.Timezone); err == nil && s.Timezone != "" {
		local := t.In(loc)
		return showTime(&local)
	}
	return showTime(t)
}
