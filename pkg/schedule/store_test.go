package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPutGetListDelete(t *testing.T) {
	e := newEnv(t, true)
	created := e.clock.Now()
	s := e.put(t, `{"id": "tick", "every_seconds": 60, "job": {"queue": "reports", "type": "report.build", "payload": {"n": 1}, "priority": "low"}}`)
	if !*s.Enabled || s.Misfire != MisfireRunOnce || s.Timezone != "UTC" || s.Job.Queue != "reports" {
		t.Fatalf("defaults not filled in: %+v", s)
	}
	if s.NextRunAt == nil || !s.NextRunAt.Equal(created.Add(time.Minute)) {
		t.Fatalf("next_run_at = %v, want creation + 60 s = %v", s.NextRunAt, created.Add(time.Minute))
	}
	if len(s.Upcoming) != UpcomingCount || !s.Upcoming[4].Equal(created.Add(5*time.Minute)) {
		t.Fatalf("upcoming = %v", s.Upcoming)
	}
	if s.LastRunAt != nil || s.LastJobID != "" {
		t.Fatalf("fresh schedule has a last run: %+v", s)
	}

	// A replace that keeps the timing keeps the planned next run; created is false.
	e.clock.Advance(10 * time.Second)
	doc := `{"id": "tick", "every_seconds": 60, "job": {"queue": "reports", "type": "report.build", "payload": {"n": 2}}}`
	in, _ := Decode([]byte(doc))
	s2, created2, err := e.st.Put(e.ctx, in)
	if err != nil || created2 {
		t.Fatalf("replace: created=%v err=%v", created2, err)
	}
	if !s2.NextRunAt.Equal(*s.NextRunAt) || !s2.CreatedAt.Equal(s.CreatedAt) || string(s2.Job.Payload) != `{"n":2}` {
		t.Fatalf("replace changed next run or creation, or lost the new payload:\n%s\n%s", mustJSON(t, s), mustJSON(t, s2))
	}
	// A new timing plans from now.
	s3 := e.put(t, `{"id": "tick", "cron": "*/15 * * * *", "timezone": "Europe/Berlin", "job": {"queue": "reports", "type": "report.build"}}`)
	if got := s3.NextRunAt.UTC().Format(time.RFC3339); got != "2026-11-23T10:15:00Z" {
		t.Fatalf("cron next_run_at = %s", got)
	}
	if _, off := s3.NextRunAt.Zone(); off != 3600 {
		t.Fatalf("times are not shown in the schedule's zone: %v", s3.NextRunAt)
	}

	e.put(t, `{"id": "other", "cron": "@daily", "job": {"type": "x"}}`)
	all, err := e.st.List(e.ctx, "")
	if err != nil || len(all) != 2 || all[0].ID != "other" || all[1].ID != "tick" {
		t.Fatalf("list: %v %v", all, err)
	}
	some, err := e.st.List(e.ctx, "default")
	if err != nil || len(some) != 1 || some[0].ID != "other" {
		t.Fatalf("list ?queue=default: %v %v", some, err)
	}

	if err := e.st.Delete(e.ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Get(e.ctx, "tick"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := e.st.Delete(e.ctx, "tick"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	rdb := e.q.Redis()
	k := keysFor("reports")
	if n := rdb.HLen(e.ctx, k.defs).Val() + rdb.ZCard(e.ctx, k.next).Val(); n != 0 {
		t.Fatalf("delete left %d entries in the queue's keys", n)
	}
}

func TestPutValidation(t *testing.T) {
	e := newEnv(t, true)
	job := `"job": {"type": "x"}`
	cases := []struct{ doc, field, msg string }{
		{`{"id": "a", "cron": "61 * * * *", ` + job + `}`, "cron", "minute"},
		{`{"id": "a", "cron": "* * *", ` + job + `}`, "cron", "5 or 6 fields"},
		{`{"id": "a", "cron": "@every 5s", ` + job + `}`, "cron", "every_seconds"},
		{`{"id": "a", "cron": "* * * * *", "timezone": "Mars/Olympus", ` + job + `}`, "timezone", "unknown time zone"},
		{`{"id": "a", "cron": "* * * * *", "every_seconds": 5, ` + job + `}`, "cron", "not both"},
		{`{"id": "a", ` + job + `}`, "cron", "required"},
		{`{"id": "a", "every_seconds": 0, ` + job + `}`, "every_seconds", "between"},
		{`{"id": "a", "every_seconds": 5, "misfire": "later", ` + job + `}`, "misfire", "skip"},
		{`{"id": "a b", "every_seconds": 5, ` + job + `}`, "id", "must match"},
		{`{"id": "a", "every_seconds": 5, "job": {"type": "x", "priority": "urgent"}}`, "job.priority", "high, normal, low"},
		{`{"id": "a", "every_seconds": 5, "job": {"type": "x", "queue": "Bad Queue"}}`, "job.queue", "must match"},
		{`{"id": "a", "every_seconds": 5, "job": {}}`, "job.type", "required"},
		{`{"id": "a", "every_seconds": 5, "job": {"type": "x", "max_attempts": 0}}`, "job.max_attempts", "between"},
	}
	for _, c := range cases {
		s, err := Decode([]byte(c.doc))
		if err != nil {
			t.Fatalf("decode %s: %v", c.doc, err)
		}
		_, _, err = e.st.Put(e.ctx, s)
		if got := fieldOf(t, err); got != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: field %q, error %q; want field %q mentioning %q", c.doc, got, err, c.field, c.msg)
		}
	}
	// Bad input changes nothing.
	if n := e.q.Redis().DBSize(e.ctx).Val(); n != 0 {
		keys := e.q.Redis().Keys(e.ctx, "*").Val()
		t.Fatalf("rejected puts wrote %d keys: %v", n, keys)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct{ doc, field string }{
		{`{"id": "a", "every_secs": 5}`, "every_secs"},
		{`{"id": "a", "job": {"type": "x", "priorty": "low"}}`, "job.priorty"},
		{`{"id": "a", "job": {"type": "x", "backoff": {"base": 1}}}`, "job.backoff.base"},
		{`{"id": "a", "every_seconds": "5"}`, "every_seconds"},
		{`{"id": "a", "enabled": "yes"}`, "enabled"},
		{`[1]`, ""},
		{`{"id": "a"} {}`, ""},
		{`{"id": `, ""},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.doc))
		if err == nil {
			t.Errorf("%s: no error", c.doc)
			continue
		}
		if got := fieldOf(t, err); got != c.field {
			t.Errorf("%s: field %q (%v), want %q", c.doc, got, err, c.field)
		}
	}
	// What GET returns can be written back as it is.
	s := &Schedule{ID: "a", Cron: "@hourly", Job: JobTemplate{Type: "x"}}
	now := time.Now()
	s.NextRunAt, s.LastRunAt, s.Upcoming, s.CreatedAt = &now, &now, []time.Time{now}, now
	if _, err := Decode([]byte(mustJSON(t, s))); err != nil {
		t.Fatalf("a schedule as returned does not decode: %v", err)
	}
}

func TestPatch(t *testing.T) {
	e := newEnv(t, true)
	e.put(t, `{"id": "p", "cron": "0 3 * * *", "timezone": "Europe/Berlin", "job": {"queue": "q1", "type": "x", "payload": {"a": 1, "b": 2}}}`)

	s, err := e.st.SetEnabled(e.ctx, "p", false)
	if err != nil || *s.Enabled || s.NextRunAt != nil || len(s.Upcoming) != 0 {
		t.Fatalf("disable: %+v %v", s, err)
	}
	if n := e.q.Redis().ZCard(e.ctx, keysFor("q1").next).Val(); n != 0 {
		t.Fatalf("a disabled schedule is still planned (%d)", n)
	}
	s, err = e.st.SetEnabled(e.ctx, "p", true)
	if err != nil || s.NextRunAt == nil || s.NextRunAt.UTC().Format(time.RFC3339) != "2026-11-24T02:00:00Z" {
		t.Fatalf("enable: %+v %v", s, err)
	}

	// Merge patch: payload members merge, null removes; every_seconds replaces cron.
	s, err = e.st.Patch(e.ctx, "p", []byte(`{"every_seconds": 30, "job": {"payload": {"b": null, "c": 3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Cron != "" || s.EverySeconds == nil || *s.EverySeconds != 30 || string(s.Job.Payload) != `{"a":1,"c":3}` || s.Timezone != "Europe/Berlin" {
		t.Fatalf("patched: %s", mustJSON(t, s))
	}
	if !s.NextRunAt.Equal(e.clock.Now().Add(30 * time.Second)) {
		t.Fatalf("new interval not planned from now: %v", s.NextRunAt)
	}
	s, err = e.st.Patch(e.ctx, "p", []byte(`{"cron": "*/5 * * * *"}`))
	if err != nil || s.EverySeconds != nil || s.Cron != "*/5 * * * *" {
		t.Fatalf("cron replaces every_seconds: %+v %v", s, err)
	}

	for doc, field := range map[string]string{
		`{"cron": "*/5 * * * *", "every_seconds": 5}`: "cron",
		`{"timezone": "Nowhere/Land"}`:                "timezone",
		`{"job": {"priority": "top"}}`:                "job.priority",
		`{"id": "q"}`:                                 "id",
		`{"colour": "red"}`:                           "colour",
		`[]`:                                          "",
	} {
		before := e.get(t, "p")
		_, err := e.st.Patch(e.ctx, "p", []byte(doc))
		if got := fieldOf(t, err); got != field {
			t.Errorf("patch %s: field %q (%v), want %q", doc, got, err, field)
		}
		if after := e.get(t, "p"); mustJSON(t, after) != mustJSON(t, before) {
			t.Errorf("a rejected patch changed the schedule: %s", mustJSON(t, after))
		}
	}
	if _, err := e.st.Patch(e.ctx, "nope", []byte(`{}`)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("patch unknown: %v", err)
	}
}

func TestMoveToAnotherQueue(t *testing.T) {
	e := newEnv(t, true)
	e.put(t, `{"id": "m", "every_seconds": 10, "job": {"queue": "old", "type": "x"}}`)
	sch := e.scheduler(SchedulerConfig{})
	e.clock.Advance(10 * time.Second)
	if _, err := sch.FireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	before := e.get(t, "m")
	if before.LastJobID == "" {
		t.Fatal("did not fire")
	}
	e.clock.Advance(time.Second)
	after := e.put(t, `{"id": "m", "every_seconds": 10, "job": {"queue": "new", "type": "x"}}`)
	if after.Job.Queue != "new" || !after.NextRunAt.Equal(*before.NextRunAt) || after.LastJobID != before.LastJobID || !after.LastRunAt.Equal(*before.LastRunAt) {
		t.Fatalf("move lost the run state:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, after))
	}
	rdb := e.q.Redis()
	for _, key := range keysFor("old").all()[:3] { // not the revision counter
		if n := rdb.Exists(e.ctx, key).Val(); n != 0 {
			t.Errorf("old queue still has %s", key)
		}
	}
	e.clock.Advance(10 * time.Second)
	if _, err := sch.FireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.jobs(t, "new")); n != 1 {
		t.Fatalf("new queue has %d jobs after the next fire time, want 1", n)
	}
	if n := len(e.jobs(t, "old")); n != 1 {
		t.Fatalf("old queue has %d jobs, want the 1 fired before the move", n)
	}
}

func TestTrigger(t *testing.T) {
	e := newEnv(t, true)
	before := e.put(t, `{"id": "t", "cron": "@daily", "job": {"queue": "trig", "type": "x", "payload": {"k": "v"}, "priority": "high"}}`)
	j, err := e.st.Trigger(e.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if j.Queue != "trig" || j.Type != "x" || string(j.Payload) != `{"k":"v"}` || j.Priority != "high" || j.State != "queued" {
		t.Fatalf("triggered job: %+v", j)
	}
	after := e.get(t, "t")
	if mustJSON(t, after) != mustJSON(t, before) {
		t.Fatalf("trigger moved the schedule:\n%s\n%s", mustJSON(t, before), mustJSON(t, after))
	}
	if _, err := e.st.Trigger(e.ctx, "none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("trigger unknown: %v", err)
	}
}

// TestConcurrentPuts checks the per-schedule lock: concurrent replaces of
// one schedule leave exactly one planned entry and a consistent index.
func TestConcurrentPuts(t *testing.T) {
	e := newEnv(t, false)
	queues := []string{"c1", "c2", "c3"}
	errs := make(chan error, 30)
	for i := range 30 {
		go func() {
			s, _ := Decode(fmt.Appendf(nil, `{"id": "c", "every_seconds": %d, "job": {"queue": %q, "type": "x"}}`, i+1, queues[i%3]))
			_, _, err := e.st.Put(e.ctx, s)
			errs <- err
		}()
	}
	for range 30 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s := e.get(t, "c")
	planned := 0
	for _, q := range queues {
		planned += int(e.q.Redis().ZCard(e.ctx, keysFor(q).next).Val())
		if q != s.Job.Queue && e.q.Redis().HExists(e.ctx, keysFor(q).defs, "c").Val() {
			t.Errorf("queue %s still holds a definition", q)
		}
	}
	if planned != 1 {
		t.Fatalf("%d planned entries, want 1", planned)
	}
	if !slices.Contains(queues, s.Job.Queue) {
		t.Fatal(s.Job.Queue)
	}
}
