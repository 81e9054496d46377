package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

func TestSubmitAndGetJob(t *testing.T) {
	a := start(t)
	res := a.do("POST", "/v1/jobs", map[string]any{"type": "email.send", "payload": map[string]any{"to": "a@b.c"}, "priority": "high"})
	var j job.Job
	res.decode(t, http.StatusCreated, &j)
	if j.ID == "" || j.Queue != "default" || j.Type != "email.send" || j.Priority != job.High || j.State != job.Queued ||
		j.MaxAttempts != 3 || j.TimeoutSeconds != 30 || string(j.Payload) != `{"to":"a@b.c"}` {
		t.Fatalf("submitted job: %+v", j)
	}
	if loc := res.header.Get("Location"); loc != "/v1/jobs/"+j.ID {
		t.Errorf("Location %q", loc)
	}
	if res.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	got := a.do("GET", "/v1/jobs/"+j.ID, nil)
	var again job.Job
	got.decode(t, http.StatusOK, &again)
	if !reflect.DeepEqual(j, again) {
		t.Errorf("GET differs from the submit answer:\n%s\n%s", res.body, got.body)
	}
}

func TestSubmitIdempotent(t *testing.T) {
	a := start(t)
	spec := map[string]any{"type": "charge", "idempotency_key": "order-42"}
	first := a.submit(t, spec)
	var dup job.Job
	a.do("POST", "/v1/jobs", spec).decode(t, http.StatusOK, &dup)
	if dup.ID != first.ID {
		t.Fatalf("duplicate answered job %s, want %s", dup.ID, first.ID)
	}
	if st := a.stats(t); st[0].Queued["normal"] != 1 {
		t.Fatalf("a duplicate created a job: %+v", st[0])
	}
}

func TestSubmitValidation(t *testing.T) {
	a := start(t)
	a.submit(t, map[string]any{"type": "warmup"}) // the queue exists; nothing below may change it
	before := a.stats(t)
	cases := []struct{ name, body, field string }{
		{"queue", `{"type":"a","queue":"Bad Name"}`, "queue"},
		{"type missing", `{}`, "type"},
		{"type pattern", `{"type":"a b"}`, "type"},
		{"type not a string", `{"type":5}`, "type"},
		{"priority", `{"type":"a","priority":"urgent"}`, "priority"},
		{"max_attempts range", `{"type":"a","max_attempts":0}`, "max_attempts"},
		{"max_attempts string", `{"type":"a","max_attempts":"3"}`, "max_attempts"},
		{"max_attempts fraction", `{"type":"a","max_attempts":1.5}`, "max_attempts"},
		{"timeout_seconds", `{"type":"a","timeout_seconds":86401}`, "timeout_seconds"},
		{"backoff base", `{"type":"a","backoff":{"base_seconds":-1,"max_seconds":1}}`, "backoff.base_seconds"},
		{"backoff max below base", `{"type":"a","backoff":{"base_seconds":10,"max_seconds":1}}`, "backoff.max_seconds"},
		{"backoff type", `{"type":"a","backoff":{"base_seconds":"x"}}`, "backoff.base_seconds"},
		{"backoff unknown field", `{"type":"a","backoff":{"base":1}}`, "backoff.base"},
		{"run_at format", `{"type":"a","run_at":"tomorrow"}`, "run_at"},
		{"run_at too far", `{"type":"a","run_at":"2999-01-01T00:00:00Z"}`, "run_at"},
		{"run_at with delay", `{"type":"a","run_at":"2026-01-01T00:00:00Z","delay_seconds":5}`, "delay_seconds"},
		{"delay negative", `{"type":"a","delay_seconds":-1}`, "delay_seconds"},
		{"depends_on not a list", `{"type":"a","depends_on":"x"}`, "depends_on"},
		{"depends_on unknown job", `{"type":"a","depends_on":["01JD0000000000000000000000"]}`, "depends_on[0]"},
		{"depends_on batch ref", `{"type":"a","depends_on":["#0"]}`, "depends_on[0]"},
		{"depends_on twice", `{"type":"a","depends_on":["x","x"]}`, "depends_on[1]"},
		{"idempotency_key", `{"type":"a","idempotency_key":"` + strings.Repeat("k", 257) + `"}`, "idempotency_key"},
		{"unknown field", `{"type":"a","priorty":"high"}`, "priorty"},
		{"not an object", `[{"type":"a"}]`, ""},
		{"trailing data", `{"type":"a"} {}`, ""},
		{"malformed", `{"type":`, ""},
		// The payload is checked once, by the decoder (job.Spec.BuildDecoded
		// does not check it again).
		{"payload malformed", `{"type":"a","payload":{"a":}}`, ""},
		{"empty body", ``, ""},
		{"null", `null`, "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a.do("POST", "/v1/jobs", []byte(c.body), "Content-Type", "application/json").
				wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
		})
	}
	if after := a.stats(t); !reflect.DeepEqual(before, after) {
		t.Fatalf("rejected submissions changed the queues:\n%+v\n%+v", before, after)
	}
}

