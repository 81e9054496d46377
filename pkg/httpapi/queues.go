package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// queueList is the answer of GET /v1/queues.
type queueList struct {
	Queues []queue.QueueStats `json:"queues"`
}

// retriedCount and deletedCount answer the dead-letter actions.
type retriedCount struct {
	Retried int `json:"retried"`
}

type deletedCount struct {
	Deleted int `json:"deleted"`
}

// workerList is the answer of GET /v1/workers.
type workerList struct {
	Workers []queue.WorkerInfo `json:"workers"`
}

// storageView is GET /v1/storage's answer.
type storageView struct {
	Format       string             `json:"format"`
	WritableAt   *job.Time          `json:"writable_at,omitempty"`
	Readers      []queue.ReaderInfo `json:"readers"`
	Unregistered []string           `json:"unregistered_workers"`
	HeldBackBy   []string           `json:"held_back_by"`
	// Reads is what this API's release reads, Newest the newest format it
	// writes (once the gate opened), Writes what this API writes now.
	Reads  []int `json:"reads"`
	Newest int   `json:"newest"`
	Writes int   `json:"writes"`
}

// storage handles GET /v1/storage.
func (s *Server) storage(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	st, err := s.q.Storage(c.Request.Context(), s.cfg.WorkerMaxAge)
	if err != nil {
		fail(c, err)
		return
	}
	var writableAt *job.Time
	if st.WritableAt != nil {
		t := job.Time(*st.WritableAt)
		writableAt = &t
	}
	c.JSON(http.StatusOK, storageView{Format: st.Format, WritableAt: writableAt, Readers: st.Readers, Unregistered: st.Unregistered,
		HeldBackBy: st.HeldBackBy, Reads: queue.ReadFormats(), Newest: queue.WriteFormat, Writes: s.q.Writing()})
}

