package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func compile(t testing.TB, s Spec) *Timetable {
	t.Helper()
	tt, err := s.Compile()
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	return tt
}

func at(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func format(times []time.Time) string {
	parts := make([]string, len(times))
	for i, v := range times {
		parts[i] = v.Format(time.RFC3339Nano)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sameTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// checkUpcoming compiles spec and checks that the fire times after from are
// want (RFC 3339 with the local offset, which is checked too).
func checkUpcoming(t *testing.T, spec Spec, from string, want []string) {
	t.Helper()
	tt := compile(t, spec)
	got := tt.Upcoming(at(t, from), len(want))
	var gotS []string
	for _, g := range got {
		gotS = append(gotS, g.Format(time.RFC3339))
	}
	if strings.Join(gotS, " ") != strings.Join(want, " ") {
		t.Errorf("%q in %q after %s:\n got %v\nwant %v", spec.Cron, spec.Timezone, from, gotS, want)
	}
}

// 2026: Berlin springs forward on Mar 29 at 02:00 CET (to 03:00 CEST) and
// falls back on Oct 25 at 03:00 CEST (to 02:00 CET); New York springs forward
// on Mar 8 at 02:00 EST and falls back on Nov 1 at 02:00 EDT (to 01:00 EST).
func TestNextDST(t *testing.T) {
	t.Parallel()
	const berlin, newYork = "Europe/Berlin", "America/New_York"
	tests := []struct {
		name, zone, cron, from string
		want                   []string
	}{
		// Wall-clock expressions: a skipped time fires once, right after the gap.
		{"berlin spring daily 02:30", berlin, "30 2 * * *", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"new york spring daily 02:30", newYork, "30 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"berlin spring 6 fields", berlin, "15 30 2 * * *", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:15+02:00"}},
		{"new york spring 6 fields", newYork, "0 30 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"berlin spring whole skipped hour collapses", berlin, "* 2 * * *", "2026-03-29T01:59:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"berlin spring every 2 hours", berlin, "0 */2 * * *", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"berlin spring skipped and real 03:00 fire once", berlin, "0 2,3 * * *", "2026-03-29T01:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},

		// Wall-clock expressions: a repeated time fires at its first occurrence.
		{"berlin fall daily 02:30", berlin, "30 2 * * *", "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin fall daily 02:30 from inside the repeat", berlin, "30 2 * * *", "2026-10-25T02:10:00+01:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		{"new york fall daily 02:30 is not repeated", newYork, "30 2 * * *", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
		{"new york fall daily 01:30", newYork, "30 1 * * *", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"new york fall 6 fields", newYork, "30 30 1 * * *", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:30-04:00", "2026-11-02T01:30:30-05:00"}},
		{"berlin fall 6 fields every 20 s in one minute", berlin, "*/20 59 2 * * *", "2026-10-25T02:58:00+02:00",
			[]string{"2026-10-25T02:59:00+02:00", "2026-10-25T02:59:20+02:00", "2026-10-25T02:59:40+02:00", "2026-10-26T02:59:00+01:00"}},
		{"new york fall hours 1-2", newYork, "0 1-2 * * *", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-02T01:00:00-05:00"}},

		// Periodic expressions: every real hour or quarter, through both transitions.
		{"berlin spring hourly", berlin, "0 * * * *", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"berlin fall hourly", berlin, "0 * * * *", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"new york spring hourly at :30", newYork, "30 * * * *", "2026-03-08T00:45:00-05:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"}},
		{"new york fall hourly", newYork, "@hourly", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"berlin spring every 15 min", berlin, "*/15 * * * *", "2026-03-29T01:30:00+01:00",
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"berlin fall every 15 min", berlin, "*/15 * * * *", "2026-10-25T02:30:00+02:00",
			[]string{"2026-10-25T02:45:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00",
				"2026-10-25T02:30:00+01:00", "2026-10-25T02:45:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"new york spring every 15 min", newYork, "*/15 * * * *", "2026-03-08T01:30:00-05:00",
			[]string{"2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"}},
		{"new york fall every 15 min", newYork, "*/15 * * * *", "2026-11-01T01:30:00-04:00",
			[]string{"2026-11-01T01:45:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:15:00-05:00"}},
		{"berlin spring 6 fields every 20 s", berlin, "*/20 * * * * *", "2026-03-29T01:59:30+01:00",
			[]string{"2026-03-29T01:59:40+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:00:20+02:00"}},
		{"new york fall 6 fields every 30 s", newYork, "*/30 * * * * *", "2026-11-01T01:59:00-04:00",
			[]string{"2026-11-01T01:59:30-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:00:30-05:00"}},

		// Midnight skipped (robfig/cron skips the whole day).
		{"sao paulo midnight skipped", "America/Sao_Paulo", "@daily", "2018-11-03T12:00:00-03:00",
			[]string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}},
		{"santiago midnight skipped", "America/Santiago", "0 0 * * *", "2026-09-05T12:00:00-04:00",
			[]string{"2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"}},
		// Samoa skipped Dec 30, 2011 entirely.
		{"apia skipped day", "Pacific/Apia", "0 9 * * *", "2011-12-29T12:00:00-10:00",
			[]string{"2011-12-31T00:00:00+14:00", "2011-12-31T09:00:00+14:00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkUpcoming(t, Spec{Cron: tc.cron, Timezone: tc.zone}, tc.from, tc.want)
		})
	}
}

func TestNextCalendar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, zone, cron, from string
		want                   []string
	}{
		{"leap day", "", "0 0 29 2 *", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"leap day across 2100, 8 years", "", "0 0 29 2 *", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z"}},
		{"day 31 skips 30-day months", "", "0 0 31 * *", "2026-01-31T00:00:00Z",
			[]string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z"}},
		{"@hourly", "", "@hourly", "2026-05-05T10:20:00Z",
			[]string{"2026-05-05T11:00:00Z", "2026-05-05T12:00:00Z"}},
		{"@daily in Berlin", "Europe/Berlin", "@daily", "2026-05-05T10:20:00Z",
			[]string{"2026-05-06T00:00:00+02:00", "2026-05-07T00:00:00+02:00"}},
		{"@midnight", "", "@midnight", "2026-05-05T00:00:00Z",
			[]string{"2026-05-06T00:00:00Z"}},
		{"@weekly is Sunday", "", "@weekly", "2026-05-05T00:00:00Z",
			[]string{"2026-05-10T00:00:00Z", "2026-05-17T00:00:00Z"}},
		{"@monthly", "", "@monthly", "2026-05-05T00:00:00Z",
			[]string{"2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"}},
		{"@yearly", "", "@yearly", "2026-05-05T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z"}},
		{"@annually", "Asia/Kolkata", "@annually", "2026-05-05T00:00:00Z",
			[]string{"2027-01-01T00:00:00+05:30"}},
		{"strictly after a fire time", "", "0 3 * * *", "2026-05-05T03:00:00Z",
			[]string{"2026-05-06T03:00:00Z"}},
		{"seconds field", "", "*/10 * * * * *", "2026-05-05T03:00:05Z",
			[]string{"2026-05-05T03:00:10Z", "2026-05-05T03:00:20Z"}},
		{"day of week names", "", "0 9 * * mon-fri", "2026-05-08T10:00:00Z", // a Friday
			[]string{"2026-05-11T09:00:00Z", "2026-05-12T09:00:00Z"}},
		{"day of month or day of week", "", "0 0 13 * fri", "2026-02-01T00:00:00Z",
			[]string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z"}},
		{"surrounding spaces", "", "  0 12 * * *  ", "2026-05-05T00:00:00Z",
			[]string{"2026-05-05T12:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkUpcoming(t, Spec{Cron: tc.cron, Timezone: tc.zone}, tc.from, tc.want)
		})
	}

	t.Run("fractional second input", func(t *testing.T) {
		t.Parallel()
		tt := compile(t, Spec{Cron: "* * * * * *"})
		got := tt.Next(at(t, "2026-05-05T10:00:00.5Z"))
		if want := at(t, "2026-05-05T10:00:01Z"); !got.Equal(want) {
			t.Errorf("Next = %v, want %v", got, want)
		}
	})
	t.Run("result in the schedule's zone", func(t *testing.T) {
		t.Parallel()
		tt := compile(t, Spec{Cron: "0 3 * * *", Timezone: "Europe/Berlin"})
		if got := tt.Next(at(t, "2026-05-05T00:00:00Z")).Location().String(); got != "Europe/Berlin" {
			t.Errorf("location = %s", got)
		}
	})
}

// TestNextMatchesWallClockRules checks Next against a plain statement of
// the rules, minute by minute of real time, around every transition of a
// set of zones with unusual transitions (30-minute DST, midnight DST, a
// skipped day, negative DST, DST suspended for Ramadan).
func TestNextMatchesWallClockRules(t *testing.T) {
	t.Parallel()
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo",
		"America/Santiago", "Pacific/Apia", "America/Havana", "Europe/Dublin", "Africa/Casablanca", "Asia/Kolkata", "UTC"}
	exprs := []string{"30 2 * * *", "30 1 * * *", "0 0 * * *", "45 23 * * *", "0 */2 * * *", "*/7 1-3 * * *",
		"* 2 * * *", "15 0 * * 0", "0 * * * *", "*/15 * * * *", "30 * * * *", "*/20 * * * 0,1"}
	for _, zone := range zones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			var windows []time.Time // the transitions, or one plain day
			for _, span := range [][2]time.Time{
				{time.Date(2011, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2012, 7, 1, 0, 0, 0, 0, time.UTC)},
				{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
			} {
				for x := span[0]; ; {
					_, end := x.In(loc).ZoneBounds()
					if end.IsZero() || !end.Before(span[1]) {
						break
					}
					windows = append(windows, end)
					x = end
				}
			}
			if len(windows) == 0 {
				windows = append(windows, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC))
			}
			for _, expr := range exprs {
				tt := compile(t, Spec{Cron: expr, Timezone: zone})
				for _, transition := range windows {
					from, to := transition.Add(-26*time.Hour), transition.Add(26*time.Hour)
					want := reference(tt, from, to)
					var got []time.Time
					for f := tt.Next(from); !f.After(to); f = tt.Next(f) {
						got = append(got, f)
					}
					if !sameTimes(got, want) {
						t.Errorf("%q around %v:\n got %s\nwant %s", expr, transition.In(loc), format(got), format(want))
					}
					// Next from any instant, such as one inside a repeated hour.
					for x, i := from, 0; i < len(want); x = x.Add(7*time.Minute + 13*time.Second) {
						for i < len(want) && !want[i].After(x) {
							i++
						}
						if i < len(want) && !tt.Next(x).Equal(want[i]) {
							t.Errorf("%q: Next(%v) = %v, want %v", expr, x.In(loc), tt.Next(x), want[i])
							break
						}
					}
				}
			}
		})
	}
}

// reference lists the fire times in (from, to] by stepping through real
// time a minute at a time: a periodic expression fires whenever the wall
// clock matches; a wall-clock one fires whenever the wall clock first reaches
// beyond its latest reading a time that matches (so a skipped time fires
// when the clock jumps over it and a repeated one does not fire again).
func reference(tt *Timetable, from, to time.Time) []time.Time {
	var fires []time.Time
	start := from.Add(-27 * time.Hour).Truncate(time.Minute)
	latest := wallClock(start, zoneOffset(start, tt.loc))
	match := nextWall(tt.wall, latest) // the first matching wall-clock time after latest
	prev := latest
	for x := start.Add(time.Minute); !x.After(to); x = x.Add(time.Minute) {
		w := wallClock(x, zoneOffset(x, tt.loc))
		var fire bool
		if tt.periodic {
			if w.Before(prev) || w.After(match) {
				match = nextWall(tt.wall, w.Add(-time.Nanosecond))
			}
			fire = w.Equal(match)
			prev = w
		} else if w.After(latest) {
			fire = !match.After(w)
			latest = w
			if !match.After(latest) {
				match = nextWall(tt.wall, latest)
			}
		}
		if fire && x.After(from) {
			fires = append(fires, x)
		}
	}
	return fires
}

func TestNextInterval(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("3600 s apart in real time across spring-forward and fall-back", func(t *testing.T) {
		t.Parallel()
		for _, anchor := range []time.Time{
			time.Date(2026, 3, 28, 22, 10, 0, 0, berlin),
			time.Date(2026, 10, 24, 22, 10, 0, 0, berlin),
		} {
			tt := compile(t, Spec{EverySeconds: new(3600), Timezone: "Europe/Berlin", Anchor: anchor})
			got := tt.Upcoming(anchor, 10)
			prev := anchor
			for _, g := range got {
				if d := g.Sub(prev); d != time.Hour {
					t.Errorf("anchor %v: %v after %v, %v apart", anchor, g, prev, d)
				}
				prev = g
			}
		}
	})
	t.Run("daily interval drifts on the wall clock across DST", func(t *testing.T) {
		t.Parallel()
		anchor := time.Date(2026, 3, 28, 0, 0, 0, 0, berlin)
		tt := compile(t, Spec{EverySeconds: new(86400), Timezone: "Europe/Berlin", Anchor: anchor})
		got := tt.Upcoming(anchor, 2)
		want := []time.Time{time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 1, 0, 0, 0, berlin)}
		if !sameTimes(got, want) {
			t.Errorf("got %s, want %s", format(got), format(want))
		}
	})
	tests := []struct {
		name         string
		every        int
		anchor, from string
		want         []string
	}{
		{"epoch anchor: every 300 s on the 5 minutes", 300, "", "2026-05-05T10:02:00Z",
			[]string{"2026-05-05T10:05:00Z", "2026-05-05T10:10:00Z"}},
		{"strictly after the anchor", 60, "2026-05-05T10:00:00.25Z", "2026-05-05T10:00:00.25Z",
			[]string{"2026-05-05T10:01:00.25Z", "2026-05-05T10:02:00.25Z"}},
		{"before the anchor", 60, "2026-05-05T10:00:00.25Z", "2026-05-05T09:58:30Z",
			[]string{"2026-05-05T09:59:00.25Z", "2026-05-05T10:00:00.25Z"}},
		{"just before a fire time", 60, "2026-05-05T10:00:00.25Z", "2026-05-05T10:01:00.249999999Z",
			[]string{"2026-05-05T10:01:00.25Z"}},
		{"one second", 1, "2026-05-05T10:00:00Z", "2026-05-05T10:00:07.5Z",
			[]string{"2026-05-05T10:00:08Z", "2026-05-05T10:00:09Z"}},
		{"one year", MaxEverySeconds, "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z", "2028-12-31T00:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := Spec{EverySeconds: new(tc.every)}
			if tc.anchor != "" {
				spec.Anchor = at(t, tc.anchor)
			}
			got := compile(t, spec).Upcoming(at(t, tc.from), len(tc.want))
			var want []time.Time
			for _, w := range tc.want {
				want = append(want, at(t, w))
			}
			if !sameTimes(got, want) {
				t.Errorf("got %s, want %s", format(got), format(want))
			}
		})
	}
}

