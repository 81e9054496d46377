package sundialmongo

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/sundialhq/sundial/internal/outbox"
	"github.com/sundialhq/sundial/pkg/queue"
)

// RelayConfig tunes a Relay. Zero values take the documented defaults.
type RelayConfig struct {
	// ID names this relay in the leader lock and the logs. Default
	// "<hostname>-<pid>-<random>".
	ID string
	// LockKey is the Redis key of the leader lock. Default
	// "sundial:outbox:mongodb:leader".
	LockKey string
	// LockTTL is how long a dead relay blocks the others at most. Default 3 s.
	LockTTL time.Duration
	// PollInterval is how often the relay reads the outbox when it is
	// empty (MongoDB's relay polls: FerretDB has no change streams).
	// Default 200 ms.
	PollInterval time.Duration
	// Batch is how many documents one pass reads. Default 1000.
	Batch int
	// Logger receives the relay's logs. Default slog.Default().
	Logger *slog.Logger
}

// Relay moves committed outbox documents into Redis, each exactly once
// (see docs/outbox.md); a leader lock in Redis lets one relay at a time.
type Relay struct {
	r     *outbox.Relay
	store *store
}

// NewRelay returns a relay of db's outbox into q. It does not check that
// the server has transactions (CheckTransactions does).
func NewRelay(db *mongo.Database, q *queue.Client, cfg RelayConfig) *Relay {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	s := &store{c: db.Collection(Collection, relayConcerns)}
	return &Relay{store: s, r: outbox.New(s, q, outbox.Config{
		ID: cfg.ID, LockKey: cfg.LockKey, LockTTL: cfg.LockTTL, PollInterval: cfg.PollInterval,
		Batch: cfg.Batch, Logger: cfg.Logger,
	})}
}

// Run relays until ctx ends, taking part in the leader election; it
// returns nil then. Database and Redis errors are logged and retried.
func (r *Relay) Run(ctx context.Context) error { return r.r.Run(ctx) }

// RelayOnce relays one batch without the leader lock and returns how many
// documents it relayed; for tests and tools.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) { return r.r.RelayOnce(ctx) }

// Leader reports whether this relay holds the leader lock right now.
func (r *Relay) Leader() bool { return r.r.Leader() }

// Lag returns the age of the oldest committed document not yet relayed.
func (r *Relay) Lag(ctx context.Context) (time.Duration, error) { return r.r.Lag(ctx) }

// Collectors returns the relay's metrics, labelled store="mongodb".
func (r *Relay) Collectors() []prometheus.Collector { return r.r.Collectors() }

// Ping checks that the database answers.
func (r *Relay) Ping(ctx context.Context) error {
	_, err := r.store.Oldest(ctx)
	return err
}

// relayConcerns are the relay's read and write concerns: it reads with
// "majority", so that it relays only documents whose transaction a
// failover cannot roll back (with "local" a commit not yet on a majority
// could be relayed, then undone: a job in Redis whose order never
// happened), and deletes with "majority".
var relayConcerns = options.Collection().SetReadConcern(readconcern.Majority()).SetWriteConcern(writeconcern.Majority())

// store is the outbox collection of one database.
type store struct{ c *mongo.Collection }

func (s *store) Name() string { return "mongodb" }

func (s *store) Read(ctx context.Context, n int) ([]outbox.Row, error) {
	cur, err := s.c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(n)))
	if err != nil {
		return nil, err
	}
	var docs []document
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	rows := make([]outbox.Row, len(docs))
	for i, d := range docs {
		j, err := outbox.Decode([]byte(d.Job))
		if err != nil {
			return nil, err
		}
		rows[i] = outbox.Row{ID: d.ID, Job: j}
	}
	return rows, nil
}

func (s *store) Delete(ctx context.Context, rows []outbox.Row) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID.(string)
	}
	_, err := s.c.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	return err
}

func (s *store) Oldest(ctx context.Context) (time.Time, error) {
	var d document
	err := s.c.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return time.Time{}, nil
	}
	return d.CreatedAt, err
}

// Listen returns nil: the relay polls (FerretDB has no change streams).
func (s *store) Listen(context.Context) <-chan struct{} { return nil }
