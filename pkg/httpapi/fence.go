package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/access"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// The fence keeps teams apart: for a caller limited to queue patterns (a
// key's "@billing-*|ops-*", a sign-in role's queues) every queue outside
// them, and everything in one, does not exist. It is the one place that
// decides, for every /v1 route:
//
//   - a route naming a queue ({q}) outside the patterns answers 404, as an
//     unknown queue does;
//   - a route naming a job, a batch or a schedule loads it first and
//     answers 404 when it belongs to another queue (a batch: when any of its
//     members does), so that ids leak nothing;
//   - a request body naming a queue (a submit, a batch, a workflow, a
//     schedule's job, a bulk move's to_queue, a signal by key, a claim)
//     outside the patterns is refused with 403; a claim that names no queue
//     claims from the visible queues only;
//   - list answers (queues, throughput, history backlog, workers and their
//     active jobs, schedules, the history search, a job's graph, a batch's
//     jobs) are filtered before they are sent;
//   - the stream (stream.go, hub.go) sends only the visible queues' events,
//     bulk progress and counts.
//
// A caller without patterns passes untouched, at no cost.

// errHiddenJob and friends answer for what a caller may not see: the same
// answers as for what does not exist.
var (
	errHiddenJob      = &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "job not found"}
	errHiddenBatch    = &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "batch not found"}
	errHiddenSchedule = &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "schedule not found"}
)

func errHiddenQueue(q string) error {
	return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: fmt.Sprintf("queue %q not found", q)}
}

func errForeignQueue(q string) error {
	return &apiError{Status: http.StatusForbidden, Code: codePermissionDenied, Message: fmt.Sprintf("queue %q is outside the queues this caller may use", q)}
}

// maxFencedBatchMembers bounds how many members of a batch the fence reads
// to decide whether a limited caller may see it.
const maxFencedBatchMembers = 10_000

// fence returns the middleware of route r.
func (s *Server) fence(r route) gin.HandlerFunc {
	key := r.Method + " " + r.Path
	bodyQueues := fencedBodies[key]
	filter := fencedLists[key]
	return func(c *gin.Context) {
		allow := principalOf(c).queues
		if !allow.Limited() {
			return
		}
		if err := s.fenceRequest(c, allow, bodyQueues); err != nil {
			fail(c, err)
			return
		}
		if c.IsAborted() || filter == nil {
			return
		}
		s.filterAnswer(c, func(doc map[string]any) error { return filter(c, s, allow, doc) })
	}
}

// fenceRequest checks what the request names: its path's queue, job, batch
// or schedule, and the queues of its body.
func (s *Server) fenceRequest(c *gin.Context, allow access.Patterns, bodyQueues func(map[string]any) []string) error {
	ctx := c.Request.Context()
	path := c.FullPath()
	if q, ok := c.Params.Get("q"); ok && !allow.Allows(q) {
		return errHiddenQueue(q)
	}
	if id, ok := c.Params.Get("id"); ok {
		switch {
		case strings.HasPrefix(path, "/v1/jobs/"):
			q, err := s.jobQueue(ctx, id)
			if err != nil {
				return err
			}
			if q != "" && !allow.Allows(q) {
				return errHiddenJob
			}
		case strings.HasPrefix(path, "/v1/batches/"):
			ok, err := s.batchVisible(ctx, id, allow)
			if err != nil {
				return err
			}
			if !ok {
				return errHiddenBatch
			}
		}
	}
	if id, ok := c.Params.Get("schedule_id"); ok {
		sc, err := s.schedules().Get(ctx, id)
		switch {
		case errors.Is(err, schedule.ErrNotFound):
		case err != nil:
			return err
		case !allow.Allows(orDefault(sc.Job.Queue)):
			return errHiddenSchedule
		}
	}
	if bodyQueues == nil || c.Request.Body == nil {
		return nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBatchBodyBytes))
	if err != nil {
		return err
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(data))
	var doc map[string]any
	if json.Unmarshal(data, &doc) != nil || doc == nil {
		return nil // not an object: the handler refuses it
	}
	if path == "/v1/claim" {
		if _, named := doc["queues"]; !named {
			return s.claimVisible(c, allow, doc)
		}
	}
	for _, q := range bodyQueues(doc) {
		if !allow.Allows(q) {
			return errForeignQueue(q)
		}
	}
	return nil
}

// claimVisible makes a claim that names no queue name the visible known
// queues, so that it cannot take another team's jobs.
func (s *Server) claimVisible(c *gin.Context, allow access.Patterns, doc map[string]any) error {
	known, err := s.q.Queues(c.Request.Context())
	if err != nil {
		return err
	}
	visible := allow.Filter(known)
	if len(visible) == 0 {
		return errForeignQueue("(none known)")
	}
	doc["queues"] = visible
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(data))
	c.Request.ContentLength = int64(len(data))
	return nil
}

