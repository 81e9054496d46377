package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// The HTTP worker protocol (docs/workers.md): a worker in any language
// claims jobs with a long poll, renews its leases (reporting progress),
// and reports each outcome with the lease's fencing token — the same
// scripts, fencing, retries and events as the Go worker.

// Limits of the worker protocol.
const (
	maxClaim       = 1000
	maxWaitSeconds = 60
	maxClaimQueues = 32
	maxMessageLen  = 1024
	maxErrorLen    = 64 << 10
)

var workerIDRe = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

// claimRequest is the body of a claim.
type claimRequest struct {
	// WorkerID names the worker in GET /v1/workers and in job events.
	WorkerID string `json:"worker_id"`
	// Queues to claim from, in priority order (POST /v1/claim only; the
	// single-queue form takes it from the path).
	Queues []string `json:"queues,omitempty"`
	// Types the worker runs; empty means any. A queued job of another type
	// is parked for a worker that runs it, and the claim goes on behind it:
	// workers with different types share a queue, each taking its own
	// types in priority order.
	Types []string `json:"types,omitempty"`
	// Max is the most jobs to claim, 1..1000. Default 1.
	Max int `json:"max,omitempty"`
	// WaitSeconds is how long to wait for a job when none is due, 0..60.
	// Default 0 (answer at once).
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
}

// leaseInfo is what a worker needs to keep and end its lease.
type leaseInfo struct {
	Token string `json:"token"`
	// ExpiresAt is when the lease runs out unless renewed (the API's clock).
	ExpiresAt msTime `json:"expires_at"`
	// TTLSeconds is the lease's length: renew it every third of this.
	TTLSeconds float64 `json:"ttl_seconds"`
}

// claimedJob is a job and its lease.
type claimedJob struct {
	Job   *job.Job  `json:"job"`
	Lease leaseInfo `json:"lease"`
}

// claimResult is the answer to a claim: the jobs, highest priority first
// (empty when none came in time).
type claimResult struct {
	Jobs []claimedJob `json:"jobs"`
}

// heartbeatRequest renews a lease and may report progress.
type heartbeatRequest struct {
	Token    string `json:"token"`
	WorkerID string `json:"worker_id,omitempty"`
	// Progress is 0..100; with Message, shown on the job and sent as a
	// progress event (at most one a second per job).
	Progress *int   `json:"progress,omitempty"`
	Message  string `json:"message,omitempty"`
}

// heartbeatResult tells when the renewed lease runs out.
type heartbeatResult struct {
	LeaseExpiresAt msTime `json:"lease_expires_at"`
}

