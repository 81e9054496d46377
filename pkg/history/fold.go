package history

import (
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// jobGroup is the events of one job within a batch, oldest first, folded
// into the changes they make to the job's document.
type jobGroup struct {
	id, queue, jtype string
	events           []*streamEvent

	first      bool      // the group holds the job's submitted event
	durable    bool      // the group holds a durable job's step, signal or parked event: its records are read too
	logs       bool      // the group holds a log event: the job's log lines are copied (logs.go)
	firstAt    time.Time // time of the group's first event
	createdAt  time.Time // submitted event's time
	version    version   // last event's position
	state      job.State
	attempt    int
	updatedAt  time.Time
	workerID   string
	startedAt  *time.Time
	finishedAt *time.Time
	lastError  string
	// cleared lists fields a retried event removed and no later event of
	// the group set again (the engine deletes them from the job hash).
	cleared map[string]bool

	hash     *jobHash        // the job's Redis hash, when it was read
	logLines []queue.LogLine // the job's log lines, when read (logs)
}

// groupByJob splits events into per-job groups in the order each job first
// appears, each group oldest first (events must be in stream order per
// queue, as read).
func groupByJob(events []*streamEvent) []*jobGroup {
	index := map[string]*jobGroup{}
	var out []*jobGroup
	for _, e := range events {
		key := e.Queue + "\x00" + e.JobID
		g, ok := index[key]
		if !ok {
			g = &jobGroup{id: e.JobID, queue: e.Queue, jtype: e.Type, firstAt: e.At}
			index[key] = g
			out = append(out, g)
		}
		g.add(e)
	}
	return out
}

// add folds one event, newer than every event already added, into g. It
// mirrors what the engine's scripts do to the job hash.
func (g *jobGroup) add(e *streamEvent) {
	g.events = append(g.events, e)
	if e.Type != "" {
		g.jtype = e.Type
	}
	g.version, g.state, g.attempt, g.updatedAt = e.version, e.State, e.Attempt, e.At
	if e.WorkerID != "" {
		g.workerID = e.WorkerID
		delete(g.cleared, fWorkerID)
	}
	switch e.Event.Event {
	case job.EventStep, job.EventSignal, job.EventParked:
		g.durable = true
	case job.EventLog:
		g.logs = true
	case job.EventSubmitted:
		g.first, g.createdAt = true, e.At
	case job.EventStarted:
		at := e.At
		g.startedAt = &at
		delete(g.cleared, fStartedAt)
	case job.EventRetried:
		g.startedAt, g.finishedAt, g.workerID = nil, nil, ""
		if g.cleared == nil {
			g.cleared = map[string]bool{}
		}
		for _, f := range []string{fStartedAt, fFinishedAt, fWorkerID, fResult} {
			g.cleared[f] = true
		}
	case job.EventFailed, job.EventDead, job.EventLeaseExpired, job.EventCancelled:
		if e.Error != "" {
			g.lastError = e.Error
		}
	}
	if e.State.Final() {
		at := e.At
		g.finishedAt = &at
		delete(g.cleared, fFinishedAt)
	} else {
		g.finishedAt = nil
	}
}

// final reports whether the group leaves the job in a final state.
func (g *jobGroup) final() bool { return g.state.Final() }

// fields returns what the group sets on the job's document, and what it
// removes. Fields from the job's Redis hash (payload, result, …) are
// included when the hash was read.
func (g *jobGroup) fields() (set, unset bson.D) {
	set = bson.D{
		{Key: fQueue, Value: g.queue},
		{Key: fType, Value: g.jtype},
		{Key: fState, Value: string(g.state)},
		{Key: fAttempt, Value: g.attempt},
		{Key: fVersion, Value: string(g.version)},
		{Key: fUpdatedAt, Value: g.updatedAt},
	}
	if g.workerID != "" {
		set = append(set, bson.E{Key: fWorkerID, Value: g.workerID})
	}
	if g.startedAt != nil {
		set = append(set, bson.E{Key: fStartedAt, Value: *g.startedAt})
	}
	if g.finishedAt != nil {
		set = append(set, bson.E{Key: fFinishedAt, Value: *g.finishedAt})
	}
	if g.lastError != "" {
		set = append(set, bson.E{Key: fLastError, Value: g.lastError})
	}
	if h := g.hash; h != nil {
		set = append(set, h.fields()...)
		if h.result != "" && h.state == g.state {
			set = append(set, bson.E{Key: fResult, Value: h.result})
		}
	}
	for _, f := range []string{fStartedAt, fFinishedAt, fWorkerID, fResult} {
		if g.cleared[f] && !has(set, f) {
			unset = append(unset, bson.E{Key: f, Value: ""})
		}
	}
	return set, unset
}

// document returns the whole document of a job this group creates: the
// group's fields plus created_at (createdAtGuess).
func (g *jobGroup) document() bson.D {
	set, _ := g.fields()
	doc := make(bson.D, 0, len(set)+2)
	doc = append(doc, bson.E{Key: fID, Value: g.id}, bson.E{Key: fCreatedAt, Value: g.createdAtGuess()})
	return append(doc, set...)
}

// createdAtGuess is the job's creation time as far as the group knows: from
// its Redis hash, else its submitted event, else the group's first event.
func (g *jobGroup) createdAtGuess() time.Time {
	switch {
	case g.hash != nil && !g.hash.createdAt.IsZero():
		return g.hash.createdAt
	case !g.createdAt.IsZero():
		return g.createdAt
	}
	return g.firstAt
}

func has(d bson.D, key string) bool {
	for _, e := range d {
		if e.Key == key {
			return true
		}
	}
	return false
}
