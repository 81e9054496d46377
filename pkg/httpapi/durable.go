package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Durable jobs over HTTP (docs/durable.md): an HTTP worker records its
// job's steps and parks it to wait, with the same scripts as the Go
// worker (queue.RecordStep, queue.OutcomeParked); anyone with a submit key
// sends signals. A worker reads what was recorded with GET /v1/jobs/{id}
// (the job's durable field).

// stepRequest records a step of a durable job (HTTP worker).
type stepRequest struct {
	Token    string `json:"token"`
	WorkerID string `json:"worker_id,omitempty"`
	// Seq is the step's place in the handler's order, from 1.
	Seq int `json:"seq"`
	// Name identifies the step with its place; a wait for a signal is
	// named "signal:<name>", a sleep "sleep".
	Name string `json:"name"`
	// Status: "ok" (Result), "err" (Error: the step failed for good),
	// "wait" (a sleep or a wait for a signal has begun; Deadline, and
	// Signal for a signal), "timeout" (the wait's deadline passed first).
	Status    string          `json:"status"`
	StartedAt *job.Time       `json:"started_at,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Deadline  *job.Time       `json:"deadline,omitempty"`
	// Signal is the name of the signal a wait waits for; SignalKey the key
	// it may be sent to instead of the job's id (POST /v1/signals).
	Signal    string `json:"signal,omitempty"`
	SignalKey string `json:"signal_key,omitempty"`
}

// stepResult is the step as recorded, and for a wait, the signal when one
// arrived.
type stepResult struct {
	Step   job.Step    `json:"step"`
	Signal *job.Signal `json:"signal,omitempty"`
}

// parkRequest ends an attempt of a durable job that waits.
type parkRequest struct {
	Token    string `json:"token"`
	WorkerID string `json:"worker_id,omitempty"`
	// DelaySeconds is when the job runs again at the latest (the sleep's
	// end, the wait's deadline), 0 up to a year.
	DelaySeconds float64 `json:"delay_seconds"`
	// Signal names the signal it waits for: it runs again as soon as the
	// signal arrives (at once, if it arrived meanwhile). Empty for a sleep.
	Signal string `json:"signal,omitempty"`
}

// signalRequest is a signal's value and the sender's idempotency key.
type signalRequest struct {
	Value json.RawMessage `json:"value,omitempty"`
	// IdempotencyKey makes a signal sent again (a retry after a lost
	// answer) a duplicate, answered as delivered, instead of a conflict.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// keySignalRequest is a signal sent to the job of a queue that chose key.
type keySignalRequest struct {
	Queue          string          `json:"queue"`
	Key            string          `json:"key"`
	Name           string          `json:"name"`
	Value          json.RawMessage `json:"value,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// signalResult says what became of a signal.
type signalResult struct {
	// Status: "delivered", "duplicate" (sent before with this idempotency
	// key), or "pending" (by key: kept for the job that will wait with it).
	Status string `json:"status"`
	JobID  string `json:"job_id,omitempty"`
}

// checkDurableName checks a step's or a signal's name, or a key.
func checkDurableName(field, v string) error {
	if !job.ValidDurableName(v) {
		return invalid(field, "%s: 1 to 200 characters without tabs or line breaks", field)
	}
	return nil
}

func (r *stepRequest) check() error {
	switch {
	case r.Seq < 1 || r.Seq > queue.MaxSteps:
		return invalid("seq", "seq: 1 to %d (a job records at most %d steps)", queue.MaxSteps, queue.MaxSteps)
	case checkDurableName("name", r.Name) != nil:
		return checkDurableName("name", r.Name)
	case r.Status != job.StepOK && r.Status != job.StepErr && r.Status != job.StepWait && r.Status != job.StepTimeout:
		return invalid("status", "status: one of ok, err, wait, timeout")
	case len(r.Result) > queue.MaxStepBytes || len(r.Error) > queue.MaxStepBytes:
		return invalid("result", "result or error: at most %d bytes", queue.MaxStepBytes)
	case r.Status == job.StepErr && strings.TrimSpace(r.Error) == "":
		return invalid("error", "error: required with status err")
	case r.Signal != "" && checkDurableName("signal", r.Signal) != nil:
		return checkDurableName("signal", r.Signal)
	case r.SignalKey != "" && checkDurableName("signal_key", r.SignalKey) != nil:
		return checkDurableName("signal_key", r.SignalKey)
	case r.SignalKey != "" && r.Signal == "":
		return invalid("signal_key", "signal_key: only with signal (a wait for a signal)")
	}
	return checkLease(r.Token, r.WorkerID)
}

func (r *parkRequest) check() error {
	switch {
	case !validDelay(r.DelaySeconds, true):
		return invalid("delay_seconds", "delay_seconds: must be 0 to %d", maxDelaySeconds)
	case r.Signal != "" && checkDurableName("signal", r.Signal) != nil:
		return checkDurableName("signal", r.Signal)
	}
	return checkLease(r.Token, r.WorkerID)
}

// recordStep handles POST /v1/jobs/{id}/steps.
func (s *Server) recordStep(c *gin.Context) {
	var req stepRequest
	if !s.bind(c, &req) {
		return
	}
	ctx := c.Request.Context()
	id := c.Param("id")
	q, ok := s.jobQueueOf(c, id)
	if !ok {
		return
	}
	now := s.now()
	start := now
	if req.StartedAt != nil {
		start = time.Time(*req.StartedAt)
	}
	var value string
	end := now
	switch req.Status {
	case job.StepOK:
		value = string(compactJSON(req.Result))
	case job.StepErr:
		value = req.Error
	case job.StepWait, job.StepTimeout:
		if req.Status == job.StepWait {
			end = time.Time{}
		}
		if req.Deadline != nil {
			value = strconv.FormatInt(time.Time(*req.Deadline).UnixMilli(), 10)
		}
	}
	rec := job.StepRecord(req.Status, req.Name, start, end, value)
	got, sig, err := s.q.RecordStep(ctx, q, queue.Lease{Job: &job.Job{ID: id}, Token: req.Token},
		queue.StepWrite{Seq: req.Seq, Record: rec, Signal: req.Signal, Key: req.SignalKey})
	switch {
	case err == nil:
	case err == queue.ErrLeaseLost:
		fail(c, errLeaseLost)
		return
	case err == queue.ErrTooManySteps:
		// 400, not 409: a worker takes a 409 for a lost lease.
		fail(c, invalid("seq", "seq: %s", err.Error()))
		return
	case err == queue.ErrStepsTooLarge:
		fail(c, invalid("result", "result: %s", err.Error()))
		return
	default:
		fail(c, err)
		return
	}
	step, _ := job.ParseStep(req.Seq, got)
	out := stepResult{Step: step}
	if sig != "" {
		if v, ok := job.ParseSignal(req.Signal, sig); ok {
			out.Signal = &v
		}
	}
	c.JSON(http.StatusOK, out)
}

// compactJSON is raw JSON without insignificant space ("null" for none).
func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// parkJob handles POST /v1/jobs/{id}/park.
func (s *Server) parkJob(c *gin.Context) {
	var req parkRequest
	if !s.bind(c, &req) {
		return
	}
	what := "sleep"
	if req.Signal != "" {
		what = "signal:" + req.Signal
	}
	s.report(c, queue.Outcome{ID: c.Param("id"), Token: req.Token, Kind: queue.OutcomeParked, Error: what,
		Delay: secondsDuration(req.DelaySeconds), WorkerID: req.WorkerID})
}

// signalJob handles POST /v1/jobs/{id}/signals/{signal}.
func (s *Server) signalJob(c *gin.Context) {
	var req signalRequest
	data, err := readBody(c, s.cfg.MaxBodyBytes, true)
	if err == nil && len(data) > 0 {
		if derr := jsonbody.Decode(data, &req, jsonbody.Strict); derr != nil {
			err = jsonError(derr, data, jsonbody.Where{})
		}
	}
	if err != nil {
		fail(c, err)
		return
	}
	name := c.Param("signal")
	if err := checkDurableName("signal", name); err != nil {
		fail(c, err)
		return
	}
	id := c.Param("id")
	q, ok := s.jobQueueOf(c, id)
	if !ok {
		return
	}
	s.sendSignal(c, queue.Signal{Queue: q, ID: id, Name: name, Value: req.Value, IdempotencyKey: req.IdempotencyKey})
}

// signalByKey handles POST /v1/signals.
func (s *Server) signalByKey(c *gin.Context) {
	var req keySignalRequest
	if err := s.decodeBody(c, &req); err != nil {
		fail(c, err)
		return
	}
	if !job.ValidQueue(req.Queue) {
		fail(c, invalid("queue", "queue: required, [a-z0-9_-]{1,64}"))
		return
	}
	for _, f := range []struct{ field, v string }{{"key", req.Key}, {"name", req.Name}} {
		if err := checkDurableName(f.field, f.v); err != nil {
			fail(c, err)
			return
		}
	}
	s.sendSignal(c, queue.Signal{Queue: req.Queue, Key: req.Key, Name: req.Name, Value: req.Value, IdempotencyKey: req.IdempotencyKey})
}

func (s *Server) sendSignal(c *gin.Context, sig queue.Signal) {
	if len(sig.Value) > queue.MaxStepBytes {
		fail(c, invalid("value", "value: at most %d bytes", queue.MaxStepBytes))
		return
	}
	if len(sig.IdempotencyKey) > 200 {
		fail(c, invalid("idempotency_key", "idempotency_key: at most 200 characters"))
		return
	}
	sig.Value = compactJSON(sig.Value)
	st, id, err := s.q.SendSignal(c.Request.Context(), sig)
	if err != nil {
		fail(c, err)
		return
	}
	switch st {
	case queue.SignalDelivered, queue.SignalDuplicate:
		c.JSON(http.StatusOK, signalResult{Status: string(st), JobID: id})
	case queue.SignalPending:
		c.JSON(http.StatusAccepted, signalResult{Status: string(st)})
	case queue.SignalMissing:
		fail(c, &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "job not found"})
	case queue.SignalConflict:
		fail(c, &apiError{Status: http.StatusConflict, Code: codeConflict, Message: "the job has a signal of this name already (a job takes one signal of each name; send it again with the first idempotency_key to get its answer)"})
	case queue.SignalFinished:
		fail(c, &apiError{Status: http.StatusConflict, Code: codeConflict, Message: "the job has ended: it takes no more signals"})
	default: // SignalFull
		fail(c, &apiError{Status: http.StatusConflict, Code: codeConflict, Message: "too many signals are kept for keys no job chose yet in this queue"})
	}
}