func TestSubmitBatch(t *testing.T) {
	a := start(t)
	body := map[string]any{"jobs": []map[string]any{
		{"type": "build"},
		{"type": "deploy", "depends_on": []string{"#0"}, "priority": "high"},
		{"type": "later", "delay_seconds": 3600},
	}}
	var out jobList
	a.do("POST", "/v1/jobs/batch", body).decode(t, http.StatusCreated, &out)
	if len(out.Jobs) != 3 {
		t.Fatalf("%d jobs", len(out.Jobs))
	}
	if out.Jobs[0].Type != "build" || out.Jobs[0].State != job.Queued {
		t.Errorf("job 0: %+v", out.Jobs[0])
	}
	if out.Jobs[1].State != job.Waiting || !reflect.DeepEqual(out.Jobs[1].DependsOn, []string{out.Jobs[0].ID}) {
		t.Errorf("job 1 should wait on job 0: %+v", out.Jobs[1])
	}
	if out.Jobs[2].State != job.Scheduled || out.Jobs[2].Queue != "default" {
		t.Errorf("job 2: %+v", out.Jobs[2])
	}
	// A batch with a duplicate answers 201 with the earlier job in its place.
	var again jobList
	a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"type": "x", "idempotency_key": "k"}, {"type": "x", "idempotency_key": "k"}}}).
		decode(t, http.StatusCreated, &again)
	if again.Jobs[0].ID != again.Jobs[1].ID {
		t.Errorf("in-batch duplicate got two ids: %s %s", again.Jobs[0].ID, again.Jobs[1].ID)
	}
}