func TestUpcoming(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC)
	for _, spec := range []Spec{
		{Cron: "30 2 * * *", Timezone: "Europe/Berlin"},
		{Cron: "*/15 * * * *", Timezone: "America/New_York"},
		{Cron: "0 0 29 2 *"},
		{Cron: "@hourly", Timezone: "Europe/Berlin"},
		{EverySeconds: new(7), Timezone: "Europe/Berlin"},
	} {
		tt := compile(t, spec)
		got := tt.Upcoming(from, 5)
		if len(got) != 5 {
			t.Fatalf("%+v: %d times, want 5", spec, len(got))
		}
		prev := from
		for _, g := range got {
			if !g.After(prev) {
				t.Errorf("%+v: %s not increasing", spec, format(got))
			}
			prev = g
		}
		if got := tt.Upcoming(from, 0); len(got) != 0 {
			t.Errorf("Upcoming(0) = %v", got)
		}
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	minute := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	specs := map[string]Spec{
		"cron":     {Cron: "* * * * *"},
		"interval": {EverySeconds: new(60), Anchor: t0},
	}
	for _, policy := range []MisfirePolicy{MisfireSkip, MisfireRunOnce, MisfireRunAll, ""} {
		for _, missed := range []int{0, 1, 5, 250} {
			for _, onTime := range []bool{true, false} {
				for kind, spec := range specs {
					name := fmt.Sprintf("%s/%s/missed=%d/on_time=%v", kind, policy, missed, onTime)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						spec.Misfire = policy
						tt := compile(t, spec)
						// The fire times are t0 + i minutes; missed of them are long late.
						now, next := minute(missed).Add(400*time.Millisecond), minute(missed+1)
						if !onTime {
							now, next = minute(missed-1).Add(30*time.Second), minute(missed)
						}
						var want []time.Time
						keep := map[MisfirePolicy]int{MisfireSkip: 0, MisfireRunOnce: 1, "": 1, MisfireRunAll: 100}[policy]
						for i := max(0, missed-keep); i < missed; i++ {
							want = append(want, minute(i))
						}
						if onTime {
							want = append(want, minute(missed))
						}
						fire, gotNext := tt.Due(t0, now)
						if !sameTimes(fire, want) {
							t.Errorf("fire = %s\nwant %s", format(fire), format(want))
						}
						if !gotNext.Equal(next) || !gotNext.After(now) {
							t.Errorf("next = %v, want %v", gotNext, next)
						}
					})
				}
			}
		}
	}
}

