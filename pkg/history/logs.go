package history

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Job logs in the history (docs/concepts.md, "Job logs"): when a batch holds
// a job's log event, the writer copies the lines the job keeps in Redis
// into the logs collection, one document per line named by the job and
// the line's seq, so that a line copied twice (a replayed batch, two log
// events) is one document. They expire with the history's retention.

// logDoc is a log line as stored.
type logDoc struct {
	ID      string            `bson:"_id"` // "<job id>:<seq, 12 digits>"
	JobID   string            `bson:"job_id"`
	Seq     int64             `bson:"seq"`
	At      time.Time         `bson:"at"`
	Attempt int               `bson:"attempt"`
	Level   string            `bson:"level"`
	Message string            `bson:"message"`
	Fields  map[string]string `bson:"fields,omitempty"`
}

// readLogLines reads the log lines of each group that holds a log event,
// with one pipelined round trip (a job keeps at most its cap of lines).
func readLogLines(ctx context.Context, rdb redis.UniversalClient, groups []*jobGroup) error {
	pipe := rdb.Pipeline()
	cmds := map[*jobGroup]*redis.StringSliceCmd{}
	for _, g := range groups {
		g.logLines = nil
		if g.logs {
			cmds[g] = pipe.LRange(ctx, queue.LogKey(g.queue, g.id), 0, -1)
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	for g, cmd := range cmds {
		for _, raw := range cmd.Val() {
			if l, ok := queue.ParseLogLine(raw); ok {
				g.logLines = append(g.logLines, l)
			}
		}
	}
	return nil
}

// insertLogs stores the log lines read for groups; lines stored before are
// skipped.
func (s *Store) insertLogs(ctx context.Context, groups []*jobGroup) error {
	var docs []any
	for _, g := range groups {
		for _, l := range g.logLines {
			docs = append(docs, logDoc{ID: fmt.Sprintf("%s:%012d", g.id, l.Seq), JobID: g.id, Seq: l.Seq, At: time.Time(l.At),
				Attempt: l.Attempt, Level: l.Level, Message: l.Message, Fields: l.Fields})
		}
	}
	if len(docs) == 0 {
		return nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := s.logs.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if _, err := duplicates(err); err != nil {
		return fmt.Errorf("history: insert log lines: %w", err)
	}
	return nil
}

// Logs returns up to limit of job id's log lines with a seq above after,
// oldest first, as the history keeps them (once the job left Redis).
func (s *Store) Logs(ctx context.Context, jobID string, after int64, limit int) ([]queue.LogLine, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	cur, err := s.logs.Find(ctx, bson.D{{Key: fJobID, Value: jobID}, {Key: fSeq, Value: bson.D{{Key: "$gt", Value: after}}}},
		options.Find().SetSort(bson.D{{Key: fSeq, Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("history: logs: %w", err)
	}
	var docs []logDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("history: logs: %w", err)
	}
	out := make([]queue.LogLine, len(docs))
	for i, d := range docs {
		out[i] = queue.LogLine{Seq: d.Seq, At: job.Time(d.At.UTC()), Attempt: d.Attempt, Level: d.Level, Message: d.Message, Fields: d.Fields}
	}
	return out, nil
}
