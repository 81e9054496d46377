package openapicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/sundialhq/sundial/pkg/httpapi"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func TestMain(m *testing.M) {
	srv, stop, err := queuetest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisServer = srv
	code := m.Run()
	stop()
	os.Exit(code)
}

// redisServer is the private redis-server the tests' APIs run over.
var redisServer *queuetest.Server

// key is the API key the checked API accepts: the document requires a
// bearer key on /v1 routes.
const key = "openapi-check-key"

// checkedAPI is a running API and a validator of the document it serves.
type checkedAPI struct {
	t    *testing.T
	base string
	hc   *http.Client
	q    *queue.Client
	v    validator.Validator
}

// start runs the API over a real Redis (rate limiting on, so that its
// headers are checked too) and loads the document it serves into the
// validator, failing the test when the validator finds the document
// invalid.
func start(t *testing.T) *checkedAPI {
	t.Helper()
	q := queue.New(redisServer.Client(), queue.Options{})
	s, err := httpapi.New(httpapi.Config{Queue: q, APIKeys: []string{key}, RateLimit: "10000-S",
		ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		tr.CloseIdleConnections()
	})
	a := &checkedAPI{t: t, base: "http://" + ln.Addr().String(), hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, q: q}

	req, _ := http.NewRequest("GET", a.base+"/v1/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	served, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %v", res.StatusCode, err)
	}
	doc, err := libopenapi.NewDocument(served)
	if err != nil {
		t.Fatalf("the served document does not parse: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("the validator does not take the served document: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the served document is not valid OpenAPI 3.1:\n%s", describe(verrs))
	}
	a.v = v
	return a
}

// describe lists validation errors, one line each, with their schema
// failures.
func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %s %s: %s: %s\n", e.RequestMethod, e.RequestPath, e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "    at %s (%s): %s\n", f.FieldPath, f.KeywordLocation, f.Reason)
		}
	}
	return b.String()
}

// exchange is one request and its answer, read in full.
type exchange struct {
	req  *http.Request
	body []byte // the request's
	res  *http.Response
	data []byte // the answer's
}

// rewound returns the exchange's request and answer with their bodies
// readable again, for the validator.
func (x exchange) rewound() (*http.Request, *http.Response) {
	req := x.req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(x.body))
	res := *x.res
	res.Body = io.NopCloser(bytes.NewReader(x.data))
	res.Request = req
	return req, &res
}

// send makes one request with the API key (body as JSON when not empty)
// and checks the status.
func (a *checkedAPI) send(method, path, body string, want int) exchange {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if res.StatusCode != want {
		a.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, data, want)
	}
	return exchange{req: req, body: []byte(body), res: res, data: data}
}

// call makes a request the document allows and checks that the request
// and the answer both match it; it returns the answer's body.
func (a *checkedAPI) call(method, path, body string, want int) []byte {
	a.t.Helper()
	x := a.send(method, path, body, want)
	if ok, errs := a.v.ValidateHttpRequestResponse(x.rewound()); !ok {
		a.t.Errorf("%s %s → %d does not match the document:\n%s  answer: %.300s", method, path, want, describe(errs), x.data)
	}
	return x.data
}

// refused makes a request that breaks the document on purpose: the API
// refuses it with want, the validator must find the request invalid too
// (the document states the rule the API enforces), and the error answer
// must match the document.
func (a *checkedAPI) refused(method, path, body string, want int) {
	a.t.Helper()
	x := a.send(method, path, body, want)
	if ok, _ := a.v.ValidateHttpRequest(func() *http.Request { r, _ := x.rewound(); return r }()); ok {
		a.t.Errorf("%s %s %s: the API refuses it (%d) but the document allows it", method, path, body, want)
	}
	if ok, errs := a.v.ValidateHttpResponse(x.rewound()); !ok {
		a.t.Errorf("%s %s → %d: the error answer does not match the document:\n%s  answer: %.300s", method, path, want, describe(errs), x.data)
	}
}

// field reads one string member of a JSON object.
func field(t *testing.T, data []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	s, _ := m[name].(string)
	return s
}

