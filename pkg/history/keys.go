package history

import "github.com/sundialhq/sundial/pkg/queue"

// The Redis keys of the history writers, besides the engine's event
// streams (queue.EventStreamKey) and job hashes (queue.JobKey).

// ownerKey names the writer that owns queue's history (see ownership). It
// lives in the queue's cluster slot.
func ownerKey(q string) string { return queue.QueueKey(q, "history:owner") }

// janitorKey is taken by the writer that runs a retention round on
// FerretDB, for most of a janitor interval.
const janitorKey = "sundial:history:janitor"
