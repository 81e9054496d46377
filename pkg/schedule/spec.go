package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sundialhq/sundial/pkg/job"
)

// Limits and tolerances of recurring schedules.
const (
	// MaxEverySeconds bounds every_seconds: one (non-leap) year.
	MaxEverySeconds = 365 * 24 * 60 * 60

	// MisfireTolerance is how late a fire time may be and still count as on
	// time. An on-time fire time always fires, whatever the misfire policy;
	// a later one is a misfire and is handled by the policy.
	MisfireTolerance = time.Second

	// MaxCatchUp caps how many missed fire times run_all submits at once.
	// The most recent ones are kept, the older ones are dropped.
	MaxCatchUp = 100
)

// MisfirePolicy says what a schedule does about fire times it missed, for
// example while no scheduler was running.
type MisfirePolicy string

// The misfire policies. The zero value means MisfireRunOnce.
const (
	// MisfireSkip fires none of the missed times.
	MisfireSkip MisfirePolicy = "skip"
	// MisfireRunOnce fires the most recent missed time once.
	MisfireRunOnce MisfirePolicy = "run_once"
	// MisfireRunAll fires every missed time, at most MaxCatchUp of them
	// (the most recent).
	MisfireRunAll MisfirePolicy = "run_all"
)

// catchUp is how many missed fire times the policy submits at most.
func (p MisfirePolicy) catchUp() int {
	switch p {
	case MisfireSkip:
		return 0
	case MisfireRunAll:
		return MaxCatchUp
	default:
		return 1
	}
}

// FieldError is the validation error returned by Spec.Compile. Field is the
// JSON name of the field at fault ("cron", "every_seconds", "timezone",
// "misfire") and Message starts with it. It is job.FieldError, so that the
// HTTP layer maps the validation errors of jobs and schedules in one place.
type FieldError = job.FieldError

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// Spec is the timing of a recurring schedule as a client submits it: exactly
// one of Cron and EverySeconds, a time zone and a misfire policy.
type Spec struct {
	// Cron is a cron expression with 5 fields (minute hour day-of-month
	// month day-of-week), 6 fields with a leading seconds field, or one of
	// the descriptors @yearly, @annually, @monthly, @weekly, @daily,
	// @midnight and @hourly. Fields accept *, ?, lists (1,15), ranges (1-5),
	// steps (*/15, 10-50/20) and the names jan…dec and sun…sat.
	Cron string `json:"cron,omitempty"`

	// EverySeconds is a fixed interval, 1 to MaxEverySeconds. It is a
	// pointer so that an explicit 0 is reported as out of range rather than
	// as missing.
	EverySeconds *int `json:"every_seconds,omitempty"`

	// Timezone is the IANA time zone Cron is read in, such as
	// "Europe/Berlin"; empty means UTC. It does not move interval fire
	// times, only the zone the times are returned in.
	Timezone string `json:"timezone,omitempty"`

	// Misfire is the misfire policy; empty means MisfireRunOnce.
	Misfire MisfirePolicy `json:"misfire,omitempty"`

	// Anchor aligns interval fire times: they are Anchor + k*EverySeconds
	// for every integer k. The zero value means the Unix epoch, so that
	// intervals dividing a day fire at round UTC times. It is not part of
	// the API; a store sets it, for example to the schedule's creation time.
	Anchor time.Time `json:"-"`
}

// Compile validates s and returns its timetable. The error, if any, is a
// *FieldError naming the field at fault.
func (s Spec) Compile() (*Timetable, error) {
	t := &Timetable{misfire: s.Misfire}
	switch {
	case s.Cron == "" && s.EverySeconds == nil:
		return nil, fieldErr("cron", "one of cron or every_seconds is required")
	case s.Cron != "" && s.EverySeconds != nil:
		return nil, fieldErr("cron", "set either cron or every_seconds, not both")
	case s.EverySeconds != nil:
		if n := *s.EverySeconds; n < 1 || n > MaxEverySeconds {
			return nil, fieldErr("every_seconds", "must be between 1 and %d (one year), got %d", MaxEverySeconds, n)
		}
		t.every = int64(*s.EverySeconds)
		t.anchor = s.Anchor
		if t.anchor.IsZero() {
			t.anchor = time.Unix(0, 0)
		}
	default:
		wall, err := parseCron(s.Cron)
		if err != nil {
			return nil, err
		}
		t.wall = wall
		t.periodic = wall.Hour&allHours == allHours
	}

	switch s.Timezone {
	case "", "UTC":
		t.loc = time.UTC
	case "Local":
		return nil, fieldErr("timezone", `"Local" depends on the server's settings; use an IANA name such as "Europe/Berlin"`)
	default:
		loc, err := time.LoadLocation(s.Timezone)
		if err != nil {
			return nil, fieldErr("timezone", "unknown time zone %q", s.Timezone)
		}
		t.loc = loc
	}

	switch s.Misfire {
	case "":
		t.misfire = MisfireRunOnce
	case MisfireSkip, MisfireRunOnce, MisfireRunAll:
	default:
		return nil, fieldErr("misfire", "must be one of skip, run_once, run_all; got %q", s.Misfire)
	}
	return t, nil
}

