// Package history writes every job event from the queues' Redis streams to
// MongoDB and answers history queries (search, a job's events, finished
// jobs that have left Redis). It never sits on the hot path: the queue keeps
// working while MongoDB is slow or down.
package history

import (
	"context"
	"errors"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// Errors returned by a Reader. Callers test them with errors.Is.
var (
	ErrNotFound      = errors.New("not found in history")
	ErrInvalidCursor = errors.New("invalid cursor")
)

// Query filters a history search. Zero fields do not filter.
type Query struct {
	Queue string
	Type  string
	Group string // the jobs' fairness group (a tenant)
	State job.State
	From  time.Time // created_at ≥ From
	To    time.Time // created_at < To
	// DependsOn selects the jobs that depend on any of these ids (as
	// stored: a job of another queue is named "<queue>|<id>").
	DependsOn []string
	// Tag selects the jobs with this tag.
	Tag string
	// Payload selects the jobs whose payload has all these top-level
	// field values, each a PayloadTerm.
	Payload []string
	Limit   int    // 1..500; 0 means 50
	Cursor  string // opaque, from a previous page
}

// EventPage selects a page of a job's events.
type EventPage struct {
	Limit  int    // 1..500; 0 means 50
	Cursor string // opaque, from a previous page
}

// Reader answers history queries. The HTTP API depends on this interface;
// *Store implements it over MongoDB.
type Reader interface {
	// Search returns jobs matching q, newest first, and the cursor of the
	// next page ("" on the last page).
	Search(ctx context.Context, q Query) ([]*job.Job, string, error)
	// Events returns a page of a job's events, oldest first, and the
	// cursor of the next page ("" on the last); ErrNotFound when it has
	// none.
	Events(ctx context.Context, jobID string, page EventPage) ([]job.Event, string, error)
	// Job returns a job's last recorded state; ErrNotFound when unknown.
	Job(ctx context.Context, id string) (*job.Job, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}
