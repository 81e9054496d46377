package job

import (
	"testing"
	"time"
)

func TestDueAt(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later := created.Add(time.Minute)
	for _, c := range []struct {
		name        string
		runAt, want time.Time
		started     time.Time
		wantDelay   time.Duration
	}{
		{"run_at later (scheduled, retried, a dependency ended)", later, later, later.Add(2 * time.Second), 2 * time.Second},
		{"run_at earlier (due from its submit)", created.Add(-time.Hour), created, created.Add(time.Second), time.Second},
		{"started before due (clocks apart)", later, later, later.Add(-time.Second), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := &Job{CreatedAt: created, RunAt: c.runAt}
			if got := j.DueAt(); !got.Equal(c.want) {
				t.Errorf("DueAt %v, want %v", got, c.want)
			}
			if got := j.StartDelay(c.started); got != c.wantDelay {
				t.Errorf("StartDelay %v, want %v", got, c.wantDelay)
			}
		})
	}
}
