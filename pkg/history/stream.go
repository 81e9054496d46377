package history

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// streamEvent is one entry of a queue's event stream: the event, and where
// it sits in the stream.
type streamEvent struct {
	job.Event
	stream  string  // the stream key it was read from
	version version // its position, comparable across the stream
}

// parseEntry decodes a stream entry written by the engine's Lua scripts
// (fields job_id, queue, type, event, state, attempt, worker_id, error, at
// in unix ms). queue names the stream's queue, in case the entry lacks it.
func parseEntry(stream, queue string, m redis.XMessage) (*streamEvent, error) {
	v, err := parseVersion(m.ID)
	if err != nil {
		return nil, err
	}
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	e := &streamEvent{stream: stream, version: v}
	e.ID = m.ID
	e.JobID = str("job_id")
	e.Queue = str("queue")
	if e.Queue == "" {
		e.Queue = queue
	}
	e.Type = str("type")
	e.Event.Event = job.EventType(str("event"))
	e.State = job.State(str("state"))
	e.WorkerID = str("worker_id")
	e.Error = str("error")
	if e.JobID == "" || e.Event.Event == "" {
		return nil, fmt.Errorf("stream entry %s of %s lacks job_id or event", m.ID, stream)
	}
	if a := str("attempt"); a != "" {
		if e.Attempt, err = strconv.Atoi(a); err != nil {
			return nil, fmt.Errorf("stream entry %s of %s: bad attempt %q", m.ID, stream, a)
		}
	}
	ms, err := strconv.ParseInt(str("at"), 10, 64)
	if err != nil {
		// Fall back on the entry id's time, which Redis took from its clock.
		ms = entryMillis(m.ID)
	}
	e.At = time.UnixMilli(ms).UTC()
	return e, nil
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
