package history

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"
)

// Update batch sizes. FerretDB v1 holds one PostgreSQL connection per
// matched document until an update command ends (50 by default), so a
// larger command deadlocks it; updates there go in small commands.
const (
	mongoUpdateChunk  = 500
	ferretUpdateChunk = 16
)

// writeStats counts what one write did.
type writeStats struct {
	events, duplicateEvents   int
	jobsInserted, jobsUpdated int
	staleUpdates              int // groups older than the stored document
}

// write stores a batch: every event (insert-only, duplicates ignored) and,
// for each job group, its document. A group holding the job's submitted
// event creates the document with one insert; other groups update it with
// a guarded update that only applies when the stored version is older, so
// an older event never overwrites a newer state and a replayed batch
// changes nothing. Writes are idempotent: after an error the caller
// retries the whole batch.
//
// The guard is correct on FerretDB, whose updates are not atomic
// read-modify-writes, because one writer at a time owns a queue (see
// owner.go) and a job's events all live in its queue's stream.
func (s *Store) write(ctx context.Context, events []*streamEvent, groups []*jobGroup) (writeStats, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	// Events and job documents go to different collections: write both at
	// once (two connections, two server threads).
	var evStats, jobStats writeStats
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.insertEvents(gctx, events, &evStats) })
	g.Go(func() error { return s.writeJobs(gctx, groups, &jobStats) })
	err := g.Wait()
	jobStats.events, jobStats.duplicateEvents = evStats.events, evStats.duplicateEvents
	return jobStats, err
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

func (s *Store) insertEvents(ctx context.Context, events []*streamEvent, st *writeStats) error {
	if len(events) == 0 {
		return nil
	}
	docs := make([]any, len(events))
	for i, e := range events {
		docs[i] = newEventDoc(e)
	}
	_, err := s.events.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	dups, err := duplicates(err)
	if err != nil {
		return fmt.Errorf("history: insert events: %w", err)
	}
	st.events, st.duplicateEvents = len(events)-len(dups), len(dups)
	return nil
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

// updateJobs applies groups to existing documents, each only where the
// stored version is older than the group's. Documents that turn out not to
// exist (the submitted event was never seen, or retention removed the
// document) are created from what the group knows.
func (s *Store) updateJobs(ctx context.Context, groups []*jobGroup, st *writeStats) error {
	if len(groups) == 0 {
		return nil
	}
	chunk := mongoUpdateChunk
	if s.FerretDB() {
		chunk = ferretUpdateChunk
	}
	var matched int64
	for start := 0; start < len(groups); start += chunk {
		part := groups[start:min(start+chunk, len(groups))]
		models := make([]mongo.WriteModel, len(part))
		for i, g := range part {
			models[i] = guardedUpdate(g)
		}
		res, err := s.jobs.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if err != nil {
			return fmt.Errorf("history: update jobs: %w", err)
		}
		matched += res.MatchedCount
	}
	st.jobsUpdated = int(matched)
	if int(matched) == len(groups) {
		return nil
	}
	// Some guards did not hold: find out which documents are newer (a
	// replay: nothing to do) and which are missing (create them).
	return s.createMissing(ctx, groups, st)
}

// guardedUpdate sets g's fields on its job's document where the stored
// version is older than g's last event.
func guardedUpdate(g *jobGroup) mongo.WriteModel {
	set, unset := g.fields()
	update := bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	filter := bson.D{{Key: fID, Value: g.id}, {Key: fVersion, Value: bson.D{{Key: "$lt", Value: string(g.version)}}}}
	return mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update)
}

func (s *Store) createMissing(ctx context.Context, groups []*jobGroup, st *writeStats) error {
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.id
	}
	cur, err := s.jobs.Find(ctx, bson.D{{Key: fID, Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: fID, Value: 1}, {Key: fVersion, Value: 1}}))
	if err != nil {
		return fmt.Errorf("history: find job versions: %w", err)
	}
	var found []struct {
		ID      string `bson:"_id"`
		Version string `bson:"version"`
	}
	if err := cur.All(ctx, &found); err != nil {
		return fmt.Errorf("history: find job versions: %w", err)
	}
	stored := make(map[string]string, len(found))
	for _, f := range found {
		stored[f.ID] = f.Version
	}
	var missing []*jobGroup
	for _, g := range groups {
		v, ok := stored[g.id]
		switch {
		case !ok:
			missing = append(missing, g)
		case v >= string(g.version):
			st.staleUpdates++
		}
	}
	if len(missing) == 0 {
		return nil
	}
	dups, err := s.insertJobs(ctx, missing)
	if err != nil {
		return err
	}
	st.jobsInserted += len(missing) - len(dups)
	for _, g := range dups { // created meanwhile: apply the guarded update once more
		if _, err := s.jobs.BulkWrite(ctx, []mongo.WriteModel{guardedUpdate(g)}); err != nil {
			return fmt.Errorf("history: update jobs: %w", err)
		}
	}
	return nil
}

// duplicates splits the error of an unordered insert into the indexes of
// the documents that already existed (duplicate _id) and any other error.
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
