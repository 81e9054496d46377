package sundialmongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/outbox"
)

// Collection is the outbox collection's name.
const Collection = "sundial_outbox"

// ErrNoTransaction: SubmitTx was called with a context that carries no
// session in a running transaction (see mongo.Session.WithTransaction).
var ErrNoTransaction = errors.New("sundialmongo: SubmitTx needs the context of a session in a transaction (mongo.Session.WithTransaction's callback context)")

// ErrNoTransactions: the server has no multi-document transactions.
var ErrNoTransactions = errors.New("sundialmongo: this server has no transactions")

// document is one outbox entry. Its _id is the job id, a ULID: ids sort in
// the order SubmitTx made them, which is the order the relay reads.
type document struct {
	ID        string    `bson:"_id"`
	Queue     string    `bson:"queue"`
	Job       string    `bson:"job"` // the job as the engine stores it, JSON
	CreatedAt time.Time `bson:"created_at"`
}

// SubmitTx writes jobs (sundial.Job values or typed jobs) into db's outbox within the transaction of ctx's
// session (the callback context of mongo.Session.WithTransaction) and
// returns their job ids, in order. Nothing reaches Redis until the
// transaction commits; then the relay submits each job exactly once, with
// the id returned here. A validation error is a *job.FieldError. Jobs may
// not set IdempotencyKey or DependsOn (see docs/outbox.md).
func SubmitTx(ctx context.Context, db *mongo.Database, jobs ...sundial.Args) ([]string, error) {
	if s := mongo.SessionFromContext(ctx); s == nil || !s.TransactionRunning() {
		return nil, ErrNoTransaction
	}
	return insert(ctx, db, jobs)
}

// insert writes the outbox documents of jobs with ctx's session, if any.
func insert(ctx context.Context, db *mongo.Database, jobs []sundial.Args) ([]string, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	now := time.Now()
	built, err := outbox.Prepare(jobs, sundial.Build)
	if err != nil {
		return nil, err
	}
	docs := make([]any, len(built))
	ids := make([]string, len(built))
	for i, j := range built {
		b, err := outbox.Encode(j)
		if err != nil {
			return nil, fmt.Errorf("sundialmongo: %w", err)
		}
		docs[i] = document{ID: j.ID, Queue: j.Queue, Job: string(b), CreatedAt: now}
		ids[i] = j.ID
	}
	if _, err := db.Collection(Collection).InsertMany(ctx, docs, options.InsertMany().SetOrdered(true)); err != nil {
		return nil, fmt.Errorf("sundialmongo: insert into the outbox: %w", err)
	}
	return ids, nil
}

// CheckTransactions returns an error wrapping ErrNoTransactions when db's
// server cannot run multi-document transactions: FerretDB (its buildInfo
// names a ferretdbVersion) or a standalone mongod (hello names no replica
// set and it is no mongos).
func CheckTransactions(ctx context.Context, db *mongo.Database) error {
	admin := db.Client().Database("admin")
	var info bson.M
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return fmt.Errorf("sundialmongo: buildInfo: %w", err)
	}
	if v, ok := info["ferretdbVersion"]; ok {
		return fmt.Errorf("%w: it is FerretDB %v, which has none; the MongoDB outbox needs a MongoDB replica set or sharded cluster (docs/outbox.md)", ErrNoTransactions, v)
	}
	var hello bson.M
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return fmt.Errorf("sundialmongo: hello: %w", err)
	}
	if _, rs := hello["setName"]; !rs && hello["msg"] != "isdbgrid" {
		return fmt.Errorf("%w: it is a standalone mongod; the MongoDB outbox needs a replica set or sharded cluster (docs/outbox.md)", ErrNoTransactions)
	}
	return nil
}

// Connect returns a client of uri, for the poller's relay.
func Connect(ctx context.Context, uri string) (*mongo.Client, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(10 * time.Second))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Wait waits until the job with id (as SubmitTx returned it) is relayed
// and then until it ends, or until ctx ends, and returns the ended job.
// Before the relay, Client.Wait answers ErrNotFound; this waits through
// that, so it waits until ctx ends for a job whose transaction aborted.
func Wait(ctx context.Context, c *sundial.Client, id string) (*sundial.Record, error) {
	return outbox.Wait(ctx, c, id)
}
