package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Collection is the MongoDB collection of the audit log, in the history
// store's database.
const Collection = "audit"

// DefaultRetention is how long records are kept when StoreOptions.Retention
// is zero: 90 days (SUNDIAL_AUDIT_RETENTION=2160h).
const DefaultRetention = 2160 * time.Hour

// Page sizes of Query.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// StoreOptions tune a Store. The zero value is usable.
type StoreOptions struct {
	// Retention is how long a record is kept. Default DefaultRetention.
	Retention time.Duration
	// JanitorInterval is how often RunJanitor deletes expired records where
	// TTL indexes are missing (FerretDB). Default 1 h.
	JanitorInterval time.Duration
	// OpTimeout bounds each MongoDB call. Default 5 s: a record is written
	// while its request waits.
	OpTimeout time.Duration
	// Logger receives the store's logs. Default slog.Default().
	Logger *slog.Logger
}

func (o *StoreOptions) fill() {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.JanitorInterval <= 0 {
		o.JanitorInterval = time.Hour
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Store is the audit log in MongoDB: a Sink and a Reader. It is safe for
// concurrent use.
type Store struct {
	coll *mongo.Collection
	db   *mongo.Database
	opts StoreOptions

	mu       sync.Mutex
	ready    bool
	ferretDB bool
}

var (
	_ Sink   = (*Store)(nil)
	_ Reader = (*Store)(nil)
)

// NewStore returns a Store over db's "audit" collection. It does no I/O;
// Setup creates the indexes and Write calls it until it succeeds.
func NewStore(db *mongo.Database, opts StoreOptions) *Store {
	opts.fill()
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	return &Store{db: db, coll: db.Collection(Collection, majority), opts: opts}
}

func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.OpTimeout)
}

// Setup detects the server and creates the indexes: the time (a TTL index
// on MongoDB, which expires records by itself), actor, action and target.
// It is idempotent.
func (s *Store) Setup(ctx context.Context) error {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready {
		return nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var info bson.M
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return fmt.Errorf("audit: buildInfo: %w", err)
	}
	_, ferret := info["ferretdbVersion"]
	atName, at := "at", options.Index().SetName("at")
	if !ferret {
		atName = "at_ttl"
		at = options.Index().SetName(atName).SetExpireAfterSeconds(int32(s.opts.Retention / time.Second))
	}
	models := []mongo.IndexModel{
		{Keys: bson.D{{Key: "at", Value: 1}}, Options: at},
		{Keys: bson.D{{Key: "actor.id", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("actor_id")},
		{Keys: bson.D{{Key: "action", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("action_id")},
		{Keys: bson.D{{Key: "target", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("target_id")},
	}
	for _, m := range models {
		if _, err := s.coll.Indexes().CreateOne(ctx, m); err != nil {
			var ce mongo.CommandError
			// The TTL index made with another retention: replace it.
			if errors.As(err, &ce) && (ce.Code == 85 || ce.Code == 86) && !ferret {
				if err := s.coll.Indexes().DropOne(ctx, atName); err != nil {
					return fmt.Errorf("audit: replace index: %w", err)
				}
				if _, err := s.coll.Indexes().CreateOne(ctx, m); err != nil {
					return fmt.Errorf("audit: create index: %w", err)
				}
				continue
			}
			return fmt.Errorf("audit: create index: %w", err)
		}
	}
	s.mu.Lock()
	s.ready, s.ferretDB = true, ferret
	s.mu.Unlock()
	return nil
}

// Write inserts r.
func (s *Store) Write(ctx context.Context, r Record) error {
	if err := s.Setup(ctx); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	if _, err := s.coll.InsertOne(ctx, r); err != nil {
		return fmt.Errorf("audit: insert: %w", err)
	}
	return nil
}

// Query returns a page of records, newest first.
func (s *Store) Query(ctx context.Context, q Query) ([]Record, string, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	q.Limit = min(q.Limit, MaxPageSize)
	filter := bson.D{}
	if q.Actor != "" {
		filter = append(filter, bson.E{Key: "actor.id", Value: q.Actor})
	}
	if q.Action != "" {
		filter = append(filter, bson.E{Key: "action", Value: q.Action})
	}
	if q.Target != "" {
		filter = append(filter, bson.E{Key: "target", Value: q.Target})
	}
	at := bson.D{}
	if !q.Since.IsZero() {
		at = append(at, bson.E{Key: "$gte", Value: q.Since})
	}
	if !q.Until.IsZero() {
		at = append(at, bson.E{Key: "$lt", Value: q.Until})
	}
	if len(at) > 0 {
		filter = append(filter, bson.E{Key: "at", Value: at})
	}
	if q.Cursor != "" {
		if !validID(q.Cursor) {
			return nil, "", ErrInvalidCursor
		}
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: q.Cursor}}})
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	cur, err := s.coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(int64(q.Limit+1)))
	if err != nil {
		return nil, "", fmt.Errorf("audit: query: %w", err)
	}
	var out []Record
	if err := cur.All(ctx, &out); err != nil {
		return nil, "", fmt.Errorf("audit: query: %w", err)
	}
	next := ""
	if len(out) > q.Limit {
		out = out[:q.Limit]
		next = out[len(out)-1].ID
	}
	for i := range out {
		out[i].At = out[i].At.UTC()
	}
	return out, next, nil
}

// validID reports whether id has the shape NewID makes (24 hex digits).
func validID(id string) bool {
	if len(id) != 24 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
			return false
		}
	}
	return true
}

// Expire deletes the records older than the retention and returns how many.
// MongoDB's TTL index does this by itself; RunJanitor calls it on FerretDB.
func (s *Store) Expire(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	res, err := s.coll.DeleteMany(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: now.Add(-s.opts.Retention)}}}})
	if err != nil {
		return 0, fmt.Errorf("audit: expire: %w", err)
	}
	return int(res.DeletedCount), nil
}

// RunJanitor expires records every JanitorInterval until ctx ends, where
// the server has no TTL indexes (FerretDB); on MongoDB it returns once
// Setup has found TTL indexes. Errors are logged; the next round retries.
func (s *Store) RunJanitor(ctx context.Context) {
	t := time.NewTicker(s.opts.JanitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Setup(ctx); err != nil {
			s.opts.Logger.Warn("audit janitor: store not ready", "err", err)
			continue
		}
		s.mu.Lock()
		ferret := s.ferretDB
		s.mu.Unlock()
		if !ferret {
			return
		}
		if n, err := s.Expire(ctx, time.Now()); err != nil {
			s.opts.Logger.Warn("audit janitor", "err", err)
		} else if n > 0 {
			s.opts.Logger.Info("audit janitor: expired records", "deleted", n)
		}
	}
}
