package httpapi

import (
	"net/http"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
)

// POST /v1/outcomes records many outcomes, each under its own token: a
// stale one is refused alone, the others take effect, in two queues, and
// the claim in the same request takes the next jobs.
func TestBatchedOutcomes(t *testing.T) {
	a := start(t)
	var jobs []*job.Job
	for i := range 4 {
		jobs = append(jobs, a.submit(t, map[string]any{"type": "a", "queue": []string{"qa", "qb"}[i%2], "max_attempts": 1}))
	}
	got := a.claimJobs(t, "/v1/claim", map[string]any{"worker_id": "py-1", "queues": []string{"qa", "qb"}, "max": 10})
	if len(got) != 4 {
		t.Fatalf("claimed %d", len(got))
	}
	tok := map[string]string{}
	for _, c := range got {
		tok[c.Job.ID] = c.Lease.Token
	}
	next := a.submit(t, map[string]any{"type": "a", "queue": "qb"})
	var res outcomesResult
	a.do("POST", "/v1/outcomes", map[string]any{
		"outcomes": []map[string]any{
			{"id": jobs[0].ID, "queue": "qa", "complete": map[string]any{"token": tok[jobs[0].ID], "result": 1, "worker_id": "py-1"}},
			{"id": jobs[1].ID, "complete": map[string]any{"token": tok[jobs[1].ID] + "0"}}, // stale: refused alone
			{"id": jobs[2].ID, "queue": "qa", "fail": map[string]any{"token": tok[jobs[2].ID], "error": "boom"}},
			{"id": jobs[3].ID, "queue": "qb", "snooze": map[string]any{"token": tok[jobs[3].ID], "delay_seconds": 60}},
		},
		"claim": map[string]any{"worker_id": "py-1", "queues": []string{"qb"}, "max": 5},
	}).decode(t, http.StatusOK, &res)
	want := []string{"succeeded", "stale", "dead", "scheduled"}
	for i, r := range res.Results {
		if r.ID != jobs[i].ID || r.State != want[i] {
			t.Fatalf("result %d: %+v, want %s", i, r, want[i])
		}
	}
	if len(res.Jobs) != 1 || res.Jobs[0].Job.ID != next.ID || res.Jobs[0].Lease.Token == "" {
		t.Fatalf("the claim took %+v, want %s", res.Jobs, next.ID)
	}
	var j job.Job
	a.do("GET", "/v1/jobs/"+jobs[1].ID, nil).decode(t, http.StatusOK, &j)
	if j.State != job.Active {
		t.Fatalf("the stale outcome changed its job: %s", j.State)
	}
	// The same batch sent again (a lost reply): every lease is gone now.
	a.do("POST", "/v1/outcomes", map[string]any{"outcomes": []map[string]any{
		{"id": jobs[0].ID, "queue": "qa", "complete": map[string]any{"token": tok[jobs[0].ID]}},
	}}).decode(t, http.StatusOK, &res)
	if res.Results[0].State != "stale" {
		t.Fatalf("a resent outcome: %+v", res.Results[0])
	}
	// Bad input changes nothing.
	a.do("POST", "/v1/outcomes", map[string]any{"outcomes": []map[string]any{
		{"id": jobs[1].ID, "complete": map[string]any{"token": tok[jobs[1].ID]}, "fail": map[string]any{"token": tok[jobs[1].ID], "error": "x"}},
	}}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "outcomes[0]")
	a.do("POST", "/v1/outcomes", map[string]any{"outcomes": []map[string]any{
		{"id": jobs[1].ID, "fail": map[string]any{"token": tok[jobs[1].ID]}},
	}}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "outcomes[0]")
	a.do("GET", "/v1/jobs/"+jobs[1].ID, nil).decode(t, http.StatusOK, &j)
	if j.State != job.Active {
		t.Fatalf("a refused batch changed a job: %s", j.State)
	}
}
