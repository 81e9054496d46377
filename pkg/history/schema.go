package history

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// The collections of the history database.
const (
	// JobsCollection holds one document per job: its latest recorded state.
	JobsCollection = "jobs"
	// EventsCollection holds one document per event, insert-only.
	EventsCollection = "events"
	// LogsCollection holds one document per log line a job's handler
	// logged, insert-only (logs.go).
	LogsCollection = "logs"
)

// version is the position of an event in its queue's stream as a string
// that sorts like the stream: "<ms:15 digits>-<seq:20 digits>" for an
// entry with one event, followed by ".<index:6 digits>" for an event of a
// batch entry. A job's events all live in its queue's stream, so their
// versions order them exactly, and a job document records the version of
// the last event folded into it.
type version string

// parseVersion turns a stream entry id "1712345678901-3" into a version.
func parseVersion(id string) (version, error) {
	msPart, seqPart, ok := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(msPart, 10, 64)
	seq, err2 := strconv.ParseUint(seqPart, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("bad stream entry id %q", id)
	}
	return version(fmt.Sprintf("%015d-%020d", ms, seq)), nil
}

// at returns the version of the event at index i of the entry at v.
func (v version) at(i int) version { return version(fmt.Sprintf("%s.%06d", v, i)) }

// eventDocID is an event's deterministic _id: its queue and stream
// position, so that writing the same entry twice is a duplicate-key no-op.
func eventDocID(queue string, v version) string { return queue + "/" + string(v) }

// eventDoc is an event as stored. It leaves out what the job document
// knows (queue, type) and empty worker_id and error: FerretDB's cost per
// inserted document grows with its number of fields. The queue is the
// prefix of the _id.
type eventDoc struct {
	ID       string `bson:"_id"`
	JobID    string `bson:"job_id"`
	Event    string `bson:"event"`
	State    string `bson:"state"`
	Attempt  int    `bson:"attempt"`
	WorkerID string `bson:"worker_id,omitempty"`
	Error    string `bson:"error,omitempty"`
	// Message is a durable job's step ("<seq> <name> <status>") or
	// signal (its name).
	Message string    `bson:"message,omitempty"`
	At      time.Time `bson:"at"`
}

func newEventDoc(e *streamEvent) eventDoc {
	return eventDoc{
		ID: eventDocID(e.Queue, e.version), JobID: e.JobID,
		Event: string(e.Event.Event), State: string(e.State), Attempt: e.Attempt,
		WorkerID: e.WorkerID, Error: e.Error, Message: e.Message, At: e.At,
	}
}

// event returns the stored event; jobType is the job's type, from its document.
func (d *eventDoc) event(jobType string) job.Event {
	q, v := "", d.ID
	if i := strings.LastIndexByte(v, '/'); i >= 0 {
		q, v = v[:i], v[i+1:]
	}
	return job.Event{
		ID: entryID(v), JobID: d.JobID, Queue: q, Type: jobType,
		Event: job.EventType(d.Event), State: job.State(d.State), Attempt: d.Attempt,
		WorkerID: d.WorkerID, Error: d.Error, Message: d.Message, At: d.At.UTC(),
	}
}

// entryID turns a version back into the event id the stream gave it:
// the entry id, with ".<index>" for an event of a batch entry.
func entryID(v string) string {
	v, idx, batched := strings.Cut(v, ".")
	msPart, seqPart, ok := strings.Cut(v, "-")
	ms, err1 := strconv.ParseUint(msPart, 10, 64)
	seq, err2 := strconv.ParseUint(seqPart, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return v
	}
	id := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq, 10)
	if batched {
		n, err := strconv.Atoi(idx)
		if err != nil {
			return v
		}
		id += "." + strconv.Itoa(n)
	}
	return id
}

