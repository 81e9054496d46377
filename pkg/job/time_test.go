package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Every time of a job, its progress and an event comes out in TimeLayout:
// milliseconds, UTC, whatever the precision and zone of the value.
func TestTimesMarshalInOneFormat(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	at := time.Date(2026, 11, 23, 22, 6, 41, 123456789, berlin)
	bare := time.Date(2026, 11, 23, 22, 0, 0, 0, berlin)
	const want, wantBare = `"2026-11-23T21:06:41.123Z"`, `"2026-11-23T21:00:00.000Z"`
	j := Job{ID: "x", RunAt: bare, CreatedAt: at, StartedAt: &at, FinishedAt: &at, Progress: &Progress{Percent: 5, At: at}}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, f := range []string{`"run_at":` + wantBare, `"created_at":` + want, `"started_at":` + want, `"finished_at":` + want, `"at":` + want, `"id":"x"`, `"percent":5`} {
		if !strings.Contains(s, f) {
			t.Errorf("job JSON lacks %s:\n%s", f, s)
		}
	}
	if strings.Count(s, "run_at") != 1 {
		t.Errorf("run_at twice:\n%s", s)
	}
	// Pointers and values marshal alike, and the JSON reads back.
	pb, _ := json.Marshal(&j)
	if string(pb) != s {
		t.Errorf("*Job marshals differently:\n%s\n%s", pb, s)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil || !back.CreatedAt.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("read back: %v %v", back.CreatedAt, err)
	}
	e, _ := json.Marshal(Event{JobID: "x", At: at})
	if !strings.Contains(string(e), `"at":`+want) {
		t.Errorf("event JSON: %s", e)
	}
	// Optional times stay absent.
	b, _ = json.Marshal(Job{ID: "y"})
	if strings.Contains(string(b), "started_at") || strings.Contains(string(b), "finished_at") {
		t.Errorf("unset optional times appear: %s", b)
	}
}
