package job

import (
	"encoding/json"
	"math/rand/v2"
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

// appendTime writes years 0 to 9999 by hand: byte for byte what
// time.Time.AppendFormat writes in TimeLayout, for any instant, zone and
// precision, and for the years around and beyond the hand-written range.
func TestAppendTimeMatchesAppendFormat(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 27))
	zones := []*time.Location{time.UTC, time.FixedZone("CET", 3600), time.FixedZone("odd", -(9*3600 + 30*60 + 17))}
	years := []int{-1, 0, 1, 9, 99, 999, 1000, 1969, 1970, 2026, 9998, 9999, 10000, 12345}
	check := func(at time.Time) {
		t.Helper()
		want := `"` + at.UTC().Format(TimeLayout) + `"`
		if got := string(appendTime(nil, at)); got != want {
			t.Fatalf("appendTime(%v) = %s, want %s", at, got, want)
		}
	}
	for _, y := range years {
		for _, z := range zones {
			check(time.Date(y, time.January, 1, 0, 0, 0, 0, z))
			check(time.Date(y, time.December, 31, 23, 59, 59, 999999999, z))
		}
	}
	for range 20000 {
		at := time.Unix(r.Int64N(253402300800+2*86400)-86400, r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		check(at)
	}
}
