package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
)

// searchResult is the answer of GET /v1/jobs and of a queue's dead letters.
type searchResult struct {
	Jobs       []*job.Job `json:"jobs"`
	NextCursor string     `json:"next_cursor"`
}

// writeJobPage answers 200 with a page of jobs (an empty list, never
// null) and the cursor of the next page ("" at the end).
func writeJobPage(c *gin.Context, jobs []*job.Job, next string) {
	if jobs == nil {
		jobs = []*job.Job{}
	}
	c.JSON(http.StatusOK, searchResult{Jobs: jobs, NextCursor: next})
}

// eventView is one entry of a job's history as GET /v1/jobs/{id}/events
// shows it: "type" is the event type (submitted, started, …).
type eventView struct {
	Type     job.EventType `json:"type"`
	At       time.Time     `json:"at"`
	State    job.State     `json:"state"`
	Attempt  int           `json:"attempt"`
	WorkerID string        `json:"worker_id"`
	Error    string        `json:"error"`
	// Actor names who caused a cancelled or retried event through the API
	// (its audit record's actor); absent for the engine's own events and
	// for jobs a bulk action selected.
	Actor *audit.Actor `json:"actor,omitempty"`
}

// eventList is the answer of GET /v1/jobs/{id}/events.
type eventList struct {
	Events []eventView `json:"events"`
	// NextCursor fetches the next page (?cursor=); "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// historyErr marks errors of the history store other than its sentinels,
// which the error table maps to 503.
func historyErr(err error) error {
	if err == nil || errors.Is(err, history.ErrNotFound) || errors.Is(err, history.ErrInvalidCursor) {
		return err
	}
	return &historyError{err}
}

// searchJobs handles GET /v1/jobs: a search of the history store.
func (s *Server) searchJobs(c *gin.Context) {
	q, err := searchQuery(c)
	if err != nil {
		fail(c, err)
		return
	}
	if s.cfg.History == nil {
		fail(c, errNoHistory)
		return
	}
	jobs, next, err := s.cfg.History.Search(c.Request.Context(), q)
	if err != nil {
		fail(c, historyErr(err))
		return
	}
	writeJobPage(c, jobs, next)
}

func searchQuery(c *gin.Context) (history.Query, error) {
	var q history.Query
	if err := checkQuery(c, "queue", "type", "group", "state", "tag", "payload.*", "from", "to", "limit", "cursor"); err != nil {
		return q, err
	}
	q.Queue, q.Type, q.Group, q.Cursor, q.Tag = c.Query("queue"), c.Query("type"), c.Query("group"), c.Query("cursor"), c.Query("tag")
	if err := checkTag(q.Tag); err != nil {
		return q, err
	}
	for name, vals := range c.Request.URL.Query() {
		field, ok := strings.CutPrefix(name, "payload.")
		if !ok {
			continue
		}
		if !history.ValidPayloadField(field) {
			return q, invalid(name, "%s must name a top-level payload field of at most %d bytes", name, history.MaxPayloadKeyLen)
		}
		for _, v := range vals {
			q.Payload = append(q.Payload, history.PayloadTerm(field, v))
		}
	}
	q.State = job.State(c.Query("state"))
	switch {
	case q.Queue != "" && !job.ValidQueue(q.Queue):
		return q, invalid("queue", "queue must match [a-z0-9_-]{1,64}")
	case q.Type != "" && !job.ValidType(q.Type):
		return q, invalid("type", "type must match [A-Za-z0-9_.:-]{1,128}")
	case q.Group != "" && !job.ValidGroup(q.Group):
		return q, invalid("group", "group must match [A-Za-z0-9_.:@-]{1,128}")
	case q.State != "" && !q.State.Valid():
		return q, invalid("state", "state must be one of waiting, scheduled, queued, active, succeeded, dead, cancelled")
	}
	var err error
	if q.From, err = queryTime(c, "from"); err != nil {
		return q, err
	}
	if q.To, err = queryTime(c, "to"); err != nil {
		return q, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, invalid("to", "to must be after from")
	}
	q.Limit, err = queryLimit(c)
	return q, err
}

// jobEvents handles GET /v1/jobs/{id}/events, oldest first.
func (s *Server) jobEvents(c *gin.Context) {
	if err := checkQuery(c, "limit", "cursor"); err != nil {
		fail(c, err)
		return
	}
	if s.cfg.History == nil {
		fail(c, errNoHistory)
		return
	}
	limit, err := queryLimit(c)
	if err != nil {
		fail(c, err)
		return
	}
	events, next, err := s.cfg.History.Events(c.Request.Context(), c.Param("id"), history.EventPage{Limit: limit, Cursor: c.Query("cursor")})
	if err != nil {
		fail(c, historyErr(err))
		return
	}
	out := eventList{Events: make([]eventView, len(events)), NextCursor: next}
	for i, e := range events {
		out.Events[i] = eventView{Type: e.Event, At: e.At, State: e.State, Attempt: e.Attempt, WorkerID: e.WorkerID, Error: e.Error}
	}
	s.eventActors(c.Request.Context(), c.Param("id"), out.Events)
	c.JSON(http.StatusOK, out)
}
