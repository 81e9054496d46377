package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Job logs (docs/concepts.md, "Job logs"): the HTTP worker protocol's way
// to keep what a handler logged (the Go worker's is worker.Logger), and
// the read of a job's lines.

// logHistory is a history store that keeps job logs (history.Store).
type logHistory interface {
	Logs(ctx context.Context, jobID string, after int64, limit int) ([]queue.LogLine, error)
}

// logsRequest is the body of POST /v1/jobs/{id}/logs.
type logsRequest struct {
	// Token is the running attempt's fencing token.
	Token string           `json:"token"`
	Lines []queue.LogEntry `json:"lines"`
}

func (r *logsRequest) check() error {
	if r.Token == "" {
		return invalid("token", "token is required")
	}
	if len(r.Lines) == 0 || len(r.Lines) > queue.MaxLogLinesPerCall {
		return invalid("lines", "lines must hold 1 to %d lines", queue.MaxLogLinesPerCall)
	}
	for i := range r.Lines {
		if err := r.Lines[i].Check(); err != nil {
			return invalid("lines["+strconv.Itoa(i)+"]", "lines[%d]: %s", i, err.Error())
		}
	}
	return nil
}

// logsAccepted answers POST /v1/jobs/{id}/logs.
type logsAccepted struct {
	Accepted int `json:"accepted"`
	// FirstSeq is the seq the first line got.
	FirstSeq int64 `json:"first_seq"`
}

// logsPage answers GET /v1/jobs/{id}/logs.
type logsPage struct {
	Lines []queue.LogLine `json:"lines"`
	// Dropped counts the job's oldest lines dropped past the cap.
	Dropped int64 `json:"dropped"`
	// NextAfter is the seq to ask for lines after next (the last line's,
	// or after's when none).
	NextAfter int64 `json:"next_after"`
}

// appendLogs handles POST /v1/jobs/{id}/logs.
func (s *Server) appendLogs(c *gin.Context) {
	var req logsRequest
	if !s.bind(c, &req) {
		return
	}
	id := c.Param("id")
	q, ok := s.jobQueueOf(c, id)
	if !ok {
		return
	}
	first, err := s.q.AppendLogs(c.Request.Context(), q, queue.Lease{Job: &job.Job{ID: id}, Token: req.Token}, req.Lines)
	if err == queue.ErrLeaseLost {
		err = errLeaseLost
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, logsAccepted{Accepted: len(req.Lines), FirstSeq: first})
}

// jobLogs handles GET /v1/jobs/{id}/logs.
func (s *Server) jobLogs(c *gin.Context) {
	if err := checkQuery(c, "after", "limit"); err != nil {
		fail(c, err)
		return
	}
	var after int64
	if v, ok := c.GetQuery("after"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fail(c, invalid("after", "after must be a line's seq (0 or more)"))
			return
		}
		after = n
	}
	limit, err := queryLimitUpTo(c, queue.DefaultLogCap)
	if err != nil {
		fail(c, err)
		return
	}
	ctx := c.Request.Context()
	id := c.Param("id")
	var lines []queue.LogLine
	var dropped int64
	q, err := s.q.QueueOf(ctx, id)
	if err == nil {
		lines, dropped, err = s.q.Logs(ctx, q, id, after, limit)
	} else if h, ok := s.cfg.History.(logHistory); ok && errors.Is(err, queue.ErrNotFound) {
		// Pruned from Redis: the lines the history copied.
		lines, err = h.Logs(ctx, id, after, limit)
	}
	if err != nil {
		fail(c, err)
		return
	}
	page := logsPage{Lines: lines, Dropped: dropped, NextAfter: after}
	if page.Lines == nil {
		page.Lines = []queue.LogLine{}
	}
	if n := len(lines); n > 0 {
		page.NextAfter = lines[n-1].Seq
	}
	c.JSON(http.StatusOK, page)
}

// logRoutes are the routes of job logs.
func (s *Server) logRoutes() []route {
	return []route{
		{http.MethodPost, "/v1/jobs/:id/logs", s.appendLogs, operation{
			ID: "appendJobLogs", Tag: "workers", Summary: "Keep lines a running job logged (HTTP worker)", Scope: scopeWork,
			Description: "Keeps up to 100 lines (level debug, info, warn or error; a message, longer than 8 KiB cut; at most 20 fields) under the running attempt's token, numbered on from the job's last line. " +
				"A job keeps its last 1,000 lines (SUNDIAL_JOB_LOG_LINES); older ones are dropped and counted. Each call adds a log event to the stream. " +
				"409 when the lease is lost: nothing is kept.",
			Body: logsRequest{}, Status: http.StatusOK, Response: logsAccepted{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/jobs/:id/logs", s.jobLogs, operation{
			ID: "jobLogs", Tag: "jobs", Summary: "A job's log lines, oldest first",
			Description: "The lines the job's handlers logged with a seq above after, oldest first, from Redis while the job is kept there, then from the history store, which copies them on each log event. Follow a running job by asking again with after=next_after on each of its log events.",
			Query: []param{
				{"after", "Only lines with a seq above this one.", map[string]any{"type": "integer", "minimum": 0}, false},
				{"limit", "Page size.", map[string]any{"type": "integer", "minimum": 1, "maximum": queue.DefaultLogCap, "default": defaultPageSize}, false},
			},
			Status: http.StatusOK, Response: logsPage{}, Errors: []int{400, 404, 503},
		}},
	}
}
