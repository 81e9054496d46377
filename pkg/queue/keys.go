package queue

// Every Redis key Sundial uses is built in this file. A queue's keys carry
// the queue name as a hash tag, so in Redis Cluster one queue lives in one
// slot and every script over it stays atomic.

const prefix = "sundial:"

// Global keys (not tied to one queue).
const (
	keyQueues       = prefix + "queues"      // set of known queue names
	keyWorkers      = prefix + "workers"     // zset worker id → last heartbeat ms
	keyWorkerPrefix = prefix + "worker:"     // hash per worker
	chanWake        = prefix + "poller:wake" // pub/sub: an earlier due time arrived
	chanCancel      = prefix + "cancel"      // pub/sub: an active job was cancelled
)

// The storage format's keys (format.go). They share one hash tag, which no
// queue name can be (a queue name has no '.'), so that in Redis Cluster
// the registration script reads the marker and writes the registry at once.
const (
	storageTag     = prefix + "{.storage}:"
	keyFormat      = storageTag + "format"      // hash: format = the format written (absent: 1)
	keyReaders     = storageTag + "readers"     // zset process id → registration expiry ms
	keyReadersInfo = storageTag + "reader-info" // hash process id → ReaderInfo JSON
)

// queueKeys are the keys of one queue, in the order every script receives
// them as KEYS (see lua/lib.lua). Scripts build the per-job keys of the same
// slot from the prefixes they get in ARGV: the job hash jobPrefix+id, and
// tag+"idem:"+key (idempotency),
// tag+"deps:"+id and tag+"dependents:"+id (dependency sets),
// tag+"expires" (zset: id → when it may no longer start, its start_by or
// deadline), tag+"seq:"+key (a sequence key's last job) and
// tag+"deb:"+key ("<id> <first submit ms>": a debounce key's pending job),
// tag+"seqtails" (hash: a sequence key's last job → the key) and
// tag+"log:"+id (list: a job's log lines, lua/log.lua).
type queueKeys struct {
	name      string
	tag       string // "sundial:{name}:"
	jobPrefix string // "sundial:job:{name}:"
	all       []string
	// head is what every script call over these keys sends after the
	// function's name: the number of keys, the keys, and the first two
	// ARGV (jobPrefix, tag); nameArg is the fifth ARGV. Boxed once here,
	// so that a call copies them into its command instead of allocating
	// each (Client.command).
	head    []any
	nameArg any
}

// The KEYS indexes, mirrored in lua/lib.lua.
const (
	kHigh = iota
	kNormal
	kLow
	kScheduled
	kWaiting
	kLeases
	kDead
	kFinished
	kEvents
	kStats
	kPaused
	kSignal
	kFence
	numKeys
)

func keysFor(queue string) *queueKeys {
	tag := prefix + "{" + queue + "}:"
	k := &queueKeys{name: queue, tag: tag, jobPrefix: prefix + "job:{" + queue + "}:"}
	k.all = make([]string, numKeys)
	for i, s := range [...]string{"high", "normal", "low", "scheduled", "waiting", "leases", "dead", "finished", "events", "stats", "paused", "signal", "fence"} {
		k.all[i] = tag + s
	}
	// A script call declares one key, the high list, which routes it to
	// the queue's slot; the script makes the others from the tag (lua/lib.lua).
	k.head = []any{1, k.all[kHigh], k.jobPrefix, k.tag}
	k.nameArg = k.name
	return k
}

func (k *queueKeys) key(i int) string      { return k.all[i] }
func (k *queueKeys) job(id string) string  { return k.jobPrefix + id }
func (k *queueKeys) log(id string) string  { return k.tag + "log:" + id } // lua/log.lua
func (k *queueKeys) tput(sec int64) string { return k.tag + "tput:" + itoa(sec) }

// active is the hash of the queue's running attempts (K_ACTIVE in lua/lib.lua).
func (k *queueKeys) active() string { return k.tag + "active" }

// padScore is the lease-set score of storage format 3's padding entry
// (PAD_SCORE in lua/lib.lua): no lease's expiry reaches it.
const padScore = "9007199254740991"

// IsPadding tells whether a member of a queue's lease set or a field of
// its active hash is storage format 3's padding entry (PAD in
// lua/lib.lua) rather than a job: job ids never start with "~".
func IsPadding(member string) bool { return len(member) > 0 && member[0] == '~' }

// EventStreamKey returns the Redis stream that holds queue's job events.
func EventStreamKey(queue string) string { return keysFor(queue).key(kEvents) }

func workerKey(id string) string { return keyWorkerPrefix + id }

// JobKey returns the hash that holds job id of queue.
func JobKey(queue, id string) string { return keysFor(queue).job(id) }

// LogKey is the list of job id's log lines in queue (lua/log.lua).
func LogKey(queue, id string) string { return keysFor(queue).log(id) }

// keyBatchesOpen is the set of batches whose callbacks have not all fired
// (batch.go): the poller looks there for callbacks due.
const keyBatchesOpen = prefix + "batches:open"

// keyBatchesSettled is a sorted set of the batches that left the open set
// (id → when, unix ms), kept BatchRetention: where CheckSettledBatches
// finds a batch whose slot came back with less than it had settled.
const keyBatchesSettled = prefix + "batches:settled"

// batchKeys are the keys of one batch, in lua/batchadd.lua's KEYS order.
// Their hash tag "{batch.<id>}" is no queue's (queue names have no '.'):
// a batch lives in its own slot, wherever its members' queues live.
func batchKeys(id string) []string {
	tag := batchTag(id)
	return []string{tag + "meta", tag + "members", tag + "queues", tag + "done"}
}

// batchTag is the start of batch id's keys, its hash tag included.
func batchTag(id string) string { return prefix + "{batch." + id + "}:" }