func TestDueEdges(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	skip := compile(t, Spec{Cron: "* * * * *", Misfire: MisfireSkip})
	tests := []struct {
		name     string
		planned  time.Time
		now      time.Time
		wantFire []time.Time
		wantNext time.Time
	}{
		{"due exactly now", t0, t0, []time.Time{t0}, t0.Add(time.Minute)},
		{"exactly the tolerance late is on time", t0, t0.Add(MisfireTolerance), []time.Time{t0}, t0.Add(time.Minute)},
		{"just over the tolerance is a misfire", t0, t0.Add(MisfireTolerance + time.Nanosecond), nil, t0.Add(time.Minute)},
		{"planned in the future", t0, t0.Add(-time.Second), nil, t0},
		{"never planned", time.Time{}, t0.Add(time.Second), nil, t0.Add(time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fire, next := skip.Due(tc.planned, tc.now)
			if !sameTimes(fire, tc.wantFire) || !next.Equal(tc.wantNext) {
				t.Errorf("Due = %s, %v; want %s, %v", format(fire), next, format(tc.wantFire), tc.wantNext)
			}
		})
	}

	t.Run("every second, both on-time fire times", func(t *testing.T) {
		t.Parallel()
		tt := compile(t, Spec{EverySeconds: new(1), Misfire: MisfireSkip})
		fire, _ := tt.Due(t0.Add(-time.Hour), t0)
		if want := []time.Time{t0.Add(-time.Second), t0}; !sameTimes(fire, want) {
			t.Errorf("fire = %s, want %s", format(fire), format(want))
		}
	})
	t.Run("run_all after 250 days of a daily schedule keeps the newest 100", func(t *testing.T) {
		t.Parallel()
		tt := compile(t, Spec{Cron: "0 3 * * *", Timezone: "Europe/Berlin", Misfire: MisfireRunAll})
		planned := tt.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		all := append([]time.Time{planned}, tt.Upcoming(planned, 249)...)
		now := all[249].Add(time.Hour)
		fire, next := tt.Due(planned, now)
		if !sameTimes(fire, all[150:]) {
			t.Errorf("fire = %s\nwant %s", format(fire), format(all[150:]))
		}
		if want := tt.Next(all[249]); !next.Equal(want) {
			t.Errorf("next = %v, want %v", next, want)
		}
	})
	t.Run("run_all after a year of an every-second schedule", func(t *testing.T) {
		t.Parallel()
		tt := compile(t, Spec{Cron: "* * * * * *", Misfire: MisfireRunAll})
		now := t0.Add(365*24*time.Hour + 100*time.Millisecond)
		fire, _ := tt.Due(t0, now)
		if len(fire) != 101 || !fire[0].Equal(now.Truncate(time.Second).Add(-100*time.Second)) || !fire[100].Equal(now.Truncate(time.Second)) {
			t.Errorf("fire = %d times, from %v to %v", len(fire), fire[0], fire[len(fire)-1])
		}
	})
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		spec  Spec
		field string
		msg   string // a part of the message
	}{
		{"neither cron nor every_seconds", Spec{}, "cron", "cron: one of cron or every_seconds is required"},
		{"both cron and every_seconds", Spec{Cron: "* * * * *", EverySeconds: new(60)}, "cron", "not both"},
		{"3 fields", Spec{Cron: "* * *"}, "cron", "cron: expected 5 or 6 fields, got 3"},
		{"7 fields", Spec{Cron: "0 0 0 1 1 * 2026"}, "cron", "cron: expected 5 or 6 fields, got 7"},
		{"blank", Spec{Cron: "   "}, "cron", "expected 5 or 6 fields, got 0"},
		{"minute out of range", Spec{Cron: "61 * * * *"}, "cron", `minute field "61": end of range (61) above maximum (59)`},
		{"second out of range", Spec{Cron: "60 0 * * * *"}, "cron", `second field "60"`},
		{"hour not a number", Spec{Cron: "0 x * * *"}, "cron", `hour field "x": "x" is not a number or a name`},
		{"day of month 0", Spec{Cron: "0 0 0 * *"}, "cron", `day-of-month field "0"`},
		{"month 13", Spec{Cron: "0 0 1 13 *"}, "cron", `month field "13"`},
		{"day of week 7", Spec{Cron: "0 0 * * 7"}, "cron", `day-of-week field "7"`},
		{"step 0", Spec{Cron: "*/0 * * * *"}, "cron", `minute field "*/0"`},
		{"@every", Spec{Cron: "@every 5m"}, "cron", "use every_seconds"},
		{"unknown descriptor", Spec{Cron: "@reboot"}, "cron", `unknown descriptor "@reboot"`},
		{"time zone prefix", Spec{Cron: "TZ=Europe/Berlin 0 3 * * *"}, "cron", "timezone field"},
		{"time zone prefix without expression", Spec{Cron: "CRON_TZ=UTC"}, "cron", "timezone field"},
		{"never fires", Spec{Cron: "0 0 30 2 *"}, "cron", `"0 0 30 2 *" never fires`},
		{"never fires, Nov 31", Spec{Cron: "0 0 0 31 11 *"}, "cron", "never fires"},
		{"unknown time zone", Spec{Cron: "0 3 * * *", Timezone: "Mars/Base"}, "timezone", `timezone: unknown time zone "Mars/Base"`},
		{"Local", Spec{Cron: "0 3 * * *", Timezone: "Local"}, "timezone", `timezone: "Local"`},
		{"path as time zone", Spec{Cron: "0 3 * * *", Timezone: "../etc/passwd"}, "timezone", "unknown time zone"},
		{"bad misfire", Spec{Cron: "0 3 * * *", Misfire: "later"}, "misfire", `misfire: must be one of skip, run_once, run_all; got "later"`},
		{"every_seconds 0", Spec{EverySeconds: new(0)}, "every_seconds", "every_seconds: must be between 1 and 31536000 (one year), got 0"},
		{"every_seconds negative", Spec{EverySeconds: new(-5)}, "every_seconds", "got -5"},
		{"every_seconds too large", Spec{EverySeconds: new(MaxEverySeconds + 1)}, "every_seconds", "got 31536001"},
		{"interval with bad time zone", Spec{EverySeconds: new(60), Timezone: "Nowhere"}, "timezone", "unknown time zone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tt, err := tc.spec.Compile()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Compile = %v, %v; want a *FieldError", tt, err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Message, tc.msg) || !strings.HasPrefix(fe.Message, tc.field+": ") || err.Error() != fe.Message {
				t.Errorf("error field %q message %q; want field %q and a message containing %q", fe.Field, fe.Message, tc.field, tc.msg)
			}
		})
	}
}

