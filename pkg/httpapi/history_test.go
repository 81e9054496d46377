package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
)

// fakeHistory is a history.Reader over maps.
type fakeHistory struct {
	mu        sync.Mutex
	jobs      map[string]*job.Job
	events    map[string][]job.Event
	lastQuery history.Query
	err       error
}

func (f *fakeHistory) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeHistory) Search(_ context.Context, q history.Query) ([]*job.Job, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQuery = q
	if f.err != nil {
		return nil, "", f.err
	}
	if q.Cursor == "bogus" {
		return nil, "", history.ErrInvalidCursor
	}
	var out []*job.Job
	for _, j := range f.jobs {
		if len(q.DependsOn) > 0 && !slices.ContainsFunc(j.DependsOn, func(d string) bool { return slices.Contains(q.DependsOn, d) }) {
			continue
		}
		out = append(out, j)
	}
	return out, "next-page", nil
}

// Events pages by position: the cursor is the index of the page's first.
func (f *fakeHistory) Events(_ context.Context, id string, p history.EventPage) ([]job.Event, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, "", f.err
	}
	ev, ok := f.events[id]
	if !ok {
		return nil, "", history.ErrNotFound
	}
	from, _ := strconv.Atoi(p.Cursor)
	to := min(from+p.Limit, len(ev))
	next := ""
	if to < len(ev) {
		next = strconv.Itoa(to)
	}
	return ev[from:to], next, nil
}

func (f *fakeHistory) Job(_ context.Context, id string) (*job.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	j, ok := f.jobs[id]
	if !ok {
		return nil, history.ErrNotFound
	}
	return j, nil
}

func (f *fakeHistory) Ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func TestHistoryNotConfigured(t *testing.T) {
	a := start(t)
	e := a.do("GET", "/v1/jobs", nil).wantError(t, http.StatusServiceUnavailable, codeUnavailable, "")
	if e.Message != "history store not configured" {
		t.Errorf("message %q", e.Message)
	}
	a.do("GET", "/v1/jobs/01JD0000000000000000000000/events", nil).wantError(t, http.StatusServiceUnavailable, codeUnavailable, "")
	// Bad filters are still bad input.
	a.do("GET", "/v1/jobs?limit=0", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "limit")
}

func TestSearchJobs(t *testing.T) {
	h := &fakeHistory{jobs: map[string]*job.Job{"01JDA": {ID: "01JDA", Queue: "mail", Type: "send", State: job.Dead}}}
	a := start(t, func(c *Config) { c.History = h })
	var res searchResult
	a.do("GET", "/v1/jobs?queue=mail&type=send&group=tenant-1&state=dead&from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z&limit=10&cursor=abc", nil).
		decode(t, http.StatusOK, &res)
	if len(res.Jobs) != 1 || res.NextCursor != "next-page" {
		t.Fatalf("%+v", res)
	}
	h.mu.Lock()
	q := h.lastQuery
	h.mu.Unlock()
	want := history.Query{Queue: "mail", Type: "send", State: job.Dead, Limit: 10, Cursor: "abc",
		From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}
	if !q.From.Equal(want.From) || !q.To.Equal(want.To) || q.Queue != want.Queue || q.Type != want.Type || q.Group != "tenant-1" ||
		q.State != want.State || q.Limit != want.Limit || q.Cursor != want.Cursor {
		t.Fatalf("query %+v, want %+v", q, want)
	}
	a.do("GET", "/v1/jobs", nil).decode(t, http.StatusOK, &res)
	h.mu.Lock()
	if h.lastQuery.Limit != defaultPageSize {
		t.Errorf("default limit %d", h.lastQuery.Limit)
	}
	h.mu.Unlock()

	for _, c := range []struct{ query, field string }{
		{"limit=501", "limit"}, {"limit=x", "limit"}, {"state=lost", "state"}, {"queue=A+B", "queue"},
		{"type=a%20b", "type"}, {"group=a%20b", "group"}, {"from=yesterday", "from"}, {"to=2026", "to"},
		{"from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "to"}, {"cursor=bogus", "cursor"}, {"stat=dead", "stat"},
	} {
		a.do("GET", "/v1/jobs?"+c.query, nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
	}
	h.setErr(errors.New("server selection timeout"))
	a.do("GET", "/v1/jobs", nil).wantError(t, http.StatusServiceUnavailable, codeUnavailable, "")
}

func TestJobEvents(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	h := &fakeHistory{events: map[string][]job.Event{"01JDA": {
		{JobID: "01JDA", Queue: "q", Type: "send", Event: job.EventSubmitted, State: job.Queued, At: at},
		{JobID: "01JDA", Queue: "q", Type: "send", Event: job.EventFailed, State: job.Scheduled, Attempt: 1, WorkerID: "w1", Error: "boom", At: at.Add(time.Second)},
	}}}
	a := start(t, func(c *Config) { c.History = h })
	var out eventList
	a.do("GET", "/v1/jobs/01JDA/events", nil).decode(t, http.StatusOK, &out)
	want := []eventView{
		{Type: job.EventSubmitted, At: at, State: job.Queued},
		{Type: job.EventFailed, At: at.Add(time.Second), State: job.Scheduled, Attempt: 1, WorkerID: "w1", Error: "boom"},
	}
	if len(out.Events) != 2 || out.Events[0] != want[0] || out.Events[1] != want[1] || out.NextCursor != "" {
		t.Fatalf("events %+v, next %q", out.Events, out.NextCursor)
	}
	// Paged: one a page, the cursor passed through.
	var p1, p2 eventList
	a.do("GET", "/v1/jobs/01JDA/events?limit=1", nil).decode(t, http.StatusOK, &p1)
	if len(p1.Events) != 1 || p1.Events[0] != want[0] || p1.NextCursor == "" {
		t.Fatalf("first page %+v", p1)
	}
	a.do("GET", "/v1/jobs/01JDA/events?limit=1&cursor="+p1.NextCursor, nil).decode(t, http.StatusOK, &p2)
	if len(p2.Events) != 1 || p2.Events[0] != want[1] || p2.NextCursor != "" {
		t.Fatalf("second page %+v", p2)
	}
	a.do("GET", "/v1/jobs/01JDA/events?limit=0", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "limit")
	a.do("GET", "/v1/jobs/01JDB/events", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
}
