package history

import (
	"context"
	_ "embed"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/own.lua
	ownSrc string
	//go:embed lua/disown.lua
	disownSrc string

	ownScript    = redis.NewScript(ownSrc)
	disownScript = redis.NewScript(disownSrc)
)

// ownership is the set of queues whose event streams this writer owns.
//
// One writer at a time writes a queue's history: it holds an expiring key
// per queue, renewed every third of its TTL. Several writers split the
// queues between them and take over those of a writer that stops renewing
// (it died or lost Redis) once its keys expire. Owning a queue makes the
// version guard of job documents correct on FerretDB, whose updates are
// read-then-write, not atomic: no two writers update one job at once.
//
// A writer trusts its ownership for two thirds of the TTL after the renewal
// started, so it stops writing before another writer can take over, as
// long as its clock runs at the rate of Redis'.
type ownership struct {
	rdb redis.UniversalClient
	id  string
	ttl time.Duration

	mu    sync.Mutex
	until map[string]time.Time // queue → end of trusted ownership
}

func newOwnership(rdb redis.UniversalClient, id string, ttl time.Duration) *ownership {
	return &ownership{rdb: rdb, id: id, ttl: ttl, until: map[string]time.Time{}}
}

// claim takes or renews the ownership of each of queues in one pipelined
// round trip, and drops queues not listed. It returns the queues owned now.
func (o *ownership) claim(ctx context.Context, queues []string) ([]string, error) {
	start := time.Now()
	pipe := o.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(queues))
	for i, q := range queues {
		cmds[i] = ownScript.Eval(ctx, pipe, []string{ownerKey(q)}, o.id, o.ttl.Milliseconds())
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return o.owned(), err
		}
	}
	until := start.Add(o.ttl * 2 / 3)
	o.mu.Lock()
	defer o.mu.Unlock()
	next := make(map[string]time.Time, len(queues))
	for i, q := range queues {
		if n, _ := cmds[i].Int(); n == 1 {
			next[q] = until
		}
	}
	o.until = next
	return o.ownedLocked(), nil
}

// owns reports whether this writer may write queue's history now.
func (o *ownership) owns(queue string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Now().Before(o.until[queue])
}

// owned returns the queues this writer may write now, sorted.
func (o *ownership) owned() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ownedLocked()
}

func (o *ownership) ownedLocked() []string {
	now := time.Now()
	out := make([]string, 0, len(o.until))
	for q, t := range o.until {
		if now.Before(t) {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// release gives every owned queue up at once, so another writer can take
// over without waiting for the keys to expire.
func (o *ownership) release(ctx context.Context) {
	o.mu.Lock()
	queues := make([]string, 0, len(o.until))
	for q := range o.until {
		queues = append(queues, q)
	}
	o.until = map[string]time.Time{}
	o.mu.Unlock()
	if len(queues) == 0 {
		return
	}
	pipe := o.rdb.Pipeline()
	for _, q := range queues {
		disownScript.Eval(ctx, pipe, []string{ownerKey(q)}, o.id)
	}
	_, _ = pipe.Exec(ctx)
}