// listQueues handles GET /v1/queues.
func (s *Server) listQueues(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	stats, err := s.q.Stats(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	if stats == nil {
		stats = []queue.QueueStats{}
	}
	c.JSON(http.StatusOK, queueList{Queues: stats})
}

// getQueue handles GET /v1/queues/{q}.
func (s *Server) getQueue(c *gin.Context) {
	q, err := s.knownQueue(c)
	if err == nil {
		err = checkQuery(c)
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.answerStats(c, q)
}

func (s *Server) answerStats(c *gin.Context, q string) {
	stats, err := s.q.Stats(c.Request.Context(), q)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, stats[0])
}

// pauseQueue handles POST /v1/queues/{q}/pause. Pausing a queue that has
// never had a job creates it, so a queue can be paused before its first
// job arrives.
func (s *Server) pauseQueue(c *gin.Context) {
	q, err := queueParam(c)
	if err == nil {
		err = s.emptyBody(c)
	}
	if err == nil {
		err = s.q.Pause(c.Request.Context(), q)
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.answerStats(c, q)
}

// forgetQueue handles DELETE /v1/queues/{q}.
func (s *Server) forgetQueue(c *gin.Context) {
	q, err := s.knownQueue(c)
	if err == nil {
		err = s.q.Forget(c.Request.Context(), q, 0)
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// resumeQueue handles POST /v1/queues/{q}/resume.
func (s *Server) resumeQueue(c *gin.Context) {
	q, err := s.knownQueue(c)
	if err == nil {
		err = s.emptyBody(c)
	}
	if err == nil {
		err = s.q.Resume(c.Request.Context(), q)
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.answerStats(c, q)
}

// listDead handles GET /v1/queues/{q}/dead: newest first, paged.
func (s *Server) listDead(c *gin.Context) {
	q, err := s.knownQueue(c)
	if err == nil {
		err = checkQuery(c, "limit", "cursor", "tag")
	}
	if err != nil {
		fail(c, err)
		return
	}
	limit, err := queryLimit(c)
	if err == nil {
		err = checkTag(c.Query("tag"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	var jobs []*job.Job
	var next string
	if tag := c.Query("tag"); tag != "" {
		// The live list's filter, over the dead set (newest first).
		jobs, next, err = s.q.List(c.Request.Context(), q, queue.ListOptions{State: job.Dead, Tag: tag, Limit: limit, Cursor: c.Query("cursor")})
	} else {
		jobs, next, err = s.q.Dead(c.Request.Context(), q, limit, c.Query("cursor"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	writeJobPage(c, jobs, next)
}

// retryDead handles POST /v1/queues/{q}/dead/retry.
func (s *Server) retryDead(c *gin.Context) {
	s.deadAction(c, s.q.RetryDead, func(n int) any { return retriedCount{Retried: n} })
}

// purgeDead handles DELETE /v1/queues/{q}/dead.
func (s *Server) purgeDead(c *gin.Context) {
	s.deadAction(c, s.q.PurgeDead, func(n int) any { return deletedCount{Deleted: n} })
}

func (s *Server) deadAction(c *gin.Context, act func(context.Context, string, []string) (int, error), answer func(int) any) {
	q, err := s.knownQueue(c)
	if err != nil {
		fail(c, err)
		return
	}
	data, err := readBody(c, s.cfg.MaxBodyBytes, true)
	if err != nil {
		fail(c, err)
		return
	}
	var sel deadSelection
	if data != nil {
		if err := jsonbody.Decode(data, &sel, jsonbody.Strict); err != nil {
			fail(c, jsonError(err, data, jsonbody.Where{}))
			return
		}
		if err := checkIDs(sel.IDs, bytesHasKey(data, "ids")); err != nil {
			fail(c, err)
			return
		}
	}
	auditNote(c, auditSelection{IDs: sel.IDs, All: sel.IDs == nil}, "")
	n, err := act(c.Request.Context(), q, sel.IDs)
	if err != nil {
		fail(c, err)
		return
	}
	auditNote(c, nil, fmt.Sprintf("changed %d", n))
	c.JSON(http.StatusOK, answer(n))
}

// checkIDs validates an explicit id selection. An empty list is refused
// rather than read as "all": omit ids to act on every dead job.
func checkIDs(ids []string, present bool) error {
	if present && len(ids) == 0 {
		return invalid("ids", "ids must name at least one job; omit ids to act on every dead job")
	}
	for i, id := range ids {
		if id == "" || len(id) > 64 || strings.ContainsAny(id, "{}:, \t\r\n") {
			return invalid(fmt.Sprintf("ids[%d]", i), "ids[%d] is not a job id", i)
		}
	}
	return nil
}

// bytesHasKey reports whether the JSON object data has a top-level key.
func bytesHasKey(data []byte, key string) bool {
	var m map[string]any
	if jsonbody.Decode(data, &m, jsonbody.Strict) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// knownQueue returns the {q} path parameter: 400 when malformed, 404 when
// no job was ever submitted to it and it was never paused.
func (s *Server) knownQueue(c *gin.Context) (string, error) {
	q, err := queueParam(c)
	if err != nil {
		return "", err
	}
	known, err := s.q.Queues(c.Request.Context())
	if err != nil {
		return "", err
	}
	if !slices.Contains(known, q) {
		return "", &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: fmt.Sprintf("queue %q not found", q)}
	}
	return q, nil
}

// emptyBody accepts no body, or an empty JSON object.
func (s *Server) emptyBody(c *gin.Context) error {
	data, err := readBody(c, s.cfg.MaxBodyBytes, true)
	if err != nil || data == nil {
		return err
	}
	var empty struct{}
	if err := jsonbody.Decode(data, &empty, jsonbody.Strict); err != nil {
		return jsonError(err, data, jsonbody.Where{})
	}
	return nil
}

// listWorkers handles GET /v1/workers.
func (s *Server) listWorkers(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	ws, err := s.q.Workers(c.Request.Context(), s.cfg.WorkerMaxAge)
	if err != nil {
		fail(c, err)
		return
	}
	if ws == nil {
		ws = []queue.WorkerInfo{}
	}
	c.JSON(http.StatusOK, workerList{Workers: ws})
}

// metricsTarget is one entry of a Prometheus HTTP service-discovery list
// (http_sd_configs): one worker's /metrics address and labels.
type metricsTarget struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// metricsTargets handles GET /v1/workers/metrics-targets: the live workers
// that serve /metrics (their registry entry's metrics_url), in Prometheus's
// HTTP service-discovery format. Workers without one (HTTP workers,
// SUNDIAL_METRICS_ADDR=off, older releases) are left out.
func (s *Server) metricsTargets(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	ws, err := s.q.Workers(c.Request.Context(), s.cfg.WorkerMaxAge)
	if err != nil {
		fail(c, err)
		return
	}
	out := []metricsTarget{}
	for _, w := range ws {
		t, ok := targetOf(w)
		if ok {
			out = append(out, t)
		}
	}
	c.JSON(http.StatusOK, out)
}

// targetOf turns a worker's metrics_url into its service-discovery entry:
// host:port as the target, and the path as __metrics_path__ when it is not
// Prometheus's default.
func targetOf(w queue.WorkerInfo) (metricsTarget, bool) {
	u, err := url.Parse(w.MetricsURL)
	if w.MetricsURL == "" || err != nil || u.Host == "" {
		return metricsTarget{}, false
	}
	labels := map[string]string{"worker_id": w.ID, "hostname": w.Hostname}
	if u.Path != "" && u.Path != "/metrics" {
		labels["__metrics_path__"] = u.Path
	}
	if u.Scheme == "https" {
		labels["__scheme__"] = "https"
	}
	return metricsTarget{Targets: []string{u.Host}, Labels: labels}, true
}
