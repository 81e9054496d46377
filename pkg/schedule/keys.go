package schedule

import (
	"sync"

	"github.com/sundialhq/sundial/pkg/queue"
)

// Every Redis key of recurring schedules is built in this file.
//
// A schedule lives in the cluster slot of its job template's queue, so that
// firing it (compare-and-set of its next run plus the submit of its job) is
// one script:
//
//	sundial:{q}:schedules       hash  id → definition (JSON record)
//	sundial:{q}:schedules:next  zset  id → next run, Unix ms (enabled schedules only)
//	sundial:{q}:schedules:runs  hash  id → "<last fire time ms> <last job id>"
//
// Global keys find a schedule by id and tell schedulers about changes:
//
//	sundial:schedules:index     hash  id → queue: which queue holds the schedule (the truth)
//	sundial:schedules:queues    set   queues that ever held a schedule
//	sundial:schedules:version   counter, incremented by every change
//	sundial:schedules:changed   pub/sub channel; the message is the new version
//	sundial:schedules:leader    the leader lock: the id of the scheduler that fires
//	sundial:schedules:lock:<id> a short lock held while one request changes schedule id
const (
	keyIndex      = "sundial:schedules:index"
	keyQueues     = "sundial:schedules:queues"
	keyVersion    = "sundial:schedules:version"
	chanChanged   = "sundial:schedules:changed"
	keyLeader     = "sundial:schedules:leader"
	keyLockPrefix = "sundial:schedules:lock:"
)

// queueKeys are the schedule keys of one queue, in the order the scripts of
// lua/ receive them as KEYS.
type queueKeys struct {
	defs, next, runs, rev string
}

// keyCache memoises keysFor: building a queue's keys allocates, and a
// scheduler needs them for every fire.
var keyCache sync.Map // queue name → queueKeys

func keysFor(q string) queueKeys {
	if k, ok := keyCache.Load(q); ok {
		return k.(queueKeys)
	}
	k := queueKeys{
		defs: queue.QueueKey(q, "schedules"),
		next: queue.QueueKey(q, "schedules:next"),
		runs: queue.QueueKey(q, "schedules:runs"),
		rev:  queue.QueueKey(q, "schedules:rev"),
	}
	keyCache.Store(q, k)
	return k
}

func (k queueKeys) all() []string { return []string{k.defs, k.next, k.runs, k.rev} }

func lockKey(id string) string { return keyLockPrefix + id }