// jobQueue returns the queue of job id, from Redis or the history store;
// "" when neither knows it (the handler answers 404 itself).
func (s *Server) jobQueue(ctx context.Context, id string) (string, error) {
	j, err := s.q.Get(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		if s.cfg.History == nil {
			return "", nil
		}
		j, err = s.cfg.History.Job(ctx, id)
		if errors.Is(err, history.ErrNotFound) {
			return "", nil
		}
		err = historyErr(err)
	}
	if err != nil {
		return "", err
	}
	return j.Queue, nil
}

// batchVisible reports whether every member of batch id is in a visible
// queue (true for a batch that does not exist: the handler answers 404).
func (s *Server) batchVisible(ctx context.Context, id string, allow access.Patterns) (bool, error) {
	cursor := ""
	for read := 0; read < maxFencedBatchMembers; {
		jobs, next, err := s.q.BatchMembers(ctx, id, cursor, maxPageSize)
		if errors.Is(err, queue.ErrBatchNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, j := range jobs {
			if !allow.Allows(j.Queue) {
				return false, nil
			}
		}
		read += len(jobs)
		if next == "" {
			return true, nil
		}
		cursor = next
	}
	return false, nil
}

func orDefault(q string) string {
	if q == "" {
		return job.DefaultQueue
	}
	return q
}

// specQueue is the queue a job spec in a body names (the default queue
// when it names none).
func specQueue(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	q, _ := m["queue"].(string)
	return []string{orDefault(q)}
}

// specsQueues are the queues of a list of job specs.
func specsQueues(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		out = append(out, specQueue(e)...)
	}
	return out
}

// fencedBodies name, per route, the queues its body names.
var fencedBodies = map[string]func(map[string]any) []string{
	"POST /v1/jobs":       func(d map[string]any) []string { return specQueue(d) },
	"POST /v1/jobs/batch": func(d map[string]any) []string { return specsQueues(d["jobs"]) },
	"POST /v1/outcomes": func(d map[string]any) []string { // the outcomes' queues and the claim's
		var out []string
		for _, o := range asList(d["outcomes"]) {
			if m, ok := o.(map[string]any); ok {
				if q, ok := m["queue"].(string); ok {
					out = append(out, q)
				}
			}
		}
		if m, ok := d["claim"].(map[string]any); ok {
			for _, q := range asList(m["queues"]) {
				if q, ok := q.(string); ok {
					out = append(out, q)
				}
			}
		}
		return out
	},
	"POST /v1/batches": func(d map[string]any) []string {
		out := specsQueues(d["jobs"])
		for _, k := range []string{"on_success", "on_complete"} {
			if d[k] != nil {
				out = append(out, specQueue(d[k])...)
			}
		}
		return out
	},
	"POST /v1/batches/:id/jobs": func(d map[string]any) []string { return specsQueues(d["jobs"]) },
	"POST /v1/workflows": func(d map[string]any) []string {
		steps, _ := d["steps"].([]any)
		var out []string
		for _, st := range steps {
			if m, ok := st.(map[string]any); ok {
				out = append(out, specQueue(m["job"])...)
			}
		}
		return out
	},
	"PUT /v1/schedules/:schedule_id": func(d map[string]any) []string { return specQueue(d["job"]) },
	"PATCH /v1/schedules/:schedule_id": func(d map[string]any) []string {
		if d["job"] == nil {
			return nil
		}
		return specQueue(d["job"])
	},
	"POST /v1/queues/:q/jobs/bulk": func(d map[string]any) []string {
		if q, ok := d["to_queue"].(string); ok && q != "" {
			return []string{q}
		}
		return nil
	},
	"POST /v1/signals": func(d map[string]any) []string {
		q, _ := d["queue"].(string)
		return []string{orDefault(q)}
	},
	"POST /v1/claim": func(d map[string]any) []string {
		list, _ := d["queues"].([]any)
		var out []string
		for _, q := range list {
			if s, ok := q.(string); ok {
				out = append(out, s)
			}
		}
		return out
	},
}

// listFilter removes from a decoded answer what allow does not see.
type listFilter func(c *gin.Context, s *Server, allow access.Patterns, doc map[string]any) error

// keep filters the list doc[key] to the entries whose queue (read by
// queueOf) allow sees.
func keep(doc map[string]any, key string, allow access.Patterns, queueOf func(map[string]any) string) {
	list, _ := doc[key].([]any)
	out := make([]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && allow.Allows(queueOf(m)) {
			out = append(out, e)
		}
	}
	doc[key] = out
}

