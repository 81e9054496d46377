package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestUnhandledTypeWaitsThenEndsDead, with real processes (API, a Go
// worker that handles only the built-in types, a poller with
// SUNDIAL_UNHANDLED_TIMEOUT=3s): a job of a type nobody handles does not
// block the job behind it, says why it waits (held_back no_handler, the
// queue's unhandled count), is taken by an HTTP worker that handles its
// type when one comes, and otherwise ends dead with `no handler for type
// "X"` no sooner than the timeout and within 3 s after it.
func TestUnhandledTypeWaitsThenEndsDead(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	env := serviceEnv(srv, "SUNDIAL_HISTORY=off", "SUNDIAL_UNHANDLED_TIMEOUT=3s")
	startProc(t, binary(t, "api"), append(env, "SUNDIAL_HTTP_ADDR="+addr)...)
	startProc(t, binary(t, "worker"), env...)
	startProc(t, binary(t, "poller"), env...)
	base := "http://" + addr
	hc := &http.Client{Timeout: 5 * time.Second}
	call := func(method, path string, body any, out any) int {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return 0
		}
		defer res.Body.Close()
		if out != nil {
			_ = json.NewDecoder(res.Body).Decode(out)
		}
		return res.StatusCode
	}
	type heldBack struct{ Reason, Message string }
	type jobView struct {
		ID        string    `json:"id"`
		State     string    `json:"state"`
		LastError string    `json:"last_error"`
		HeldBack  *heldBack `json:"held_back"`
	}
	queuetest.Eventually(t, 20*time.Second, "the API answers", func() bool {
		return call(http.MethodGet, "/v1/queues", nil, nil) == http.StatusOK
	})
	submit := func(typ, prio string) jobView {
		t.Helper()
		var j jobView
		if code := call(http.MethodPost, "/v1/jobs", map[string]any{"type": typ, "priority": prio, "payload": map[string]any{}}, &j); code != http.StatusCreated {
			t.Fatalf("submit %s: %d", typ, code)
		}
		return j
	}
	get := func(id string) jobView {
		var j jobView
		call(http.MethodGet, "/v1/jobs/"+id, nil, &j)
		return j
	}

	orphan := submit("report.build", "high")
	submittedAt := time.Now()
	behind := submit("sundial.echo", "normal")
	queuetest.Eventually(t, 20*time.Second, "the job behind the unhandled one succeeds", func() bool {
		return get(behind.ID).State == "succeeded"
	})
	queuetest.Eventually(t, 10*time.Second, "the unhandled job says why it waits", func() bool {
		j := get(orphan.ID)
		var q struct {
			Unhandled int `json:"unhandled"`
		}
		call(http.MethodGet, "/v1/queues/default", nil, &q)
		return j.State == "queued" && j.HeldBack != nil && j.HeldBack.Reason == "no_handler" && q.Unhandled == 1
	})

	queuetest.Eventually(t, timeout+15*time.Second, "the unhandled job ends dead", func() bool {
		return get(orphan.ID).State == "dead"
	})
	deadAfter := time.Since(submittedAt)
	if j := get(orphan.ID); j.LastError != `no handler for type "report.build"` {
		t.Fatalf("last_error %q", j.LastError)
	}
	// The poller looks every quarter of the timeout (at most 5 s) in a pass
	// of at most a second: 3 s + 0.75 s + 1 s, and scheduling slack.
	if deadAfter < timeout || deadAfter > timeout+3*time.Second {
		t.Fatalf("dead %v after its submit, want between %v and %v", deadAfter, timeout, timeout+3*time.Second)
	}
	// A worker that handles the type takes a parked job.
	waiting := submit("report.build", "low")
	queuetest.Eventually(t, 10*time.Second, "the second job is parked too", func() bool {
		j := get(waiting.ID)
		return j.HeldBack != nil && j.HeldBack.Reason == "no_handler"
	})

	var claim struct {
		Jobs []struct {
			Job jobView `json:"job"`
		} `json:"jobs"`
	}
	// An HTTP worker that handles the type claims a parked one.
	if code := call(http.MethodPost, "/v1/queues/default/claim", map[string]any{"worker_id": "reports-1", "types": []string{"report.build"}, "max": 5}, &claim); code != http.StatusOK ||
		len(claim.Jobs) != 1 || claim.Jobs[0].Job.ID != waiting.ID {
		t.Fatalf("claim by a handler of report.build: %d %+v, want %s", code, claim, waiting.ID)
	}
	t.Logf("unhandled job ended dead %v after its submit (timeout %v)", deadAfter.Round(time.Millisecond), timeout)
}