// allHours has a bit for each of the 24 hours, as in cron.SpecSchedule.Hour.
const allHours = 1<<24 - 1

// cronParser reads 5 fields, 6 with leading seconds, and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// descriptors are the accepted @-names; @every is left to every_seconds and
// @reboot means nothing to a scheduler.
var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// neverProbe is where Compile looks for a first fire time; any start works,
// since an expression that fires at all fires within every 8 years.
var neverProbe = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// parseCron parses expr into a pattern of wall-clock times, evaluated in UTC
// so that robfig/cron never sees a DST transition.
func parseCron(expr string) (*cron.SpecSchedule, error) {
	e := strings.TrimSpace(expr)
	var parsed cron.Schedule
	var err error
	switch {
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return nil, fieldErr("cron", "put the time zone in the timezone field, not in the expression")
	case e == "@every" || strings.HasPrefix(e, "@every "):
		return nil, fieldErr("cron", "@every is not supported in cron; use every_seconds for a fixed interval")
	case strings.HasPrefix(e, "@"):
		if !descriptors[e] {
			return nil, fieldErr("cron", "unknown descriptor %q; use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly", e)
		}
		parsed, err = cronParser.Parse(e)
	default:
		fields := strings.Fields(e)
		if len(fields) != 5 && len(fields) != 6 {
			return nil, fieldErr("cron", "expected 5 or 6 fields, got %d", len(fields))
		}
		parsed, err = cronParser.Parse(strings.Join(fields, " "))
		if err != nil {
			return nil, badField(fields, err)
		}
	}
	if err != nil {
		return nil, fieldErr("cron", "%v", err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fieldErr("cron", "unsupported expression %q", e)
	}
	wall := *spec
	wall.Location = time.UTC
	if nextWall(&wall, neverProbe).IsZero() {
		return nil, fieldErr("cron", "%q never fires: no date matches its day-of-month, month and day-of-week fields", e)
	}
	return &wall, nil
}

// badField finds which field of a 5- or 6-field expression robfig/cron
// rejected, by parsing each field alone, and says so.
func badField(fields []string, whole error) *FieldError {
	names := []string{"minute", "hour", "day-of-month", "month", "day-of-week"}
	if len(fields) == 6 {
		names = append([]string{"second"}, names...)
	}
	for i, f := range fields {
		probe := make([]string, len(fields))
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = f
		if _, err := cronParser.Parse(strings.Join(probe, " ")); err != nil {
			return fieldErr("cron", "%s field %q: %s", names[i], f, reason(err, f))
		}
	}
	return fieldErr("cron", "%v", whole)
}

// reason rewords a robfig/cron field error for a user.
func reason(err error, field string) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "failed to parse int from "); ok {
		bad, _, _ := strings.Cut(rest, ":")
		return fmt.Sprintf("%q is not a number or a name", bad)
	}
	msg = strings.TrimSuffix(msg, ": "+field)
	for _, part := range strings.Split(field, ",") {
		msg = strings.TrimSuffix(msg, ": "+part)
	}
	return msg
}

