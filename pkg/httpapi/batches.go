package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// maxBatchMembers bounds the jobs of one POST /v1/batches or
// POST /v1/batches/{id}/jobs; a batch grows past it by adding.
const maxBatchMembers = 10_000

// batchCreateRequest is the body of POST /v1/batches (docs/workflows.md,
// "Batches").
type batchCreateRequest struct {
	ID         string     `json:"id,omitempty"`
	Jobs       []job.Spec `json:"jobs"`
	OnSuccess  *job.Spec  `json:"on_success,omitempty"`
	OnComplete *job.Spec  `json:"on_complete,omitempty"`
	Open       bool       `json:"open,omitempty"`
}

// batchAddRequest is the body of POST /v1/batches/{id}/jobs.
type batchAddRequest struct {
	Jobs []job.Spec `json:"jobs"`
	Seal bool       `json:"seal,omitempty"`
}

// batchSubmitted answers POST /v1/batches and POST /v1/batches/{id}/jobs:
// the batch, and the ids of the jobs just stored, in the order sent.
type batchSubmitted struct {
	Batch  *queue.BatchInfo `json:"batch"`
	JobIDs []string         `json:"job_ids"`
}

// batchResults is a page of GET /v1/batches/{id}/results.
type batchResults struct {
	Results    []queue.BatchResult `json:"results"`
	NextCursor string              `json:"next_cursor"`
}

type cancelledCount struct {
	Cancelled int `json:"cancelled"`
}

