package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// listLiveJobs handles GET /v1/queues/{q}/jobs: a page of the queue's jobs
// in one live state, from Redis.
func (s *Server) listLiveJobs(c *gin.Context) {
	q, err := s.knownQueue(c)
	if err == nil {
		err = checkQuery(c, "state", "type", "priority", "tag", "limit", "cursor")
	}
	if err == nil {
		err = checkTag(c.Query("tag"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	o := queue.ListOptions{State: job.Queued, Type: c.Query("type"), Priority: job.Priority(c.Query("priority")), Tag: c.Query("tag"), Cursor: c.Query("cursor")}
	if v, ok := c.GetQuery("state"); ok {
		o.State = job.State(v)
		if !slices.Contains(queue.ListStates, o.State) {
			fail(c, invalid("state", "state must be one of queued, scheduled, waiting, active, dead (the history search serves the others)"))
			return
		}
	}
	if o.Type != "" && !job.ValidType(o.Type) {
		fail(c, invalid("type", "type must match [A-Za-z0-9_.:-]{1,128}"))
		return
	}
	if o.Priority != "" && o.Priority != job.High && o.Priority != job.Normal && o.Priority != job.Low {
		fail(c, invalid("priority", "priority must be one of high, normal, low"))
		return
	}
	if o.Limit, err = queryLimit(c); err != nil {
		fail(c, err)
		return
	}
	jobs, next, err := s.q.List(c.Request.Context(), q, o)
	if err != nil {
		fail(c, err)
		return
	}
	writeJobPage(c, jobs, next)
}

// bulkRequest is the body of POST /v1/queues/{q}/jobs/bulk.
type bulkRequest struct {
	Action  queue.BulkAction  `json:"action"`
	IDs     []string          `json:"ids,omitempty"`
	Filter  *queue.BulkFilter `json:"filter,omitempty"`
	ToQueue string            `json:"to_queue,omitempty"`
}

// bulkResult answers a bulk action, and is what the stream's bulk
// progress messages carry.
type bulkResult struct {
	// ID names the request in the stream's progress messages (its
	// X-Request-Id).
	ID      string           `json:"id"`
	Action  queue.BulkAction `json:"action"`
	Queue   string           `json:"queue"`
	ToQueue string           `json:"to_queue,omitempty"`
	queue.BulkResult
	// Done is false in the progress messages sent while the action runs.
	Done bool `json:"done"`
}

// bulkMessage is how the stream sends a bulk action's progress.
type bulkMessage struct {
	Kind string      `json:"kind"`
	Bulk *bulkResult `json:"bulk"`
}

// bulkProgressEvery bounds how often one bulk action's progress is sent
// on the stream.
const bulkProgressEvery = 200 * time.Millisecond

// bulkJobs handles POST /v1/queues/{q}/jobs/bulk.
func (s *Server) bulkJobs(c *gin.Context) {
	q, err := queueParam(c)
	if err != nil {
		fail(c, err)
		return
	}
	data, err := readBody(c, s.cfg.MaxBodyBytes, false)
	if err != nil {
		fail(c, err)
		return
	}
	var body bulkRequest
	if err := jsonbody.Decode(data, &body, jsonbody.Strict); err != nil {
		fail(c, jsonError(err, data, jsonbody.Where{Nested: []string{"filter"}, TimeField: "filter.since"}))
		return
	}
	r := queue.BulkRequest{Action: body.Action, IDs: body.IDs, Filter: body.Filter, ToQueue: body.ToQueue}
	if r.IDs == nil && bytesHasKey(data, "ids") {
		r.IDs = []string{} // "ids": [] or null is refused, not read as "all"
	}
	auditNote(c, auditSelection{IDs: r.IDs, Filter: r.Filter, ToQueue: r.ToQueue}, "")
	if err := r.Validate(q); err != nil {
		fail(c, err)
		return
	}
	c.Set(ctxAuditAction, "jobs.bulk."+string(r.Action))
	if _, err := s.knownQueue(c); err != nil {
		fail(c, err)
		return
	}
	out := bulkResult{ID: c.Writer.Header().Get(requestIDHeader), Action: r.Action, Queue: q, ToQueue: r.ToQueue}
	var last time.Time
	res, err := s.q.Bulk(c.Request.Context(), q, r, func(p queue.BulkResult) {
		if now := time.Now(); now.Sub(last) >= bulkProgressEvery {
			last = now
			progress := out
			progress.BulkResult = p
			s.hub.publishBulk(&progress)
		}
	})
	out.BulkResult, out.Done = res, true
	auditNote(c, nil, fmt.Sprintf("matched %d, changed %d", res.Matched, res.Count))
	if err != nil {
		fail(c, err)
		return
	}
	s.hub.publishBulk(&out)
	c.JSON(http.StatusOK, out)
}

// publishBulk sends a bulk action's progress to the stream's clients that
// follow its queue (and no particular jobs or types).
func (h *hub) publishBulk(r *bulkResult) {
	var msg []byte
	for _, c := range h.snapshot() {
		f := c.filter
		if len(f.jobs) > 0 || len(f.types) > 0 || len(f.queues) > 0 && !slices.Contains(f.queues, r.Queue) || !f.allow.Allows(r.Queue) {
			continue
		}
		if msg == nil {
			msg, _ = json.Marshal(bulkMessage{Kind: "bulk", Bulk: r})
		}
		h.offer(c, msg)
	}
}

// checkTag refuses a tag filter that no job can carry ("" = no filter).
func checkTag(tag string) error {
	if tag != "" && !job.ValidTag(tag) {
		return invalid("tag", "tag must match [A-Za-z0-9_.:=/-]{1,64}")
	}
	return nil
}
