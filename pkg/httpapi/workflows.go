package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/internal/workflow"
	"github.com/sundialhq/sundial/pkg/job"
)

// workflowRequest is the body of POST /v1/workflows: a DAG of named steps
// (docs/workflows.md).
type workflowRequest struct {
	ID    string         `json:"id,omitempty"`
	Steps []workflowStep `json:"steps"`
}

// workflowStep is one step of a workflowRequest: a job as POST /v1/jobs
// takes it, and the steps it runs after.
type workflowStep struct {
	Name  string   `json:"name"`
	Job   job.Spec `json:"job"`
	After []string `json:"after,omitempty"`
}

// workflowResult is the answer of POST /v1/workflows: each step's job by
// step name.
type workflowResult struct {
	ID    string              `json:"id"`
	Steps map[string]*job.Job `json:"steps"`
}

// workflowRoutes are the routes of workflows.
func (s *Server) workflowRoutes() []route {
	return []route{
		{http.MethodPost, "/v1/workflows", s.submitWorkflow, operation{
			Many: true,
			ID:   "submitWorkflow", Tag: "jobs", Summary: "Submit a workflow: a DAG of jobs in any queues", Scope: scopeSubmit,
			Description: "Validates every step (names unique, after naming steps of the workflow, no cycle, each job as POST /v1/jobs takes it, without depends_on) and stores nothing when one is wrong (400 naming steps[i].name, steps[i].after[j] or steps[i].job.x). " +
				"Then stores the steps in dependency order, each queue's steps that can go together in one all-or-nothing call. A step runs once the steps of its after succeeded; when one ends dead or cancelled it is cancelled, or runs with the job's on_dependency_failure \"run\". " +
				"Each step without an idempotency_key gets \"wf:<id>:<name>\": the same document sent again (after a 503 midway, say) stores only what is missing; send an id to make that work, or the server picks a new one. " +
				"200 when every step was stored before. 409 when a step cannot be stored because a step of its queue it runs after already ended dead or cancelled: it and the steps after it are not stored, every other step is, and the message names them. The body may be 16× the usual limit.",
			Body: workflowRequest{}, Status: http.StatusCreated, Response: workflowResult{},
			Also:   map[int]string{http.StatusOK: "Every step was stored by an earlier submit of the same workflow id; nothing new was created."},
			Errors: []int{400, 409, 413, 415, 503},
		}},
	}
}

// submitWorkflow handles POST /v1/workflows: 201 with each step's job by
// name, 200 when all of them were stored before.
func (s *Server) submitWorkflow(c *gin.Context) {
	data, err := readBody(c, s.cfg.MaxBatchBodyBytes, false)
	if err == nil {
		err = checkQuery(c)
	}
	if err != nil {
		fail(c, err)
		return
	}
	req, err := decodeWorkflow(data)
	if err != nil {
		fail(c, err)
		return
	}
	ctx := c.Request.Context()
	now := s.now()
	if req.ID == "" {
		req.ID = job.NewID(now)
	}
	specs := make([]*job.Spec, len(req.Steps))
	for i := range req.Steps {
		specs[i] = &req.Steps[i].Job
	}
	if err := s.q.ApplyTypeDefaults(ctx, specs...); err != nil {
		fail(c, err)
		return
	}
	traceparent := requestTraceparent(c)
	steps := make([]workflow.Step, len(req.Steps))
	for i := range req.Steps {
		st := &req.Steps[i]
		j, err := st.Job.BuildDecoded(now)
		if err != nil {
			var fe *job.FieldError
			if errors.As(err, &fe) {
				err = fe.Prefix(fmt.Sprintf("steps[%d].job", i))
			}
			fail(c, err)
			return
		}
		if j.Traceparent == "" {
			j.Traceparent = traceparent
		}
		steps[i] = workflow.Step{Name: st.Name, Job: j, After: st.After, OnDependencyFailure: st.Job.OnDependencyFailure}
	}
	stored, err := workflow.Submit(ctx, s.q, req.ID, steps)
	if err != nil {
		var ended *workflow.EndedError
		if errors.As(err, &ended) {
			err = &apiError{Status: http.StatusConflict, Code: codeConflict, Message: ended.Error()}
		}
		fail(c, err)
		return
	}
	out := workflowResult{ID: req.ID, Steps: make(map[string]*job.Job, len(stored))}
	status := http.StatusOK
	for name, st := range stored {
		out.Steps[name] = st.Job
		if !st.Duplicate {
			status = http.StatusCreated
		}
	}
	c.JSON(status, out)
}

// decodeWorkflow decodes the body of POST /v1/workflows; when that fails,
// it is decoded again step by step to name the member at fault as
// "steps[i].x" or "steps[i].job.x".
func decodeWorkflow(data []byte) (*workflowRequest, error) {
	var req workflowRequest
	if decodeFast(data, &req) {
		return &req, nil
	}
	first := jsonbody.Decode(data, &req, jsonbody.Strict)
	if first == nil {
		return &req, nil
	}
	var raw struct {
		ID    string            `json:"id"`
		Steps []json.RawMessage `json:"steps"`
	}
	if err := jsonbody.Decode(data, &raw, jsonbody.Strict); err != nil {
		return nil, jsonError(err, data, jsonbody.Where{})
	}
	for i, r := range raw.Steps {
		prefix := fmt.Sprintf("steps[%d]", i)
		var st struct {
			Name  string          `json:"name"`
			Job   json.RawMessage `json:"job"`
			After []string        `json:"after"`
		}
		if err := jsonbody.Decode(r, &st, jsonbody.Strict); err != nil {
			return nil, jsonError(err, r, jsonbody.Where{Prefix: prefix})
		}
		var spec job.Spec
		if err := jsonbody.Decode(st.Job, &spec, jsonbody.Strict); err != nil {
			return nil, jsonError(err, st.Job, specWhere(prefix+".job"))
		}
	}
	return nil, jsonError(first, data, jsonbody.Where{})
}
