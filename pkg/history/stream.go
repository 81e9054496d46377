package history

import (
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// streamEvent is one event of a queue's event stream, and where it sits
// in the stream: a stream entry holds one event, or the events of several
// jobs (a batch entry, see queue.ParseEvents).
type streamEvent struct {
	job.Event
	stream  string  // the stream key it was read from
	entry   string  // the stream entry it came from (what XACK takes)
	index   int     // its place in the entry
	parts   int     // how many events the entry holds
	version version // its position, comparable across the stream
}

// parseEntry decodes a stream entry (queue.ParseEvents) into its events,
// each placed in its stream.
func parseEntry(stream, q string, m redis.XMessage) ([]*streamEvent, error) {
	v, err := parseVersion(m.ID)
	if err != nil {
		return nil, err
	}
	evs, err := queue.ParseEvents(q, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stream, err)
	}
	out := make([]*streamEvent, len(evs))
	for i, e := range evs {
		out[i] = &streamEvent{Event: e, stream: stream, entry: m.ID, index: i, parts: len(evs), version: v}
		if len(evs) > 1 {
			out[i].version = v.at(i)
		}
	}
	return out, nil
}

// entryMillis returns the millisecond part of a stream entry id (0 when it
// is not one).
func entryMillis(id string) int64 {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			ms, _ := strconv.ParseInt(id[:i], 10, 64)
			return ms
		}
	}
	ms, _ := strconv.ParseInt(id, 10, 64)
	return ms
}

// nextEntryID returns the smallest stream id greater than id ("5-3" →
// "5-4"), the bound that trims everything up to and including id.
func nextEntryID(id string) string {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			seq, err := strconv.ParseUint(id[i+1:], 10, 64)
			if err != nil {
				return "0-0"
			}
			if seq == ^uint64(0) {
				ms, _ := strconv.ParseUint(id[:i], 10, 64)
				return strconv.FormatUint(ms+1, 10) + "-0"
			}
			return id[:i+1] + strconv.FormatUint(seq+1, 10)
		}
	}
	return "0-0"
}

// compareIDs orders two stream entry ids.
func compareIDs(a, b string) int {
	am, bm := entryMillis(a), entryMillis(b)
	if am != bm {
		if am < bm {
			return -1
		}
		return 1
	}
	as, bs := entrySeq(a), entrySeq(b)
	switch {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

func entrySeq(id string) uint64 {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			seq, _ := strconv.ParseUint(id[i+1:], 10, 64)
			return seq
		}
	}
	return 0
}
