package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

const (
	auditAdminKey  = "admin-secret-0123456789"
	auditSubmitKey = "submit-secret-0123456789"
)

// startAudited runs a Server with two keys (admin, submit only) whose audit
// log is a real store (FerretDB).
func startAudited(t *testing.T, opts ...option) (*testAPI, *audit.Store) {
	t.Helper()
	_, db := mongotest.Client(t)
	store := audit.NewStore(db, audit.StoreOptions{})
	a := start(t, append([]option{func(c *Config) {
		c.APIKeys = []string{auditAdminKey, auditSubmitKey + ":submit"}
		c.Audit, c.AuditLog = store, store
	}}, opts...)...)
	return a, store
}

// as sends a request with key.
func (a *testAPI) as(key, method, path string, body any) response {
	a.t.Helper()
	return a.do(method, path, body, "Authorization", "Bearer "+key)
}

// records reads every record of the audit log, newest first.
func records(t *testing.T, store *audit.Store, q audit.Query) []audit.Record {
	t.Helper()
	q.Limit = audit.MaxPageSize
	recs, _, err := store.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestAuditRecordsEachAction: every state-changing action leaves exactly
// one record naming its actor, target and outcome; a refused attempt (401,
// 403) leaves a refused record; no record holds a key; GET /v1/audit pages
// and filters them and needs the admin scope.
func TestAuditRecordsEachAction(t *testing.T) {
	a, store := startAudited(t)
	admin, submitter := audit.KeyID(auditAdminKey), audit.KeyID(auditSubmitKey)
	ctx := context.Background()

	var j job.Job
	a.as(auditSubmitKey, "POST", "/v1/jobs", map[string]any{"type": "t", "queue": "aq", "delay_seconds": 3600}).decode(t, http.StatusCreated, &j)
	var sig job.Job
	a.as(auditSubmitKey, "POST", "/v1/jobs", map[string]any{"type": "t", "queue": "sq", "delay_seconds": 3600}).decode(t, http.StatusCreated, &sig)
	var dead []string
	for range 2 {
		var d job.Job
		a.as(auditAdminKey, "POST", "/v1/jobs", map[string]any{"type": "doomed", "queue": "dq"}).decode(t, http.StatusCreated, &d)
		leases, err := a.q.Claim(ctx, "dq", 1, "w1")
		if err != nil || len(leases) != 1 {
			t.Fatalf("claim: %v", err)
		}
		if _, err := a.q.Complete(ctx, "dq", []queue.Outcome{{ID: d.ID, Token: leases[0].Token, Kind: queue.OutcomeDead, Error: "boom", WorkerID: "w1"}}); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, d.ID)
	}

	type step struct {
		key, method, path string
		body              any
		status            int
		action, target    string
		outcome           string
		actor             string
	}
	steps := []step{
		{auditAdminKey, "POST", "/v1/jobs/" + j.ID + "/cancel", nil, 200, "job.cancel", "job:" + j.ID, audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/jobs/" + j.ID + "/cancel", nil, 409, "job.cancel", "job:" + j.ID, audit.OutcomeFailed, admin},
		{auditAdminKey, "POST", "/v1/jobs/" + j.ID + "/retry", nil, 200, "job.retry", "job:" + j.ID, audit.OutcomeOK, admin},
		{auditSubmitKey, "POST", "/v1/jobs/" + j.ID + "/cancel", nil, 403, "job.cancel", "job:" + j.ID, audit.OutcomeRefused, submitter},
		{auditAdminKey, "POST", "/v1/queues/aq/pause", nil, 200, "queue.pause", "queue:aq", audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/queues/aq/resume", nil, 200, "queue.resume", "queue:aq", audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/queues/aq/jobs/bulk", map[string]any{"action": "cancel", "filter": map[string]any{"state": "queued", "type": "t"}}, 200, "jobs.bulk.cancel", "queue:aq", audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/queues/dq/dead/retry", map[string]any{"ids": dead[:1]}, 200, "dead.retry", "queue:dq", audit.OutcomeOK, admin},
		{auditAdminKey, "DELETE", "/v1/queues/dq/dead", nil, 200, "dead.purge", "queue:dq", audit.OutcomeOK, admin},
		{auditAdminKey, "PUT", "/v1/schedules/nightly", map[string]any{"every_seconds": 60, "job": map[string]any{"type": "x", "queue": "aq"}}, 201, "schedule.put", "schedule:nightly", audit.OutcomeOK, admin},
		{auditAdminKey, "DELETE", "/v1/schedules/nightly", nil, 204, "schedule.delete", "schedule:nightly", audit.OutcomeOK, admin},
		{auditAdminKey, "PUT", "/v1/queues/aq/limits/smtp", map[string]any{"types": []string{"t"}, "concurrency": 1}, 201, "limit.put", "queue:aq/limit:smtp", audit.OutcomeOK, admin},
		{auditAdminKey, "DELETE", "/v1/queues/aq/limits/smtp", nil, 204, "limit.delete", "queue:aq/limit:smtp", audit.OutcomeOK, admin},
		{auditAdminKey, "PUT", "/v1/queues/aq/uniqueness", map[string]any{"window_seconds": 600}, 200, "uniqueness.put", "queue:aq", audit.OutcomeOK, admin},
		{auditSubmitKey, "PUT", "/v1/queues/aq/uniqueness", map[string]any{"window_seconds": 60}, 403, "uniqueness.put", "queue:aq", audit.OutcomeRefused, submitter},
		{auditSubmitKey, "GET", "/v1/audit", nil, 403, "listAudit", "GET /v1/audit", audit.OutcomeRefused, submitter},
		{auditAdminKey, "PUT", "/v1/schedules/hourly", map[string]any{"every_seconds": 3600, "job": map[string]any{"type": "x", "queue": "aq"}}, 201, "schedule.put", "schedule:hourly", audit.OutcomeOK, admin},
		{auditAdminKey, "PATCH", "/v1/schedules/hourly", map[string]any{"enabled": false}, 200, "schedule.patch", "schedule:hourly", audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/schedules/hourly/trigger", nil, 201, "schedule.trigger", "schedule:hourly", audit.OutcomeOK, admin},
		{auditSubmitKey, "POST", "/v1/jobs/" + sig.ID + "/signals/go", map[string]any{"value": "v"}, 200, "job.signal", "job:" + sig.ID + "/signal:go", audit.OutcomeOK, submitter},
		{auditAdminKey, "POST", "/v1/queues/dq/jobs/bulk", map[string]any{"action": "move", "ids": dead[1:], "to_queue": "dq2"}, 200, "jobs.bulk.move", "queue:dq", audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/queues/fq/pause", nil, 200, "queue.pause", "queue:fq", audit.OutcomeOK, admin},
		{auditAdminKey, "POST", "/v1/queues/fq/resume", nil, 200, "queue.resume", "queue:fq", audit.OutcomeOK, admin},
		{auditAdminKey, "DELETE", "/v1/queues/fq", nil, 204, "queue.forget", "queue:fq", audit.OutcomeOK, admin},
		{"wrong-key", "POST", "/v1/queues/aq/pause", nil, 401, "auth.refused", "queue:aq", audit.OutcomeRefused, ""},
	}
	for i, s := range steps {
		before := len(records(t, store, audit.Query{}))
		res := a.as(s.key, s.method, s.path, s.body)
		if res.status != s.status {
			t.Fatalf("step %d %s %s: status %d, want %d: %s", i, s.method, s.path, res.status, s.status, res.body)
		}
		all := records(t, store, audit.Query{})
		if len(all) != before+1 {
			t.Fatalf("step %d %s %s: %d new records, want 1", i, s.method, s.path, len(all)-before)
		}
		r := all[0]
		if r.Action != s.action || r.Target != s.target || r.Outcome != s.outcome || r.Actor.ID != s.actor || r.Status != s.status {
			t.Errorf("step %d %s %s: record %+v; want action %s target %s outcome %s actor %q", i, s.method, s.path, r, s.action, s.target, s.outcome, s.actor)
		}
		if r.RequestID == "" || r.RequestID != res.header.Get(requestIDHeader) {
			t.Errorf("step %d: request id %q, answer's %q", i, r.RequestID, res.header.Get(requestIDHeader))
		}
	}
	// The bulk action's filter and the dead retry's ids are recorded.
	bulk := records(t, store, audit.Query{Action: "jobs.bulk.cancel"})
	if len(bulk) != 1 || !strings.Contains(bulk[0].Filter, `"type":"t"`) || !strings.Contains(bulk[0].Detail, "changed") {
		t.Errorf("bulk record: %+v", bulk)
	}
	if r := records(t, store, audit.Query{Action: "dead.retry"}); len(r) != 1 || !strings.Contains(r[0].Filter, dead[0]) {
		t.Errorf("dead retry record: %+v", r)
	}
	// Reads and submits record nothing; the start recorded the keys by id.
	keys := records(t, store, audit.Query{Action: "keys.loaded"})
	if len(keys) != 1 || !strings.Contains(keys[0].Detail, admin) || !strings.Contains(keys[0].Detail, submitter+" scopes=read+submit") {
		t.Errorf("keys.loaded: %+v", keys)
	}

	// Nothing secret anywhere in the log.
	all := records(t, store, audit.Query{})
	if len(all) != len(steps)+1 {
		t.Errorf("%d records, want %d", len(all), len(steps)+1)
	}
	raw, _ := json.Marshal(all)
	for _, secret := range []string{auditAdminKey, auditSubmitKey, "wrong-key"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit log holds the secret %q", secret)
		}
	}

	// GET /v1/audit: filters and pages.
	var page auditList
	a.as(auditAdminKey, "GET", "/v1/audit?actor="+submitter, nil).decode(t, http.StatusOK, &page)
	if len(page.Records) != 4 {
		t.Errorf("actor filter: %d records, want 4", len(page.Records))
	}
	a.as(auditAdminKey, "GET", "/v1/audit?target=job:"+j.ID+"&limit=2", nil).decode(t, http.StatusOK, &page)
	if len(page.Records) != 2 || page.NextCursor == "" || page.Records[0].Action != "job.cancel" || page.Records[0].Outcome != audit.OutcomeRefused {
		t.Fatalf("target page 1: %+v", page)
	}
	a.as(auditAdminKey, "GET", "/v1/audit?target=job:"+j.ID+"&limit=2&cursor="+page.NextCursor, nil).decode(t, http.StatusOK, &page)
	if len(page.Records) != 2 || page.NextCursor != "" {
		t.Fatalf("target page 2: %+v", page)
	}
	a.as(auditAdminKey, "GET", "/v1/audit?since=yesterday", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "since")
	a.as(auditAdminKey, "GET", "/v1/audit?cursor=zz", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "cursor")
}

// TestAuditWithoutStore: without a history store the records go to the
// log (without secrets) and GET /v1/audit answers 503 saying so.
func TestAuditWithoutStore(t *testing.T) {
	a := start(t, func(c *Config) { c.APIKeys = []string{auditAdminKey} })
	a.as(auditAdminKey, "POST", "/v1/queues/lq/pause", nil).decode(t, http.StatusOK, nil)
	a.as("nope", "GET", "/v1/queues", nil).wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	e := a.as(auditAdminKey, "GET", "/v1/audit", nil).wantError(t, http.StatusServiceUnavailable, codeUnavailable, "")
	if !strings.Contains(e.Message, "log") {
		t.Errorf("503 message %q does not say where the records go", e.Message)
	}
	logs := a.logs.String()
	for _, want := range []string{"action=queue.pause", "actor_id=" + audit.KeyID(auditAdminKey), "action=auth.refused", "action=keys.loaded"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(logs, auditAdminKey) || strings.Contains(logs, "nope") {
		t.Error("the log holds a key")
	}
}

// TestEventsNameTheActor: a job's cancelled and retried events, read from
// the history, name who cancelled and retried it (from the audit log).
func TestEventsNameTheActor(t *testing.T) {
	_, db := mongotest.Client(t)
	hist := history.NewStore(db, history.StoreOptions{Logger: discardLogger()})
	store := audit.NewStore(db, audit.StoreOptions{})
	a := start(t, func(c *Config) {
		c.APIKeys = []string{auditAdminKey, "other-admin-secret-012345"}
		c.Audit, c.AuditLog, c.History = store, store, hist
	})
	ctx, cancel := context.WithCancel(context.Background())
	w := history.NewWriter(a.q, hist, history.WriterConfig{Consumer: "t", DiscoverInterval: 20 * time.Millisecond, Linger: time.Millisecond, Logger: discardLogger()})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	var j job.Job
	a.as(auditAdminKey, "POST", "/v1/jobs", map[string]any{"queue": "ev", "type": "t", "delay_seconds": 3600}).decode(t, http.StatusCreated, &j)
	a.as(auditAdminKey, "POST", "/v1/jobs/"+j.ID+"/cancel", nil).decode(t, http.StatusOK, nil)
	a.as("other-admin-secret-012345", "POST", "/v1/jobs/"+j.ID+"/retry", nil).decode(t, http.StatusOK, nil)
	var list eventList
	deadline := time.Now().Add(20 * time.Second)
	for {
		// 404 until the history writer recorded the job's first events.
		if res := a.as(auditAdminKey, "GET", "/v1/jobs/"+j.ID+"/events", nil); res.status != http.StatusNotFound {
			res.decode(t, http.StatusOK, &list)
		}
		if len(list.Events) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events never reached the history: %+v", list.Events)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition under a deadline
	}
	want := map[job.EventType]string{job.EventCancelled: audit.KeyID(auditAdminKey), job.EventRetried: audit.KeyID("other-admin-secret-012345")}
	for _, e := range list.Events {
		switch {
		case want[e.Type] != "" && (e.Actor == nil || e.Actor.ID != want[e.Type]):
			t.Errorf("%s event: actor %+v, want %s", e.Type, e.Actor, want[e.Type])
		case want[e.Type] == "" && e.Actor != nil:
			t.Errorf("%s event names an actor: %+v", e.Type, e.Actor)
		}
	}
}