func TestCompileValid(t *testing.T) {
	t.Parallel()
	for _, spec := range []Spec{
		{Cron: "0 3 * * *", Timezone: "Europe/Berlin", Misfire: MisfireSkip},
		{Cron: "0 0 3 * * *", Timezone: "UTC", Misfire: MisfireRunAll},
		{Cron: "? * * * ?"},
		{Cron: "0 0 29 2 *"},
		{Cron: "0\t3 *  * *"},
		{Cron: "0 9-17/2 1,15 jan-jun MON-FRI", Misfire: MisfireRunOnce},
		{Cron: "@midnight"},
		{EverySeconds: new(1)},
		{EverySeconds: new(MaxEverySeconds), Timezone: "America/New_York"},
	} {
		if _, err := spec.Compile(); err != nil {
			t.Errorf("Compile(%+v): %v", spec, err)
		}
	}
}

func TestSpecJSON(t *testing.T) {
	t.Parallel()
	var s Spec
	if err := json.Unmarshal([]byte(`{"cron":"0 3 * * *","timezone":"Europe/Berlin","misfire":"run_all"}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Cron != "0 3 * * *" || s.Timezone != "Europe/Berlin" || s.Misfire != MisfireRunAll || s.EverySeconds != nil {
		t.Errorf("decoded %+v", s)
	}
	if err := json.Unmarshal([]byte(`{"every_seconds":0}`), &s); err != nil {
		t.Fatal(err)
	}
	s.Cron = ""
	var fe *FieldError
	if _, err := s.Compile(); !errors.As(err, &fe) || fe.Field != "every_seconds" {
		t.Errorf("every_seconds 0: %v", err)
	}
	out, err := json.Marshal(Spec{EverySeconds: new(300), Anchor: time.Now()})
	if err != nil || string(out) != `{"every_seconds":300}` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
}

func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		"0 3 * * *", "*/15 * * * *", "0 30 2 * * *", "@hourly", "@daily", "@every 1m", "@", "0 0 29 2 *",
		"0 0 30 2 *", "0 0 31 * *", "1-5/2,*/7 */3 1,15 jan-mar mon-fri", "TZ=UTC", "CRON_TZ=Europe/Berlin 0 3 * * *",
		"* * * * * *", "0 0 0 1 1 * 2026", "61 * * * *", "*/0 * * * *", "-1 * * * *", ", * * * *", "a-b/c * * * *",
		"* 2 * * *", "0 */2 * * *", "?", "\x00", "0 0 1 1 1",
	} {
		f.Add(seed, uint8(0), int64(0))
	}
	zones := []string{"", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "America/Santiago"}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, offset int64) {
		spec := Spec{Cron: expr, Timezone: zones[int(zone)%len(zones)]}
		tt, err := spec.Compile()
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "cron" || !strings.HasPrefix(fe.Message, "cron: ") {
				t.Fatalf("Compile(%q): %v", expr, err)
			}
			return
		}
		const span = 130 * 365 * 24 * 3600 // 2000 to 2130
		if offset < 0 {
			offset = -(offset + 1)
		}
		prev := time.Unix(946684800+offset%span, offset%1e9)
		for range 3 {
			next := tt.Next(prev)
			if next.IsZero() || !next.After(prev) {
				t.Fatalf("%q in %q: Next(%v) = %v", expr, spec.Timezone, prev, next)
			}
			if again := tt.Next(next.Add(-time.Nanosecond)); !again.Equal(next) {
				t.Fatalf("%q in %q: Next(%v) = %v but Next(%v) = %v", expr, spec.Timezone, prev, next, next.Add(-time.Nanosecond), again)
			}
			prev = next
		}
	})
}

func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct {
		name string
		spec Spec
	}{
		{"daily_0230_berlin", Spec{Cron: "30 2 * * *", Timezone: "Europe/Berlin"}},
		{"weekdays_9_to_17_new_york", Spec{Cron: "0 9-17 * * 1-5", Timezone: "America/New_York"}},
		{"every_15_min_new_york", Spec{Cron: "*/15 * * * *", Timezone: "America/New_York"}},
		{"leap_day_utc", Spec{Cron: "0 0 29 2 *"}},
		{"every_300_s", Spec{EverySeconds: new(300)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tt := compile(b, bc.spec)
			starts := make([]time.Time, 64)
			for i := range starts {
				starts[i] = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 137 * time.Hour)
			}
			i := 0
			for b.Loop() {
				tt.Next(starts[i%len(starts)])
				i++
			}
		})
	}
}
