package history

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// janitorChunk is how many documents one janitor delete removes: FerretDB
// deletes by a list of ids, which PostgreSQL caps at 65,535 parameters.
const janitorChunk = 5000

// Expire deletes the job documents whose last event, and the events, that
// are older than the retention, and returns how many it deleted. Real
// MongoDB does this itself with TTL indexes; the writer runs Expire
// periodically where they are missing (FerretDB).
func (s *Store) Expire(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-s.opts.Retention)
	total := 0
	for _, t := range ttlIndexes {
		n, err := s.expire(ctx, s.db.Collection(t.coll), t.field, cutoff)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (s *Store) expire(ctx context.Context, coll *mongo.Collection, field string, cutoff time.Time) (int, error) {
	filter := bson.D{{Key: field, Value: bson.D{{Key: "$lt", Value: cutoff}}}}
	total := 0
	for {
		ids, err := s.expiredIDs(ctx, coll, filter)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		ctx1, cancel := s.opCtx(ctx)
		res, err := coll.DeleteMany(ctx1, bson.D{{Key: fID, Value: bson.D{{Key: "$in", Value: ids}}}})
		cancel()
		if err != nil {
			return total, fmt.Errorf("history: expire %s: %w", coll.Name(), err)
		}
		total += int(res.DeletedCount)
		if len(ids) < janitorChunk {
			return total, nil
		}
	}
}

func (s *Store) expiredIDs(ctx context.Context, coll *mongo.Collection, filter bson.D) ([]any, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: fID, Value: 1}}).SetLimit(janitorChunk))
	if err != nil {
		return nil, fmt.Errorf("history: expire %s: %w", coll.Name(), err)
	}
	var docs []struct {
		ID any `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("history: expire %s: %w", coll.Name(), err)
	}
	ids := make([]any, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	return ids, nil
}

// runJanitor runs Expire every JanitorInterval until ctx ends, where the
// server lacks TTL indexes. The first round waits one interval, so that
// restarts do not each rescan the collections, and a round runs only in the
// writer that takes the round's Redis key, so several writers do not repeat
// it. Errors are logged; the next round retries.
func (w *Writer) runJanitor(ctx context.Context) {
	s := w.store
	t := time.NewTicker(s.opts.JanitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := w.rdb.SetNX(ctx, janitorKey, w.own.id, s.opts.JanitorInterval*9/10).Result()
		if err != nil || !ok {
			continue
		}
		if n, err := s.Expire(ctx, time.Now()); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("history janitor failed; retrying next round", "err", err, "deleted", n)
		} else if n > 0 {
			s.log.Info("history janitor deleted expired documents", "deleted", n, "retention", s.opts.Retention)
		}
	}
}
