package outbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Status is what the leading relay of an outbox last wrote about it: what
// GET /v1/outbox answers and the dashboard's overview shows.
type Status struct {
	// Store names the outbox: "postgres" or "mongodb".
	Store string
	// RelayID is the relay that wrote it (Config.ID).
	RelayID string
	// LagSeconds is the age of the oldest committed row not yet relayed
	// (0: none), -1 when the relay could not read the outbox.
	LagSeconds float64
	// Relayed counts the rows relayed since the status key was created,
	// by every relay of the outbox (a relay killed right after deleting
	// rows may leave that pass out).
	Relayed int64
	// At is when the relay wrote it; a relay writes every StatusInterval
	// while it leads, so an older At means no relay leads.
	At time.Time
}

// StatusInterval is how often the leading relay writes its Status.
const StatusInterval = 2 * time.Second

// Stores are the names of the outboxes a relay can serve.
var Stores = []string{"postgres", "mongodb"}

// StatusKey is the Redis hash of an outbox's Status.
func StatusKey(store string) string { return "sundial:outbox:" + store + ":status" }

// ReadStatuses returns the Status of each outbox a relay ever wrote one
// for, in the order of Stores: one pipelined round trip.
func ReadStatuses(ctx context.Context, rdb redis.UniversalClient) ([]Status, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(Stores))
	for i, s := range Stores {
		cmds[i] = pipe.HGetAll(ctx, StatusKey(s))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := []Status{}
	for i, s := range Stores {
		h := cmds[i].Val()
		if len(h) == 0 {
			continue
		}
		st := Status{Store: s, RelayID: h["relay_id"]}
		st.LagSeconds, _ = strconv.ParseFloat(h["lag_seconds"], 64)
		st.Relayed, _ = strconv.ParseInt(h["relayed"], 10, 64)
		if ms, err := strconv.ParseInt(h["at_ms"], 10, 64); err == nil {
			st.At = time.UnixMilli(ms).UTC()
		}
		out = append(out, st)
	}
	return out, nil
}

// writeStatus records the relay's lag in the outbox's status hash.
func (r *Relay) writeStatus(ctx context.Context) {
	lag := -1.0
	if d, err := r.Lag(ctx); err == nil {
		lag = d.Seconds()
	}
	err := r.q.Redis().HSet(ctx, StatusKey(r.store.Name()), "relay_id", r.cfg.ID,
		"lag_seconds", strconv.FormatFloat(lag, 'f', 3, 64), "at_ms", strconv.FormatInt(time.Now().UnixMilli(), 10)).Err()
	if err != nil && ctx.Err() == nil {
		r.log.Warn("writing the outbox relay's status failed", "err", err)
	}
}

// countRelayed adds n relayed rows to the status. A relay killed between
// deleting rows and this count leaves them out: the count is for people,
// the rows' jobs are what the relay guarantees.
func (r *Relay) countRelayed(ctx context.Context, n int) {
	if err := r.q.Redis().HIncrBy(ctx, StatusKey(r.store.Name()), "relayed", int64(n)).Err(); err != nil && ctx.Err() == nil {
		r.log.Warn("counting relayed outbox rows failed", "err", err)
	}
}
