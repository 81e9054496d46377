package queue

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// UnhandledTypes returns the types of queue's jobs that wait parked for a
// handler: a typed claim (Claim with types) met them and did not handle
// their type (lua/lib.lua, NOHANDLER). Their count is QueueStats.Unhandled.
func (c *Client) UnhandledTypes(ctx context.Context, queue string) ([]string, error) {
	slots, err := c.rdb.SMembers(ctx, c.keysFor(queue).tag+"pslots:"+NoHandlerLimit).Result()
	if err != nil {
		return nil, fmt.Errorf("unhandled types: %w", err)
	}
	out := make([]string, 0, len(slots))
	for _, s := range slots {
		if t, ok := strings.CutPrefix(s, NoHandlerLimit+"|"); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// BuryUnhandled ends dead, with last_error `no handler for type "<jtype>"`,
// up to limit of queue's jobs of type jtype that were parked for a handler
// at or before `before`, and returns how many. The caller checks first that
// no live worker of the queue handles the type (the poller does, after
// SUNDIAL_UNHANDLED_TIMEOUT).
func (c *Client) BuryUnhandled(ctx context.Context, queue, jtype string, before time.Time, limit int) (int, error) {
	n, err := c.run(ctx, c.scripts.unhandled, c.keysFor(queue), c.opts.Now(), jtype, before.UnixMilli(), limit).Int()
	if err != nil {
		return 0, fmt.Errorf("bury unhandled: %w", err)
	}
	return n, nil
}
