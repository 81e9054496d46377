package history

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"
)

// How job updates are sent. MongoDB takes them in unordered bulk writes.
// FerretDB v1 gets one update per command, two at a time: a command whose
// upsert meets a duplicate key stops there (it ignores ordered: false), and
// one that updates many documents holds a PostgreSQL connection per
// document until it ends, which deadlocks its pool beyond 50.
const (
	mongoUpdateChunk    = 500
	ferretUpdateWorkers = 2
)

// writeStats counts what one write did.
type writeStats struct {
	events, duplicateEvents   int
	jobsInserted, jobsUpdated int
	staleUpdates              int // groups older than the stored document
}

// write stores a batch: every event (insert-only, duplicates ignored) and,
// for each job group, its document. A group holding the job's submitted
// event creates the document with one insert; other groups (and replays)
// go through a guarded upsert that only applies when the stored version is
// older, so an older event never overwrites a newer state and a replayed
// batch changes nothing. Writes are idempotent: after an error the caller
// retries the whole batch. Each MongoDB call has its own timeout, so a
// large batch makes progress across retries.
//
// The guard is correct on FerretDB, whose updates are not atomic
// read-modify-writes, because one writer at a time owns a queue (see
// owner.go) and a job's events all live in its queue's stream.
func (s *Store) write(ctx context.Context, events []*streamEvent, groups []*jobGroup) (writeStats, error) {
	// Events and job documents go to different collections: write both at
	// once (two connections, two server threads).
	var evStats, jobStats writeStats
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.insertEvents(gctx, events, &evStats) })
	g.Go(func() error { return s.writeJobs(gctx, groups, &jobStats) })
	g.Go(func() error { return s.insertLogs(gctx, groups) })
	err := g.Wait()
	jobStats.events, jobStats.duplicateEvents = evStats.events, evStats.duplicateEvents
	return jobStats, err
}

func (s *Store) insertEvents(ctx context.Context, events []*streamEvent, st *writeStats) error {
	if len(events) == 0 {
		return nil
	}
	docs := make([]any, len(events))
	for i, e := range events {
		docs[i] = newEventDoc(e)
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := s.events.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	dups, err := duplicates(err)
	if err != nil {
		return fmt.Errorf("history: insert events: %w", err)
	}
	st.events, st.duplicateEvents = len(events)-len(dups), len(dups)
	return nil
}

// writeJobs creates or updates the document of each job group.
func (s *Store) writeJobs(ctx context.Context, groups []*jobGroup, st *writeStats) error {
	var inserts, updates []*jobGroup
	for _, g := range groups {
		if g.first {
			inserts = append(inserts, g)
		} else {
			updates = append(updates, g)
		}
	}
	dups, err := s.insertJobs(ctx, inserts)
	if err != nil {
		return err
	}
	st.jobsInserted = len(inserts) - len(dups)
	return s.updateJobs(ctx, append(updates, dups...), st)
}

// insertJobs creates the documents of groups that hold their job's first
// event. It returns the groups whose document already exists (a replay).
func (s *Store) insertJobs(ctx context.Context, groups []*jobGroup) ([]*jobGroup, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	docs := make([]any, len(groups))
	for i, g := range groups {
		docs[i] = g.document()
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := s.jobs.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	dups, err := duplicates(err)
	if err != nil {
		return nil, fmt.Errorf("history: insert jobs: %w", err)
	}
	out := make([]*jobGroup, len(dups))
	for i, d := range dups {
		out[i] = groups[d]
	}
	return out, nil
}

// updateJobs applies each group to its job's document where the stored
// version is older (guardedUpsert).
func (s *Store) updateJobs(ctx context.Context, groups []*jobGroup, st *writeStats) error {
	if len(groups) == 0 {
		return nil
	}
	var mu sync.Mutex
	send := func(ctx context.Context, part []*jobGroup) error {
		models := make([]mongo.WriteModel, len(part))
		for i, g := range part {
			models[i] = guardedUpsert(g)
		}
		ctx, cancel := s.opCtx(ctx)
		defer cancel()
		res, err := s.jobs.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		stale, err := duplicates(err)
		if err != nil {
			return fmt.Errorf("history: update jobs: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		st.staleUpdates += len(stale)
		if res != nil {
			st.jobsUpdated += int(res.MatchedCount)
			st.jobsInserted += int(res.UpsertedCount)
		}
		return nil
	}
	if !s.FerretDB() {
		for start := 0; start < len(groups); start += mongoUpdateChunk {
			if err := send(ctx, groups[start:min(start+mongoUpdateChunk, len(groups))]); err != nil {
				return err
			}
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ferretUpdateWorkers)
	for i := range groups {
		g.Go(func() error { return send(gctx, groups[i:i+1]) })
	}
	return g.Wait()
}

// guardedUpsert sets g's fields on its job's document where the stored
// version is older than g's last event. The filter cannot match a document
// that is as new or newer, so the upsert then tries to insert a second
// document with that _id and fails with a duplicate key: the group is
// stale and changes nothing. When the document does not exist (the
// submitted event was never seen, or retention removed the document) the
// upsert creates it from what the group knows.
func guardedUpsert(g *jobGroup) mongo.WriteModel {
	set, unset := g.fields()
	update := bson.D{
		{Key: "$set", Value: set},
		{Key: "$setOnInsert", Value: bson.D{{Key: fCreatedAt, Value: g.createdAtGuess()}}},
	}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	filter := bson.D{{Key: fID, Value: g.id}, {Key: fVersion, Value: bson.D{{Key: "$lt", Value: string(g.version)}}}}
	return mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true)
}

// duplicates splits the error of an unordered write into the indexes of
// the operations that met a duplicate _id and any other error.
func duplicates(err error) ([]int, error) {
	if err == nil {
		return nil, nil
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return nil, err
	}
	idx := make([]int, 0, len(bwe.WriteErrors))
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return nil, err
		}
		idx = append(idx, we.Index)
	}
	return idx, nil
}
