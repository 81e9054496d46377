package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestWebhookPolicy runs sundial.http jobs, submitted over the API, on two
// worker processes: one with the default webhook policy, one started with
// SUNDIAL_HTTP_JOB_ALLOW=127.0.0.1. The first refuses a loopback receiver
// (by address and by a name resolving to it) without retry and without
// sending it anything; the second reaches it, and keeps the response body
// in the result only when the job asks.
func TestWebhookPolicy(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal answer")
	}))
	t.Cleanup(hook.Close)
	port := hook.URL[strings.LastIndex(hook.URL, ":")+1:]

	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	env := serviceEnv(srv, "SUNDIAL_HISTORY=off", "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_API_KEYS=producer:submit")
	proctest.Start(t, proctest.Binary(t, "api"), env...)
	proctest.Start(t, proctest.Binary(t, "worker"), append(env, "SUNDIAL_QUEUES=webhooks-default", "SUNDIAL_WORKER_ID=default-policy")...)
	proctest.Start(t, proctest.Binary(t, "worker"), append(env, "SUNDIAL_QUEUES=webhooks-allowed", "SUNDIAL_WORKER_ID=loopback-allowed", "SUNDIAL_HTTP_JOB_ALLOW=127.0.0.1")...)
	base := "http://" + addr
	queuetest.Eventually(t, 30*time.Second, "the API", func() bool { return proctest.Ready(http.DefaultClient, base) })

	api := &http.Client{Timeout: 10 * time.Second}
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer producer")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := api.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(res.Body)
		return res.StatusCode, out.Bytes()
	}
	submit := func(queueName string, payload map[string]any) string {
		t.Helper()
		status, b := call("POST", "/v1/jobs", map[string]any{"type": "sundial.http", "queue": queueName, "payload": payload,
			"max_attempts": 3, "backoff": map[string]any{"base_seconds": 0, "max_seconds": 0}})
		var j job.Job
		if status != http.StatusCreated || json.Unmarshal(b, &j) != nil {
			t.Fatalf("submit: %d %s", status, b)
		}
		return j.ID
	}
	q := queue.New(srv.Client(), queue.Options{})
	// final waits for job id to end and returns it as the API shows it.
	final := func(id string) job.Job {
		t.Helper()
		queuetest.Eventually(t, 30*time.Second, "job "+id+" to end", func() bool {
			j, err := q.Get(context.Background(), id)
			return err == nil && (j.State == job.Succeeded || j.State == job.Dead)
		})
		status, b := call("GET", "/v1/jobs/"+id, nil)
		var j job.Job
		if status != http.StatusOK || json.Unmarshal(b, &j) != nil {
			t.Fatalf("GET job %s: %d %s", id, status, b)
		}
		return j
	}

	// The default policy: refused, once, and the receiver got nothing.
	for _, c := range []struct{ url, want string }{
		{hook.URL + "/hook", "sundial.http: 127.0.0.1:" + port + " is a loopback address, refused by the webhook policy (allow it with SUNDIAL_HTTP_JOB_ALLOW)"},
		{"http://localhost:" + port + "/hook", "sundial.http: localhost:" + port + " resolves to "},
	} {
		j := final(submit("webhooks-default", map[string]any{"url": c.url, "body": map[string]any{"event": "x"}}))
		if j.State != job.Dead || j.Attempt != 1 {
			t.Errorf("%s: %s after %d attempts; want dead after 1 (no retry)", c.url, j.State, j.Attempt)
		}
		if !strings.Contains(j.LastError, c.want) || !strings.Contains(j.LastError, "refused by the webhook policy") {
			t.Errorf("%s: last_error %q, want %q", c.url, j.LastError, c.want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests from a worker with the default policy", n)
	}

	// Allowed: reached, with the body only when asked for.
	j := final(submit("webhooks-allowed", map[string]any{"url": hook.URL + "/hook"}))
	if j.State != job.Succeeded || compact(j.Result) != `{"status":200}` {
		t.Errorf("allowed: %s, result %s; want succeeded with the status only", j.State, j.Result)
	}
	j = final(submit("webhooks-allowed", map[string]any{"url": hook.URL + "/hook", "method": "GET", "keep_body": true}))
	if j.State != job.Succeeded || compact(j.Result) != `{"body":"internal answer","status":200}` {
		t.Errorf("keep_body: %s, result %s; want succeeded with the body", j.State, j.Result)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the receiver got %d requests, want 2", n)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
