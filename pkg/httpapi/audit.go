package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Gin context keys a handler sets to complete its audit record.
const (
	ctxAuditAction = "sundial.audit.action" // replaces the route's action (a bulk action's kind)
	ctxAuditFilter = "sundial.audit.filter" // a bulk action's selection, any JSON value
	ctxAuditDetail = "sundial.audit.detail" // a few words: counts, a reason
	ctxErrorCode   = "sundial.error_code"   // the API error code fail answered
)

// auditTimeout bounds the write of one record while its request waits.
const auditTimeout = 3 * time.Second

// auditNote completes the request's audit record with a bulk action's
// selection and a detail; either may be empty.
func auditNote(c *gin.Context, filter any, detail string) {
	if filter != nil {
		if b, err := json.Marshal(filter); err == nil {
			c.Set(ctxAuditFilter, string(b))
		}
	}
	if detail != "" {
		c.Set(ctxAuditDetail, detail)
	}
}

// auditSelection is how a bulk action's selection is recorded: its ids
// (up to 10,000, as sent), or its filter, or every dead job.
type auditSelection struct {
	IDs     []string          `json:"ids,omitempty"`
	All     bool              `json:"all,omitempty"`
	Filter  *queue.BulkFilter `json:"filter,omitempty"`
	ToQueue string            `json:"to_queue,omitempty"`
}

// audited records one audit record per request of a route once its
// handler has answered: every request of a route with an action
// (operation.Audit), and every refused one (403) of the others. A 401 is
// recorded by guard, before the route's handlers run.
func (s *Server) audited(r route) gin.HandlerFunc {
	action := r.Doc.Audit
	return func(c *gin.Context) {
		c.Next()
		status := c.Writer.Status()
		if action == "" && status != http.StatusForbidden {
			return
		}
		a := action
		if a == "" {
			a = r.Doc.ID
		}
		if v := c.GetString(ctxAuditAction); v != "" {
			a = v
		}
		s.record(c, a, auditTarget(c), status)
	}
}

// record writes the request's audit record: its actor, request id, action,
// target, filter and outcome. A record the sink cannot keep goes to the
// log at error level, so that it is never lost silently. Nothing secret is
// recorded: the actor is a key's id, never the key.
func (s *Server) record(c *gin.Context, action, target string, status int) {
	now := time.Now().UTC()
	r := audit.Record{
		ID: audit.NewID(now), At: now, Actor: actorOf(c), RequestID: c.GetString(ctxRequestID),
		Action: action, Target: target, Status: status, Code: c.GetString(ctxErrorCode),
		Filter: c.GetString(ctxAuditFilter), Detail: c.GetString(ctxAuditDetail),
	}
	switch {
	case status < 400:
		r.Outcome = audit.OutcomeOK
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		r.Outcome = audit.OutcomeRefused
	default:
		r.Outcome = audit.OutcomeFailed
	}
	s.writeAudit(c.Request.Context(), r)
}

// writeAudit keeps r in the sink, or logs it.
func (s *Server) writeAudit(ctx context.Context, r audit.Record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := s.audit.Write(ctx, r); err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "audit record not stored; logged instead", append(audit.Attrs(r), slog.String("err", err.Error()))...)
	}
}

// auditTarget names what a request acted on from its path parameters:
// "job:<id>", "queue:<q>", "queue:<q>/limit:<name>", "schedule:<id>",
// "batch:<id>", "job:<id>/signal:<name>"; the route for a route without
// parameters.
func auditTarget(c *gin.Context) string {
	batch := strings.HasPrefix(c.FullPath(), "/v1/batches/")
	var parts []string
	for _, p := range c.Params {
		kind := p.Key
		switch p.Key {
		case "id":
			kind = "job"
			if batch {
				kind = "batch"
			}
		case "q":
			kind = "queue"
		case "name":
			kind = "limit"
		case "schedule_id":
			kind = "schedule"
		}
		parts = append(parts, kind+":"+p.Value)
	}
	if len(parts) == 0 {
		if p := c.FullPath(); p != "" {
			return c.Request.Method + " " + p
		}
		return c.Request.Method + " unmatched"
	}
	return strings.Join(parts, "/")
}

// auditList is the answer of GET /v1/audit.
type auditList struct {
	Records    []audit.Record `json:"records"`
	NextCursor string         `json:"next_cursor"`
}

// errNoAudit: GET /v1/audit without an audit store.
var errNoAudit = &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
	Message: "audit store not configured (SUNDIAL_HISTORY=off): audit records are written to the API's log instead"}

