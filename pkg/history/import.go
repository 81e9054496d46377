package history

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sundialhq/sundial/pkg/job"
)

// Import writes events, and the jobs they are about, as the writer would
// have written them from the streams: one event document each and one job
// document per job, folded from its events (oldest first) with the fields
// of jobs that events do not carry (payload, result, priority, …). Each
// event's ID must be the one the stream gave it ("<ms>-<seq>", or
// "<ms>-<seq>.<index>" for an event of a batch entry), unique in its queue
// and increasing within a job; importing the same events again changes
// nothing. A job of jobs without events is not written.
//
// It is for backfills and load tools (tools/historyscale), not for the
// running system: the writer records what the streams say.
func (s *Store) Import(ctx context.Context, events []job.Event, jobs []*job.Job) error {
	evs := make([]*streamEvent, len(events))
	for i := range events {
		v, err := eventVersion(events[i].ID)
		if err != nil {
			return fmt.Errorf("history: import: event %d: %w", i, err)
		}
		evs[i] = &streamEvent{Event: events[i], entry: events[i].ID, parts: 1, version: v}
	}
	byID := make(map[string]*job.Job, len(jobs))
	for _, j := range jobs {
		byID[j.Queue+"\x00"+j.ID] = j
	}
	groups := groupByJob(evs)
	for _, g := range groups {
		if j := byID[g.queue+"\x00"+g.id]; j != nil {
			g.hash = hashOf(j)
		}
	}
	_, err := s.write(ctx, evs, groups)
	return err
}

// eventVersion is the version of an event id as the stream gave it (the
// inverse of entryID).
func eventVersion(id string) (version, error) {
	entry, idx, batched := strings.Cut(id, ".")
	v, err := parseVersion(entry)
	if err != nil || !batched {
		return v, err
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 {
		return "", fmt.Errorf("bad event id %q", id)
	}
	return v.at(n), nil
}
