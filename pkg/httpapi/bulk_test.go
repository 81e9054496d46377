package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestListQueueJobs: GET /v1/queues/{q}/jobs pages through a live state,
// filters by type and priority, and refuses bad input.
func TestListQueueJobs(t *testing.T) {
	a := start(t)
	want := map[string]bool{}
	for i := range 7 {
		j := a.submit(t, map[string]any{"type": []string{"a", "b"}[i%2], "queue": "mail", "priority": []string{"high", "low"}[i%2]})
		want[j.ID] = true
	}
	a.submit(t, map[string]any{"type": "a", "queue": "mail", "delay_seconds": 60})
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		v := url.Values{"limit": {"3"}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var page searchResult
		a.do("GET", "/v1/queues/mail/jobs?"+v.Encode(), nil).decode(t, http.StatusOK, &page)
		for _, j := range page.Jobs {
			if j.State != job.Queued || seen[j.ID] {
				t.Fatalf("job %s: %s, seen before %v", j.ID, j.State, seen[j.ID])
			}
			seen[j.ID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d queued jobs, want %d", len(seen), len(want))
	}
	var page searchResult
	a.do("GET", "/v1/queues/mail/jobs?state=queued&type=b&priority=low", nil).decode(t, http.StatusOK, &page)
	if len(page.Jobs) != 3 || page.NextCursor != "" {
		t.Fatalf("type b: %d jobs, cursor %q", len(page.Jobs), page.NextCursor)
	}
	a.do("GET", "/v1/queues/mail/jobs?state=scheduled", nil).decode(t, http.StatusOK, &page)
	if len(page.Jobs) != 1 || page.Jobs[0].State != job.Scheduled {
		t.Fatalf("scheduled: %+v", page.Jobs)
	}
	a.do("GET", "/v1/queues/mail/jobs?state=dead", nil).decode(t, http.StatusOK, &page)
	if page.Jobs == nil || len(page.Jobs) != 0 {
		t.Fatalf("dead: %+v", page.Jobs)
	}
	for _, c := range []struct{ query, field string }{
		{"state=succeeded", "state"},
		{"state=bogus", "state"},
		{"type=bad%20type", "type"},
		{"priority=urgent", "priority"},
		{"limit=0", "limit"},
		{"cursor=nonsense", "cursor"},
		{"stat=dead", "stat"},
	} {
		a.do("GET", "/v1/queues/mail/jobs?"+c.query, nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
	}
	a.do("GET", "/v1/queues/nope/jobs", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
}

// TestBulkJobs: a bulk retry by filter answers the counts and pushes its
// progress on the stream; bad requests are refused with nothing changed.
func TestBulkJobs(t *testing.T) {
	a := start(t)
	ids := a.bury(t, "mail", 5)
	a.waitStream(t)
	ws := a.mustDial(t, "queue=mail")
	a.waitClients(t, 1)

	before := a.stats(t)
	for _, c := range []struct {
		body  string
		field string
	}{
		{`{"action":"retry"}`, "ids"},
		{`{"action":"retry","ids":[]}`, "ids"},
		{`{"action":"retry","ids":["` + ids[0] + `"],"filter":{}}`, "ids"},
		{`{"action":"explode","filter":{}}`, "action"},
		{`{"action":"retry","filter":{"state":"queued"}}`, "filter.state"},
		{`{"action":"retry","filter":{"since":"yesterday"}}`, "filter.since"},
		{`{"action":"move","filter":{}}`, "to_queue"},
		{`{"action":"retry","filter":{},"extra":1}`, "extra"},
	} {
		a.do("POST", "/v1/queues/mail/jobs/bulk", c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
	}
	if after := a.stats(t); after[0].Dead != before[0].Dead || after[0].Dead != 5 {
		t.Fatalf("a refused request changed the dead count: %d", after[0].Dead)
	}
	a.do("POST", "/v1/queues/nope/jobs/bulk", `{"action":"retry","filter":{}}`).wantError(t, http.StatusNotFound, codeNotFound, "")

	var res bulkResult
	a.do("POST", "/v1/queues/mail/jobs/bulk", map[string]any{"action": "retry", "filter": map[string]any{"type": "doomed", "error_contains": "boo"}}).decode(t, http.StatusOK, &res)
	if res.Matched != 5 || res.Count != 5 || !res.Done || res.Action != queue.BulkRetry || res.Queue != "mail" || res.ID == "" {
		t.Fatalf("%+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no bulk message on the stream: %v", err)
		}
		var m bulkMessage
		if json.Unmarshal(data, &m) != nil || m.Kind != "bulk" {
			continue
		}
		if m.Bulk.ID == res.ID && m.Bulk.Done {
			if m.Bulk.Count != 5 {
				t.Fatalf("stream says %+v", m.Bulk)
			}
			break
		}
	}
	// By ids: delete one of the (now queued) jobs is skipped, counted out.
	a.do("POST", "/v1/queues/mail/jobs/bulk", map[string]any{"action": "delete", "ids": ids[:2]}).decode(t, http.StatusOK, &res)
	if res.Matched != 2 || res.Count != 0 {
		t.Fatalf("delete of queued jobs: %+v", res)
	}
	a.do("POST", "/v1/queues/mail/jobs/bulk", map[string]any{"action": "cancel", "filter": map[string]any{"state": "queued"}}).decode(t, http.StatusOK, &res)
	if res.Count != 5 {
		t.Fatalf("cancel: %+v", res)
	}
}
