package history

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// jobHash is what a job's Redis hash knows beyond its events.
type jobHash struct {
	state          job.State
	payload        string
	result         string
	priority       string
	maxAttempts    int
	timeout        int
	backoff        job.Backoff
	runAt          time.Time
	createdAt      time.Time
	dependsOn      []string
	idempotencyKey string
}

// decodeJobHash reads the fields of a job hash (queue.JobKey) written by
// the engine; nil when the hash is gone (pruned after its retention). The
// engine exports no decoder, so this mirrors its field names.
func decodeJobHash(h map[string]string) *jobHash {
	if len(h) == 0 || h["id"] == "" {
		return nil
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	f64 := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	ms := func(s string) time.Time {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	j := &jobHash{
		state: job.State(h["state"]), payload: h["payload"], result: h["result"],
		priority: h["priority"], maxAttempts: atoi(h["max_attempts"]), timeout: atoi(h["timeout"]),
		backoff:   job.Backoff{BaseSeconds: f64(h["backoff_base"]), MaxSeconds: f64(h["backoff_max"])},
		runAt:     ms(h["run_at"]),
		createdAt: ms(h["created_at"]), idempotencyKey: h["idempotency_key"],
	}
	if d := h["depends_on"]; d != "" {
		j.dependsOn = strings.Split(d, ",")
	}
	return j
}

// fields returns the document fields the hash provides (not created_at,
// which only a new document takes, nor result, which depends on the state).
func (h *jobHash) fields() bson.D {
	d := bson.D{
		{Key: fPriority, Value: h.priority},
		{Key: fMaxAttempts, Value: h.maxAttempts},
		{Key: fTimeout, Value: h.timeout},
		{Key: fBackoff, Value: backoffDoc{BaseSeconds: h.backoff.BaseSeconds, MaxSeconds: h.backoff.MaxSeconds}},
	}
	if h.payload != "" {
		d = append(d, bson.E{Key: fPayload, Value: h.payload})
	}
	if !h.runAt.IsZero() {
		d = append(d, bson.E{Key: fRunAt, Value: h.runAt})
	}
	if len(h.dependsOn) > 0 {
		d = append(d, bson.E{Key: fDependsOn, Value: h.dependsOn})
	}
	if h.idempotencyKey != "" {
		d = append(d, bson.E{Key: fIdempotencyKey, Value: h.idempotencyKey})
	}
	return d
}

// hashFields are the job hash fields the history reads (see decodeJobHash).
var hashFields = []string{"id", "state", "payload", "result", "priority", "max_attempts", "timeout",
	"backoff_base", "backoff_max", "run_at", "created_at", "depends_on", "idempotency_key"}

// readJobHashes fills in the hash of each group with one pipelined round
// trip. Groups whose hash is gone keep hash == nil.
func readJobHashes(ctx context.Context, rdb redis.UniversalClient, groups []*jobGroup) error {
	if len(groups) == 0 {
		return nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(groups))
	for i, g := range groups {
		cmds[i] = pipe.HMGet(ctx, queue.JobKey(g.queue, g.id), hashFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	for i, g := range groups {
		h := make(map[string]string, len(hashFields))
		for j, v := range cmds[i].Val() {
			if s, ok := v.(string); ok {
				h[hashFields[j]] = s
			}
		}
		g.hash = decodeJobHash(h)
	}
	return nil
}
