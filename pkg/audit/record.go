package audit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// Outcomes of a Record.
const (
	// OutcomeOK: the action was done (a 2xx answer).
	OutcomeOK = "ok"
	// OutcomeRefused: the caller was not allowed (401 or 403).
	OutcomeRefused = "refused"
	// OutcomeFailed: the action was allowed but did not happen (another
	// error: a conflict, a bad request, an unavailable Redis).
	OutcomeFailed = "failed"
)

// Kinds of Actor.
const (
	// ActorKey is a caller authenticated by an API key; Actor.ID is the
	// key's id (KeyID), never the key.
	ActorKey = "key"
	// ActorUser is a user signed in with OpenID Connect; Actor.ID is the
	// provider's subject, Actor.Name the user's name or email.
	ActorUser = "user"
	// ActorAnonymous is a caller without valid credentials (a refused
	// attempt) or any caller of an open API.
	ActorAnonymous = "anonymous"
	// ActorSystem is the API process itself (the keys it started with).
	ActorSystem = "system"
)

// Actor is who did something.
type Actor struct {
	Kind string `json:"kind" bson:"kind"`
	// ID is stable and not secret: "key:1a2b3c4d5e6f" for an API key
	// (KeyID), the OpenID subject for a user, empty for anonymous callers.
	ID string `json:"id,omitempty" bson:"id,omitempty"`
	// Name is a user's display name or email (OpenID Connect).
	Name string `json:"name,omitempty" bson:"name,omitempty"`
	// IP is the client's address as the API saw it.
	IP string `json:"ip,omitempty" bson:"ip,omitempty"`
}

// String names the actor for log lines and messages: "key:1a2b3c4d5e6f",
// "user:<subject> (<name>)", "anonymous".
func (a Actor) String() string {
	switch {
	case a.Kind == ActorUser && a.Name != "":
		return "user:" + a.ID + " (" + a.Name + ")"
	case a.Kind == ActorUser:
		return "user:" + a.ID
	case a.ID != "":
		return a.ID
	}
	return a.Kind
}

// Record is one entry of the audit log.
type Record struct {
	// ID orders records: the time in nanoseconds (hex) and a random
	// suffix, so that newer records have greater ids.
	ID        string    `json:"id" bson:"_id"`
	At        time.Time `json:"at" bson:"at"`
	Actor     Actor     `json:"actor" bson:"actor"`
	RequestID string    `json:"request_id,omitempty" bson:"request_id,omitempty"`
	// Action names what was attempted: "job.cancel", "queue.pause",
	// "jobs.bulk.retry", "auth.refused"… (docs/security.md lists them).
	Action string `json:"action" bson:"action"`
	// Target is what it was done to: "job:<id>", "queue:<name>",
	// "schedule:<id>", "queue:<name>/limit:<name>"…; the route for a
	// refused attempt.
	Target string `json:"target,omitempty" bson:"target,omitempty"`
	// Filter is a bulk action's selection as JSON (its filter, or its ids'
	// count), empty for other actions.
	Filter string `json:"filter,omitempty" bson:"filter,omitempty"`
	// Outcome is OutcomeOK, OutcomeRefused or OutcomeFailed; Status is the
	// HTTP status answered and Code the API's error code, if any.
	Outcome string `json:"outcome" bson:"outcome"`
	Status  int    `json:"status,omitempty" bson:"status,omitempty"`
	Code    string `json:"code,omitempty" bson:"code,omitempty"`
	// Detail says more in a few words: a bulk action's counts, a refusal's
	// reason. Never a secret.
	Detail string `json:"detail,omitempty" bson:"detail,omitempty"`
}

// NewID returns a record id for a record made at t.
func NewID(t time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%016x", t.UnixNano()) + hex.EncodeToString(b)
}

// Sink keeps records.
type Sink interface {
	// Write keeps r. An error means r was not kept.
	Write(ctx context.Context, r Record) error
}

// Reader reads the audit log.
type Reader interface {
	// Query returns a page of records, newest first, and the cursor of the
	// next page ("" on the last).
	Query(ctx context.Context, q Query) ([]Record, string, error)
}

// Query selects records; zero fields select everything.
type Query struct {
	Actor  string // Actor.ID
	Action string
	Target string
	Since  time.Time // at or after
	Until  time.Time // before
	Limit  int       // 1..500; default 50
	Cursor string    // the previous page's next cursor
}

// ErrInvalidCursor is returned for a cursor that Query did not make.
var ErrInvalidCursor = errors.New("audit: invalid cursor")

// Log is the Sink used when no store is configured: every record becomes
// a log line ("audit" at info level) with its fields, so that the audit
// trail is kept by whatever keeps the logs.
type Log struct{ Logger *slog.Logger }

// Write logs r.
func (l Log) Write(ctx context.Context, r Record) error {
	l.Logger.LogAttrs(ctx, slog.LevelInfo, "audit", Attrs(r)...)
	return nil
}

// Attrs are r's fields as log attributes (snake_case keys).
func Attrs(r Record) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("audit_id", r.ID),
		slog.Time("at", r.At),
		slog.String("actor_kind", r.Actor.Kind),
		slog.String("actor_id", r.Actor.ID),
		slog.String("action", r.Action),
		slog.String("target", r.Target),
		slog.String("outcome", r.Outcome),
		slog.Int("status", r.Status),
		slog.String("request_id", r.RequestID),
	}
	if r.Actor.Name != "" {
		attrs = append(attrs, slog.String("actor_name", r.Actor.Name))
	}
	if r.Actor.IP != "" {
		attrs = append(attrs, slog.String("remote_ip", r.Actor.IP))
	}
	if r.Filter != "" {
		attrs = append(attrs, slog.String("filter", r.Filter))
	}
	if r.Code != "" {
		attrs = append(attrs, slog.String("code", r.Code))
	}
	if r.Detail != "" {
		attrs = append(attrs, slog.String("detail", r.Detail))
	}
	return attrs
}

// KeyID names an API key in the audit log without revealing it: "key:" and
// the first 12 hex digits of the key's SHA-256. An operator finds a key's
// id with `printf %s "$KEY" | sha256sum | cut -c1-12`; the API logs every
// key's id at start.
func KeyID(key string) string {
	d := sha256.Sum256([]byte(key))
	return "key:" + hex.EncodeToString(d[:6])
}

// MarshalJSON writes r with its time in the API's one format
// (job.TimeLayout: RFC 3339, milliseconds, UTC).
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	return json.Marshal(struct {
		plain
		At job.Time `json:"at"`
	}{plain(r), job.Time(r.At)})
}
