package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// POST /v1/outcomes: the HTTP worker protocol's batched report (docs/workers.md,
// "Batched outcomes"). Many attempts' outcomes in one request, and
// optionally the next claim, so that a worker pays one round trip per
// batch instead of one per job. Each outcome keeps the guarantees of its
// per-job route: it is checked against its own lease token in its queue's
// script, and refused alone (status stale) when its lease is lost; the
// others go on.

// maxOutcomes bounds one POST /v1/outcomes.
const maxOutcomes = 1000

// outcomeItem is one attempt's outcome: exactly one of complete, fail and
// snooze, each the body its per-job route takes.
type outcomeItem struct {
	// ID is the job's id.
	ID string `json:"id"`
	// Queue is the job's queue, as its claim answered; it saves a lookup
	// (a wrong one makes the outcome stale, never another job's).
	Queue    string           `json:"queue,omitempty"`
	Complete *completeRequest `json:"complete,omitempty"`
	Fail     *failRequest     `json:"fail,omitempty"`
	Snooze   *snoozeRequest   `json:"snooze,omitempty"`
}

// outcomesRequest is the body of POST /v1/outcomes.
type outcomesRequest struct {
	Outcomes []outcomeItem `json:"outcomes"`
	// Claim, when set, claims after the outcomes are recorded, as POST
	// /v1/claim's body does (its queues are required), and the answer
	// carries the jobs.
	Claim *claimRequest `json:"claim,omitempty"`
}

// outcomeStatus is one outcome's answer: the state the job reached, or
// stale when its lease was lost (nothing changed for it).
type outcomeStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// outcomesResult answers POST /v1/outcomes.
type outcomesResult struct {
	// Results are in the order of the outcomes.
	Results []outcomeStatus `json:"results"`
	// Jobs are what the claim took (none without a claim).
	Jobs []claimedJob `json:"jobs"`
}

func (r *outcomesRequest) check() error {
	if len(r.Outcomes) > maxOutcomes || (len(r.Outcomes) == 0 && r.Claim == nil) {
		return invalid("outcomes", "outcomes: 1 to %d (or none with a claim)", maxOutcomes)
	}
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		f := fmt.Sprintf("outcomes[%d]", i)
		n := 0
		var err error
		if o.Complete != nil {
			n, err = n+1, o.Complete.check()
		}
		if o.Fail != nil {
			n, err = n+1, o.Fail.check()
		}
		if o.Snooze != nil {
			n, err = n+1, o.Snooze.check()
		}
		switch {
		case o.ID == "" || len(o.ID) > 64:
			return invalid(f+".id", "%s.id: a job id is required", f)
		case o.Queue != "" && !job.ValidQueue(o.Queue):
			return invalid(f+".queue", "%s.queue: not a queue name", f)
		case n != 1:
			return invalid(f, "%s: exactly one of complete, fail and snooze", f)
		case err != nil:
			if ae, ok := err.(*apiError); ok {
				return invalid(f, "%s: %s", f, ae.Message)
			}
			return err
		}
	}
	if r.Claim != nil && len(r.Claim.Queues) == 0 {
		return invalid("claim.queues", "claim.queues: name the queues to claim from")
	}
	return nil
}

// outcome is the engine's outcome of item o.
func (o *outcomeItem) outcome() queue.Outcome {
	switch {
	case o.Complete != nil:
		return o.Complete.outcome(o.ID)
	case o.Fail != nil:
		return o.Fail.outcome(o.ID)
	}
	return o.Snooze.outcome(o.ID)
}

// reportOutcomes handles POST /v1/outcomes.
func (s *Server) reportOutcomes(c *gin.Context) {
	var req outcomesRequest
	if !s.bind(c, &req) {
		return
	}
	if req.Claim != nil {
		if err := req.Claim.validate(req.Claim.Queues); err != nil {
			fail(c, err)
			return
		}
	}
	ctx := c.Request.Context()
	out := outcomesResult{Results: make([]outcomeStatus, len(req.Outcomes)), Jobs: []claimedJob{}}
	// By queue, in the order they came: one script call per queue.
	byQueue := map[string][]int{}
	var order []string
	for i := range req.Outcomes {
		o := &req.Outcomes[i]
		out.Results[i].ID = o.ID
		q := o.Queue
		if q == "" {
			var err error
			if q, err = s.q.QueueOf(ctx, o.ID); err != nil {
				if errors.Is(err, queue.ErrNotFound) {
					out.Results[i].State = string(queue.StatusStale) // no such job: its lease is no more
					continue
				}
				fail(c, err)
				return
			}
		}
		if allow := principalOf(c).queues; allow.Limited() && !allow.Allows(q) {
			// Another team's job does not exist for this caller (the fence
			// checked the queues the body names).
			out.Results[i].State = string(queue.StatusStale)
			continue
		}
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], i)
	}
	for _, q := range order {
		idx := byQueue[q]
		os := make([]queue.Outcome, len(idx))
		for k, i := range idx {
			os[k] = req.Outcomes[i].outcome()
		}
		st, err := s.q.Complete(ctx, q, os)
		if err != nil {
			// Earlier queues' outcomes are recorded; the worker sends the
			// batch again, and those answer stale (their leases ended).
			fail(c, err)
			return
		}
		for k, i := range idx {
			out.Results[i].State = string(st[k])
		}
	}
	if req.Claim != nil {
		jobs, ok := s.claimJobs(c, *req.Claim, req.Claim.Queues)
		if !ok {
			return
		}
		out.Jobs = jobs.Jobs
	}
	c.JSON(http.StatusOK, out)
}

// outcomeRoutes are the routes of the batched worker protocol.
func (s *Server) outcomeRoutes() []route {
	return []route{
		{http.MethodPost, "/v1/outcomes", s.reportOutcomes, operation{
			ID: "reportOutcomes", Tag: "workers", Summary: "Report many attempts' outcomes, then claim (HTTP worker, batched)", Scope: scopeWork,
			Description: "Records up to 1,000 outcomes, each exactly one of complete, fail and snooze with the body its per-job route takes (its own lease token), grouped by queue into one script call each. " +
				"Each is checked alone: results[i].state is the state the job reached, or stale when its lease was lost (nothing changed for it; the worker must drop it), as the per-job route's 409. " +
				"With claim (POST /v1/claim's body, queues required), the answer also carries the jobs claimed after the outcomes: one round trip per batch. docs/workers.md, \"Batched outcomes\".",
			Body: outcomesRequest{}, Status: http.StatusOK, Response: outcomesResult{}, Errors: []int{400, 403, 413, 415, 503},
		}},
	}
}