func TestSubmitBatchAllOrNothing(t *testing.T) {
	a := start(t)
	a.submit(t, map[string]any{"type": "warmup"})
	before := a.stats(t)
	many := make([]string, MaxBatchJobs+1)
	for i := range many {
		many[i] = `{"type":"a"}`
	}
	cases := []struct{ name, body, field string }{
		{"bad priority", `{"jobs":[{"type":"a"},{"type":"b","priority":"x"}]}`, "jobs[1].priority"},
		{"unknown field", `{"jobs":[{"type":"a"},{"type":"b","priorty":"high"}]}`, "jobs[1].priorty"},
		{"type error", `{"jobs":[{"type":"a","max_attempts":"x"}]}`, "jobs[0].max_attempts"},
		{"bad time", `{"jobs":[{"type":"a"},{"type":"a"},{"type":"a","run_at":"x"}]}`, "jobs[2].run_at"},
		{"nested unknown field", `{"jobs":[{"type":"a","backoff":{"zz":1}}]}`, "jobs[0].backoff.zz"},
		{"forward reference", `{"jobs":[{"type":"a","depends_on":["#1"]},{"type":"b"}]}`, "jobs[0].depends_on[0]"},
		{"reference across queues", `{"jobs":[{"type":"a","queue":"q1"},{"type":"b","queue":"q2","depends_on":["#0"]}]}`, "jobs[1].queue"},
		{"two queues", `{"jobs":[{"type":"a","queue":"q1"},{"type":"b"},{"type":"b","queue":"q2"}]}`, "jobs[1].queue"},
		// Large enough for its answer to be encoded while it is stored.
		{"two queues, large plain batch", `{"jobs":[` + strings.Repeat(`{"type":"a"},`, overlapAnswerMin+3) + `{"type":"b","queue":"q2"}]}`, fmt.Sprintf("jobs[%d].queue", overlapAnswerMin+3)},
		{"missing dependency", `{"jobs":[{"type":"a"},{"type":"b","depends_on":["01JD0000000000000000000000"]}]}`, "jobs[1].depends_on[0]"},
		{"missing dependency, new queue", `{"jobs":[{"type":"a","queue":"qa"},{"type":"b","queue":"qa","depends_on":["01JD0000000000000000000000"]}]}`, "jobs[1].depends_on[0]"},
		{"job not an object", `{"jobs":[{"type":"a"},5]}`, "jobs[1]"},
		{"unknown top-level field", `{"jobz":[]}`, "jobz"},
		{"jobs not a list", `{"jobs":{}}`, "jobs"},
		{"no jobs", `{"jobs":[]}`, "jobs"},
		{"jobs missing", `{}`, "jobs"},
		{"too many jobs", `{"jobs":[` + strings.Join(many, ",") + `]}`, "jobs"},
		{"trailing data", `{"jobs":[{"type":"a"}]}]`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a.do("POST", "/v1/jobs/batch", c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
		})
	}
	if after := a.stats(t); !reflect.DeepEqual(before, after) {
		t.Fatalf("rejected batches changed the queues:\n%+v\n%+v", before, after)
	}
}

// TestLargeBatchesAnswerWhatWasStored sends plain batches (no idempotency
// key, no dependency: their answers are encoded while Redis stores them)
// from several connections at once, and checks that every answer lists
// its own jobs, in order, as the API then reads them back.
func TestLargeBatchesAnswerWhatWasStored(t *testing.T) {
	a := start(t)
	const senders, size = 6, 3 * overlapAnswerMin
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	answers := make([]jobList, senders)
	errs := make(chan error, senders)
	for g := range senders {
		go func() {
			specs := make([]map[string]any, size)
			for i := range specs {
				specs[i] = map[string]any{"type": "t", "queue": fmt.Sprintf("q%d", g%2), "payload": map[string]int{"g": g, "i": i}}
			}
			body, _ := json.Marshal(map[string]any{"jobs": specs})
			req, _ := http.NewRequest("POST", a.base+"/v1/jobs/batch", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", trace)
			res, err := a.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			data, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusCreated {
				errs <- fmt.Errorf("sender %d: status %d: %s", g, res.StatusCode, data)
				return
			}
			errs <- json.Unmarshal(data, &answers[g])
		}()
	}
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for g, ans := range answers {
		if len(ans.Jobs) != size {
			t.Fatalf("sender %d: %d jobs answered, want %d", g, len(ans.Jobs), size)
		}
		for i, j := range ans.Jobs {
			want := fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)
			if string(j.Payload) != want || j.Queue != fmt.Sprintf("q%d", g%2) || j.Traceparent != trace || seen[j.ID] {
				t.Fatalf("sender %d, job %d answered as %+v (payload %s), want payload %s, own id", g, i, j, j.Payload, want)
			}
			seen[j.ID] = true
			var stored job.Job
			a.do("GET", "/v1/jobs/"+j.ID, nil).decode(t, http.StatusOK, &stored)
			if string(stored.Payload) != want || stored.State != j.State || !stored.CreatedAt.Equal(j.CreatedAt) {
				t.Fatalf("sender %d, job %d: stored %+v, answered %+v", g, i, stored, j)
			}
		}
	}
}