// Timetable answers when a compiled Spec fires. Create it with Spec.Compile;
// it is immutable and safe for concurrent use.
//
// Interval timetables fire at Anchor + k*EverySeconds: real elapsed time,
// unaffected by time zones and DST.
//
// Cron timetables match wall-clock times in their time zone. Where the zone's
// UTC offset changes (DST, or a zone changing its standard time) the wall
// clock jumps, and two rules apply, decided by the hour field:
//
//   - Wall-clock expressions, whose hour field does not cover all 24 hours
//     ("30 2 * * *", "0 9-17 * * 1-5", "0 */2 * * *", "* 2 * * *", @daily),
//     fire once for each matching wall-clock time. A time skipped by
//     spring-forward fires at the first instant after the gap: 02:30 on the
//     last Sunday of March in Europe/Berlin fires at 03:00 CEST, and the
//     skipped 02:00…02:59 of "* 2 * * *" collapse into that one fire. A time
//     repeated by fall-back fires at its first occurrence only: "30 1 * * *"
//     in America/New_York fires at 01:30 EDT, not again at 01:30 EST.
//   - Periodic expressions, whose hour field covers all 24 hours ("*", "*/1",
//     "0-23", @hourly), fire at every real instant whose wall-clock time
//     matches: "0 * * * *" and "*/15 * * * *" keep firing every real hour and
//     quarter, twice through a repeated hour and never in a skipped one.
//
// This is Vixie cron's rule, with the hour field alone deciding which kind an
// expression is. Times are returned in the timetable's time zone.
type Timetable struct {
	wall     *cron.SpecSchedule // the cron pattern, in UTC standing for the wall clock
	periodic bool               // the hour field covers all 24 hours
	every    int64              // interval in seconds, for interval timetables
	anchor   time.Time          // interval fire times are anchor + k*every
	loc      *time.Location
	misfire  MisfirePolicy
}

// Next returns the first fire time strictly after after, or the zero Time if
// there is none (Compile rejects cron expressions that never fire).
func (t *Timetable) Next(after time.Time) time.Time {
	var next time.Time
	switch {
	case t.wall == nil:
		next = t.nextInterval(after)
	case t.periodic:
		next = t.nextPeriodic(after)
	default:
		next = t.nextWallClock(after)
	}
	if next.IsZero() {
		return next
	}
	return next.In(t.loc)
}

// Upcoming returns the next n fire times after after, in increasing order.
func (t *Timetable) Upcoming(after time.Time, n int) []time.Time {
	var times []time.Time
	for range n {
		next := t.Next(after)
		if next.IsZero() {
			break
		}
		times = append(times, next)
		after = next
	}
	return times
}

// Due says what to fire now. planned is the schedule's stored next run time,
// which may lie in the past after downtime (it counts as a fire time even if
// the spec has changed since); the zero Time means the schedule was never
// planned and nothing is due.
//
// Fire times from planned to now are due. Those at most MisfireTolerance late
// are on time and always fire. Older ones are misfires: skip fires none of
// them, run_once the most recent one, run_all the most recent MaxCatchUp. fire
// lists the due times to submit, oldest first, each being the scheduled time
// it stands for; next is the new next run time, strictly after now (planned
// itself when it is still in the future).
func (t *Timetable) Due(planned, now time.Time) (fire []time.Time, next time.Time) {
	if planned.After(now) {
		return nil, planned
	}
	next = t.Next(now)
	if planned.IsZero() {
		return nil, next
	}
	late := now.Add(-MisfireTolerance) // fire times before late are misfires
	if n := t.misfire.catchUp(); n > 0 && planned.Before(late) {
		fire = t.newest(planned, late, n)
	}
	first := planned
	if first.Before(late) {
		first = t.Next(late.Add(-time.Nanosecond))
	}
	for f := first; !f.IsZero() && !f.After(now); f = t.Next(f) {
		fire = append(fire, f)
	}
	return fire, next
}

// newest returns the last n fire times in [from, before), counting from as
// one, oldest first. It looks at a window before before that grows until it
// holds n fire times or reaches from, so that a long downtime of a frequent
// schedule does not mean stepping through every missed time.
func (t *Timetable) newest(from, before time.Time, n int) []time.Time {
	span := before.Sub(from)
	for window := time.Minute; ; {
		start, whole := before.Add(-window), window >= span
		f := from
		if !whole {
			f = t.Next(start.Add(-time.Nanosecond))
		}
		ring := make([]time.Time, 0, n)
		count := 0
		for ; !f.IsZero() && f.Before(before); f = t.Next(f) {
			if len(ring) < n {
				ring = append(ring, f)
			} else {
				ring[count%n] = f
			}
			count++
		}
		if whole || count >= n {
			if count > n {
				k := count % n
				ring = append(ring[k:], ring[:k]...)
			}
			return ring
		}
		if window > span/4 {
			window = span
		} else {
			window *= 4
		}
	}
}

