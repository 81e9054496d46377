package httpapi

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// runBatchQueues claims and completes every job of queues (those in dead
// end dead), then does the poller's batch work: relay, fire.
func (a *testAPI) runBatchQueues(t *testing.T, dead map[string]bool, queues ...string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queues {
		ls, err := a.q.Claim(ctx, q, 100, "w")
		if err != nil {
			t.Fatal(err)
		}
		var out []queue.Outcome
		for _, l := range ls {
			kind := queue.OutcomeSucceeded
			if dead[l.Job.ID] {
				kind = queue.OutcomeDead
			}
			out = append(out, queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: kind, WorkerID: "w", Error: "boom", Result: []byte(`"r-` + l.Job.ID + `"`)})
		}
		if len(out) > 0 {
			if _, err := a.q.Complete(ctx, q, out); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.q.RelayBatchEnds(ctx, q, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.q.FireBatchCallbacks(ctx, 100); err != nil {
		t.Fatal(err)
	}
}

// TestBatchRoutes: a batch submitted over REST, read back (counts, members
// paged, results), its callbacks fired once; a member dies, the batch is
// retried whole and on_success fires.
func TestBatchRoutes(t *testing.T) {
	a := start(t)
	body := map[string]any{"id": "import-1", "jobs": []map[string]any{
		{"type": "row", "queue": "ba", "payload": 1}, {"type": "row", "queue": "bb", "payload": 2}, {"type": "row", "queue": "ba", "payload": 3},
	}, "on_success": map[string]any{"type": "good", "queue": "bcb", "payload": map[string]any{"to": "ops"}},
		"on_complete": map[string]any{"type": "done", "queue": "bcb"}}
	var out batchSubmitted
	res := a.do("POST", "/v1/batches", body)
	res.decode(t, http.StatusCreated, &out)
	if res.header.Get("Location") != "/v1/batches/import-1" || out.Batch.ID != "import-1" || out.Batch.Total != 3 || !out.Batch.Sealed ||
		len(out.JobIDs) != 3 || out.Batch.Counts.Pending != 3 || out.Batch.OnSuccess.State != "pending" {
		t.Fatalf("answer %+v %+v", out, out.Batch)
	}
	for _, id := range out.JobIDs {
		var j job.Job
		a.do("GET", "/v1/jobs/"+id, nil).decode(t, http.StatusOK, &j)
		if j.Batch != "import-1" {
			t.Fatalf("member %+v", j)
		}
	}
	// Members, paged, in the order sent.
	var page searchResult
	a.do("GET", "/v1/batches/import-1/jobs?limit=2", nil).decode(t, http.StatusOK, &page)
	if len(page.Jobs) != 2 || page.NextCursor == "" || page.Jobs[0].ID != out.JobIDs[0] || page.Jobs[1].Queue != "bb" {
		t.Fatalf("page 1 %+v", page)
	}
	a.do("GET", "/v1/batches/import-1/jobs?limit=2&cursor="+page.NextCursor, nil).decode(t, http.StatusOK, &page)
	if len(page.Jobs) != 1 || page.NextCursor != "" || page.Jobs[0].ID != out.JobIDs[2] {
		t.Fatalf("page 2 %+v", page)
	}
	a.runBatchQueues(t, map[string]bool{out.JobIDs[1]: true}, "ba", "bb")
	var info queue.BatchInfo
	a.do("GET", "/v1/batches/import-1", nil).decode(t, http.StatusOK, &info)
	if info.Counts != (queue.BatchCounts{Succeeded: 2, Dead: 1}) || info.OnSuccess.State != "pending" || info.OnComplete.State != "fired" || info.OnComplete.JobID == "" {
		t.Fatalf("after a death: %+v %+v %+v", info.Counts, info.OnSuccess, info.OnComplete)
	}
	var results batchResults
	a.do("GET", "/v1/batches/import-1/results", nil).decode(t, http.StatusOK, &results)
	if len(results.Results) != 3 || results.Results[0].State != job.Succeeded || string(results.Results[0].Result) != `"r-`+out.JobIDs[0]+`"` ||
		results.Results[1].State != job.Dead || results.Results[1].LastError != "boom" {
		t.Fatalf("results %+v", results)
	}
	var retried retriedCount
	a.do("POST", "/v1/batches/import-1/retry", nil).decode(t, http.StatusOK, &retried)
	if retried.Retried != 1 {
		t.Fatalf("retried %d", retried.Retried)
	}
	a.runBatchQueues(t, nil, "bb")
	a.do("GET", "/v1/batches/import-1", nil).decode(t, http.StatusOK, &info)
	if info.Counts != (queue.BatchCounts{Succeeded: 3}) || info.OnSuccess.State != "fired" {
		t.Fatalf("after the retry: %+v %+v", info.Counts, info.OnSuccess)
	}
	var cb job.Job
	a.do("GET", "/v1/jobs/"+info.OnSuccess.JobID, nil).decode(t, http.StatusOK, &cb)
	if cb.Type != "good" || cb.Batch != "import-1" || string(cb.Payload) != `{"batch":"import-1","to":"ops"}` {
		t.Fatalf("on_success job %+v", cb)
	}
	// A second batch of that id is refused.
	a.do("POST", "/v1/batches", body).wantError(t, http.StatusConflict, codeConflict, "")
}

// TestBatchRoutesOpenAddCancel: an open batch takes more jobs, is sealed
// by an add, then refuses more; cancel ends its members whole and fires
// on_complete.
func TestBatchRoutesOpenAddCancel(t *testing.T) {
	a := start(t)
	var out batchSubmitted
	a.do("POST", "/v1/batches", map[string]any{"open": true, "on_complete": map[string]any{"type": "done", "queue": "bcb"}}).
		decode(t, http.StatusCreated, &out)
	id := out.Batch.ID
	if id == "" || out.Batch.Sealed || out.Batch.Total != 0 || len(out.JobIDs) != 0 {
		t.Fatalf("open batch %+v", out.Batch)
	}
	a.do("POST", "/v1/batches/"+id+"/jobs", map[string]any{"jobs": []map[string]any{{"type": "row", "queue": "ba"}, {"type": "row", "queue": "bb"}}}).
		decode(t, http.StatusOK, &out)
	if out.Batch.Total != 2 || out.Batch.Sealed || len(out.JobIDs) != 2 {
		t.Fatalf("after add %+v", out.Batch)
	}
	a.do("POST", "/v1/batches/"+id+"/jobs", map[string]any{"jobs": []map[string]any{{"type": "row", "queue": "ba"}}, "seal": true}).
		decode(t, http.StatusOK, &out)
	if out.Batch.Total != 3 || !out.Batch.Sealed {
		t.Fatalf("after sealing %+v", out.Batch)
	}
	a.do("POST", "/v1/batches/"+id+"/jobs", map[string]any{"jobs": []map[string]any{{"type": "row"}}}).
		wantError(t, http.StatusConflict, codeConflict, "")
	var cancelled cancelledCount
	a.do("POST", "/v1/batches/"+id+"/cancel", nil).decode(t, http.StatusOK, &cancelled)
	if cancelled.Cancelled != 3 {
		t.Fatalf("cancelled %d", cancelled.Cancelled)
	}
	a.do("POST", "/v1/batches/"+id+"/cancel", nil).decode(t, http.StatusOK, &cancelled)
	if cancelled.Cancelled != 0 {
		t.Fatalf("cancelled again %d", cancelled.Cancelled)
	}
	a.runBatchQueues(t, nil, "ba", "bb")
	var info queue.BatchInfo
	a.do("GET", "/v1/batches/"+id, nil).decode(t, http.StatusOK, &info)
	if info.Counts != (queue.BatchCounts{Cancelled: 3}) || info.Cancelled == nil || info.OnComplete.State != "fired" {
		t.Fatalf("cancelled batch %+v %+v", info, info.OnComplete)
	}
}

// TestBatchRoutesRefused: bad input answers 400 naming the field, an
// unknown batch 404, and neither changes anything.
func TestBatchRoutesRefused(t *testing.T) {
	a := start(t)
	var out batchSubmitted
	a.do("POST", "/v1/batches", map[string]any{"id": "sealed", "jobs": []map[string]any{{"type": "row", "queue": "ba"}}}).
		decode(t, http.StatusCreated, &out)
	a.do("POST", "/v1/batches", map[string]any{"id": "open", "open": true}).decode(t, http.StatusCreated, &out)
	before := a.stats(t)
	row := `{"type":"row","queue":"ba"}`
	many := `{"id":"x","jobs":[` + strings.Repeat(row+",", 10_000) + row + `]}`
	cases := []struct{ name, path, body, field string }{
		{"bad id", "/v1/batches", `{"id":"a b","jobs":[` + row + `]}`, "id"},
		{"no jobs", "/v1/batches", `{"id":"x","jobs":[]}`, "jobs"},
		{"jobs missing", "/v1/batches", `{"id":"x"}`, "jobs"},
		{"too many jobs", "/v1/batches", many, "jobs"},
		{"bad job", "/v1/batches", `{"id":"x","jobs":[` + row + `,{"type":"row","priority":"urgent"}]}`, "jobs[1].priority"},
		{"unknown job field", "/v1/batches", `{"id":"x","jobs":[` + row + `,{"type":"row","priorty":"high"}]}`, "jobs[1].priorty"},
		{"depends_on", "/v1/batches", `{"id":"x","jobs":[{"type":"row","depends_on":["01J00000000000000000000000"]}]}`, "jobs[0].depends_on"},
		{"idempotency key", "/v1/batches", `{"id":"x","jobs":[{"type":"row","idempotency_key":"k"}]}`, "jobs[0].idempotency_key"},
		{"callback payload not an object", "/v1/batches", `{"id":"x","jobs":[` + row + `],"on_success":{"type":"cb","payload":[1]}}`, "on_success.payload"},
		{"bad callback", "/v1/batches", `{"id":"x","jobs":[` + row + `],"on_complete":{"type":"cb","priorty":"high"}}`, "on_complete.priorty"},
		{"unknown field", "/v1/batches", `{"id":"x","jobs":[` + row + `],"on_sucess":{"type":"cb"}}`, "on_sucess"},
		{"add: bad job", "/v1/batches/open/jobs", `{"jobs":[{"type":""}]}`, "jobs[0].type"},
		{"add: unknown field", "/v1/batches/open/jobs", `{"jobs":[],"sael":true}`, "sael"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := a.do("POST", c.path, c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
			t.Log(e.Message)
		})
	}
	a.do("GET", "/v1/batches/sealed/jobs?cursor=zz", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "cursor")
	a.do("GET", "/v1/batches/sealed/results?limt=5", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "limt")
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/batches/nope", ""}, {"GET", "/v1/batches/nope/jobs", ""}, {"GET", "/v1/batches/nope/results", ""},
		{"POST", "/v1/batches/nope/jobs", `{"jobs":[` + row + `]}`}, {"POST", "/v1/batches/nope/cancel", ""},
		{"POST", "/v1/batches/nope/retry", ""}, {"GET", "/v1/batches/a%20b", ""},
	} {
		var body any
		if r.body != "" {
			body = r.body
		}
		e := a.do(r.method, r.path, body).wantError(t, http.StatusNotFound, codeNotFound, "")
		if e.Message != "batch not found" {
			t.Errorf("%s %s: %q", r.method, r.path, e.Message)
		}
	}
	if after := a.stats(t); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused requests changed the queues:\n%+v\n%+v", before, after)
	}
	a.do("GET", "/v1/batches/x", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	var info queue.BatchInfo
	a.do("GET", "/v1/batches/open", nil).decode(t, http.StatusOK, &info)
	if info.Total != 0 || info.Sealed {
		t.Fatalf("open batch changed: %+v", info)
	}
}
