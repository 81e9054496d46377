package httpapi

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
)

// TestSubmitWorkflow: a document whose steps name later steps in after,
// over two queues, is stored in dependency order; sent again with its id
// it stores nothing and answers 200 with the same jobs.
func TestSubmitWorkflow(t *testing.T) {
	a := start(t)
	body := map[string]any{"id": "order-42", "steps": []map[string]any{
		{"name": "notify", "job": map[string]any{"type": "mail", "queue": "mail"}, "after": []string{"load", "extract"}},
		{"name": "load", "job": map[string]any{"type": "load", "queue": "etl"}, "after": []string{"transform"}},
		{"name": "transform", "job": map[string]any{"type": "transform", "queue": "etl", "on_dependency_failure": "run"}, "after": []string{"extract"}},
		{"name": "extract", "job": map[string]any{"type": "extract", "queue": "etl", "idempotency_key": "mine"}},
	}}
	var out workflowResult
	a.do("POST", "/v1/workflows", body).decode(t, http.StatusCreated, &out)
	if out.ID != "order-42" || len(out.Steps) != 4 {
		t.Fatalf("answer %+v", out)
	}
	st := out.Steps
	if st["extract"].State != job.Queued || st["extract"].IdempotencyKey != "mine" {
		t.Errorf("extract %+v", st["extract"])
	}
	if st["load"].IdempotencyKey != "wf:order-42:load" || st["transform"].OnDependencyFailure != job.DependencyRun {
		t.Errorf("load %+v, transform %+v", st["load"], st["transform"])
	}
	for name, deps := range map[string][]string{
		"transform": {st["extract"].ID}, "load": {st["transform"].ID}, "notify": {st["load"].ID, st["extract"].ID},
	} {
		got, err := a.q.Get(t.Context(), st[name].ID)
		if err != nil || got.State != job.Waiting || !reflect.DeepEqual(got.DependsOn, deps) {
			t.Errorf("%s: %+v %v; want waiting on %v", name, got, err, deps)
		}
	}
	var again workflowResult
	a.do("POST", "/v1/workflows", body).decode(t, http.StatusOK, &again)
	for name, j := range out.Steps {
		if again.Steps[name].ID != j.ID {
			t.Errorf("%s stored again: %s, first %s", name, again.Steps[name].ID, j.ID)
		}
	}
	// Without an id the server picks one.
	var fresh workflowResult
	a.do("POST", "/v1/workflows", map[string]any{"steps": []map[string]any{{"name": "a", "job": map[string]any{"type": "x"}}}}).
		decode(t, http.StatusCreated, &fresh)
	if fresh.ID == "" || fresh.Steps["a"].IdempotencyKey != "wf:"+fresh.ID+":a" {
		t.Fatalf("fresh %+v", fresh)
	}
}

// TestSubmitWorkflowRefused: a bad document answers 400 naming the member
// at fault and stores nothing.
func TestSubmitWorkflowRefused(t *testing.T) {
	a := start(t)
	a.submit(t, map[string]any{"type": "warmup"})
	before := a.stats(t)
	step := func(name, extra string) string {
		return `{"name":"` + name + `","job":{"type":"t","queue":"wq"}` + extra + `}`
	}
	doc := func(steps ...string) string { return `{"id":"w1","steps":[` + strings.Join(steps, ",") + `]}` }
	many := slices.Repeat([]string{step("s", "")}, 1001) // counted before names are checked
	cases := []struct{ name, body, field string }{
		{"cycle", doc(step("a", `,"after":["c"]`), step("b", `,"after":["a"]`), step("c", `,"after":["b"]`)), "steps[1].after[0]"},
		{"after itself", doc(step("a", `,"after":["a"]`)), "steps[0].after[0]"},
		{"unknown step", doc(step("a", ""), step("b", `,"after":["a","zz"]`)), "steps[1].after[1]"},
		{"after twice", doc(step("a", ""), step("b", `,"after":["a","a"]`)), "steps[1].after[1]"},
		{"name twice", doc(step("a", ""), step("a", "")), "steps[1].name"},
		{"bad name", doc(step("a/b", "")), "steps[0].name"},
		{"bad job", doc(step("a", ""), `{"name":"b","job":{"type":"t","priority":"urgent"},"after":["a"]}`), "steps[1].job.priority"},
		{"unknown job field", doc(step("a", ""), `{"name":"b","job":{"type":"t","priorty":"high"}}`), "steps[1].job.priorty"},
		{"unknown step field", doc(`{"name":"a","job":{"type":"t"},"aftr":[]}`), "steps[0].aftr"},
		{"type error", doc(`{"name":"a","job":{"type":"t","max_attempts":"x"}}`), "steps[0].job.max_attempts"},
		{"job missing", doc(step("a", ""), `{"name":"b"}`), "steps[1].job.type"},
		{"depends_on", doc(step("a", ""), `{"name":"b","job":{"type":"t","depends_on":["#0"]}}`), "steps[1].job.depends_on"},
		{"bad id", `{"id":"a b","steps":[` + step("a", "") + `]}`, "id"},
		{"no steps", `{"steps":[]}`, "steps"},
		{"steps missing", `{}`, "steps"},
		{"too many steps", doc(many...), "steps"},
		{"step not an object", doc(step("a", ""), `5`), "steps[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := a.do("POST", "/v1/workflows", c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
			t.Log(e.Message)
		})
	}
	if after := a.stats(t); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused workflows changed the queues:\n%+v\n%+v", before, after)
	}
}

// TestSubmitWorkflowStepEnded: a step that cannot be stored because a step
// of its queue before it already ended answers 409 naming both; the steps
// stored before it stay.
func TestSubmitWorkflowStepEnded(t *testing.T) {
	a := start(t)
	doc := func(last string) map[string]any {
		return map[string]any{"id": "w", "steps": []map[string]any{
			{"name": "a", "job": map[string]any{"type": "t", "queue": "q1"}},
			{"name": "b", "job": map[string]any{"type": "t", "queue": "q2"}, "after": []string{"a"}},
			{"name": last, "job": map[string]any{"type": "t", "queue": "q1"}, "after": []string{"a", "b"}},
		}}
	}
	var out workflowResult
	a.do("POST", "/v1/workflows", doc("c")).decode(t, http.StatusCreated, &out)
	a.do("POST", "/v1/jobs/"+out.Steps["a"].ID+"/cancel", nil).decode(t, http.StatusOK, &job.Job{})
	e := a.do("POST", "/v1/workflows", doc("d")).wantError(t, http.StatusConflict, codeConflict, "")
	if !strings.Contains(e.Message, `step "d" not stored: step "a"`) || !strings.Contains(e.Message, "cancelled") {
		t.Fatalf("message %q", e.Message)
	}
}