// batchRoutes are the routes of batches.
func (s *Server) batchRoutes() []route {
	return []route{
		{http.MethodPost, "/v1/batches", s.submitBatchJobs, operation{
			Many: true,
			ID:   "submitBatchJobs", Tag: "batches", Summary: "Submit a batch: jobs in any queues, with callbacks", Scope: scopeSubmit,
			Description: "Validates every job (each as POST /v1/jobs takes it, without depends_on and idempotency_key) and callback (payload a JSON object or none), storing nothing when one is wrong (400 naming id, jobs[i].x, on_success.x or on_complete.x). " +
				"Then stores the members, each with the field batch, and seals the batch unless open is true. Once the batch is sealed and every member ended, the poller submits on_complete, and on_success when every member succeeded, each once, with the idempotency key \"batch:<id>:on_success\" (or on_complete), the field batch and the payload member \"batch\" set to the batch's id. " +
				"1 to 10,000 jobs a request (none with open); add more with POST /v1/batches/{id}/jobs. 409 when a batch of that id exists. The body may be 16× the usual limit.",
			Body: batchCreateRequest{}, Status: http.StatusCreated, Response: batchSubmitted{},
			Errors: []int{400, 409, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/batches/:id", s.getBatch, operation{
			ID: "getBatch", Tag: "batches", Summary: "A batch: its members by state, its callbacks",
			Description: "counts holds the members by how they last ended, and pending those that have not ended (waiting, scheduled, queued or active); a retried member counts as it ended until it ends again. Each callback is pending, due (being submitted) or fired, with its job_id.",
			Status:      http.StatusOK, Response: queue.BatchInfo{}, Errors: []int{404, 503},
		}},
		{http.MethodPost, "/v1/batches/:id/jobs", s.addBatchJobs, operation{
			Many: true,
			ID:   "addBatchJobs", Tag: "batches", Summary: "Add jobs to an open batch, and seal it", Scope: scopeSubmit,
			Description: "Adds jobs (as in POST /v1/batches; up to 10,000 a request) to a batch not sealed yet, then seals it when seal is true (jobs may then be empty): its callbacks wait for the seal. 409 when the batch is sealed.",
			Body:        batchAddRequest{}, Status: http.StatusOK, Response: batchSubmitted{},
			Errors: []int{400, 404, 409, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/batches/:id/jobs", s.listBatchJobs, operation{
			ID: "listBatchJobs", Tag: "batches", Summary: "A batch's members, in the order added",
			Description: "Paged: limit (1-500, default 50) jobs a page, then next_cursor as cursor (empty on the last). A member whose job was pruned after its retention shows its id, queue and the state it ended in.",
			Query:       []param{limitParam, cursorParam},
			Status:      http.StatusOK, Response: searchResult{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodGet, "/v1/batches/:id/results", s.listBatchResults, operation{
			ID: "listBatchResults", Tag: "batches", Summary: "The results of a batch's members (fan-in)",
			Description: "Each member's id, queue, state, result (when it succeeded) and last_error, in the order added; paged as GET /v1/batches/{id}/jobs.",
			Query:       []param{limitParam, cursorParam},
			Status:      http.StatusOK, Response: batchResults{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodPost, "/v1/batches/:id/cancel", s.cancelBatch, operation{
			Long: true,
			ID:   "cancelBatch", Audit: "batch.cancel", Tag: "batches", Summary: "Cancel a batch whole", Scope: scopeSubmit,
			Description: "Seals the batch and cancels every member that has not ended (their dependents too); on_complete then fires, on_success does not. Sending it again is harmless.",
			Status:      http.StatusOK, Response: cancelledCount{}, Errors: []int{404, 503},
		}},
		{http.MethodPost, "/v1/batches/:id/retry", s.retryBatch, operation{
			Long: true,
			ID:   "retryBatch", Audit: "batch.retry", Tag: "batches", Summary: "Retry a batch's dead and cancelled members", Scope: scopeSubmit,
			Description: "Requeues them with their attempts reset; on_success fires once every member succeeded (if it has not yet).",
			Status:      http.StatusOK, Response: retriedCount{}, Errors: []int{404, 503},
		}},
	}
}

// readBatchRequest reads a batch route's body into req (no query
// parameters allowed); on a bad request it answers and returns false.
func (s *Server) readBatchRequest(c *gin.Context, req any) bool {
	data, err := readBody(c, s.cfg.MaxBatchBodyBytes, false)
	if err == nil {
		err = checkQuery(c)
	}
	if err == nil {
		err = decodeBatchBody(data, req)
	}
	if err != nil {
		fail(c, err)
		return false
	}
	return true
}

// submitBatchJobs handles POST /v1/batches.
func (s *Server) submitBatchJobs(c *gin.Context) {
	var req batchCreateRequest
	if !s.readBatchRequest(c, &req) {
		return
	}
	now := s.now()
	if req.ID == "" {
		req.ID = job.NewID(now)
	} else if !queue.ValidBatchID(req.ID) {
		fail(c, invalid("id", "id must match [A-Za-z0-9_.:@-]{1,128}"))
		return
	}
	if len(req.Jobs) == 0 && !req.Open {
		fail(c, invalid("jobs", "jobs must hold at least one job (or open be true)"))
		return
	}
	members, err := s.buildMembers(c, req.Jobs)
	if err != nil {
		fail(c, err)
		return
	}
	spec := queue.BatchSpec{ID: req.ID, Jobs: members, Open: req.Open}
	for _, cb := range []struct {
		spec  *job.Spec
		field string
		into  **job.Job
	}{{req.OnSuccess, "on_success", &spec.OnSuccess}, {req.OnComplete, "on_complete", &spec.OnComplete}} {
		if cb.spec == nil {
			continue
		}
		if err := s.q.ApplyTypeDefaults(c.Request.Context(), cb.spec); err != nil {
			fail(c, err)
			return
		}
		j, err := cb.spec.BuildDecoded(now)
		if err != nil {
			fail(c, prefixField(err, cb.field))
			return
		}
		*cb.into = j
	}
	info, subs, err := s.q.CreateBatch(c.Request.Context(), spec)
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Location", "/v1/batches/"+req.ID)
	c.JSON(http.StatusCreated, batchSubmitted{Batch: info, JobIDs: jobIDs(subs)})
}

// addBatchJobs handles POST /v1/batches/{id}/jobs.
func (s *Server) addBatchJobs(c *gin.Context) {
	var req batchAddRequest
	if !s.readBatchRequest(c, &req) {
		return
	}
	members, err := s.buildMembers(c, req.Jobs)
	if err != nil {
		fail(c, err)
		return
	}
	info, subs, err := s.q.AddToBatch(c.Request.Context(), c.Param("id"), members, req.Seal)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, batchSubmitted{Batch: info, JobIDs: jobIDs(subs)})
}

// buildMembers builds the jobs of a batch request, naming a bad one
// "jobs[i].x".
func (s *Server) buildMembers(c *gin.Context, specs []job.Spec) ([]*job.Job, error) {
	if len(specs) > maxBatchMembers {
		return nil, invalid("jobs", "jobs holds at most %d jobs a request; add more with POST /v1/batches/{id}/jobs", maxBatchMembers)
	}
	if err := s.q.ApplyTypeDefaults(c.Request.Context(), pointers(specs)...); err != nil {
		return nil, err
	}
	now := s.now()
	traceparent := requestTraceparent(c)
	out := make([]*job.Job, len(specs))
	for i := range specs {
		j, err := specs[i].BuildDecoded(now)
		if err != nil {
			return nil, prefixField(err, fmt.Sprintf("jobs[%d]", i))
		}
		if j.Traceparent == "" {
			j.Traceparent = traceparent
		}
		out[i] = j
	}
	return out, nil
}

// prefixField puts prefix before the field a *job.FieldError names.
func prefixField(err error, prefix string) error {
	var fe *job.FieldError
	if errors.As(err, &fe) {
		return fe.Prefix(prefix)
	}
	return err
}

func jobIDs(subs []queue.Submitted) []string {
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.Job.ID
	}
	return ids
}

// getBatch handles GET /v1/batches/{id}.
func (s *Server) getBatch(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	info, err := s.q.Batch(c.Request.Context(), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, info)
}

// listBatchJobs handles GET /v1/batches/{id}/jobs.
func (s *Server) listBatchJobs(c *gin.Context) {
	limit, err := pageQuery(c)
	if err != nil {
		fail(c, err)
		return
	}
	jobs, next, err := s.q.BatchMembers(c.Request.Context(), c.Param("id"), c.Query("cursor"), limit)
	if err != nil {
		fail(c, err)
		return
	}
	writeJobPage(c, jobs, next)
}

// listBatchResults handles GET /v1/batches/{id}/results.
func (s *Server) listBatchResults(c *gin.Context) {
	limit, err := pageQuery(c)
	if err != nil {
		fail(c, err)
		return
	}
	res, next, err := s.q.BatchResults(c.Request.Context(), c.Param("id"), c.Query("cursor"), limit)
	if err != nil {
		fail(c, err)
		return
	}
	if res == nil {
		res = []queue.BatchResult{}
	}
	c.JSON(http.StatusOK, batchResults{Results: res, NextCursor: next})
}

// pageQuery checks a paged route's query (limit, cursor) and returns limit.
func pageQuery(c *gin.Context) (int, error) {
	if err := checkQuery(c, "limit", "cursor"); err != nil {
		return 0, err
	}
	return queryLimit(c)
}

// cancelBatch handles POST /v1/batches/{id}/cancel.
func (s *Server) cancelBatch(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	n, err := s.q.CancelBatch(c.Request.Context(), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, cancelledCount{Cancelled: n})
}

// retryBatch handles POST /v1/batches/{id}/retry.
func (s *Server) retryBatch(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	n, err := s.q.RetryBatch(c.Request.Context(), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, retriedCount{Retried: n})
}

// decodeBatchBody decodes the body of POST /v1/batches or
// POST /v1/batches/{id}/jobs into req; when that fails, it is decoded
// again member by member to name the one at fault ("jobs[i].x",
// "on_success.x").
func decodeBatchBody(data []byte, req any) error {
	if decodeFast(data, req) {
		return nil
	}
	first := jsonbody.Decode(data, req, jsonbody.Strict)
	if first == nil {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := jsonbody.Decode(data, &raw, jsonbody.Strict); err != nil {
		return jsonError(err, data, jsonbody.Where{})
	}
	var jobs []json.RawMessage
	if r, ok := raw["jobs"]; ok && json.Unmarshal(r, &jobs) == nil {
		for i, r := range jobs {
			var spec job.Spec
			if err := jsonbody.Decode(r, &spec, jsonbody.Strict); err != nil {
				return jsonError(err, r, specWhere(fmt.Sprintf("jobs[%d]", i)))
			}
		}
	}
	for _, name := range []string{"on_success", "on_complete"} {
		if r, ok := raw[name]; ok {
			var spec job.Spec
			if err := jsonbody.Decode(r, &spec, jsonbody.Strict); err != nil {
				return jsonError(err, r, specWhere(name))
			}
		}
	}
	return jsonError(first, data, jsonbody.Where{})
}
