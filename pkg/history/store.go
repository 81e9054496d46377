package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// DefaultRetention is how long history is kept when StoreOptions.Retention
// is zero: 30 days (SUNDIAL_HISTORY_RETENTION=720h).
const DefaultRetention = 720 * time.Hour

// StoreOptions tune a Store. The zero value is usable.
type StoreOptions struct {
	// Retention is how long a job document (counted from its last event)
	// and an event are kept. Default DefaultRetention.
	Retention time.Duration
	// JanitorInterval is how often the janitor deletes expired documents
	// where TTL indexes are missing (FerretDB): one writer at a time does,
	// one interval after it started and then every interval. Each round
	// reads both collections in full on FerretDB. Default 1 h.
	JanitorInterval time.Duration
	// OpTimeout bounds each MongoDB call. Default 30 s.
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
		o.OpTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Store is the history in MongoDB: the writer's sink and the API's Reader.
// It is safe for concurrent use.
type Store struct {
	db     *mongo.Database
	jobs   *mongo.Collection
	events *mongo.Collection
	logs   *mongo.Collection
	opts   StoreOptions
	log    *slog.Logger

	mu       sync.Mutex
	ready    bool // Setup succeeded
	ferretDB bool // the server is FerretDB: no TTL indexes, small update batches
}

var _ Reader = (*Store)(nil)

// NewStore returns a Store over db. It does no I/O: the writer calls Setup
// (collections, indexes, server detection) until it succeeds, and reads
// work without it, so a process starts while MongoDB is down.
func NewStore(db *mongo.Database, opts StoreOptions) *Store {
	opts.fill()
	majority := options.Collection().SetWriteConcern(writeconcern.Majority())
	return &Store{
		db:     db,
		jobs:   db.Collection(JobsCollection, majority),
		events: db.Collection(EventsCollection, majority),
		logs:   db.Collection(LogsCollection, majority),
		opts:   opts,
		log:    opts.Logger,
	}
}

// Connect returns a MongoDB client for uri with timeouts suited to the
// history: server selection gives up after 5 s, so that calls fail fast
// (and the writer backs off) while MongoDB is down. Errors never contain
// the URI's password.
func Connect(uri string) (*mongo.Client, error) {
	opts := options.Client().ApplyURI(uri).
		SetAppName("sundial").
		SetServerSelectionTimeout(5 * time.Second).
		SetConnectTimeout(5 * time.Second)
	c, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("history: connect to MongoDB: %s", redact(err.Error(), uri))
	}
	return c, nil
}

// redact removes uri's password (and uri itself) from msg.
func redact(msg, uri string) string {
	if u, err := url.Parse(uri); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// Ping reports whether MongoDB answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	return s.db.Client().Ping(ctx, readpref.Primary())
}

// FerretDB reports whether Setup found a FerretDB server (false before it ran).
func (s *Store) FerretDB() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ferretDB
}

