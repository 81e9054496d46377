package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/sundialhq/sundial/pkg/queue"
)

// TestLimitsAPI sets, reads, changes and deletes a limit over HTTP and
// checks that a claim obeys it at once and GET /v1/queues shows it.
func TestLimitsAPI(t *testing.T) {
	a := start(t)
	ctx := context.Background()
	var st queue.LimitStatus
	a.do("PUT", "/v1/queues/mail/limits/smtp", map[string]any{"types": []string{"email.send"}, "concurrency": 1}).decode(t, http.StatusCreated, &st)
	if st.Name != "smtp" || st.Concurrency != 1 || st.Types[0] != "email.send" {
		t.Fatalf("%+v", st)
	}
	for range 3 {
		a.submit(t, map[string]any{"type": "email.send", "queue": "mail", "group": "tenant-1"})
	}
	if ls, err := a.q.Claim(ctx, "mail", 10, "w"); err != nil || len(ls) != 1 || ls[0].Job.Group != "tenant-1" {
		t.Fatalf("claim under the limit: %v %v", ls, err)
	}
	var one queue.QueueStats
	a.do("GET", "/v1/queues/mail", nil).decode(t, http.StatusOK, &one)
	if one.Throttled != 2 || len(one.Limits) != 1 || one.Limits[0].Active != 1 || one.Limits[0].Throttled != 2 {
		t.Fatalf("queue stats: %+v", one)
	}
	// A limit read with GET can be written back; a raise lets jobs go.
	var got queue.LimitStatus
	a.do("GET", "/v1/queues/mail/limits/smtp", nil).decode(t, http.StatusOK, &got)
	body := map[string]any{"name": "smtp", "types": got.Types, "concurrency": 3, "active": got.Active, "throttled": got.Throttled}
	a.do("PUT", "/v1/queues/mail/limits/smtp", body).decode(t, http.StatusOK, &st)
	if st.Concurrency != 3 || st.Throttled != 0 {
		t.Fatalf("after the raise: %+v", st)
	}
	var list limitList
	a.do("GET", "/v1/queues/mail/limits", nil).decode(t, http.StatusOK, &list)
	if len(list.Limits) != 1 || list.Limits[0].Name != "smtp" {
		t.Fatalf("%+v", list)
	}
	// Bad input changes nothing and names the field.
	a.do("PUT", "/v1/queues/mail/limits/smtp", map[string]any{"concurrency": 0}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "concurrency")
	a.do("PUT", "/v1/queues/mail/limits/smtp", map[string]any{"rate": map[string]any{"limit": 5, "period_seconds": 0}}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "rate.period_seconds")
	a.do("PUT", "/v1/queues/mail/limits/smtp", map[string]any{"concurrency": 2, "burst": 1}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "burst")
	a.do("PUT", "/v1/queues/mail/limits/smtp", map[string]any{"name": "other", "concurrency": 2}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "name")
	a.do("PUT", "/v1/queues/mail/limits/bad%7Cname", map[string]any{"concurrency": 2}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "name")
	a.do("GET", "/v1/queues/mail/limits/smtp", nil).decode(t, http.StatusOK, &got)
	if got.Concurrency != 3 {
		t.Fatalf("a refused PUT changed the limit: %+v", got)
	}
	a.do("DELETE", "/v1/queues/mail/limits/smtp", nil).decode(t, http.StatusNoContent, nil)
	a.do("DELETE", "/v1/queues/mail/limits/smtp", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("GET", "/v1/queues/mail/limits/smtp", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("GET", "/v1/queues/nope/limits", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("PUT", "/v1/queues/Bad/limits/x", map[string]any{"concurrency": 1}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "queue")
	// The job's group is validated on submit.
	a.do("POST", "/v1/jobs", map[string]any{"type": "t", "group": "a b"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "group")
	a.do("POST", "/v1/jobs", map[string]any{"type": "t", "traceparent": "00-0-0-0"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "traceparent")
}