func TestGetJobNotFound(t *testing.T) {
	a := start(t)
	a.do("GET", "/v1/jobs/01JD0000000000000000000000", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("GET", "/v1/jobs/not:an:id", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("GET", "/v1/jobs/x?verbose=1", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "verbose")
}

func TestGetJobFallsBackToHistory(t *testing.T) {
	old := &job.Job{ID: "01JDOLD0000000000000000000", Queue: "default", Type: "a", State: job.Succeeded}
	h := &fakeHistory{jobs: map[string]*job.Job{old.ID: old}}
	a := start(t, func(c *Config) { c.History = h })
	var got job.Job
	a.do("GET", "/v1/jobs/"+old.ID, nil).decode(t, http.StatusOK, &got)
	if got.ID != old.ID || got.State != job.Succeeded {
		t.Fatalf("got %+v", got)
	}
	a.do("GET", "/v1/jobs/01JD0000000000000000000000", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	h.setErr(fmt.Errorf("mongo: connection refused to 10.0.0.7"))
	res := a.do("GET", "/v1/jobs/01JD0000000000000000000000", nil)
	res.wantError(t, http.StatusServiceUnavailable, codeUnavailable, "")
	if strings.Contains(string(res.body), "10.0.0.7") {
		t.Fatalf("the answer leaks the cause: %s", res.body)
	}
}

func TestCancelAndRetry(t *testing.T) {
	a := start(t)
	j := a.submit(t, map[string]any{"type": "a"})
	var got job.Job
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", nil).decode(t, http.StatusOK, &got)
	if got.State != job.Cancelled {
		t.Fatalf("after cancel: %s", got.State)
	}
	e := a.do("POST", "/v1/jobs/"+j.ID+"/cancel", "{}").wantError(t, http.StatusConflict, codeConflict, "")
	if !strings.Contains(e.Message, "cancelled") {
		t.Errorf("conflict message %q does not say the state", e.Message)
	}
	a.do("POST", "/v1/jobs/"+j.ID+"/retry", "{}").decode(t, http.StatusOK, &got)
	if got.State != job.Queued || got.Attempt != 0 {
		t.Fatalf("after retry: %+v", got)
	}
	a.do("POST", "/v1/jobs/"+j.ID+"/retry", nil).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", "/v1/jobs/01JD0000000000000000000000/cancel", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("POST", "/v1/jobs/01JD0000000000000000000000/retry", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", `{"force":true}`).wantError(t, http.StatusBadRequest, codeInvalidArgument, "force")
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", `x`, "Content-Type", "text/plain").wantError(t, http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "")
}

func TestCancelActiveJob(t *testing.T) {
	a := start(t)
	j := a.submit(t, map[string]any{"type": "a"})
	leases, err := a.q.Claim(context.Background(), "default", 1, "w1")
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v %d", err, len(leases))
	}
	var got job.Job
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", nil).decode(t, http.StatusOK, &got)
	if got.State != job.Cancelled {
		t.Fatalf("state %s", got.State)
	}
	st, err := a.q.Complete(context.Background(), "default", []queue.Outcome{{ID: j.ID, Token: leases[0].Token, Kind: queue.OutcomeSucceeded, Result: json.RawMessage(`1`)}})
	if err != nil || st[0] != queue.StatusStale {
		t.Fatalf("the cancelled job's outcome was not refused: %v %v", st, err)
	}
}

// TestJobAnswersMatchJSON checks that the job answers written without
// c.JSON are byte for byte what json.Marshal makes of them, HTML escapes
// and line separators in payloads included.
func TestJobAnswersMatchJSON(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC)
	var jobs []*job.Job
	for i, payload := range []string{`{"html":"<b>&amp;</b>","sep":"a\u2028b\u2029c","u":"é"}`, `[1, 2,  3]`, ``} {
		spec := job.Spec{Type: "t.x", Payload: json.RawMessage(payload), IdempotencyKey: fmt.Sprintf("k<%d>", i)}
		j, err := spec.Build(now)
		if err != nil {
			t.Fatal(err)
		}
		j.StartedAt = &now
		j.LastError = "failed: <nil> & \u2028"
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		want, _ := json.Marshal(j)
		got, err := appendJob(nil, j)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendJob:\n got %s (%v)\nwant %s", got, err, want)
		}
	}
	for _, list := range [][]*job.Job{nil, {}, jobs, {nil}} {
		want, _ := json.Marshal(jobList{Jobs: list})
		got, err := appendJobList(nil, list)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendJobList:\n got %s (%v)\nwant %s", got, err, want)
		}
	}
}

