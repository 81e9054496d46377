package sundial

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Event is one job event as Subscribe yields it (and GET /v1/jobs/{id}/events
// and the websocket stream show it): the job, what happened, the state it
// reached. Its ID is its place in the queue's event stream: pass it as
// SubscribeOptions.After to resume after it.
type Event = job.Event

// SubscribeOptions say which events Subscribe yields.
type SubscribeOptions struct {
	// Queue whose events to follow; may be left out with JobID.
	Queue string
	// JobID, when set, yields only that job's events.
	JobID string
	// After resumes after the event with this ID (a reconnect misses
	// nothing the stream still holds); "0" starts from the oldest event
	// the stream holds; "" from now.
	After string
}

// Subscribe yields the events of a queue, or of one job, as they happen,
// read from the queue's event stream in Redis (the same events the
// history and the websocket show), until ctx ends or Redis fails (the
// error is yielded last). Stop early by breaking out of the loop:
//
//	for ev, err := range c.Subscribe(ctx, sundial.SubscribeOptions{JobID: id}) { … }
func (c *Client) Subscribe(ctx context.Context, o SubscribeOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		name := o.Queue
		if name == "" {
			if o.JobID == "" {
				yield(Event{}, errors.New("sundial: Subscribe needs a Queue or a JobID"))
				return
			}
			q, err := c.q.QueueOf(ctx, o.JobID)
			if err != nil {
				yield(Event{}, err)
				return
			}
			name = q
		}
		stream := queue.EventStreamKey(name)
		last, skip := "$", -1
		if o.After != "" {
			last, skip = splitEventID(o.After)
		}
		if last == "$" {
			last = c.streamTail(ctx, stream)
		} else if skip >= 0 {
			// The rest of a batch entry the resumed event belongs to.
			xs, err := c.q.Redis().XRange(ctx, stream, last, last).Result()
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !c.yieldEvents(name, xs, o.JobID, skip, yield) {
				return
			}
		}
		for {
			evs, next, err := c.readEvents(ctx, name, last, time.Second)
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			last = next
			for _, e := range evs {
				if (o.JobID == "" || e.JobID == o.JobID) && !yield(e, nil) {
					return
				}
			}
		}
	}
}

// yieldEvents yields the events of xs (of job id, when set) whose index
// within their entry is above skip; false when the caller stopped.
func (c *Client) yieldEvents(name string, xs []redis.XMessage, id string, skip int, yield func(Event, error) bool) bool {
	for _, x := range xs {
		evs, err := queue.ParseEvents(name, x)
		if err != nil {
			return yield(Event{}, err)
		}
		for i, e := range evs {
			if i <= skip || (id != "" && e.JobID != id) {
				continue
			}
			if !yield(e, nil) {
				return false
			}
		}
	}
	return true
}

// splitEventID splits an event ID, "<entry id>" or "<entry id>.<i>" (the
// i-th event of a batch entry), into the entry and i (-1 for a whole
// entry, which XREAD resumes after).
func splitEventID(id string) (string, int) {
	entry, idx, ok := strings.Cut(id, ".")
	if !ok {
		return id, -1
	}
	i, err := strconv.Atoi(idx)
	if err != nil {
		return entry, -1
	}
	return entry, i
}

// streamTail is the ID of stream's last entry, "0" when it has none: a
// read after it gets what comes next.
func (c *Client) streamTail(ctx context.Context, stream string) string {
	if xs, err := c.q.Redis().XRevRangeN(ctx, stream, "+", "-", 1).Result(); err == nil && len(xs) == 1 {
		return xs[0].ID
	}
	return "0"
}

// readEvents waits up to block for the events of queue name's stream
// after entry last, and returns them with the new last entry: the one
// read of event streams Wait and Subscribe share.
func (c *Client) readEvents(ctx context.Context, name, last string, block time.Duration) ([]Event, string, error) {
	res, err := c.q.Redis().XRead(ctx, &redis.XReadArgs{Streams: []string{queue.EventStreamKey(name), last}, Block: block, Count: 1000}).Result()
	switch {
	case ctx.Err() != nil:
		return nil, last, ctx.Err()
	case err == redis.Nil:
		return nil, last, nil
	case err != nil:
		return nil, last, err
	}
	var out []Event
	for _, x := range res[0].Messages {
		evs, err := queue.ParseEvents(name, x)
		if err != nil {
			return out, last, err
		}
		out = append(out, evs...)
		last = x.ID
	}
	return out, last, nil
}
