package history

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Search limits.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// cursor is the position after the last job of a page: newest first means
// the next page holds jobs with (created_at, _id) below it.
type cursor struct {
	CreatedAt int64  `json:"c"` // unix ms
	ID        string `json:"i"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.ID == "" {
		return c, fmt.Errorf("%w: not a cursor of this search", ErrInvalidCursor)
	}
	return c, nil
}

// Search returns the jobs matching q, newest first (by created_at, then
// id), and the cursor of the next page ("" on the last page). Paging is by
// cursor, never by offset, so each job appears on exactly one page even
// while new jobs arrive. A limit outside 1..MaxLimit is taken as the
// default or MaxLimit.
func (s *Store) Search(ctx context.Context, q Query) ([]*job.Job, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	filter := bson.D{}
	if q.Queue != "" {
		filter = append(filter, bson.E{Key: fQueue, Value: q.Queue})
	}
	if q.Type != "" {
		filter = append(filter, bson.E{Key: fType, Value: q.Type})
	}
	if q.Group != "" {
		filter = append(filter, bson.E{Key: fGroup, Value: q.Group})
	}
	if q.State != "" {
		filter = append(filter, bson.E{Key: fState, Value: string(q.State)})
	}
	if q.Tag != "" {
		filter = append(filter, bson.E{Key: fTags, Value: q.Tag})
	}
	if len(q.Payload) > 0 {
		// The first term as an equality, which FerretDB pushes down to
		// its index ($all it does not); the others beside it.
		filter = append(filter, bson.E{Key: fPayloadTerms, Value: q.Payload[0]})
		if len(q.Payload) > 1 {
			var and bson.A
			for _, term := range q.Payload[1:] {
				and = append(and, bson.D{{Key: fPayloadTerms, Value: term}})
			}
			filter = append(filter, bson.E{Key: "$and", Value: and})
		}
	}
	if len(q.DependsOn) > 0 {
		filter = append(filter, bson.E{Key: fDependsOn, Value: bson.D{{Key: "$in", Value: q.DependsOn}}})
	}
	created := bson.D{}
	if !q.From.IsZero() {
		created = append(created, bson.E{Key: "$gte", Value: q.From})
	}
	if !q.To.IsZero() {
		created = append(created, bson.E{Key: "$lt", Value: q.To})
	}
	if len(created) > 0 {
		filter = append(filter, bson.E{Key: fCreatedAt, Value: created})
	}
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, "", err
		}
		at := time.UnixMilli(c.CreatedAt).UTC()
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: fCreatedAt, Value: bson.D{{Key: "$lt", Value: at}}}},
			bson.D{{Key: fCreatedAt, Value: at}, {Key: fID, Value: bson.D{{Key: "$lt", Value: c.ID}}}},
		}})
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	opts := options.Find().
		SetSort(bson.D{{Key: fCreatedAt, Value: -1}, {Key: fID, Value: -1}}).
		SetLimit(int64(limit) + 1)
	cur, err := s.jobs.Find(ctx, filter, opts)
	if err != nil {
		return nil, "", fmt.Errorf("history: search: %w", err)
	}
	var docs []jobDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, "", fmt.Errorf("history: search: %w", err)
	}
	next := ""
	if len(docs) > limit {
		docs = docs[:limit]
		last := docs[limit-1]
		next = encodeCursor(cursor{CreatedAt: last.CreatedAt.UnixMilli(), ID: last.ID})
	}
	out := make([]*job.Job, len(docs))
	for i := range docs {
		out[i] = docs[i].job()
	}
	return out, next, nil
}

// Job returns the last recorded state of job id, or ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (*job.Job, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var d jobDoc
	err := s.jobs.FindOne(ctx, bson.D{{Key: fID, Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("history: job: %w", err)
	}
	return d.job(), nil
}

// EachEvent calls fn with every recorded event of queue, in the order the
// engine wrote them, with one query (for audits and tools, such as the
// fault soak; the events' Type is left empty). It stops at fn's first
// error and returns it.
func (s *Store) EachEvent(ctx context.Context, queue string, fn func(job.Event) error) error {
	prefix := queue + "/"
	cur, err := s.events.Find(ctx, bson.D{{Key: fID, Value: bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: queue + "0"}}}},
		options.Find().SetSort(bson.D{{Key: fID, Value: 1}}))
	if err != nil {
		return fmt.Errorf("history: events: %w", err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var d eventDoc
		if err := cur.Decode(&d); err != nil {
			return fmt.Errorf("history: events: %w", err)
		}
		if err := fn(d.event("")); err != nil {
			return err
		}
	}
	return cur.Err()
}

// Events returns a page of the recorded events of job id in the order the
// engine wrote them (page.Limit of them, 50 by default, at most MaxLimit,
// after page.Cursor) and the cursor of the next page, or ErrNotFound when
// there are none. Their type is the job
// document's. The order is the stream's (the _id holds the queue and the
// stream position), not the events' times: those come from the clocks of
// different hosts and share milliseconds.
func (s *Store) Events(ctx context.Context, jobID string, page EventPage) ([]job.Event, string, error) {
	limit := page.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	filter := bson.D{{Key: fJobID, Value: jobID}}
	if page.Cursor != "" {
		c, err := decodeCursor(page.Cursor)
		if err != nil {
			return nil, "", err
		}
		filter = append(filter, bson.E{Key: fID, Value: bson.D{{Key: "$gt", Value: c.ID}}})
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	cur, err := s.events.Find(ctx, filter,
		options.Find().SetSort(bson.D{{Key: fID, Value: 1}}).SetLimit(int64(limit)+1))
	if err != nil {
		return nil, "", fmt.Errorf("history: events: %w", err)
	}
	var docs []eventDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, "", fmt.Errorf("history: events: %w", err)
	}
	if len(docs) == 0 && page.Cursor == "" {
		return nil, "", ErrNotFound
	}
	next := ""
	if len(docs) > limit {
		docs = docs[:limit]
		next = encodeCursor(cursor{ID: docs[limit-1].ID})
	}
	var j struct {
		Type string `bson:"type"`
	}
	err = s.jobs.FindOne(ctx, bson.D{{Key: fID, Value: jobID}}, options.FindOne().SetProjection(bson.D{{Key: fType, Value: 1}})).Decode(&j)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, "", fmt.Errorf("history: events: %w", err)
	}
	out := make([]job.Event, len(docs))
	for i := range docs {
		out[i] = docs[i].event(j.Type)
	}
	return out, next, nil
}
