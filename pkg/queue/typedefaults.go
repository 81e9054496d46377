package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// keyTypeDefaults is the hash of job types' submit defaults: type → JSON
// of job.Defaults (one key for the deployment, like keyQueues).
const keyTypeDefaults = prefix + "types"

// TypeDefaultsRefresh is how long a Client trusts the type defaults it
// read: a change reaches submits on other processes within it.
const TypeDefaultsRefresh = 2 * time.Second

// typeDefaults is the cache of the type defaults, read at.
type typeDefaults struct {
	at time.Time
	m  map[string]*job.Defaults
}

// SetTypeDefaults declares job type typ's submit defaults (a Runner does
// at start for the types registered with some); a zero d removes them.
func (c *Client) SetTypeDefaults(ctx context.Context, typ string, d job.Defaults) error {
	if !job.ValidType(typ) {
		return fmt.Errorf("type defaults: type %q must match [A-Za-z0-9_.:-]{1,128}", typ)
	}
	if d.IsZero() {
		return c.rdb.HDel(ctx, keyTypeDefaults, typ).Err()
	}
	if err := d.Check(); err != nil {
		return fmt.Errorf("type defaults of %s: %w", typ, err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	c.typeDefs.Store(nil) // this process sees its own change at once
	return c.rdb.HSet(ctx, keyTypeDefaults, typ, b).Err()
}

// TypeDefaults returns every type's declared submit defaults, read
// afresh.
func (c *Client) TypeDefaults(ctx context.Context) (map[string]job.Defaults, error) {
	m, err := c.readTypeDefaults(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]job.Defaults, len(m))
	for t, d := range m {
		out[t] = *d
	}
	return out, nil
}

func (c *Client) readTypeDefaults(ctx context.Context) (map[string]*job.Defaults, error) {
	raw, err := c.rdb.HGetAll(ctx, keyTypeDefaults).Result()
	if err != nil {
		return nil, fmt.Errorf("type defaults: %w", err)
	}
	m := make(map[string]*job.Defaults, len(raw))
	for t, v := range raw {
		var d job.Defaults
		if json.Unmarshal([]byte(v), &d) == nil {
			m[t] = &d
		}
	}
	return m, nil
}

// ApplyTypeDefaults fills what each spec leaves out from its type's
// declared defaults (SetTypeDefaults), read at most every
// TypeDefaultsRefresh: the Go client and the API apply them to every
// submit before building the job.
func (c *Client) ApplyTypeDefaults(ctx context.Context, specs ...*job.Spec) error {
	td := c.typeDefs.Load()
	if td == nil || time.Since(td.at) > TypeDefaultsRefresh {
		m, err := c.readTypeDefaults(ctx)
		if err != nil {
			return err
		}
		td = &typeDefaults{at: time.Now(), m: m}
		c.typeDefs.Store(td)
	}
	if len(td.m) == 0 {
		return nil
	}
	for _, s := range specs {
		s.Apply(td.m[s.Type])
	}
	return nil
}

// typeDefsCache is the Client's field type.
type typeDefsCache = atomic.Pointer[typeDefaults]
