package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/schedule"
)

func TestSchedulePutGetListDelete(t *testing.T) {
	a := start(t)
	body := `{"cron": "0 3 * * *", "timezone": "Europe/Berlin", "job": {"queue": "reports", "type": "report.build", "payload": {"n": 1}, "priority": "low"}}`
	var s schedule.Schedule
	r := a.do("PUT", "/v1/schedules/nightly", body)
	r.decode(t, http.StatusCreated, &s)
	if r.header.Get("Location") != "/v1/schedules/nightly" {
		t.Errorf("Location = %q", r.header.Get("Location"))
	}
	if s.ID != "nightly" || !*s.Enabled || s.Misfire != "run_once" || len(s.Upcoming) != 5 || s.NextRunAt == nil {
		t.Fatalf("created: %s", r.body)
	}
	for _, u := range s.Upcoming {
		if h := u.In(time.UTC).Hour(); h != 1 && h != 2 { // 03:00 Berlin is 01:00 or 02:00 UTC
			t.Fatalf("upcoming %v is not 03:00 in Berlin", u)
		}
	}
	a.do("PUT", "/v1/schedules/nightly", body).decode(t, http.StatusOK, &s)

	var got schedule.Schedule
	a.do("GET", "/v1/schedules/nightly", nil).decode(t, http.StatusOK, &got)
	if got.ID != "nightly" || got.Job.Type != "report.build" {
		t.Fatalf("get: %+v", got)
	}
	a.do("PUT", "/v1/schedules/every", `{"every_seconds": 60, "job": {"type": "x"}}`).decode(t, http.StatusCreated, nil)
	var list scheduleList
	a.do("GET", "/v1/schedules", nil).decode(t, http.StatusOK, &list)
	if len(list.Schedules) != 2 || list.Schedules[0].ID != "every" {
		t.Fatalf("list: %+v", list)
	}
	a.do("GET", "/v1/schedules?queue=reports", nil).decode(t, http.StatusOK, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].ID != "nightly" {
		t.Fatalf("list ?queue=reports: %+v", list)
	}
	a.do("GET", "/v1/schedules?queue=Bad!", nil).wantError(t, 400, codeInvalidArgument, "queue")
	a.do("GET", "/v1/schedules?qeue=x", nil).wantError(t, 400, codeInvalidArgument, "qeue")

	r = a.do("DELETE", "/v1/schedules/nightly", nil)
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	a.do("GET", "/v1/schedules/nightly", nil).wantError(t, 404, codeNotFound, "")
	a.do("DELETE", "/v1/schedules/nightly", nil).wantError(t, 404, codeNotFound, "")
}

func TestScheduleValidation(t *testing.T) {
	a := start(t)
	for _, c := range []struct{ body, field string }{
		{`{"cron": "0 25 * * *", "job": {"type": "x"}}`, "cron"},
		{`{"cron": "not a cron", "job": {"type": "x"}}`, "cron"},
		{`{"cron": "0 3 * * *", "timezone": "Europe/Atlantis", "job": {"type": "x"}}`, "timezone"},
		{`{"cron": "0 3 * * *", "every_seconds": 60, "job": {"type": "x"}}`, "cron"},
		{`{"job": {"type": "x"}}`, "cron"},
		{`{"every_seconds": -1, "job": {"type": "x"}}`, "every_seconds"},
		{`{"every_seconds": 60, "misfire": "never", "job": {"type": "x"}}`, "misfire"},
		{`{"every_seconds": 60, "job": {"type": "x", "priority": "urgent"}}`, "job.priority"},
		{`{"every_seconds": 60, "job": {"type": "x", "timeout_seconds": 0}}`, "job.timeout_seconds"},
		{`{"every_seconds": 60, "job": {"type": "x", "idempotency_key": "k"}}`, "job.idempotency_key"},
		{`{"every_seconds": 60, "job": {"type": "x"}, "enabeld": false}`, "enabeld"},
		{`{"every_seconds": "60", "job": {"type": "x"}}`, "every_seconds"},
		{`{"id": "other", "every_seconds": 60, "job": {"type": "x"}}`, "id"},
		{`{"every_seconds": 60, "job": {"type": "x"}`, ""},
	} {
		r := a.do("PUT", "/v1/schedules/s1", c.body)
		r.wantError(t, 400, codeInvalidArgument, c.field)
	}
	a.do("PUT", "/v1/schedules/bad%20id", `{"every_seconds": 60, "job": {"type": "x"}}`).wantError(t, 400, codeInvalidArgument, "id")
	a.do("PUT", "/v1/schedules/s1", `{"every_seconds": 60, "job": {"type": "x"}}`, "Content-Type", "text/plain").wantError(t, 415, codeUnsupportedMediaType, "")
	// Bad input changed nothing (the running API's own entry in the
	// storage format's registry aside).
	var wrote []string
	for _, k := range a.q.Redis().Keys(context.Background(), "*").Val() {
		if !strings.HasPrefix(k, "sundial:{.storage}:") {
			wrote = append(wrote, k)
		}
	}
	if len(wrote) != 0 {
		t.Fatalf("rejected requests wrote %d keys: %v", len(wrote), wrote)
	}
}

func TestSchedulePatchAndTrigger(t *testing.T) {
	a := start(t)
	a.do("PUT", "/v1/schedules/p", `{"cron": "*/5 * * * *", "job": {"queue": "pq", "type": "x", "payload": {"a": 1}}}`).decode(t, 201, nil)

	var s schedule.Schedule
	a.do("PATCH", "/v1/schedules/p", `{"enabled": false}`).decode(t, http.StatusOK, &s)
	if *s.Enabled || s.NextRunAt != nil || len(s.Upcoming) != 0 {
		t.Fatalf("disabled: %+v", s)
	}
	s = schedule.Schedule{}
	a.do("PATCH", "/v1/schedules/p", `{"enabled": true, "every_seconds": 30}`).decode(t, http.StatusOK, &s)
	if !*s.Enabled || s.Cron != "" || *s.EverySeconds != 30 || s.NextRunAt == nil {
		t.Fatalf("re-enabled as an interval: %+v", s)
	}
	a.do("PATCH", "/v1/schedules/p", `{"timezone": "Nowhere"}`).wantError(t, 400, codeInvalidArgument, "timezone")
	a.do("PATCH", "/v1/schedules/p", `{"job": {"priority": "top"}}`).wantError(t, 400, codeInvalidArgument, "job.priority")
	a.do("PATCH", "/v1/schedules/p", `[1]`).wantError(t, 400, codeInvalidArgument, "")
	a.do("PATCH", "/v1/schedules/none", `{"enabled": true}`).wantError(t, 404, codeNotFound, "")

	var j job.Job
	r := a.do("POST", "/v1/schedules/p/trigger", nil)
	r.decode(t, http.StatusCreated, &j)
	if j.Queue != "pq" || j.Type != "x" || string(j.Payload) != `{"a":1}` || r.header.Get("Location") != "/v1/jobs/"+j.ID {
		t.Fatalf("triggered: %s", r.body)
	}
	var after schedule.Schedule
	a.do("GET", "/v1/schedules/p", nil).decode(t, http.StatusOK, &after)
	if !after.NextRunAt.Equal(*s.NextRunAt) || after.LastJobID != "" {
		t.Fatalf("trigger moved the schedule: %+v", after)
	}
	a.do("POST", "/v1/schedules/none/trigger", nil).wantError(t, 404, codeNotFound, "")
	a.do("POST", "/v1/schedules/p/trigger", `{"now": true}`).wantError(t, 400, codeInvalidArgument, "now")
}
