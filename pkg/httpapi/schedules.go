package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// scheduleList is the answer of GET /v1/schedules.
type scheduleList struct {
	Schedules []*schedule.Schedule `json:"schedules"`
}

// scheduleIDSchema is the form of a schedule id.
var scheduleIDSchema = map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}

// scheduleRoutes are the routes of recurring schedules (docs/schedules.md).
func (s *Server) scheduleRoutes() []route {
	const path = "/v1/schedules/:schedule_id"
	return []route{
		{http.MethodPut, path, s.putSchedule, operation{
			ID: "putSchedule", Audit: "schedule.put", Tag: "schedules", Summary: "Create or replace a schedule",
			Description: "Exactly one of cron and every_seconds. The body's id may be left out; when present it must equal the path's. Read-only fields (next_run_at, upcoming…) are ignored, so a schedule read with GET can be written back. " +
				"A replace that keeps the timing keeps the planned next run. Takes effect on the running scheduler at once.",
			Body: schedule.Schedule{}, Status: http.StatusCreated, Response: schedule.Schedule{},
			Also:   map[int]string{http.StatusOK: "An existing schedule was replaced."},
			Errors: []int{400, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/schedules/preview", s.previewSchedule, operation{
			ID: "previewSchedule", Tag: "schedules", Summary: "The next five fire times of a timing", Scope: scopeRead,
			Description: "Checks cron or every_seconds and timezone as PUT does (400 naming the field) and answers the next five fire times after now, without storing anything. An interval is aligned to now, as a schedule created now would be.",
			Body:        schedulePreviewRequest{}, Status: http.StatusOK, Response: schedulePreview{},
			Errors: []int{400, 413, 415},
		}},
		{http.MethodGet, "/v1/schedules", s.listSchedules, operation{
			ID: "listSchedules", Tag: "schedules", Summary: "List schedules, ordered by id",
			Query:  []param{{"queue", "Only schedules whose jobs go to this queue.", queueSchema, false}},
			Status: http.StatusOK, Response: scheduleList{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, path, s.getSchedule, operation{
			ID: "getSchedule", Tag: "schedules", Summary: "Get a schedule",
			Status: http.StatusOK, Response: schedule.Schedule{}, Errors: []int{404, 503},
		}},
		{http.MethodPatch, path, s.patchSchedule, operation{
			ID: "patchSchedule", Audit: "schedule.patch", Tag: "schedules", Summary: "Change some fields of a schedule",
			Description: "A JSON merge patch (RFC 7396): members present replace, null removes, objects merge. Setting one of cron and every_seconds removes the other. {\"enabled\": false} disables; enabling plans the first fire time after now.",
			Body:        map[string]json.RawMessage{}, Status: http.StatusOK, Response: schedule.Schedule{},
			Errors: []int{400, 404, 409, 413, 415, 503},
		}},
		{http.MethodDelete, path, s.deleteSchedule, operation{
			ID: "deleteSchedule", Audit: "schedule.delete", Tag: "schedules", Summary: "Delete a schedule",
			Body: struct{}{}, BodyOptional: true, Status: http.StatusNoContent,
			Errors: []int{400, 404, 409, 415, 503},
		}},
		{http.MethodPost, path + "/trigger", s.triggerSchedule, operation{
			ID: "triggerSchedule", Audit: "schedule.trigger", Tag: "schedules", Summary: "Submit a schedule's job now",
			Description: "Submits the schedule's job at once without moving the schedule: its next run, last run and last job stay as they are. The body may be left out or be {}.",
			Body:        struct{}{}, BodyOptional: true, Status: http.StatusCreated, Response: job.Job{},
			Errors: []int{400, 404, 415, 503},
		}},
	}
}

// schedules returns the schedule store over the server's engine. It holds
// no state of its own, so one per request costs nothing.
func (s *Server) schedules() *schedule.Store { return schedule.NewStore(s.q) }

// putSchedule handles PUT /v1/schedules/{id}: 201 created, 200 replaced.
func (s *Server) putSchedule(c *gin.Context) {
	data, ok := s.body(c)
	if !ok {
		return
	}
	in, err := schedule.Decode(data)
	if err != nil {
		fail(c, err)
		return
	}
	id := c.Param("schedule_id")
	switch in.ID {
	case "":
		in.ID = id
	case id:
	default:
		fail(c, invalid("id", "id %q in the body differs from %q in the path", in.ID, id))
		return
	}
	out, created, err := s.schedules().Put(c.Request.Context(), in)
	if err != nil {
		fail(c, err)
		return
	}
	if created {
		c.Header("Location", "/v1/schedules/"+out.ID)
	}
	c.JSON(putStatus(created), out)
}

// listSchedules handles GET /v1/schedules[?queue=].
func (s *Server) listSchedules(c *gin.Context) {
	if err := checkQuery(c, "queue"); err != nil {
		fail(c, err)
		return
	}
	q := c.Query("queue")
	if q != "" && !job.ValidQueue(q) {
		fail(c, invalid("queue", "queue must match [a-z0-9_-]{1,64}"))
		return
	}
	list, err := s.schedules().List(c.Request.Context(), q)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, scheduleList{Schedules: list})
}

// getSchedule handles GET /v1/schedules/{id}.
func (s *Server) getSchedule(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	out, err := s.schedules().Get(c.Request.Context(), c.Param("schedule_id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// patchSchedule handles PATCH /v1/schedules/{id}.
func (s *Server) patchSchedule(c *gin.Context) {
	data, ok := s.body(c)
	if !ok {
		return
	}
	out, err := s.schedules().Patch(c.Request.Context(), c.Param("schedule_id"), data)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// deleteSchedule handles DELETE /v1/schedules/{id}: 204.
func (s *Server) deleteSchedule(c *gin.Context) {
	err := s.emptyBody(c)
	if err == nil {
		err = checkQuery(c)
	}
	if err == nil {
		err = s.schedules().Delete(c.Request.Context(), c.Param("schedule_id"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// triggerSchedule handles POST /v1/schedules/{id}/trigger: 201 with the job.
func (s *Server) triggerSchedule(c *gin.Context) {
	err := s.emptyBody(c)
	if err == nil {
		err = checkQuery(c)
	}
	if err != nil {
		fail(c, err)
		return
	}
	j, err := s.schedules().Trigger(c.Request.Context(), c.Param("schedule_id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Location", "/v1/jobs/"+j.ID)
	c.JSON(http.StatusCreated, j)
}
