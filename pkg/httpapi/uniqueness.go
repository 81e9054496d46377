package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/queue"
)

// uniquenessBody is a queue's uniqueness rules as the API reads and
// writes them.
type uniquenessBody struct {
	// WindowSeconds is how long an idempotency key names its job (1 to
	// 7776000; left out: the default, 86400).
	WindowSeconds int64 `json:"window_seconds,omitempty"`
	// UntilFinished frees a key once its job ended (succeeded, dead or
	// cancelled): "unique while queued, scheduled or active".
	UntilFinished bool `json:"until_finished"`
}

// uniquenessRoutes are the routes of a queue's uniqueness rules.
func (s *Server) uniquenessRoutes() []route {
	const path = "/v1/queues/:q/uniqueness"
	return []route{
		{http.MethodGet, path, s.getUniqueness, operation{
			ID: "getUniqueness", Tag: "queues", Summary: "A queue's uniqueness rules",
			Description: "How long an idempotency key names its job (window_seconds, the default when the queue sets none), and whether only until the job ends (until_finished).",
			Status:      http.StatusOK, Response: uniquenessBody{}, Errors: []int{400, 503},
		}},
		{http.MethodPut, path, s.putUniqueness, operation{
			ID: "putUniqueness", Audit: "uniqueness.put", Tag: "queues", Summary: "Set a queue's uniqueness rules",
			Description: "A submit whose idempotency_key names an earlier job of the queue returns that job (200) and creates nothing, for window_seconds after that submit, and with until_finished only while that job has not ended. " +
				"Applies from the next submit; {} restores the defaults (24 h, not until_finished). Creates the queue when it does not exist.",
			Body: uniquenessBody{}, Status: http.StatusOK, Response: uniquenessBody{}, Errors: []int{400, 413, 415, 503},
		}},
	}
}

// getUniqueness handles GET /v1/queues/{q}/uniqueness.
func (s *Server) getUniqueness(c *gin.Context) {
	q, err := queueParam(c)
	if err == nil {
		err = checkQuery(c)
	}
	var u queue.Uniqueness
	if err == nil {
		u, err = s.q.GetUniqueness(c.Request.Context(), q)
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, uniquenessBody{WindowSeconds: int64(u.Window / time.Second), UntilFinished: u.UntilFinished})
}

// putUniqueness handles PUT /v1/queues/{q}/uniqueness.
func (s *Server) putUniqueness(c *gin.Context) {
	q, err := queueParam(c)
	if err == nil {
		err = checkQuery(c)
	}
	var in uniquenessBody
	if err == nil {
		err = s.decodeBody(c, &in)
	}
	if err == nil {
		err = s.q.SetUniqueness(c.Request.Context(), q, queue.Uniqueness{Window: time.Duration(in.WindowSeconds) * time.Second, UntilFinished: in.UntilFinished})
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.getUniqueness(c)
}