// completeRequest reports a succeeded attempt.
type completeRequest struct {
	Token    string          `json:"token"`
	WorkerID string          `json:"worker_id,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
}

// failRequest reports a failed attempt.
type failRequest struct {
	Token    string `json:"token"`
	WorkerID string `json:"worker_id,omitempty"`
	Error    string `json:"error"`
	// Retry false sends the job to the dead letters at once; default true
	// (retry with backoff while attempts remain).
	Retry *bool `json:"retry,omitempty"`
	// RetryInSeconds, when set, is the retry's delay instead of the job's
	// backoff (e.g. a 429 answer's Retry-After), up to a year. The attempt
	// counts: without attempts left the job goes dead.
	RetryInSeconds *float64 `json:"retry_in_seconds,omitempty"`
	// Cancel true ends the job cancelled, not dead, with error as the
	// reason: the handler found it should not run (its dependents are
	// cancelled too).
	Cancel bool `json:"cancel,omitempty"`
}

// snoozeRequest asks to run a job again later without spending an attempt.
type snoozeRequest struct {
	Token    string `json:"token"`
	WorkerID string `json:"worker_id,omitempty"`
	// DelaySeconds is how long to wait before the job is due again, 0 up to
	// a year (0: queued again at once, behind the jobs already queued).
	DelaySeconds float64 `json:"delay_seconds"`
	// Reason is recorded on the snoozed event (optional).
	Reason string `json:"reason,omitempty"`
}

// releaseRequest gives a lease back without spending an attempt.
type releaseRequest struct {
	Token    string `json:"token"`
	WorkerID string `json:"worker_id,omitempty"`
}

// releaseResult is the state of a job given back: queued.
type releaseResult struct {
	State string `json:"state"`
}

// outcomeResult is the state a job reached after an outcome.
type outcomeResult struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

var errLeaseLost = &apiError{Status: http.StatusConflict, Code: codeConflict,
	Message: "lease lost: the job was reclaimed, cancelled or finished under this token, or ran past its timeout; stop working on it"}

// claimQueue handles POST /v1/queues/{q}/claim.
func (s *Server) claimQueue(c *gin.Context) {
	q, err := queueParam(c)
	if err != nil {
		fail(c, err)
		return
	}
	s.claim(c, []string{q})
}

// claimAny handles POST /v1/claim: several queues in one call, in order.
func (s *Server) claimAny(c *gin.Context) { s.claim(c, nil) }

func (s *Server) claim(c *gin.Context, queues []string) {
	var req claimRequest
	if err := s.decodeBody(c, &req); err != nil {
		fail(c, err)
		return
	}
	if queues != nil && req.Queues != nil {
		fail(c, invalid("queues", "queues: name the queue in the path or use POST /v1/claim, not both"))
		return
	}
	if queues == nil {
		queues = req.Queues
	}
	if err := req.validate(queues); err != nil {
		fail(c, err)
		return
	}
	if out, ok := s.claimJobs(c, req, queues); ok {
		c.JSON(http.StatusOK, out)
	}
}

// claimJobs claims up to req.Max jobs of queues for req's worker, waiting
// up to req.WaitSeconds for one (a validated request). It reports false
// when it answered the request itself (an error), or when the client left,
// whose claimed jobs it gave back.
func (s *Server) claimJobs(c *gin.Context, req claimRequest, queues []string) (claimResult, bool) {
	ctx := c.Request.Context()
	s.seeWorker(c, req.WorkerID, queues, req.Max, req.Types, true)
	deadline := time.Now().Add(time.Duration(req.WaitSeconds * float64(time.Second)))
	ttl := s.q.Options().LeaseTTL
	out := claimResult{Jobs: []claimedJob{}}
	var wake chan struct{}
	if req.WaitSeconds > 0 {
		var leave func(more bool)
		wake, leave = s.wake.subscribe(queues, len(req.Types) > 0)
		// A full claim of more than one job says more may be ready; with
		// max 1 every claim that got a job is full and says nothing, and
		// each ready job has a signal of its own.
		defer func() { leave(req.Max > 1 && len(out.Jobs) == req.Max) }()
	}
	for {
		for _, q := range queues {
			if len(out.Jobs) == req.Max {
				break
			}
			// Not cancelled with the request: a claim that ran must come
			// back, so that its leases are answered or given back.
			leases, err := s.q.Claim(context.WithoutCancel(ctx), q, req.Max-len(out.Jobs), req.WorkerID, req.Types...)
			if err != nil {
				if len(out.Jobs) == 0 {
					fail(c, err)
					return out, false
				}
				break // answer with what was claimed: those leases are held
			}
			exp := msTime(s.now().Add(ttl))
			for _, l := range leases {
				s.metrics.observeClaim(q, l)
				out.Jobs = append(out.Jobs, claimedJob{Job: l.Job, Lease: leaseInfo{Token: l.Token, ExpiresAt: exp, TTLSeconds: ttl.Seconds()}})
			}
		}
		left := time.Until(deadline)
		if len(out.Jobs) > 0 || left <= 0 {
			break
		}
		// A long-polling worker is alive: its registry entry is kept fresh
		// while it waits.
		t := time.NewTimer(min(left, s.registryBeat()))
		select {
		case <-wake:
		case <-t.C:
			s.seeWorker(c, req.WorkerID, queues, req.Max, req.Types, true)
		case <-s.wake.closing:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return out, false // the client left: nothing was claimed for it
		}
		select {
		case <-s.wake.closing:
			deadline = time.Now() // one last try, then answer
		default:
		}
	}
	if ctx.Err() != nil && len(out.Jobs) > 0 {
		// The client left while its jobs were claimed: nobody will run
		// them, and waiting for their leases would cost each an attempt.
		s.giveBack(context.WithoutCancel(ctx), out.Jobs)
		return out, false
	}
	return out, true
}

// giveBack releases the leases of claimed jobs whose claim could not be
// answered, so that they are queued again at once, their attempt not
// counted.
func (s *Server) giveBack(ctx context.Context, jobs []claimedJob) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	byQueue := map[string][]queue.Lease{}
	for _, j := range jobs {
		byQueue[j.Job.Queue] = append(byQueue[j.Job.Queue], queue.Lease{Job: j.Job, Token: j.Lease.Token})
	}
	for name, leases := range byQueue {
		if _, err := s.q.Release(ctx, name, leases); err != nil {
			s.log.Warn("giving back the leases of an unanswered claim failed; they will expire", "queue", name, "jobs", len(leases), "err", err)
		}
	}
}

func (r *claimRequest) validate(queues []string) error {
	if !workerIDRe.MatchString(r.WorkerID) {
		return invalid("worker_id", "worker_id: required, 1-128 characters of A-Z a-z 0-9 _ . : @ -")
	}
	if len(queues) == 0 || len(queues) > maxClaimQueues {
		return invalid("queues", "queues: 1 to %d queue names", maxClaimQueues)
	}
	seen := map[string]bool{}
	for i, q := range queues {
		if !job.ValidQueue(q) || seen[q] {
			return invalid(fmt.Sprintf("queues[%d]", i), "queues[%d]: %q is not a valid queue name or is repeated", i, q)
		}
		seen[q] = true
	}
	for i, t := range r.Types {
		if !job.ValidType(t) {
			return invalid(fmt.Sprintf("types[%d]", i), "types[%d]: %q is not a valid job type", i, t)
		}
	}
	if r.Max == 0 {
		r.Max = 1
	}
	if r.Max < 1 || r.Max > maxClaim {
		return invalid("max", "max: 1 to %d", maxClaim)
	}
	if r.WaitSeconds < 0 || r.WaitSeconds > maxWaitSeconds {
		return invalid("wait_seconds", "wait_seconds: 0 to %d", maxWaitSeconds)
	}
	return nil
}

// checkLease checks what every lease call carries.
func checkLease(token, workerID string) error {
	if token == "" {
		return invalid("token", "token: required (the lease token of the claim)")
	}
	if workerID != "" && !workerIDRe.MatchString(workerID) {
		return invalid("worker_id", "worker_id: 1-128 characters of A-Z a-z 0-9 _ . : @ -")
	}
	return nil
}

func (r *heartbeatRequest) check() error {
	switch {
	case r.Progress != nil && (*r.Progress < 0 || *r.Progress > 100):
		return invalid("progress", "progress: 0 to 100")
	case len(r.Message) > maxMessageLen:
		return invalid("message", "message: at most %d bytes", maxMessageLen)
	case r.Progress == nil && r.Message != "":
		return invalid("progress", "progress: required with a message")
	}
	return checkLease(r.Token, r.WorkerID)
}

func (r *completeRequest) check() error { return checkLease(r.Token, r.WorkerID) }

func (r *releaseRequest) check() error { return checkLease(r.Token, r.WorkerID) }

func (r *failRequest) check() error {
	switch {
	case strings.TrimSpace(r.Error) == "":
		return invalid("error", "error: required, a message saying what went wrong")
	case len(r.Error) > maxErrorLen:
		return invalid("error", "error: at most %d bytes", maxErrorLen)
	case r.RetryInSeconds != nil && !validDelay(*r.RetryInSeconds, false):
		return invalid("retry_in_seconds", "retry_in_seconds: must be more than 0 and at most %d", maxDelaySeconds)
	case r.RetryInSeconds != nil && (r.Cancel || (r.Retry != nil && !*r.Retry)):
		return invalid("retry_in_seconds", "retry_in_seconds: only for a failure that is retried (not with retry false or cancel true)")
	case r.Cancel && r.Retry != nil:
		return invalid("cancel", "cancel: not with retry (a cancelled job is not retried)")
	}
	return checkLease(r.Token, r.WorkerID)
}

// maxDelaySeconds bounds a chosen retry delay or snooze: a year, as
// worker.MaxSnooze does for Go handlers.
const maxDelaySeconds = 365 * 24 * 3600

// validDelay tells whether d seconds is a delay the protocol takes: at
// most a year, more than 0 (or 0 too when zeroOK).
func validDelay(d float64, zeroOK bool) bool {
	return d <= maxDelaySeconds && (d > 0 || (zeroOK && d == 0))
}

func (r *snoozeRequest) check() error {
	switch {
	case !validDelay(r.DelaySeconds, true):
		return invalid("delay_seconds", "delay_seconds: must be 0 to %d", maxDelaySeconds)
	case len(r.Reason) > maxErrorLen:
		return invalid("reason", "reason: at most %d bytes", maxErrorLen)
	}
	return checkLease(r.Token, r.WorkerID)
}

// bind decodes a lease call's body strictly and checks it; false when it
// answered an error.
func (s *Server) bind(c *gin.Context, req interface{ check() error }) bool {
	err := s.decodeBody(c, req)
	if err == nil {
		err = req.check()
	}
	if err != nil {
		fail(c, err)
		return false
	}
	return true
}

// heartbeat handles POST /v1/jobs/{id}/heartbeat.
func (s *Server) heartbeat(c *gin.Context) {
	var req heartbeatRequest
	if !s.bind(c, &req) {
		return
	}
	ctx := c.Request.Context()
	q, ok := s.jobQueueOf(c, c.Param("id"))
	if !ok {
		return
	}
	if req.WorkerID != "" {
		s.seeWorker(c, req.WorkerID, []string{q}, 0, nil, false)
	}
	lease := queue.Lease{Job: &job.Job{ID: c.Param("id")}, Token: req.Token}
	var held bool
	var err error
	if req.Progress != nil {
		held, _, err = s.q.Progress(ctx, q, lease, queue.ProgressReport{Percent: *req.Progress, Message: req.Message})
	} else {
		var hs []bool
		if hs, err = s.q.Extend(ctx, q, []queue.Lease{lease}); err == nil {
			held = hs[0]
		}
	}
	if err != nil {
		fail(c, err)
		return
	}
	if !held {
		fail(c, errLeaseLost)
		return
	}
	c.JSON(http.StatusOK, heartbeatResult{LeaseExpiresAt: msTime(s.now().Add(s.q.Options().LeaseTTL))})
}

// completeJob handles POST /v1/jobs/{id}/complete.
func (s *Server) completeJob(c *gin.Context) {
	var req completeRequest
	if s.bind(c, &req) {
		s.report(c, req.outcome(c.Param("id")))
	}
}

// failJob handles POST /v1/jobs/{id}/fail.
func (s *Server) failJob(c *gin.Context) {
	var req failRequest
	if s.bind(c, &req) {
		s.report(c, req.outcome(c.Param("id")))
	}
}

// snoozeJob handles POST /v1/jobs/{id}/snooze: the job runs again after
// the delay, and the attempt does not count.
func (s *Server) snoozeJob(c *gin.Context) {
	var req snoozeRequest
	if s.bind(c, &req) {
		s.report(c, req.outcome(c.Param("id")))
	}
}

// The outcome each report of job id is, for the engine: one mapping for
// the per-job routes and POST /v1/outcomes.

func (r *completeRequest) outcome(id string) queue.Outcome {
	return queue.Outcome{ID: id, Token: r.Token, Kind: queue.OutcomeSucceeded, Result: r.Result, WorkerID: r.WorkerID}
}

func (r *failRequest) outcome(id string) queue.Outcome {
	o := queue.Outcome{ID: id, Token: r.Token, Kind: queue.OutcomeFailed, Error: r.Error, WorkerID: r.WorkerID}
	switch {
	case r.Cancel:
		o.Kind = queue.OutcomeCancelled
	case r.Retry != nil && !*r.Retry:
		o.Kind = queue.OutcomeDead
	case r.RetryInSeconds != nil:
		o.Delay = max(secondsDuration(*r.RetryInSeconds), time.Millisecond)
	}
	return o
}

func (r *snoozeRequest) outcome(id string) queue.Outcome {
	return queue.Outcome{ID: id, Token: r.Token, Kind: queue.OutcomeSnoozed, Error: r.Reason,
		Delay: secondsDuration(r.DelaySeconds), WorkerID: r.WorkerID}
}

// secondsDuration is d seconds as a Duration, to the millisecond.
func secondsDuration(d float64) time.Duration {
	return time.Duration(d*1000) * time.Millisecond
}

// releaseJob handles POST /v1/jobs/{id}/release: a worker shutting down
// gives a lease back; the job returns to the head of its priority list and
// the interrupted attempt does not count.
func (s *Server) releaseJob(c *gin.Context) {
	var req releaseRequest
	if !s.bind(c, &req) {
		return
	}
	id := c.Param("id")
	q, ok := s.jobQueueOf(c, id)
	if !ok {
		return
	}
	n, err := s.q.Release(c.Request.Context(), q, []queue.Lease{{Job: &job.Job{ID: id}, Token: req.Token}})
	if err != nil {
		fail(c, err)
		return
	}
	if n == 0 {
		fail(c, errLeaseLost)
		return
	}
	c.JSON(http.StatusOK, releaseResult{State: string(job.Queued)})
}

// jobQueueOf returns the queue that holds job id, or answers the request
// (404 for no such job, 503) and returns false: the start of every route
// that acts on one job by its id.
func (s *Server) jobQueueOf(c *gin.Context, id string) (string, bool) {
	q, err := s.q.QueueOf(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return "", false
	}
	return q, true
}

// report writes one outcome with the same script as the Go worker.
func (s *Server) report(c *gin.Context, o queue.Outcome) {
	q, ok := s.jobQueueOf(c, o.ID)
	if !ok {
		return
	}
	st, err := s.q.Complete(c.Request.Context(), q, []queue.Outcome{o})
	if err != nil {
		fail(c, err)
		return
	}
	if st[0] == queue.StatusStale {
		fail(c, errLeaseLost)
		return
	}
	c.JSON(http.StatusOK, outcomeResult{ID: o.ID, State: string(st[0])})
}

// decodeBody reads a required JSON body strictly into v.
func (s *Server) decodeBody(c *gin.Context, v any) error {
	data, err := readBody(c, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	if err := jsonbody.Decode(data, v, jsonbody.Strict); err != nil {
		return jsonError(err, data, jsonbody.Where{})
	}
	return nil
}

// seenWorkers throttles the registry entries of HTTP workers: at most one
// write per worker a second per API process.
type seenWorkers struct {
	mu    sync.Mutex
	last  map[string]time.Time
	first map[string]time.Time // for started_at
	types map[string][]string  // the types of the worker's last claim
}

// registryBeat is how often an HTTP worker's registry entry is renewed:
// a third of its lifetime, at most once a second.
func (s *Server) registryBeat() time.Duration { return min(time.Second, s.cfg.WorkerMaxAge/3) }

// seeWorker records an HTTP worker in the registry (GET /v1/workers), as
// its claims and heartbeats show it alive. Its entry expires like a Go
// worker's when it stops calling. types are those of a claim (nil: any);
// a heartbeat (claim false) keeps the last claim's.
func (s *Server) seeWorker(c *gin.Context, id string, queues []string, concurrency int, types []string, claim bool) {
	now := time.Now()
	s.seen.mu.Lock()
	if s.seen.last == nil || len(s.seen.last) > 100_000 {
		s.seen.last, s.seen.first, s.seen.types = map[string]time.Time{}, map[string]time.Time{}, map[string][]string{}
	}
	if claim {
		s.seen.types[id] = types
	} else {
		types = s.seen.types[id]
	}
	if now.Sub(s.seen.last[id]) < s.registryBeat() {
		s.seen.mu.Unlock()
		return
	}
	s.seen.last[id] = now
	first, ok := s.seen.first[id]
	if !ok {
		first = now
		s.seen.first[id] = now
	}
	s.seen.mu.Unlock()
	if len(types) > 0 {
		types = slices.Sorted(slices.Values(types))
	} else {
		types = nil // any type
	}
	info := queue.WorkerInfo{ID: id, Hostname: queue.HTTPWorkerHost + c.ClientIP(), Queues: queues, Concurrency: concurrency, ActiveJobs: []string{}, StartedAt: first.UTC(), Types: types}
	if err := s.q.Heartbeat(c.Request.Context(), info, s.cfg.WorkerMaxAge); err != nil && !errors.Is(err, c.Request.Context().Err()) {
		s.log.Debug("registering an HTTP worker failed", "worker_id", id, "err", err)
	}
}

// workerRoutes are the routes of the HTTP worker protocol.
func (s *Server) workerRoutes() []route {
	lost := "409 when the lease is lost (reclaimed after expiry, cancelled, finished): the worker must stop the job; nothing changed."
	return []route{
		{http.MethodPost, "/v1/queues/:q/claim", s.claimQueue, operation{
			Long: true,
			ID:   "claimQueue", Tag: "workers", Summary: "Claim jobs (HTTP worker)", Scope: scopeWork,
			Description: "Leases up to max due jobs of the queue, highest priority first, each with its lease token. With wait_seconds, waits up to that long for a job (woken by the next submit, no polling). " +
				"The worker must renew each lease (heartbeat) every third of lease.ttl_seconds and end it with complete or fail. Registers the worker in GET /v1/workers.",
			Body: claimRequest{}, Status: http.StatusOK, Response: claimResult{}, Errors: []int{400, 403, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/claim", s.claimAny, operation{
			Long: true,
			ID:   "claim", Tag: "workers", Summary: "Claim jobs from several queues, in order (HTTP worker)", Scope: scopeWork,
			Description: "As POST /v1/queues/{q}/claim over the queues of the body, tried in the given order (like SUNDIAL_QUEUES).",
			Body:        claimRequest{}, Status: http.StatusOK, Response: claimResult{}, Errors: []int{400, 403, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/heartbeat", s.heartbeat, operation{
			ID: "heartbeat", Tag: "workers", Summary: "Renew a lease, report progress (HTTP worker)", Scope: scopeWork,
			Description: "Extends the lease by its TTL. progress (0..100) and message show on the job and as a progress event on the stream (at most one a second per job). " + lost,
			Body:        heartbeatRequest{}, Status: http.StatusOK, Response: heartbeatResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/complete", s.completeJob, operation{
			ID: "completeJob", Tag: "workers", Summary: "Report success (HTTP worker)", Scope: scopeWork,
			Description: "The attempt succeeded with result (any JSON). " + lost,
			Body:        completeRequest{}, Status: http.StatusOK, Response: outcomeResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/fail", s.failJob, operation{
			ID: "failJob", Tag: "workers", Summary: "Report failure (HTTP worker)", Scope: scopeWork,
			Description: "The attempt failed: retried with backoff while attempts remain (state scheduled or queued), else dead; retry_in_seconds replaces the backoff for this retry (e.g. a 429's Retry-After); " +
				"retry false sends it to the dead letters at once; cancel true ends it cancelled (not dead) with error as the reason, and cancels its dependents. " + lost,
			Body: failRequest{}, Status: http.StatusOK, Response: outcomeResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/snooze", s.snoozeJob, operation{
			ID: "snoozeJob", Tag: "workers", Summary: "Run again later without spending an attempt (HTTP worker)", Scope: scopeWork,
			Description: "Ends the attempt and makes the job due again after delay_seconds (state scheduled, or queued for 0), with a snoozed event. " +
				"The attempt is given back: max_attempts grows by one, so attempt numbers stay unique. For \"not yet\", not for failures. " + lost,
			Body: snoozeRequest{}, Status: http.StatusOK, Response: outcomeResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/release", s.releaseJob, operation{
			ID: "releaseJob", Tag: "workers", Summary: "Give a lease back (HTTP worker shutting down)", Scope: scopeWork,
			Description: "The worker will not run the job: it returns to the head of its priority list (state queued) at once, and the interrupted attempt does not count. " +
				"For a worker's graceful shutdown, instead of letting the lease expire (which counts an attempt and waits a lease TTL). " + lost,
			Body: releaseRequest{}, Status: http.StatusOK, Response: releaseResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
	}
}
