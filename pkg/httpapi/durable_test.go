package httpapi

import (
	"net/http"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
)

// An HTTP worker's durable job: a step recorded once under its token, a
// wait for a signal that parks the job, a signal that wakes it, and a
// next attempt that reads everything back from GET /v1/jobs/{id}.
func TestHTTPDurableStepsAndSignals(t *testing.T) {
	a := start(t)
	sub := a.submit(t, map[string]any{"type": "order"})
	got := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1"})
	tok := got[0].Lease.Token
	path := "/v1/jobs/" + sub.ID
	var st stepResult
	a.do("POST", path+"/steps", map[string]any{"token": tok, "seq": 1, "name": "charge", "status": "ok", "result": map[string]any{"id": "ch_1"}}).decode(t, http.StatusOK, &st)
	if st.Step.Status != job.StepOK || string(st.Step.Result) != `{"id":"ch_1"}` {
		t.Fatalf("recorded %+v", st)
	}
	// The same step again (a retry after a lost answer, or a second run):
	// the first record stands.
	a.do("POST", path+"/steps", map[string]any{"token": tok, "seq": 1, "name": "charge", "status": "ok", "result": "other"}).decode(t, http.StatusOK, &st)
	if string(st.Step.Result) != `{"id":"ch_1"}` {
		t.Fatalf("a step recorded twice: %+v", st)
	}
	// Bad input changes nothing.
	a.do("POST", path+"/steps", map[string]any{"token": tok, "seq": 0, "name": "x", "status": "ok"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "seq")
	a.do("POST", path+"/steps", map[string]any{"token": tok, "seq": 2, "name": "x", "status": "maybe"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "status")
	a.do("POST", path+"/steps", map[string]any{"token": tok + "9", "seq": 2, "name": "x", "status": "ok"}).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", path+"/steps", map[string]any{"token": tok, "seq": 1001, "name": "x", "status": "ok"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "seq")
	// The wait begins; no signal yet, so the worker parks the job.
	a.do("POST", path+"/steps", map[string]any{"token": tok, "seq": 2, "name": "signal:shipped", "status": "wait", "signal": "shipped"}).decode(t, http.StatusOK, &st)
	if st.Signal != nil || st.Step.Status != job.StepWait {
		t.Fatalf("wait: %+v", st)
	}
	var out outcomeResult
	a.do("POST", path+"/park", map[string]any{"token": tok, "delay_seconds": 3600, "signal": "shipped"}).decode(t, http.StatusOK, &out)
	if out.State != "scheduled" {
		t.Fatalf("park = %+v", out)
	}
	var j job.Job
	a.do("GET", path, nil).decode(t, http.StatusOK, &j)
	if j.HeldBack == nil || j.HeldBack.Reason != job.HeldSignal || j.Durable == nil || j.Durable.Awaiting == nil || j.Durable.Awaiting.Signal != "shipped" {
		t.Fatalf("parked job: %+v %+v", j.HeldBack, j.Durable)
	}
	var sr signalResult
	a.do("POST", path+"/signals/shipped", map[string]any{"value": map[string]any{"carrier": "ups"}, "idempotency_key": "s-1"}).decode(t, http.StatusOK, &sr)
	if sr.Status != "delivered" || sr.JobID != sub.ID {
		t.Fatalf("signal = %+v", sr)
	}
	a.do("POST", path+"/signals/shipped", map[string]any{"value": map[string]any{"carrier": "ups"}, "idempotency_key": "s-1"}).decode(t, http.StatusOK, &sr)
	if sr.Status != "duplicate" {
		t.Fatalf("the same signal again = %+v", sr)
	}
	a.do("POST", path+"/signals/shipped", map[string]any{"value": 2}).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", "/v1/jobs/nope/signals/shipped", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	// Woken: queued at once, claimed again; the new attempt reads the
	// steps and the signal back.
	again := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1"})
	if len(again) != 1 || again[0].Job.ID != sub.ID {
		t.Fatalf("the signalled job was not queued: %+v", again)
	}
	a.do("GET", path, nil).decode(t, http.StatusOK, &j)
	if len(j.Durable.Steps) != 2 || len(j.Durable.Signals) != 1 || string(j.Durable.Signals[0].Value) != `{"carrier":"ups"}` {
		t.Fatalf("durable = %+v", j.Durable)
	}
	// By key: kept while no job chose the key.
	a.do("POST", "/v1/signals", map[string]any{"queue": "default", "key": "order-9", "name": "paid"}).decode(t, http.StatusAccepted, &sr)
	if sr.Status != "pending" {
		t.Fatalf("signal by key = %+v", sr)
	}
	a.do("POST", "/v1/signals", map[string]any{"queue": "Bad!", "key": "k", "name": "n"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "queue")
}
