package history

import (
	"context"
	"encoding/json"
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
	group          string
	traceparent    string
	durable        string // job.Durable as JSON, for a durable job
	tags           []string
}

// decodeJobHash reads the fields of job id's hash in queue (queue.JobKey)
// with the engine's decoder; nil when the hash is gone (pruned after its
// retention).
func decodeJobHash(q, id string, h map[string]string) *jobHash {
	j := queue.DecodeJob(q, id, h)
	if j == nil {
		return nil
	}
	return hashOf(j)
}

// hashOf returns what the history takes from job j beyond its events.
func hashOf(j *job.Job) *jobHash {
	return &jobHash{
		state: j.State, payload: string(j.Payload), result: string(j.Result), priority: string(j.Priority),
		maxAttempts: j.MaxAttempts, timeout: j.TimeoutSeconds, backoff: j.Backoff,
		runAt: j.RunAt, createdAt: j.CreatedAt, dependsOn: j.DependsOn, idempotencyKey: j.IdempotencyKey,
		group: j.Group, traceparent: j.Traceparent,
		durable: durableJSON(j.Durable), tags: j.Tags,
	}
}

// durableJSON is what a durable job recorded as stored ("" for none): its
// steps and signals, not what it awaits (said of a live job only).
func durableJSON(d *job.Durable) string {
	if d == nil {
		return ""
	}
	c := *d
	c.Awaiting = nil
	b, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	return string(b)
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
	if h.group != "" {
		d = append(d, bson.E{Key: fGroup, Value: h.group})
	}
	if h.traceparent != "" {
		d = append(d, bson.E{Key: fTraceparent, Value: h.traceparent})
	}
	if h.durable != "" {
		d = append(d, bson.E{Key: fDurable, Value: h.durable})
	}
	if len(h.tags) > 0 {
		d = append(d, bson.E{Key: fTags, Value: h.tags})
	}
	if terms := payloadTerms(h.payload); len(terms) > 0 {
		d = append(d, bson.E{Key: fPayloadTerms, Value: terms})
	}
	return d
}

// hashFields are the job hash fields the history reads (see decodeJobHash).
var hashFields = []string{"type", "state", "payload", "result", "priority", "max_attempts", "timeout",
	"backoff_base", "backoff_max", "run_at", "created_at", "depends_on", "idempotency_key", "group", "traceparent", "tags"}

// readJobHashes fills in the hash of each group with one pipelined round
// trip: the fields the history keeps, or for a durable job (a group with
// a step, signal or parked event) the whole hash, its records included.
// Groups whose hash is gone keep hash == nil.
func readJobHashes(ctx context.Context, rdb redis.UniversalClient, groups []*jobGroup) error {
	if len(groups) == 0 {
		return nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(groups))
	whole := make([]*redis.MapStringStringCmd, len(groups))
	for i, g := range groups {
		if g.durable {
			whole[i] = pipe.HGetAll(ctx, queue.JobKey(g.queue, g.id))
		} else {
			cmds[i] = pipe.HMGet(ctx, queue.JobKey(g.queue, g.id), hashFields...)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	for i, g := range groups {
		if whole[i] != nil {
			g.hash = decodeJobHash(g.queue, g.id, whole[i].Val())
			continue
		}
		h := make(map[string]string, len(hashFields))
		for j, v := range cmds[i].Val() {
			if s, ok := v.(string); ok {
				h[hashFields[j]] = s
			}
		}
		g.hash = decodeJobHash(g.queue, g.id, h)
	}
	return nil
}
