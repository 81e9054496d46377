package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/queue"
)

// limitList is the answer of GET /v1/queues/{q}/limits.
type limitList struct {
	Limits []queue.LimitStatus `json:"limits"`
}

// limitBody is what PUT accepts: a limit, whose name may be left out, and
// the read-only counters of a GET, which are ignored, so that a limit read
// can be written back.
type limitBody struct {
	queue.Limit
	Active    *int64 `json:"active,omitempty"`
	Throttled *int64 `json:"throttled,omitempty"`
}

// limitRoutes are the routes of a queue's limits (docs/flow-control.md).
func (s *Server) limitRoutes() []route {
	const path = "/v1/queues/:q/limits/:name"
	return []route{
		{http.MethodGet, "/v1/queues/:q/limits", s.listLimits, operation{
			ID: "listLimits", Tag: "queues", Summary: "A queue's limits",
			Description: "Each limit with its running jobs (active) and the queued jobs it holds back (throttled), by name. 404 for an unknown queue.",
			Status:      http.StatusOK, Response: limitList{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodPut, path, s.putLimit, operation{
			ID: "putLimit", Audit: "limit.put", Tag: "queues", Summary: "Create or replace a limit",
			Description: "At least one of concurrency and rate. types: the job types it covers (every type of the queue when left out); key: a top-level payload field whose values get a limit each. " +
				"Takes effect on the next claim, cluster-wide, with no restart; a raise lets held-back jobs go at once. The body's name may be left out; when present it must equal the path's. Creates the queue when it does not exist. See docs/flow-control.md.",
			Body: limitBody{}, Status: http.StatusCreated, Response: queue.LimitStatus{},
			Also:   map[int]string{http.StatusOK: "An existing limit was replaced."},
			Errors: []int{400, 409, 413, 415, 503},
		}},
		{http.MethodGet, path, s.getLimit, operation{
			ID: "getLimit", Tag: "queues", Summary: "Get a limit",
			Status: http.StatusOK, Response: queue.LimitStatus{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodDelete, path, s.deleteLimit, operation{
			ID: "deleteLimit", Audit: "limit.delete", Tag: "queues", Summary: "Delete a limit",
			Description: "Every job the limit held back goes back to the head of its list at once. The body may be left out or be {}.",
			Body:        struct{}{}, BodyOptional: true, Status: http.StatusNoContent,
			Errors: []int{400, 404, 413, 415, 503},
		}},
	}
}

// listLimits handles GET /v1/queues/{q}/limits.
func (s *Server) listLimits(c *gin.Context) {
	q, err := s.knownQueue(c)
	if err == nil {
		err = checkQuery(c)
	}
	var ls []queue.LimitStatus
	if err == nil {
		ls, err = s.q.Limits(c.Request.Context(), q)
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, limitList{Limits: ls})
}

// putLimit handles PUT /v1/queues/{q}/limits/{name}: 201 created, 200 replaced.
func (s *Server) putLimit(c *gin.Context) {
	q, err := queueParam(c)
	if err == nil {
		err = checkQuery(c)
	}
	var in limitBody
	if err == nil {
		err = s.decodeBody(c, &in)
	}
	name := c.Param("name")
	if err == nil {
		switch in.Name {
		case "":
			in.Name = name
		case name:
		default:
			err = invalid("name", "name %q in the body differs from %q in the path", in.Name, name)
		}
	}
	var st queue.LimitStatus
	var created bool
	if err == nil {
		st, created, err = s.q.SetLimit(c.Request.Context(), q, in.Limit)
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(putStatus(created), st)
}

// putStatus is the success status of a PUT: 201 when it created the
// resource, 200 when it replaced one.
func putStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// getLimit handles GET /v1/queues/{q}/limits/{name}.
func (s *Server) getLimit(c *gin.Context) {
	q, err := queueParam(c)
	if err == nil {
		err = checkQuery(c)
	}
	var st queue.LimitStatus
	if err == nil {
		st, err = s.q.Limit(c.Request.Context(), q, c.Param("name"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

// deleteLimit handles DELETE /v1/queues/{q}/limits/{name}: 204.
func (s *Server) deleteLimit(c *gin.Context) {
	q, err := queueParam(c)
	if err == nil {
		err = s.emptyBody(c)
	}
	if err == nil {
		err = checkQuery(c)
	}
	if err == nil {
		err = s.q.DeleteLimit(c.Request.Context(), q, c.Param("name"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