// Setup detects the server (MongoDB or FerretDB) and creates the
// collections' indexes, the retention TTL indexes included on MongoDB. It
// is idempotent; the writer calls it before its first write.
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
		return fmt.Errorf("history: buildInfo: %w", err)
	}
	_, ferret := info["ferretdbVersion"]
	for _, ix := range indexes {
		keys := make(bson.D, len(ix.keys))
		for i, k := range ix.keys {
			keys[i] = bson.E{Key: k, Value: 1}
		}
		m := mongo.IndexModel{Keys: keys, Options: options.Index().SetName(ix.name)}
		if _, err := s.db.Collection(ix.coll).Indexes().CreateOne(ctx, m); err != nil {
			return fmt.Errorf("history: create index %s.%s: %w", ix.coll, ix.name, err)
		}
	}
	for _, ix := range replacedIndexes {
		err := s.db.Collection(ix.coll).Indexes().DropOne(ctx, ix.name)
		var ce mongo.CommandError
		if err != nil && !(errors.As(err, &ce) && (ce.Code == 27 || ce.Code == 26)) { // IndexNotFound, NamespaceNotFound
			return fmt.Errorf("history: drop replaced index %s.%s: %w", ix.coll, ix.name, err)
		}
	}
	if !ferret {
		if err := s.ensureTTL(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.ready, s.ferretDB = true, ferret
	s.mu.Unlock()
	server := "MongoDB"
	if ferret {
		server = "FerretDB (retention by janitor, no TTL indexes)"
	}
	s.log.Info("history store ready", "server", server, "version", info["version"], "retention", s.opts.Retention)
	return nil
}

// indexes serve the queries: search newest first (all jobs, and by each
// filter of the dashboard: queue + state, type + state, type, state,
// group); lookup by idempotency key; a job's events in order.
//
// Every search index ends with created_at, _id: Search sorts by both, and
// MongoDB can walk an index in the order of the sort (and stop after a
// page) only when the index holds every sort field after the equality
// fields. Without _id it sorts all the matching jobs in memory (a blocking
// SORT stage, refused past 100 MB), whatever their number. FerretDB v1 on
// PostgreSQL pushes down only the equality filters, never the sort or the
// limit (docs/history.md, "Search on FerretDB").
var indexes = []struct {
	coll, name string
	keys       []string
}{
	{JobsCollection, "created_id", []string{fCreatedAt, fID}},
	{JobsCollection, "queue_state_created_id", []string{fQueue, fState, fCreatedAt, fID}},
	{JobsCollection, "type_state_created_id", []string{fType, fState, fCreatedAt, fID}},
	{JobsCollection, "type_created_id", []string{fType, fCreatedAt, fID}},
	{JobsCollection, "state_created_id", []string{fState, fCreatedAt, fID}},
	{JobsCollection, "group_created_id", []string{fGroup, fCreatedAt, fID}},
	{JobsCollection, "idempotency_key", []string{fIdempotencyKey}},
	{JobsCollection, "depends_on", []string{fDependsOn}}, // a job's dependents (GET /v1/jobs/{id}/graph)
	{JobsCollection, "tags_created_id", []string{fTags, fCreatedAt, fID}},
	{JobsCollection, "payload_terms_created_id", []string{fPayloadTerms, fCreatedAt, fID}},
	{EventsCollection, "job_at", []string{fJobID, fAt}},
	{LogsCollection, "job_seq", []string{fJobID, fSeq}},
}

// replacedIndexes are the search indexes of earlier releases, without _id
// (see indexes): Setup drops them.
var replacedIndexes = []struct{ coll, name string }{
	{JobsCollection, "queue_state_created"},
	{JobsCollection, "type_created"},
	{JobsCollection, "group_created"},
}

// ttlIndexes are the retention indexes of real MongoDB: jobs expire from
// their last event, events from their time.
var ttlIndexes = []struct{ coll, name, field string }{
	{JobsCollection, "ttl_updated_at", fUpdatedAt},
	{EventsCollection, "ttl_at", fAt},
	{LogsCollection, "ttl_at", fAt},
}

// ensureTTL creates the TTL indexes, or changes their expiry when the
// retention changed (collMod, as createIndexes refuses other options).
func (s *Store) ensureTTL(ctx context.Context) error {
	secs := int32(s.opts.Retention / time.Second)
	for _, t := range ttlIndexes {
		m := mongo.IndexModel{
			Keys:    bson.D{{Key: t.field, Value: 1}},
			Options: options.Index().SetName(t.name).SetExpireAfterSeconds(secs),
		}
		_, err := s.db.Collection(t.coll).Indexes().CreateOne(ctx, m)
		var ce mongo.CommandError
		if errors.As(err, &ce) && (ce.Code == 85 || ce.Code == 86) { // IndexOptionsConflict, IndexKeySpecsConflict
			err = s.db.RunCommand(ctx, bson.D{
				{Key: "collMod", Value: t.coll},
				{Key: "index", Value: bson.D{{Key: "name", Value: t.name}, {Key: "expireAfterSeconds", Value: secs}}},
			}).Err()
		}
		if err != nil {
			return fmt.Errorf("history: TTL index %s.%s: %w", t.coll, t.name, err)
		}
	}
	return nil
}

// opCtx bounds one MongoDB call.
func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.OpTimeout)
}