// listAudit handles GET /v1/audit.
func (s *Server) listAudit(c *gin.Context) {
	if err := checkQuery(c, "actor", "action", "target", "since", "until", "limit", "cursor"); err != nil {
		fail(c, err)
		return
	}
	q := audit.Query{Actor: c.Query("actor"), Action: c.Query("action"), Target: c.Query("target"), Cursor: c.Query("cursor")}
	var err error
	if q.Since, err = queryTime(c, "since"); err != nil {
		fail(c, err)
		return
	}
	if q.Until, err = queryTime(c, "until"); err != nil {
		fail(c, err)
		return
	}
	if q.Limit, err = queryLimit(c); err != nil {
		fail(c, err)
		return
	}
	if s.cfg.AuditLog == nil {
		fail(c, errNoAudit)
		return
	}
	recs, next, err := s.cfg.AuditLog.Query(c.Request.Context(), q)
	if errors.Is(err, audit.ErrInvalidCursor) {
		fail(c, invalid("cursor", "cursor is not one this API returned"))
		return
	}
	if err != nil {
		fail(c, &historyError{err})
		return
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	c.JSON(http.StatusOK, auditList{Records: recs, NextCursor: next})
}

// auditRoutes are the audit log's routes.
func (s *Server) auditRoutes() []route {
	return []route{
		{http.MethodGet, "/v1/audit", s.listAudit, operation{
			ID: "listAudit", Tag: "operations", Summary: "The audit log, newest first", Scope: scopeAdmin,
			Description: "Who did what: one record per state-changing action (job cancel and retry, bulk actions with their filter, queue pause, resume and forget, dead letters, schedules, limits, uniqueness, batches, signals), per refused attempt (401, 403) and per start of the API (the keys it accepts, by id). " +
				"Each names its actor (an API key's id, key:<first 12 hex digits of the key's SHA-256>, or a signed-in user's subject and name; never a secret), request id, time, action, target and outcome. " +
				"Kept in the history store for SUNDIAL_AUDIT_RETENTION; 503 when no history store is configured (the records then go to the API's log). Needs the admin scope.",
			Query: []param{
				{"actor", "Only records of this actor id (key:… or a user's subject).", textSchema, false},
				{"action", "Only records of this action (job.cancel, queue.pause…).", textSchema, false},
				{"target", "Only records of this target (job:<id>, queue:<name>…).", textSchema, false},
				{"since", "at or after this time.", timeSchema, false},
				{"until", "before this time.", timeSchema, false},
				limitParam, cursorParam,
			},
			Status: http.StatusOK, Response: auditList{}, Errors: []int{400, 403, 503},
		}},
	}
}

// recordKeys records the keys this API accepts as it starts ("keys.loaded",
// by the system): their ids, scopes and queue patterns, never the keys. A
// change of SUNDIAL_API_KEYS shows as the next start's record.
func (s *Server) recordKeys(ctx context.Context) {
	var b strings.Builder
	for i, id := range s.auth.keyIDs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(id)
		b.WriteString(" scopes=")
		b.WriteString(scopeList(s.auth.scopes[i]))
		b.WriteString(" queues=")
		b.WriteString(s.auth.queues[i].String())
	}
	detail := b.String()
	switch {
	case s.open():
		detail = "no keys: the API is open"
	case s.auth.open():
		detail = "no keys"
	}
	if s.oidc != nil {
		detail += "; sign-in with OpenID Connect at " + s.oidc.cfg.Issuer
	}
	now := time.Now().UTC()
	s.writeAudit(ctx, audit.Record{ID: audit.NewID(now), At: now, Actor: audit.Actor{Kind: audit.ActorSystem},
		Action: "keys.loaded", Target: "api", Outcome: audit.OutcomeOK, Detail: detail})
}

// scopeList names a key's scopes: "read+submit+work+admin" for all.
func scopeList(scopes map[string]bool) string {
	if scopes == nil || scopes[scopeAdmin] {
		return "read+submit+work+admin"
	}
	out := "read"
	for _, sc := range []string{scopeSubmit, scopeWork} {
		if scopes[sc] {
			out += "+" + sc
		}
	}
	return out
}

// eventActions are the audit actions whose job events name their actor.
var eventActions = map[job.EventType]string{
	job.EventCancelled: "job.cancel",
	job.EventRetried:   "job.retry",
	job.EventSignal:    "job.signal",
}

// eventActorWindow is how long before its event an action's record may be:
// an active job's cancel ends it when its handler stops.
const eventActorWindow = time.Hour

// eventActors names, on a job's cancelled, retried and signal events, who
// caused them through the API: the actor of the nearest earlier record of
// the job's audit log with that action (at most 2 s later, for clocks), each
// record used once. Events of jobs a bulk action selected name no actor: the
// bulk action's own record names its filter. Without an audit store, or when
// it fails, the events go out as they are.
func (s *Server) eventActors(ctx context.Context, id string, events []eventView) {
	if s.cfg.AuditLog == nil {
		return
	}
	var first, last time.Time
	for _, e := range events {
		if eventActions[e.Type] == "" {
			continue
		}
		if first.IsZero() || e.At.Before(first) {
			first = e.At
		}
		if e.At.After(last) {
			last = e.At
		}
	}
	if first.IsZero() {
		return
	}
	recs, _, err := s.cfg.AuditLog.Query(ctx, audit.Query{Target: "job:" + id, Since: first.Add(-eventActorWindow), Until: last.Add(2 * time.Second), Limit: audit.MaxPageSize})
	if err != nil {
		s.log.Warn("job events: the audit log cannot be read; events without actors", "job_id", id, "err", err)
		return
	}
	used := map[string]bool{}
	for i := range events {
		action := eventActions[events[i].Type]
		if action == "" {
			continue
		}
		for _, r := range recs { // newest first
			if used[r.ID] || r.Action != action || r.Outcome != audit.OutcomeOK || r.At.After(events[i].At.Add(2*time.Second)) ||
				r.At.Before(events[i].At.Add(-eventActorWindow)) {
				continue
			}
			used[r.ID] = true
			a := r.Actor
			events[i].Actor = &a
			break
		}
	}
}