// Field names of a job document. The document carries the job fields of
// the API that events and the job's Redis hash know, plus:
//
//	version     the version of the last event folded in (see version)
//	updated_at  the time of that event; retention counts from it
const (
	fID             = "_id"
	fQueue          = "queue"
	fType           = "type"
	fState          = "state"
	fAttempt        = "attempt"
	fVersion        = "version"
	fUpdatedAt      = "updated_at"
	fCreatedAt      = "created_at"
	fStartedAt      = "started_at"
	fFinishedAt     = "finished_at"
	fWorkerID       = "worker_id"
	fLastError      = "last_error"
	fPayload        = "payload"
	fResult         = "result"
	fDurable        = "durable"
	fPriority       = "priority"
	fMaxAttempts    = "max_attempts"
	fTimeout        = "timeout_seconds"
	fBackoff        = "backoff"
	fRunAt          = "run_at"
	fDependsOn      = "depends_on"
	fIdempotencyKey = "idempotency_key"
	fGroup          = "group"
	fTraceparent    = "traceparent"
	fTags           = "tags"
	fPayloadTerms   = "payload_terms"
	fJobID          = "job_id"
	fSeq            = "seq"
	fAt             = "at"
)

// jobDoc is a job document as read back. Payload and result are stored as
// the JSON text the client sent and the handler returned, unchanged.
type jobDoc struct {
	ID             string      `bson:"_id"`
	Queue          string      `bson:"queue"`
	Type           string      `bson:"type"`
	State          string      `bson:"state"`
	Attempt        int         `bson:"attempt"`
	Version        string      `bson:"version"`
	CreatedAt      time.Time   `bson:"created_at"`
	StartedAt      *time.Time  `bson:"started_at"`
	FinishedAt     *time.Time  `bson:"finished_at"`
	WorkerID       string      `bson:"worker_id"`
	LastError      string      `bson:"last_error"`
	Payload        string      `bson:"payload"`
	Result         string      `bson:"result"`
	Priority       string      `bson:"priority"`
	MaxAttempts    int         `bson:"max_attempts"`
	TimeoutSeconds int         `bson:"timeout_seconds"`
	Backoff        *backoffDoc `bson:"backoff"`
	RunAt          *time.Time  `bson:"run_at"`
	DependsOn      []string    `bson:"depends_on"`
	IdempotencyKey string      `bson:"idempotency_key"`
	Group          string      `bson:"group"`
	Traceparent    string      `bson:"traceparent"`
	// Durable is what a durable job recorded (job.Durable, as JSON).
	Durable string   `bson:"durable"`
	Tags    []string `bson:"tags"`
}

func (d *jobDoc) job() *job.Job {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	j := &job.Job{
		ID: d.ID, Queue: d.Queue, Type: d.Type, Priority: job.Priority(d.Priority),
		State: job.State(d.State), Attempt: d.Attempt, MaxAttempts: d.MaxAttempts,
		TimeoutSeconds: d.TimeoutSeconds, DependsOn: d.DependsOn, IdempotencyKey: d.IdempotencyKey,
		Group: d.Group, Traceparent: d.Traceparent, Tags: d.Tags,
		CreatedAt: d.CreatedAt.UTC(), StartedAt: utc(d.StartedAt), FinishedAt: utc(d.FinishedAt),
		WorkerID: d.WorkerID, LastError: d.LastError,
	}
	if d.Backoff != nil {
		j.Backoff = job.Backoff{BaseSeconds: d.Backoff.BaseSeconds, MaxSeconds: d.Backoff.MaxSeconds}
	}
	if d.RunAt != nil {
		j.RunAt = d.RunAt.UTC()
	}
	if d.Payload != "" {
		j.Payload = []byte(d.Payload)
	}
	if d.Result != "" {
		j.Result = []byte(d.Result)
	}
	if d.Durable != "" {
		var dur job.Durable
		if json.Unmarshal([]byte(d.Durable), &dur) == nil {
			dur.Awaiting = nil // said of a live job only
			j.Durable = &dur
		}
	}
	return j
}

// backoffDoc is how a job's backoff is stored.
type backoffDoc struct {
	BaseSeconds float64 `bson:"base_seconds"`
	MaxSeconds  float64 `bson:"max_seconds"`
}