// nextInterval returns the first anchor + k*every after after.
func (t *Timetable) nextInterval(after time.Time) time.Time {
	secs := after.Unix() - t.anchor.Unix()
	if after.Nanosecond() < t.anchor.Nanosecond() {
		secs--
	}
	k := secs / t.every
	if secs%t.every != 0 && secs < 0 {
		k-- // floor, not truncation
	}
	return time.Unix(t.anchor.Unix()+(k+1)*t.every, int64(t.anchor.Nanosecond()))
}

// nextPeriodic returns the first real instant after after whose wall-clock
// time matches. Within one zone period the offset is fixed, so the wall clock
// is real time shifted; if the match lies beyond the period, the search goes
// on from the start of the next one.
func (t *Timetable) nextPeriodic(after time.Time) time.Time {
	from, zoneAt := after, after
	for {
		local := zoneAt.In(t.loc)
		_, offset := local.Zone()
		_, end := local.ZoneBounds()
		c := nextWall(t.wall, wallClock(from, offset))
		if c.IsZero() {
			return c
		}
		at := instant(c, offset)
		if end.IsZero() || at.Before(end) {
			return at
		}
		from, zoneAt = end.Add(-time.Nanosecond), end
	}
}

// nextWallClock returns the instant of the first matching wall-clock time
// that the clock has not yet shown by after; see Timetable for the rules.
func (t *Timetable) nextWallClock(after time.Time) time.Time {
	c := nextWall(t.wall, t.latestWallClock(after))
	if c.IsZero() {
		return c
	}
	return t.firstInstant(c)
}

// latestWallClock returns the latest wall-clock time shown at or before at:
// the wall clock at at, or, shortly after a fall-back, the wall clock just
// before it. Offsets differ by at most 26 hours, so zone periods that ended
// more than two days before at cannot matter.
func (t *Timetable) latestWallClock(at time.Time) time.Time {
	latest := wallClock(at, zoneOffset(at, t.loc))
	for zoneAt := at; ; {
		start, _ := zoneAt.In(t.loc).ZoneBounds()
		if start.IsZero() || at.Sub(start) > 48*time.Hour {
			return latest
		}
		zoneAt = start.Add(-time.Nanosecond)
		if w := wallClock(zoneAt, zoneOffset(zoneAt, t.loc)); w.After(latest) {
			latest = w
		}
	}
}

// firstInstant returns the first instant at which the wall clock reaches c:
// the instant c is shown at, the first of two after a fall-back, or the end
// of the gap when c is skipped.
func (t *Timetable) firstInstant(c time.Time) time.Time {
	at := time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), t.loc)
	start, end := at.ZoneBounds()
	shown := wallClock(at, zoneOffset(at, t.loc))
	switch {
	case shown.After(c): // c is skipped; at lies after the gap, read with the offset before it
		return start
	case shown.Before(c): // c is skipped; at lies before the gap, read with the offset after it
		return end
	}
	if !start.IsZero() { // was c already shown in the previous zone period?
		before := start.Add(-time.Nanosecond)
		if earlier := instant(c, zoneOffset(before, t.loc)); earlier.Before(start) && wallClock(earlier, zoneOffset(earlier, t.loc)).Equal(c) {
			return earlier
		}
	}
	return at
}

// nextWall returns the first wall-clock time strictly after w that the
// pattern matches, both expressed in UTC, or the zero Time. robfig/cron gives
// up after the end of the fifth year; Feb 29 can be eight years away (2096 to
// 2104), so one more search covers that.
func nextWall(pattern *cron.SpecSchedule, w time.Time) time.Time {
	next := pattern.Next(w)
	if next.IsZero() {
		next = pattern.Next(time.Date(w.Year()+6, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond))
	}
	return next
}

// wallClock returns the wall-clock time at instant at under the UTC offset
// offset (seconds east), expressed in UTC.
func wallClock(at time.Time, offset int) time.Time {
	return time.Unix(at.Unix()+int64(offset), int64(at.Nanosecond())).UTC()
}

// instant is the inverse of wallClock.
func instant(wall time.Time, offset int) time.Time {
	return time.Unix(wall.Unix()-int64(offset), int64(wall.Nanosecond()))
}

func zoneOffset(at time.Time, loc *time.Location) int {
	_, offset := at.In(loc).Zone()
	return offset
}