// TestSubmitTakesTheTypeDefaults: a REST submit that leaves fields out
// takes its type's declared defaults (a Go Runner declares them), one that
// sets them keeps its own, and another type takes the engine's.
func TestSubmitTakesTheTypeDefaults(t *testing.T) {
	a := start(t)
	ctx := context.Background()
	if err := a.q.SetTypeDefaults(ctx, "email.send", job.Defaults{Queue: "mail", Priority: job.High, MaxAttempts: 9, TimeoutSeconds: 120, Backoff: &job.Backoff{BaseSeconds: 1, MaxSeconds: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := a.q.SetTypeDefaults(ctx, "bad", job.Defaults{MaxAttempts: 1000}); err == nil {
		t.Fatal("defaults with max_attempts 1000 accepted")
	}
	d := a.submit(t, map[string]any{"type": "email.send"})
	if d.Queue != "mail" || d.Priority != job.High || d.MaxAttempts != 9 || d.TimeoutSeconds != 120 || d.Backoff.MaxSeconds != 2 {
		t.Fatalf("job with the type's defaults = %+v", d)
	}
	own := a.submit(t, map[string]any{"type": "email.send", "queue": "other", "max_attempts": 2})
	if own.Queue != "other" || own.MaxAttempts != 2 || own.Priority != job.High {
		t.Fatalf("job with its own fields = %+v", own)
	}
	var batch struct{ Jobs []job.Job }
	a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"type": "email.send"}, {"type": "email.send", "priority": "low"}}}).decode(t, http.StatusCreated, &batch)
	if len(batch.Jobs) != 2 || batch.Jobs[0].Queue != "mail" || batch.Jobs[1].Priority != job.Low || batch.Jobs[1].MaxAttempts != 9 {
		t.Fatalf("batch = %+v", batch.Jobs)
	}
	plain := a.submit(t, map[string]any{"type": "other"})
	if plain.Queue != "default" || plain.MaxAttempts != job.DefaultMaxAttempts {
		t.Fatalf("job of a type without defaults = %+v", plain)
	}
}

// TestQueueUniquenessRoute: PUT and GET a queue's uniqueness rules; a bad
// window is 400 with nothing changed; until_finished frees a key once its
// job ended.
func TestQueueUniquenessRoute(t *testing.T) {
	a := start(t)
	var u uniquenessBody
	a.do("GET", "/v1/queues/uq/uniqueness", nil).decode(t, http.StatusOK, &u)
	if u.WindowSeconds != 86400 || u.UntilFinished {
		t.Fatalf("defaults = %+v", u)
	}
	a.do("PUT", "/v1/queues/uq/uniqueness", map[string]any{"window_seconds": 0.5}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "window_seconds")
	a.do("PUT", "/v1/queues/uq/uniqueness", map[string]any{"window_seconds": 8000000}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "window_seconds")
	a.do("PUT", "/v1/queues/uq/uniqueness", map[string]any{"window_seconds": 600, "until_finished": true}).decode(t, http.StatusOK, &u)
	if u.WindowSeconds != 600 || !u.UntilFinished {
		t.Fatalf("after PUT = %+v", u)
	}
	first := a.submit(t, map[string]any{"type": "sync", "queue": "uq", "idempotency_key": "k"})
	var dup job.Job
	a.do("POST", "/v1/jobs", map[string]any{"type": "sync", "queue": "uq", "idempotency_key": "k"}).decode(t, http.StatusOK, &dup)
	if dup.ID != first.ID {
		t.Fatalf("duplicate = %s, want %s", dup.ID, first.ID)
	}
	a.do("POST", "/v1/jobs/"+first.ID+"/cancel", nil).decode(t, http.StatusOK, nil)
	again := a.submit(t, map[string]any{"type": "sync", "queue": "uq", "idempotency_key": "k"})
	if again.ID == first.ID {
		t.Fatal("the key of a cancelled job still named it with until_finished")
	}
}