// The served document is valid OpenAPI 3.1 to an independent validator,
// and a representative set of real exchanges, successes and errors, match
// it both ways.
func TestExchangesMatchTheDocument(t *testing.T) {
	a := start(t)
	queueName := queuetest.Name("oas")
	qp := "/v1/queues/" + queueName

	// Jobs: submit, an idempotent repeat, a batch, read, cancel, retry.
	submit := `{"type":"email.send","queue":"` + queueName + `","payload":{"to":"a@example.com"},"priority":"high","max_attempts":3,"idempotency_key":"k1"}`
	j := a.call("POST", "/v1/jobs", submit, http.StatusCreated)
	id := field(t, j, "id")
	a.call("POST", "/v1/jobs", submit, http.StatusOK)
	a.call("POST", "/v1/jobs/batch", `{"jobs":[{"type":"a","queue":"`+queueName+`"},{"type":"b","queue":"`+queueName+`","depends_on":["#0"],"delay_seconds":30}]}`, http.StatusCreated)
	a.call("GET", "/v1/jobs/"+id, "", http.StatusOK)
	a.call("GET", "/v1/jobs/01ARZ3NDEKTSV4RRFFQ69G5FAV", "", http.StatusNotFound)
	a.refused("POST", "/v1/jobs", `{"type":"a","priority":"urgent"}`, http.StatusBadRequest)
	a.refused("POST", "/v1/jobs", `{"queue":"`+queueName+`"}`, http.StatusBadRequest)
	a.refused("POST", "/v1/jobs/batch", `{"jobs":[]}`, http.StatusBadRequest)
	a.refused("POST", "/v1/jobs", `{"type":"a","delay_seconds":5,"run_at":"2030-01-01T00:00:00Z"}`, http.StatusBadRequest)
	c := a.call("POST", "/v1/jobs", `{"type":"c","queue":"`+queueName+`"}`, http.StatusCreated)
	cid := field(t, c, "id")
	a.call("POST", "/v1/jobs/"+cid+"/cancel", "", http.StatusOK)
	a.call("POST", "/v1/jobs/"+cid+"/cancel", "{}", http.StatusConflict)
	a.call("POST", "/v1/jobs/"+cid+"/retry", "", http.StatusOK)
	a.call("GET", "/v1/jobs", "", http.StatusServiceUnavailable) // no history store

	// Queues: counts, pause and resume, an unknown queue.
	a.call("GET", "/v1/queues", "", http.StatusOK)
	a.call("GET", qp, "", http.StatusOK)
	a.call("GET", "/v1/queues/"+queuetest.Name("none"), "", http.StatusNotFound)
	a.call("POST", qp+"/pause", "", http.StatusOK)
	a.call("POST", qp+"/resume", "{}", http.StatusOK)
	a.call("GET", "/v1/throughput?window=5m&queue="+queueName, "", http.StatusOK)
	a.refused("GET", "/v1/throughput?window=2h", "", http.StatusBadRequest)

	// The HTTP worker protocol: claim, heartbeat, complete; fail to dead.
	claim := a.call("POST", qp+"/claim", `{"worker_id":"oas-worker","max":2}`, http.StatusOK)
	var claimed struct {
		Jobs []struct {
			Job   struct{ ID string }
			Lease struct{ Token string }
		}
	}
	if err := json.Unmarshal(claim, &claimed); err != nil || len(claimed.Jobs) != 2 {
		t.Fatalf("claim: %s", claim)
	}
	first, second := claimed.Jobs[0], claimed.Jobs[1]
	a.call("POST", "/v1/jobs/"+first.Job.ID+"/heartbeat", `{"token":"`+first.Lease.Token+`","progress":50,"message":"half"}`, http.StatusOK)
	a.call("POST", "/v1/jobs/"+first.Job.ID+"/complete", `{"token":"`+first.Lease.Token+`","result":{"sent":true}}`, http.StatusOK)
	a.call("POST", "/v1/jobs/"+first.Job.ID+"/complete", `{"token":"`+first.Lease.Token+`"}`, http.StatusConflict)
	a.call("POST", "/v1/jobs/"+second.Job.ID+"/fail", `{"token":"`+second.Lease.Token+`","error":"boom","retry":false}`, http.StatusOK)
	a.call("POST", "/v1/claim", `{"worker_id":"oas-worker","queues":["`+queueName+`"],"types":["none"]}`, http.StatusOK)

	// Dead letters.
	a.call("GET", qp+"/dead?limit=10", "", http.StatusOK)
	a.call("POST", qp+"/dead/retry", `{"ids":["`+second.Job.ID+`"]}`, http.StatusOK)
	// A worker shutting down gives the retried job's lease back; again is a 409.
	claim = a.call("POST", qp+"/claim", `{"worker_id":"oas-worker"}`, http.StatusOK)
	if err := json.Unmarshal(claim, &claimed); err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %s", claim)
	}
	third := claimed.Jobs[0]
	a.call("POST", "/v1/jobs/"+third.Job.ID+"/release", `{"token":"`+third.Lease.Token+`","worker_id":"oas-worker"}`, http.StatusOK)
	a.call("POST", "/v1/jobs/"+third.Job.ID+"/release", `{"token":"`+third.Lease.Token+`"}`, http.StatusConflict)
	// Live jobs from Redis, and bulk actions by filter and by ids.
	a.call("GET", qp+"/jobs?state=queued&limit=5", "", http.StatusOK)
	a.call("GET", qp+"/jobs?state=dead&type=email.send&priority=normal", "", http.StatusOK)
	a.refused("GET", qp+"/jobs?state=succeeded", "", http.StatusBadRequest)
	a.call("POST", qp+"/jobs/bulk", `{"action":"retry","filter":{"state":"dead","error_contains":"boom","since":"2020-01-01T00:00:00Z"}}`, http.StatusOK)
	a.call("POST", qp+"/jobs/bulk", `{"action":"cancel","ids":["`+third.Job.ID+`"]}`, http.StatusOK)
	a.refused("POST", qp+"/jobs/bulk", `{"action":"retry"}`, http.StatusBadRequest)
	a.call("DELETE", qp+"/dead", "", http.StatusOK)

	// Limits: create, replace, read back and write back, list, delete.
	lp := qp + "/limits/smtp"
	a.call("PUT", lp, `{"concurrency":5,"types":["email.send"]}`, http.StatusCreated)
	l := a.call("PUT", lp, `{"name":"smtp","concurrency":3,"rate":{"limit":10,"period_seconds":60},"key":"tenant"}`, http.StatusOK)
	a.call("PUT", lp, string(l), http.StatusOK) // a limit read can be written back
	a.call("GET", lp, "", http.StatusOK)
	a.call("GET", qp+"/limits", "", http.StatusOK)
	a.refused("PUT", lp, `{"rate":{"limit":0,"period_seconds":60}}`, http.StatusBadRequest)
	a.refused("PUT", qp+"/limits/bad%20name", `{"concurrency":1}`, http.StatusBadRequest)
	a.refused("PUT", lp, `{"key":"tenant"}`, http.StatusBadRequest)
	a.call("DELETE", lp, "", http.StatusNoContent)
	a.call("GET", lp, "", http.StatusNotFound)

	// Schedules: create, replace, read, list, patch, trigger, preview, delete.
	sid := queuetest.Name("nightly")
	sp := "/v1/schedules/" + sid
	a.call("PUT", sp, `{"cron":"0 3 * * *","timezone":"Europe/Paris","job":{"type":"report","queue":"`+queueName+`"}}`, http.StatusCreated)
	sch := a.call("PUT", sp, `{"every_seconds":3600,"job":{"type":"report","queue":"`+queueName+`"}}`, http.StatusOK)
	a.call("PUT", sp, string(sch), http.StatusOK) // a schedule read can be written back
	a.call("GET", sp, "", http.StatusOK)
	a.call("GET", "/v1/schedules?queue="+queueName, "", http.StatusOK)
	a.call("PATCH", sp, `{"enabled":false}`, http.StatusOK)
	a.call("POST", sp+"/trigger", "", http.StatusCreated)
	a.call("POST", "/v1/schedules/preview", `{"cron":"*/5 * * * *"}`, http.StatusOK)
	a.refused("PUT", sp, `{"cron":"0 3 * * *","every_seconds":60,"job":{"type":"report"}}`, http.StatusBadRequest)
	a.call("DELETE", sp, "", http.StatusNoContent)
	a.call("GET", sp, "", http.StatusNotFound)

	// Batches: create, read, page members and results, add to an open one
	// and seal it, cancel (the callback then fires), retry, refusals.
	bid := queuetest.Name("batch")
	bp := "/v1/batches/" + bid
	a.call("POST", "/v1/batches", `{"id":"`+bid+`","jobs":[{"type":"row","queue":"`+queueName+`"},{"type":"row","queue":"`+queueName+`","payload":{"n":2}}],`+
		`"on_success":{"type":"publish","queue":"`+queueName+`","payload":{"to":"ops"}},"on_complete":{"type":"report","queue":"`+queueName+`"}}`, http.StatusCreated)
	a.call("GET", bp, "", http.StatusOK)
	a.call("GET", bp+"/jobs?limit=1", "", http.StatusOK)
	a.call("GET", bp+"/results", "", http.StatusOK)
	a.call("POST", bp+"/cancel", "", http.StatusOK)
	if _, err := a.q.RelayBatchEnds(context.Background(), queueName, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := a.q.FireBatchCallbacks(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	a.call("GET", bp, "", http.StatusOK) // cancelled_at, a fired callback's job_id
	a.call("GET", bp+"/results?limit=5", "", http.StatusOK)
	a.call("POST", bp+"/retry", "", http.StatusOK)
	open := a.call("POST", "/v1/batches", `{"open":true}`, http.StatusCreated)
	var opened struct{ Batch struct{ ID string } }
	if err := json.Unmarshal(open, &opened); err != nil {
		t.Fatal(err)
	}
	a.call("POST", "/v1/batches/"+opened.Batch.ID+"/jobs", `{"jobs":[{"type":"row","queue":"`+queueName+`"}],"seal":true}`, http.StatusOK)
	a.call("POST", "/v1/batches/"+opened.Batch.ID+"/jobs", `{"jobs":[{"type":"row"}]}`, http.StatusConflict) // sealed
	a.call("POST", "/v1/batches", `{"jobs":[{"type":"row","depends_on":["x"]}]}`, http.StatusBadRequest)
	a.call("GET", "/v1/batches/nope", "", http.StatusNotFound)
	a.refused("POST", "/v1/batches", `{"jobs":[{"type":"row"}],"opne":true}`, http.StatusBadRequest)

	// Workers: a Go worker's registry entry and the Prometheus targets.
	w := queue.WorkerInfo{ID: queuetest.Name("w"), Hostname: "host", PID: 1, Queues: []string{queueName}, Concurrency: 4,
		ActiveJobs: []string{}, StartedAt: time.Now(), MetricsURL: "http://127.0.0.1:9092/metrics"}
	if err := a.q.Heartbeat(context.Background(), w, time.Minute); err != nil {
		t.Fatal(err)
	}
	a.call("GET", "/v1/workers", "", http.StatusOK)
	a.call("GET", "/v1/workers/metrics-targets", "", http.StatusOK)

	// Operations.
	a.call("GET", "/v1/storage", "", http.StatusOK)
	a.call("GET", "/v1/history/backlog", "", http.StatusOK)
	a.call("GET", "/healthz", "", http.StatusOK)
	a.call("GET", "/readyz", "", http.StatusOK)

	// Authentication: no key, a wrong key.
	req, _ := http.NewRequest("GET", a.base+"/v1/queues", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(res.Body)
	res.Body.Close()
	x := exchange{req: req, res: res, data: data}
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d %s", res.StatusCode, data)
	}
	if ok, errs := a.v.ValidateHttpResponse(x.rewound()); !ok {
		t.Errorf("401 does not match the document:\n%s", describe(errs))
	}
}