func field(name string) func(map[string]any) string {
	return func(m map[string]any) string { s, _ := m[name].(string); return s }
}

// fencedLists filter, per route, the answer of a limited caller.
var fencedLists = map[string]listFilter{
	"GET /v1/queues": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "queues", allow, field("name"))
		return nil
	},
	"GET /v1/throughput": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "queues", allow, field("queue"))
		return nil
	},
	"GET /v1/history/backlog": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "queues", allow, field("queue"))
		var events, lag float64
		for _, e := range doc["queues"].([]any) {
			m := e.(map[string]any)
			n, _ := m["events"].(json.Number).Float64()
			l, _ := m["lag_seconds"].(json.Number).Float64()
			events, lag = events+n, max(lag, l)
		}
		doc["events"], doc["lag_seconds"] = events, lag
		return nil
	},
	"GET /v1/schedules": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "schedules", allow, func(m map[string]any) string {
			j, _ := m["job"].(map[string]any)
			q, _ := j["queue"].(string)
			return orDefault(q)
		})
		return nil
	},
	"GET /v1/jobs": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "jobs", allow, field("queue"))
		return nil
	},
	"GET /v1/batches/:id/jobs": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "jobs", allow, field("queue"))
		return nil
	},
	"GET /v1/batches/:id/results": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		keep(doc, "results", allow, field("queue"))
		return nil
	},
	"GET /v1/jobs/:id/graph": func(_ *gin.Context, _ *Server, allow access.Patterns, doc map[string]any) error {
		nodes, _ := doc["nodes"].([]any)
		for i, n := range nodes {
			m, ok := n.(map[string]any)
			if !ok {
				continue
			}
			if q, _ := m["queue"].(string); q != "" && !allow.Allows(q) {
				nodes[i] = map[string]any{"id": m["id"], "attempt": 0, "missing": true}
			}
		}
		return nil
	},
	"GET /v1/workers": func(c *gin.Context, s *Server, allow access.Patterns, doc map[string]any) error {
		list, _ := doc["workers"].([]any)
		out := make([]any, 0, len(list))
		for _, e := range list {
			w, ok := e.(map[string]any)
			if !ok {
				continue
			}
			var queues []any
			for _, q := range asList(w["queues"]) {
				if s, ok := q.(string); ok && allow.Allows(s) {
					queues = append(queues, s)
				}
			}
			if len(queues) == 0 {
				continue // serves none of the caller's queues
			}
			w["queues"] = queues
			active := []any{}
			for _, id := range asList(w["active_jobs"]) {
				sid, _ := id.(string)
				q, err := s.jobQueue(c.Request.Context(), sid)
				if err != nil {
					return err
				}
				if q != "" && allow.Allows(q) {
					active = append(active, sid)
				}
			}
			w["active_jobs"] = active
			out = append(out, w)
		}
		doc["workers"] = out
		return nil
	},
}

func asList(v any) []any { l, _ := v.([]any); return l }

// filteringWriter holds an answer back so that the fence can filter it.
type filteringWriter struct {
	gin.ResponseWriter
	buf    bytes.Buffer
	status int
}

func (w *filteringWriter) WriteHeader(code int)        { w.status = code }
func (w *filteringWriter) WriteHeaderNow()             {}
func (w *filteringWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }
func (w *filteringWriter) WriteString(s string) (int, error) {
	return w.buf.WriteString(s)
}
func (w *filteringWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
func (w *filteringWriter) Written() bool { return w.status != 0 || w.buf.Len() > 0 }
func (w *filteringWriter) Size() int     { return w.buf.Len() }

// filterAnswer runs the rest of the chain with the answer held back, then
// sends it, a 200 JSON object through filter.
func (s *Server) filterAnswer(c *gin.Context, filter func(map[string]any) error) {
	orig := c.Writer
	fw := &filteringWriter{ResponseWriter: orig}
	c.Writer = fw
	c.Next()
	c.Writer = orig
	body := fw.buf.Bytes()
	if fw.Status() == http.StatusOK && strings.HasPrefix(orig.Header().Get("Content-Type"), "application/json") {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc map[string]any
		if err := dec.Decode(&doc); err == nil && doc != nil {
			if err := filter(doc); err != nil {
				orig.Header().Del("Content-Length")
				fail(c, err)
				return
			}
			if body, err = json.Marshal(doc); err != nil {
				fail(c, err)
				return
			}
		}
	}
	orig.Header().Del("Content-Length")
	orig.WriteHeader(fw.Status())
	_, _ = orig.Write(body)
}