// durableRoutes are the routes of durable jobs.
func (s *Server) durableRoutes() []route {
	lost := "409 when the lease is lost (reclaimed after expiry, cancelled, finished): the worker must stop the job; nothing changed."
	return []route{
		{http.MethodPost, "/v1/jobs/:id/steps", s.recordStep, operation{
			ID: "recordStep", Tag: "workers", Summary: "Record a step of a durable job (HTTP worker)", Scope: scopeWork,
			Description: "Records the step at seq under the lease's token, once: a step recorded before is answered as it was recorded (a wait's record is replaced by its end). " +
				"The answer is the step as it now stands, and for a wait, the signal when one arrived. Read what is recorded with GET /v1/jobs/{id} (durable). docs/durable.md. " +
				"400 when the job recorded 1,000 steps or its steps would hold more than 4 MiB together. " + lost,
			Body: stepRequest{}, Status: http.StatusOK, Response: stepResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/park", s.parkJob, operation{
			ID: "parkJob", Tag: "workers", Summary: "Park a durable job until a time or a signal (HTTP worker)", Scope: scopeWork,
			Description: "Ends the attempt without spending it (as a snooze) and makes the job due after delay_seconds, or as soon as signal arrives (at once when it arrived meanwhile), with a parked event. " + lost,
			Body:        parkRequest{}, Status: http.StatusOK, Response: outcomeResult{}, Errors: []int{400, 403, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/signals/:signal", s.signalJob, operation{
			ID: "signalJob", Audit: "job.signal", Tag: "jobs", Summary: "Send a signal to a durable job", Scope: scopeSubmit,
			Description: "Keeps the value on the job for its WaitSignal; a job parked waiting for it runs at once. A signal sent before the wait began is kept. A job takes one signal of each name: " +
				"sent again with the same idempotency_key it answers 200 duplicate, otherwise 409. 409 too for a job that ended.",
			Body: signalRequest{}, BodyOptional: true, Status: http.StatusOK, Response: signalResult{}, Errors: []int{400, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/signals", s.signalByKey, operation{
			ID: "signalByKey", Audit: "signal.send", Tag: "jobs", Summary: "Send a signal to the job of a queue that chose a key", Scope: scopeSubmit,
			Description: "As POST /v1/jobs/{id}/signals/{signal}, to the job of the queue that waits (or waited) with this key (an order number, say). 202 pending when no job chose the key yet: the signal is kept for the one that will.",
			Body:        keySignalRequest{}, Status: http.StatusOK, Response: signalResult{}, Also: map[int]string{http.StatusAccepted: "No job chose the key yet; the signal is kept for the one that will."},
			Errors: []int{400, 409, 413, 415, 503},
		}},
	}
}
