-- lib.lua: the shared part of the transition scripts of this directory.
-- scripts.go builds one Redis function library of it and every script
-- (one function each, loaded once per server), and the same text as
-- plain scripts for servers without functions.
--
-- Every script is called with one key, KEYS[1], the queue's high-priority
-- list, which routes the call to the queue's slot; the queue's other keys
-- share its hash tag and are made from ARGV[2] (begin): the high, normal
-- and low priority lists (LPUSH in / RPOP out), scheduled (zset id → due
-- ms), waiting (zset id → created ms), leases (zset id → lease expiry),
-- dead (zset id → died ms), finished (zset id → finished ms), events
-- (stream), stats (hash), paused (flag), signal (wake list) and fence
-- (fencing-token counter). Twelve more declared keys cost every call ~1 µs
-- of Redis time and ~300 bytes (docs/benchmarks/2026-11-28-submit.md).
-- And the same first five ARGV:
--   ARGV[1] job hash prefix "sundial:job:{q}:"   ARGV[2] queue key prefix "sundial:{q}:"
--   ARGV[3] now, unix ms (the caller's clock: job timestamps, due times;
--           '' = Redis' own TIME, for a claim sent behind a blocking wait,
--           whose caller cannot know when it will run)
--   ARGV[4] lease clock override, unix ms ('' = Redis' own TIME: lease expiry
--           never depends on the clocks of different hosts agreeing)
--   ARGV[5] queue name
-- Script-specific arguments start at ARGV[6].
-- The per-call values below are set by begin() from KEYS and ARGV at the
-- start of every call (scripts.go): the library is loaded once, as a
-- Redis function library, and its functions share these upvalues. One
-- call runs at a time, so they never mix.
local K_HIGH, K_NORMAL, K_LOW
local K_SCHED, K_WAIT, K_LEASES, K_DEAD, K_FIN
-- The signals of durable jobs (signal.lua, step.lua): the key each job
-- chose → its id, and signals sent to a key no job chose yet.
local K_SIGKEYS, K_SIGPEND
-- The parked durable jobs (park_waiting): sets of the ids asleep and of
-- those awaiting a signal, the queue's sleeping and awaiting counts.
local K_SLEEPING, K_AWAITING
-- Expiry (expire_due): job id → when it may no longer start (ms), the
-- earlier of its start_by and its deadline.
local K_EXPIRES
-- K_SEQTAILS: hash, the last job of each sequence key → the key
-- (sequences_ended).
local K_SEQTAILS
-- The reasons an expired job ends dead with (its last_error).
local EXPIRED, DEADLINE_PASSED = 'expired: not started by its start_by', 'deadline passed'
local K_EVENTS, K_STATS, K_PAUSED, K_SIGNAL, K_FENCE
local JOB, QK, NOW_S, LEASE_CLOCK, QUEUE, NOW
local K_TOMB -- hash: id → priority of cancelled ids still in a priority list
-- K_ACTIVE: hash id → "<token> <attempt> <type>[ <slot>,<slot>…]" of every
-- active job, the slots being the concurrency slots it holds (set by
-- claim, removed wherever the lease entry is), so that completing a batch
-- checks every token with one HMGET instead of reading each job's hash.
local K_ACTIVE
-- K_LASTCLAIM: hash worker id → "<call> <ms> <statuses> <id> <id>…", the
-- last claim of each worker that leased jobs (claim_record): a claim sent
-- again after its reply was lost (go-redis retries a command after a read
-- timeout or EOF) answers the same jobs and tokens instead of leasing
-- others while the first ones wait, unrun, for their leases to expire.
local K_LASTCLAIM
-- CYCLE_STATUSES: the statuses of the outcomes cycle.lua recorded before
-- its claim, kept in the claim's record so that a replay answers them too.
local CYCLE_STATUSES
-- PAD is the padding entry of storage format 3: a member of K_LEASES
-- (scored PAD_SCORE, ~year 287,000, so it never expires) and a field of
-- K_ACTIVE. Longer than Redis' listpack limit for a member or value (64
-- bytes), it keeps both keys in their hash-table encodings, whose
-- inserts, lookups and removals cost the same at any size; a listpack of
-- 50 running jobs costs a scan and a copy of itself per job written
-- (docs/engine.md, "Storage format"). Job ids are ULIDs, never "~…"; as
-- a value it has no space, which no active record lacks (parse_active).
local PAD = '~padding:keeps-this-key-in-its-hash-table-encoding(docs/engine.md,storage-format-3)'
local PAD_SCORE = '9007199254740991'
-- JOB_DEFAULTS are storage format 4's defaults: a submit in format 4
-- leaves out of the job hash `id` and `queue` (both in its key), `run_at`
-- when it equals `created_at`, and every field below whose value is the
-- default given here, and readers take an absent field for its default.
-- The values are the format's, fixed: they equal job.DefaultMaxAttempts,
-- job.DefaultTimeoutSeconds and job.DefaultBackoff, and pkg/queue's
-- DecodeJob applies the same (docs/engine.md, "Storage format").
local JOB_DEFAULTS = {attempt = '0', priority = 'normal', max_attempts = '3', timeout = '30',
  backoff_base = '5', backoff_max = '3600'}
-- PROFILE_DEFAULTED are the fields of a submit's profile (submit.lua) that
-- have a default, in their order there (arguments 2 to 6 of a profile).
local PROFILE_DEFAULTED = {'priority', 'max_attempts', 'timeout', 'backoff_base', 'backoff_max'}

-- job_fields is HMGET of job id's fields, an absent one being its format-4
-- default (JOB_DEFAULTS), or false when it has none (`run_at`'s is
-- `created_at`, which the caller applies). A job whose hash is gone reads
-- false for every field that has no default: callers tell it by `type`
-- or `state`.
local function job_fields(id, fields)
  local f = redis.call('HMGET', JOB .. id, unpack(fields))
  for i = 1, #fields do
    if not f[i] then f[i] = JOB_DEFAULTS[fields[i]] or false end
  end
  return f
end
-- dec3 gives the numbers 0 to 999 as strings padded to three digits
-- ('007'), and next_attempt an attempt count's successor as a string ('0'
-- → '1'): a claim builds its tokens and attempt numbers from them instead
-- of formatting a number per job. Each string is made on first use and
-- kept while the library is loaded (a plain script of the EVALSHA fallback
-- makes only those its call uses).
local DEC3 = {}
local function dec3(i)
  local s = DEC3[i]
  if not s then s = string.format('%03d', i); DEC3[i] = s end
  return s
end
local NEXT_ATTEMPT = {}
local function next_attempt(a)
  local s = NEXT_ATTEMPT[a]
  if s then return s end
  local n = tonumber(a) + 1
  s = string.format('%d', n)
  if n < 1000 then NEXT_ATTEMPT[a] = s end
  return s
end
-- whole_reader returns a reader of a job's fields as job_fields gives
-- them (defaults filled in, false for a missing one) that reads the whole
-- hash with one HGETALL instead of an HMGET of the fields: one pass over
-- the hash instead of a search per field, for a caller that reads most of
-- a small hash (a claim reads 11 fields of a compact hash of ~5: 1.7–1.9
-- against 2.3–2.5 µs per job, 40,000 reads in one script). Not for a
-- caller that needs a few fields of a hash that may hold a large payload
-- or result. Made once per field list, at load.
local function whole_reader(fields)
  local pos, tmpl = {}, {}
  local n = #fields
  for i = 1, n do -- (ipairs is not there while a library loads)
    pos[fields[i]] = i
    tmpl[i] = JOB_DEFAULTS[fields[i]] or false
  end
  return function(id)
    local f = {unpack(tmpl, 1, n)}
    local h = redis.call('HGETALL', JOB .. id)
    for i = 1, #h, 2 do
      local p = pos[h[i]]
      if p then f[p] = h[i + 1] end
    end
    return f
  end
end
-- claim_fields reads what a claim needs of a job (claim.lua).
local claim_fields = whole_reader({'type', 'payload', 'attempt', 'max_attempts', 'timeout', 'priority',
  'created_at', 'run_at', 'state', 'group', 'traceparent', 'start_by', 'deadline'})
-- The field lists the functions below read per job, made once.
local PRIORITY_GROUP = {'priority', 'group'}
local RELEASE_FIELDS = {'type', 'priority', 'run_at', 'attempt', 'group', 'created_at'}
local TYPE_STATE_ATTEMPT = {'type', 'state', 'attempt'}
local RETRY_FIELDS = {'max_attempts', 'backoff_base', 'backoff_max', 'priority', 'group'} -- a failed attempt's (complete.lua)
-- The flow-control keys (see "Limits" below).
local K_LIMITS, K_LIMUSE, K_LIMSTAT, K_TIMERS
local K_NOHANDLER
-- NOHANDLER is the pseudo-limit that holds back queued jobs whose type a
-- claimer does not handle (a typed claim, see claim.lua): such a job is
-- parked under the slot "@handler|<type>" (park), counted as
-- 'p:@handler' in K_LIMSTAT, and K_NOHANDLER (QK..'pslots:@handler') is
-- the set of those slots. A claim that handles the type lets them go
-- first (unpark); the poller buries them after the unhandled timeout
-- when no live worker of the queue handles the type (unhandled.lua).
-- Limit names cannot hold '@'.
local NOHANDLER = '@handler'
-- Whether the queue's live batch members (QK..'blive') may hold any, asked
-- at most once a call (batch_members_live); nil: not asked yet.
local blive
-- LNOW: this call's lease clock reading (lease_now); nil: not read yet.
local LNOW
-- The events of this call (see emit).
local ev_groups, ev_last
local WAKE_CHANNEL = 'sundial:poller:wake'
local CANCEL_CHANNEL = 'sundial:cancel'
local SIGNAL_CAP = 64
-- CHUNK bounds the values one redis.call receives from unpack: Lua's C
-- stack holds about 8000, and a batch may be larger (SUNDIAL_CONCURRENCY
-- allows 10000). Even, so that score/member pairs stay together.
local CHUNK = 1000

local last_qk = nil -- the QK the keys below begin() were made for

-- begin sets the per-call values from this call's ARGV.
local function begin()
  JOB, QK, NOW_S, LEASE_CLOCK, QUEUE = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
  if NOW_S == '' then
    local t = redis.call('TIME')
    NOW_S = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  NOW = tonumber(NOW_S)
  -- The keys made from the queue's prefix are kept from the last call
  -- (calls to one queue in a row make them once).
  if QK ~= last_qk then
    K_HIGH, K_NORMAL, K_LOW = QK .. 'high', QK .. 'normal', QK .. 'low'
    K_SCHED, K_WAIT, K_LEASES, K_DEAD, K_FIN = QK .. 'scheduled', QK .. 'waiting', QK .. 'leases', QK .. 'dead', QK .. 'finished'
    K_EVENTS, K_STATS, K_PAUSED, K_SIGNAL, K_FENCE = QK .. 'events', QK .. 'stats', QK .. 'paused', QK .. 'signal', QK .. 'fence'
    K_TOMB, K_ACTIVE, K_LASTCLAIM = QK .. 'tomb', QK .. 'active', QK .. 'lastclaim'
    K_SIGKEYS, K_SIGPEND = QK .. 'sigkeys', QK .. 'sigpend'
    K_SLEEPING, K_AWAITING = QK .. 'sleeping', QK .. 'awaiting'
    K_EXPIRES, K_SEQTAILS = QK .. 'expires', QK .. 'seqtails'
    K_LIMITS, K_LIMUSE, K_LIMSTAT, K_TIMERS = QK .. 'limits', QK .. 'limuse', QK .. 'limstat', QK .. 'timers'
    K_NOHANDLER = QK .. 'pslots:' .. NOHANDLER
    last_qk = QK
  end
  ev_groups, ev_last = {}, nil
  blive = nil
  LNOW = nil
  CYCLE_STATUSES = nil
end

-- ms formats a number of milliseconds as an integer string (tostring would
-- give "1.7e+12").
local function ms(x) return string.format('%.0f', x) end

-- lease_now is the clock of leases: Redis' own TIME (or the override in ARGV[4]).
-- One reading of TIME a call (LNOW, reset by begin): a call is one
-- instant on the lease clock, as it is on NOW's.
local function lease_now()
  if LEASE_CLOCK ~= '' then return tonumber(LEASE_CLOCK) end
  if not LNOW then
    local t = redis.call('TIME')
    LNOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return LNOW
end

-- later tells whether ms string a is a later time than ms string b (both
-- whole numbers without leading zeros), without converting them.
local function later(a, b)
  return #a > #b or (#a == #b and a > b)
end

-- BOOTED maps a queue's prefix to when this server's library first saw a
-- claim of it (lease clock, ms). The library's state starts afresh with
-- the server process: after a restart (perhaps from an older snapshot, or
-- an AOF that lost its last second) and on a replica promoted by a
-- failover (that perhaps lagged), it is empty.
local BOOTED = {}

-- MAXTTL caches, per queue prefix, the longest lease TTL in use
-- (longest_ttl): {ttl = ms, at = lease clock ms when read, kept = lease
-- clock ms when this library last wrote it}.
local MAXTTL = {}

-- longest_ttl returns the longest lease TTL (ms) granted or renewed in this
-- queue lately: ttl, the caller's, or a longer one another process uses
-- (SUNDIAL_LEASE_TTL is per process). It is kept in QK..'ttl', which a
-- caller with the longest TTL refreshes (it expires three of those TTLs
-- after the last claim or renewal with it, when no lease of that length
-- can be left), read at most once a second per queue. The restart
-- quarantine waits for it, and a renewal grants it, so that a process with
-- a shorter TTL (an API pod renewing an HTTP worker's lease) never shortens
-- a lease another one granted (docs/operations.md, "Leases"). It only
-- reads: keep_ttl writes, and only for a call that granted or renewed a
-- lease, so that a call that found nothing writes no key (a claim of an
-- empty queue redirected to the new master of a slot being moved must not
-- make a key the move then finds there already).
local function longest_ttl(ttl)
  local now = lease_now()
  local c = MAXTTL[QK]
  if LIBRARY and c and now < c.at + 1000 then return math.max(ttl, c.ttl) end
  local m = tonumber(redis.call('GET', QK .. 'ttl') or '0') or 0
  if LIBRARY then MAXTTL[QK] = {ttl = m, at = now, kept = c and c.kept or 0} end
  return math.max(ttl, m)
end

-- keep_ttl records ttl, the TTL of leases this call granted or renewed,
-- as the longest in use when it is (longest_ttl), at most once a second
-- per queue and server.
local function keep_ttl(ttl)
  local now = lease_now()
  local m = longest_ttl(ttl)
  local c = MAXTTL[QK]
  if ttl < m or (LIBRARY and c and now < c.kept + 1000) then return end
  redis.call('SET', QK .. 'ttl', ms(ttl), 'PX', ms(3 * ttl))
  if LIBRARY then MAXTTL[QK] = {ttl = ttl, at = now, kept = now} end
end

-- quarantined tells whether claims of this queue must wait: a server that
-- restarted or took over may have forgotten leases it granted, so a job it
-- holds as queued (or whose restored lease looks expired) may still run
-- under a worker that claimed it before. That worker stops within a lease
-- TTL of its last accepted renewal (pkg/worker's lease guard), so no claim
-- is granted until a lease TTL (ttl, ms) after the first claim this
-- server saw of a queue that had jobs before (its fence counter exists:
-- the first submit makes it, see submit.lua); ttl is the longest TTL in use (longest_ttl), not only
-- the caller's. A queue never claimed from waits for nothing, nor do
-- the plain scripts of the EVALSHA fallback, which keep no state
-- (docs/operations.md, "Leases").
local function quarantined(ttl)
  if not LIBRARY then return false end
  local since = BOOTED[QK]
  if since == nil then
    if redis.call('EXISTS', K_FENCE) == 0 then
      BOOTED[QK] = false
      return false
    end
    since = lease_now()
    BOOTED[QK] = since
  end
  if since == false then return false end
  if lease_now() < since + ttl then return true end
  BOOTED[QK] = false
  return false
end

-- call_chunked runs redis.call(cmd, [key,] values...) over list in chunks of
-- at most CHUNK values; key may be nil (e.g. DEL of many keys).
local function call_chunked(cmd, key, list)
  local n = #list
  local i = 1
  while i <= n do
    local j = math.min(i + CHUNK - 1, n)
    if key then redis.call(cmd, key, unpack(list, i, j)) else redis.call(cmd, unpack(list, i, j)) end
    i = j + 1
  end
end

-- hmget_chunked is HMGET key over fields in chunks of CHUNK: the values
-- in order, false for a missing field. A batch of one chunk (the usual)
-- is the reply itself, not a copy.
local function hmget_chunked(key, fields)
  local n = #fields
  if n == 0 then return {} end
  if n <= CHUNK then return redis.call('HMGET', key, unpack(fields)) end
  local out = {}
  for c = 1, n, CHUNK do
    local r = redis.call('HMGET', key, unpack(fields, c, math.min(c + CHUNK - 1, n)))
    for k = 1, #r do out[c + k - 1] = r[k] end
  end
  return out
end

-- count_minute adds n to this minute's counter `what` ('s' succeeded, 'f'
-- failed attempts, 'd' dead) in the queue's per-minute hash (read by
-- Client.Throughput, trimmed by the poller).
local function count_minute(what, n)
  if n <= 0 then return end
  redis.call('HINCRBY', QK .. 'minutes', string.format('%d:%s', math.floor(NOW / 60000), what), n)
end

local PRIORITIES = {'high', 'normal', 'low'}

local function list_for(prio)
  if prio == 'high' then return K_HIGH elseif prio == 'low' then return K_LOW end
  return K_NORMAL
end

-- Fairness groups (docs/flow-control.md). The ready jobs of a group wait
-- in the group's own list, one per priority; the priority list holds one
-- marker "~<group>" for the group while that list is not empty. A claim
-- that pops a marker takes the group's next job and, when the group has
-- more, puts the marker back at the tail: groups take turns with each
-- other and with ungrouped jobs. Job ids are ULIDs, which never start
-- with "~". The stats hash counts grouped_<prio> (ids in group lists) and
-- markers_<prio> (markers in the priority list) so that queue depths stay
-- exact.
local function group_list(prio, group) return QK .. 'grp:' .. (prio or 'normal') .. ':' .. group end

-- enqueue puts a ready job into its priority list, or its group's list:
-- at the tail (the back of the line), or at the head when head is true
-- (a job given back goes first).
local function enqueue(id, prio, group, head)
  local list = list_for(prio)
  local push = head and 'RPUSH' or 'LPUSH'
  if group == nil or group == false or group == '' then
    redis.call(push, list, id)
    return
  end
  prio = prio or 'normal'
  redis.call('HINCRBY', K_STATS, 'grouped_' .. prio, 1)
  if redis.call(push, group_list(prio, group), id) == 1 then
    redis.call(push, list, '~' .. group)
    redis.call('HINCRBY', K_STATS, 'markers_' .. prio, 1)
  end
end

-- ready_batch enqueues many ready jobs at the tail of their lists with one
-- LPUSH per list: add collects the ungrouped ids (one LPUSH of many is the
-- same order as one each), flush writes them. A grouped job flushes first,
-- so every list keeps the order the jobs were added in.
local function ready_batch()
  local push, lists = {}, {}
  local b = {}
  function b.flush()
    for _, l in ipairs(lists) do call_chunked('LPUSH', l, push[l]) end
    push, lists = {}, {}
  end
  function b.add(id, prio, group)
    if group and group ~= '' then
      b.flush()
      enqueue(id, prio, group, false)
      return
    end
    local l = list_for(prio)
    if not push[l] then
      push[l] = {}
      lists[#lists + 1] = l
    end
    push[l][#push[l] + 1] = id
  end
  return b
end

-- Events. emit collects a script's events and flush_events (run after
-- every script, see scripts.go) writes them: consecutive events that share
-- event, state, worker and error go into one stream entry, whose 'jobs'
-- field lists "id type attempt" per job, comma-separated (ids are ULIDs and
-- types match [A-Za-z0-9_.:-], so neither holds a space or a comma). A
-- group of one is written as a plain entry with job_id, type and attempt.
-- A batch of 50 claims is then one XADD, not 50 (queue.ParseEvents reads
-- both forms). Progress events carry their percentage and message and are
-- written at once, after the events before them.

local function flush_events()
  -- No MAXLEN here: an event is removed only once every history writer
  -- recorded it, or by the operator's explicit cap (see the poller).
  for _, g in ipairs(ev_groups) do
    local p = g.parts
    if g.n == 6 then
      redis.call('XADD', K_EVENTS, '*',
        'job_id', p[1], 'queue', QUEUE, 'type', p[3], 'event', g.event, 'state', g.state,
        'attempt', p[5], 'worker_id', g.worker, 'error', g.err, 'at', NOW_S)
    else
      p[g.n] = nil -- the last job's ','
      redis.call('XADD', K_EVENTS, '*',
        'jobs', table.concat(p), 'queue', QUEUE, 'event', g.event, 'state', g.state,
        'worker_id', g.worker, 'error', g.err, 'at', NOW_S)
    end
  end
  ev_groups = {}
  ev_last = nil
end

-- emit records one event of this script; a 'progress' event also carries
-- its percentage and message.
local function emit(id, jtype, event, state, attempt, worker, err, pct, msg)
  worker, err = worker or '', err or ''
  if pct then
    flush_events()
    redis.call('XADD', K_EVENTS, '*',
      'job_id', id, 'queue', QUEUE, 'type', jtype, 'event', event, 'state', state,
      'attempt', attempt, 'worker_id', worker, 'error', err, 'at', NOW_S,
      'progress', pct, 'message', msg)
    return
  end
  local g = ev_last
  if not (g and g.event == event and g.state == state and g.worker == worker and g.err == err) then
    g = {event = event, state = state, worker = worker, err = err, parts = {}, n = 0}
    ev_groups[#ev_groups + 1] = g
    ev_last = g
  end
  -- The job's piece of the 'jobs' field, "id type attempt,", as six
  -- entries that table.concat joins once: no string per job here.
  if attempt == nil then error('emit: no attempt for job ' .. id) end
  local p, n = g.parts, g.n
  p[n + 1] = id; p[n + 2] = ' '; p[n + 3] = jtype; p[n + 4] = ' '; p[n + 5] = attempt; p[n + 6] = ','
  g.n = n + 6
end

-- signal wakes up to n idle workers blocked on the queue's signal list.
-- Under load no worker blocks and the list stays full: one LLEN then.
local function signal(n)
  if n <= 0 then return end
  local have = redis.call('LLEN', K_SIGNAL)
  if have >= SIGNAL_CAP then return end
  n = math.min(n, SIGNAL_CAP - have)
  local t = {}
  for i = 1, n do t[i] = '1' end
  redis.call('LPUSH', K_SIGNAL, unpack(t))
end

-- Limits (docs/flow-control.md). A limit of the queue caps how many of the
-- jobs it covers run at once (concurrency) and how many start within any
-- window of its period (rate), per value of a payload key when it has one.
-- K_LIMITS holds each definition as
--   "<types>\t<key>\t<concurrency>\t<rate>\t<period ms>"
-- (types comma-separated, '' = every type of the queue; 0 = no such cap).
-- A slot is "<limit>|<key value>":
--   K_LIMUSE           hash slot → its active jobs
--   QK..'rate:'..slot   zset "<id>:<token>" → start, lease-clock ms (its starts in the window)
--   QK..'parked:'..slot zset id → priority rank * 1e13 + parked ms: the queued
--                       jobs the slot holds back, highest priority and oldest first
--   K_TIMERS           zset slot → when a slot held back by its rate has room (lease clock)
-- K_LIMSTAT counts per limit 'a:<name>' active and 'p:<name>' parked jobs,
-- and QK..'pslots:'..name is the set of the limit's slots with parked jobs.
-- A parked job stays queued; its hash names the slot in 'parked'.
local PRIO_RANK = {high = 0, normal = 1, low = 2}
-- UNPARK_MAX bounds the jobs one timer lets go in one call.
local UNPARK_MAX = 1000

local function limit_of(slot) return string.match(slot, '^([^|]*)|') end

-- parse_limit reads one definition of K_LIMITS (nil when malformed).
local function parse_limit(name, spec)
  local types, key, conc, rate, period = string.match(spec, '^([^\t]*)\t([^\t]*)\t(%d+)\t(%d+)\t(%d+)$')
  if not types then return nil end
  return {name = name, types = types, key = key, conc = tonumber(conc), rate = tonumber(rate), period = tonumber(period)}
end

-- slot_key turns a payload value into the key part of a slot: a string,
-- number or boolean as it is when short and plain, its SHA-1 otherwise;
-- '' for anything else or a missing value (those jobs share one slot).
local function slot_key(v)
  local t = type(v)
  if t ~= 'string' and t ~= 'number' and t ~= 'boolean' then return '' end
  local s = tostring(v)
  if #s > 64 or string.find(s, '[^%w_.:@-]') then s = redis.sha1hex(s) end
  return s
end

-- limits_gate returns the admission check of one claim call, or nil when
-- the queue has no limits (claim.lua calls it only when its limits hash
-- exists: the common path pays nothing).
-- gate.check(jtype, payload) returns true and the slots to take (nil for
-- none), or false,
-- the slot that has no room and, for a full rate window, when it has room
-- again. gate.take(picks, member) takes them and returns the concurrency
-- slots held, comma-separated ('' for none).
local function limits_gate()
  local raw = redis.call('HGETALL', K_LIMITS)
  if #raw == 0 then return nil end
  local by = {}
  for i = 1, #raw, 2 do
    local l = parse_limit(raw[i], raw[i + 1])
    if l then
      local types = l.types == '' and '*' or l.types
      for t in string.gmatch(types, '[^,]+') do
        by[t] = by[t] or {}
        by[t][#by[t] + 1] = l
      end
    end
  end
  -- Per slot, read once per call and kept up to date by take.
  local used, started = {}, {}
  local lnow = nil
  local gate = {}
  function gate.check(jtype, payload)
    if not by[jtype] and not by['*'] then return true, nil end -- no limit covers it
    local picks = {}
    local doc, decoded = nil, false
    for _, ls in ipairs({by[jtype] or {}, by['*'] or {}}) do
      for _, l in ipairs(ls) do
        local kv = ''
        if l.key ~= '' then
          if not decoded then
            decoded = true
            local ok, d = pcall(cjson.decode, payload or '')
            if ok and type(d) == 'table' then doc = d end
          end
          if doc then kv = slot_key(doc[l.key]) end
        end
        local slot = l.name .. '|' .. kv
        if l.conc > 0 then
          local u = used[slot]
          if u == nil then
            u = tonumber(redis.call('HGET', K_LIMUSE, slot)) or 0
            used[slot] = u
          end
          if u >= l.conc then return false, slot, nil end
        end
        if l.rate > 0 then
          if lnow == nil then lnow = lease_now() end
          local c = started[slot]
          local rk = QK .. 'rate:' .. slot
          if c == nil then
            redis.call('ZREMRANGEBYSCORE', rk, '-inf', ms(lnow - l.period))
            c = redis.call('ZCARD', rk)
            started[slot] = c
          end
          if c >= l.rate then
            -- The oldest start in the window: the log's, or this call's
            -- own (written by flush, all at lnow).
            local first = redis.call('ZRANGE', rk, 0, 0, 'WITHSCORES')
            return false, slot, (tonumber(first[2]) or lnow) + l.period
          end
        end
        picks[#picks + 1] = {l, slot}
      end
    end
    return true, picks
  end
  -- What take changed, written by gate.flush in one command per slot.
  local add_use, add_active, add_starts, periods = {}, {}, {}, {}
  function gate.take(picks, member)
    local held = {}
    for _, p in ipairs(picks) do
      local l, slot = p[1], p[2]
      if l.conc > 0 then
        used[slot] = used[slot] + 1
        add_use[slot] = (add_use[slot] or 0) + 1
        add_active[l.name] = (add_active[l.name] or 0) + 1
        held[#held + 1] = slot
      end
      if l.rate > 0 then
        started[slot] = started[slot] + 1
        local t = add_starts[slot]
        if not t then t = {}; add_starts[slot] = t; periods[slot] = l.period end
        t[#t + 1] = ms(lnow)
        t[#t + 1] = member
      end
    end
    return table.concat(held, ',')
  end
  -- gate.flush writes what the call's takes changed; the claim runs it
  -- before it returns.
  function gate.flush()
    for slot, k in pairs(add_use) do redis.call('HINCRBY', K_LIMUSE, slot, k) end
    for name, k in pairs(add_active) do redis.call('HINCRBY', K_LIMSTAT, 'a:' .. name, k) end
    for slot, t in pairs(add_starts) do
      local rk = QK .. 'rate:' .. slot
      call_chunked('ZADD', rk, t)
      redis.call('PEXPIRE', rk, periods[slot])
    end
  end
  return gate
end

-- park holds back queued job id (of priority prio) for slot, which has no
-- room; at is when a full rate window has room again (nil: when one of
-- the slot's active jobs ends).
local function park(id, prio, slot, at)
  local name = limit_of(slot)
  redis.call('ZADD', QK .. 'parked:' .. slot, ms((PRIO_RANK[prio] or 1) * 1e13 + NOW), id)
  redis.call('SADD', QK .. 'pslots:' .. name, slot)
  redis.call('HSET', JOB .. id, 'parked', slot)
  redis.call('HINCRBY', K_LIMSTAT, 'p:' .. name, 1)
  if at and redis.call('ZADD', K_TIMERS, 'LT', 'CH', ms(at), slot) == 1 then
    redis.call('PUBLISH', WAKE_CHANNEL, ms(at))
  end
end

-- unpark lets up to k jobs that slot holds back go first in their lists
-- again, highest priority and oldest first; the claim that takes them
-- checks their limits again. Returns how many it let go.
local function unpark(slot, k)
  if k <= 0 then return 0 end
  local pk = QK .. 'parked:' .. slot
  local r = redis.call('ZPOPMIN', pk, k)
  if #r == 0 then return 0 end
  local name = limit_of(slot)
  -- To the heads in reverse: the first popped is the first claimed.
  for i = #r - 1, 1, -2 do
    local id = r[i]
    local f = job_fields(id, PRIORITY_GROUP)
    redis.call('HDEL', JOB .. id, 'parked')
    enqueue(id, f[1], f[2], true)
  end
  local n = #r / 2
  redis.call('HINCRBY', K_LIMSTAT, 'p:' .. name, -n)
  if redis.call('EXISTS', pk) == 0 then
    redis.call('SREM', QK .. 'pslots:' .. name, slot)
    redis.call('ZREM', K_TIMERS, slot)
  end
  signal(n)
  return n
end

-- unpark_handled lets up to room jobs parked for a handler (NOHANDLER) of
-- the given types (a set; nil: any) go first in their lists again, in the
-- order they were parked across the types (priority, then when, then id:
-- ids are time-ordered, so jobs parked in one call keep their submit
-- order). Returns how many it let go.
local function unpark_handled(types, room)
  local picked = {}
  local prefix = #NOHANDLER + 2
  for _, slot in ipairs(redis.call('SMEMBERS', K_NOHANDLER)) do
    if types == nil or types[string.sub(slot, prefix)] then
      local r = redis.call('ZRANGE', QK .. 'parked:' .. slot, 0, room - 1, 'WITHSCORES')
      for i = 1, #r, 2 do picked[#picked + 1] = {tonumber(r[i + 1]), r[i], slot} end
    end
  end
  if #picked == 0 then return 0 end
  table.sort(picked, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local k = math.min(room, #picked)
  local by_slot = {}
  for i = 1, k do
    local slot = picked[i][3]
    by_slot[slot] = by_slot[slot] or {}
    table.insert(by_slot[slot], picked[i][2])
  end
  for slot, ids in pairs(by_slot) do
    local pk = QK .. 'parked:' .. slot
    call_chunked('ZREM', pk, ids)
    if redis.call('EXISTS', pk) == 0 then redis.call('SREM', K_NOHANDLER, slot) end
  end
  -- To the heads in reverse: the first picked is the first claimed.
  for i = k, 1, -1 do
    local id = picked[i][2]
    local f = job_fields(id, PRIORITY_GROUP)
    redis.call('HDEL', JOB .. id, 'parked')
    enqueue(id, f[1], f[2], true)
  end
  redis.call('HINCRBY', K_LIMSTAT, 'p:' .. NOHANDLER, -k)
  return k
end

-- unpark_id lets go one parked job (cancel): it leaves the slot's parked
-- set without going back to a list.
local function unpark_id(id, slot)
  local name = limit_of(slot)
  if redis.call('ZREM', QK .. 'parked:' .. slot, id) == 1 then
    redis.call('HINCRBY', K_LIMSTAT, 'p:' .. name, -1)
  end
  redis.call('HDEL', JOB .. id, 'parked')
end

-- count_slots adds the concurrency slots of one attempt ("slot,slot")
-- to counts (slot → attempts).
local function count_slots(counts, slots)
  if slots == nil or slots == '' then return end
  for slot in string.gmatch(slots, '[^,]+') do counts[slot] = (counts[slot] or 0) + 1 end
end

-- free_slot_counts gives back concurrency slots (slot → how many): each
-- one given back lets one job the slot held back go.
local function free_slot_counts(counts)
  local by_limit = {}
  for slot, k in pairs(counts) do
    if redis.call('HINCRBY', K_LIMUSE, slot, -k) <= 0 then redis.call('HDEL', K_LIMUSE, slot) end
    local name = limit_of(slot)
    by_limit[name] = (by_limit[name] or 0) + k
    unpark(slot, k)
  end
  for name, k in pairs(by_limit) do
    local a = 'a:' .. name
    if redis.call('HINCRBY', K_LIMSTAT, a, -k) <= 0 then redis.call('HDEL', K_LIMSTAT, a) end
  end
end

-- free_slots gives back the concurrency slots one attempt held.
local function free_slots(slots)
  if slots == nil or slots == '' then return end
  local counts = {}
  count_slots(counts, slots)
  free_slot_counts(counts)
end

-- parse_active reads a K_ACTIVE record: token, attempt, type, the
-- concurrency slots held ('' for none), and for a record of storage
-- format 2 the attempt's start (ms) and worker; those two are nil for a
-- format-1 record, whose job hash holds them. The forms:
--   format 1: "<token> <attempt> <type>[ <slots>]"
--   format 2: "<token> <attempt> <type> <slots> <started> <worker>"
-- (slots and worker may be empty; worker ids hold no space, but a worker
-- is read to the end all the same). A format-2 claim writes nothing on the job hash,
-- whose state, attempt, worker_id and started_at stay what they were
-- until the attempt ends (attempt_fields); the record is the truth while
-- it exists (docs/engine.md, "Storage format").
local function parse_active(rec)
  local t, a, ty, s, st, w = string.match(rec, '^(%S+) (%S+) (%S+) (%S*) (%d+) (.*)$')
  if t then return t, a, ty, s, st, w end
  return string.match(rec, '^(%S+) (%S+) (%S+) ?(%S*)$')
end

-- running returns what is known of id's running attempt (parse_active's
-- values: token, attempt, type, slots, started, worker), or nil when it
-- runs no attempt. rec is its K_ACTIVE record when the caller read it
-- already (false: it has none; nil: read it here). Without a record the
-- job hash decides: an attempt claimed by a release from before K_ACTIVE
-- holds its token there, with state active (format 1).
local function running(id, rec)
  if rec == nil then rec = redis.call('HGET', K_ACTIVE, id) end
  if rec then return parse_active(rec) end
  local f = redis.call('HMGET', JOB .. id, 'state', 'token', 'attempt', 'type')
  if f[1] == 'active' and f[2] and f[2] ~= '' then return f[2], f[3], f[4], '' end
  return nil
end

-- claim_record returns the record of worker's last claim when it was
-- the call call (the first token tag of its ARGV, fresh per call): the
-- same call sent again. Nil otherwise, or when call is ''.
local function claim_record(worker, call)
  if call == '' then return nil end
  local rec = redis.call('HGET', K_LASTCLAIM, worker)
  if rec and string.sub(rec, 1, #call) == call and string.byte(rec, #call + 1) == 32 then return rec end
  return nil
end

-- record_claim writes worker's claim record (K_LASTCLAIM): its call, the
-- time, the statuses of a cycle's outcomes ('-': none) and the ids leased.
local function record_claim(worker, call, ids)
  local st = '-'
  if CYCLE_STATUSES and #CYCLE_STATUSES > 0 then st = table.concat(CYCLE_STATUSES, ',') end
  redis.call('HSET', K_LASTCLAIM, worker, call .. ' ' .. NOW_S .. ' ' .. st .. ' ' .. table.concat(ids, ' '))
end

-- claim_timeout is the timeout (seconds, a string) of an attempt of a job
-- whose claim fields (claim_fields) are f: its own, cut to end at its
-- deadline (whole seconds, rounded up).
local function claim_timeout(f)
  if f[13] then
    local left = math.ceil((tonumber(f[13]) - NOW) / 1000)
    if left < tonumber(f[5]) then return tostring(math.max(left, 1)) end
  end
  return f[5]
end

-- replay_claim answers a claim sent again (claim_record's rec) as the
-- first call was answered (claim.lua's groups of 12), for each job it
-- leased that still runs under the token it got then; tags are the
-- call's token tags (12 hex digits per job, in order). It also returns
-- the statuses the record holds (a cycle's outcomes).
local function replay_claim(rec, tags)
  local parts = {}
  for w in string.gmatch(rec, '%S+') do parts[#parts + 1] = w end
  local statuses = {}
  if parts[3] ~= '-' then
    for v in string.gmatch(parts[3], '[^,]+') do statuses[#statuses + 1] = v end
  end
  local out = {}
  for k = 4, #parts do
    local id = parts[k]
    local r = redis.call('HGET', K_ACTIVE, id)
    local tag = string.sub(tags, 12 * (k - 3) - 11, 12 * (k - 3))
    if r then
      local token, attempt = parse_active(r)
      if #tag == 12 and string.sub(token, -13) == '-' .. tag then
        local f = claim_fields(id)
        local o = #out
        out[o + 1] = id; out[o + 2] = token; out[o + 3] = f[1]; out[o + 4] = f[2]
        out[o + 5] = attempt; out[o + 6] = f[4]; out[o + 7] = claim_timeout(f); out[o + 8] = f[6]
        out[o + 9] = f[7]; out[o + 10] = f[8] or f[7]; out[o + 11] = f[10] or ''; out[o + 12] = f[11] or ''
      end
    end
  end
  return out, statuses
end

-- attempt_fields returns the job-hash fields a format-2 attempt (started
-- not nil) leaves on the hash when it ends, for the write that ends it:
-- attempt, worker_id, started_at. None for format 1 (the claim wrote them).
local function attempt_fields(attempt, started, worker, into)
  into = into or {}
  if started then
    local n = #into
    into[n + 1] = 'attempt'; into[n + 2] = attempt; into[n + 3] = 'worker_id'; into[n + 4] = worker
    into[n + 5] = 'started_at'; into[n + 6] = started
  end
  return into
end

-- end_lease ends an attempt's lease: its lease entry, its K_ACTIVE record
-- and the slots it held (slots nil: read from K_ACTIVE).
local function end_lease(id, slots)
  if slots == nil then
    local rec = redis.call('HGET', K_ACTIVE, id)
    slots = rec and select(4, parse_active(rec)) or ''
  end
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_ACTIVE, id)
  free_slots(slots)
end

-- slot_room returns how many more jobs slot may start now under limit l,
-- at most cap, and for a rate when its window next has room: its oldest
-- start's end, or a period from now when the window is empty (the jobs
-- let go now will fill it).
local function slot_room(l, slot, lnow, cap)
  local room, again = cap, nil
  if l.rate > 0 then
    local rk = QK .. 'rate:' .. slot
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', ms(lnow - l.period))
    room = math.min(room, l.rate - redis.call('ZCARD', rk))
    local first = redis.call('ZRANGE', rk, 0, 0, 'WITHSCORES')
    again = first[2] and tonumber(first[2]) + l.period or lnow + l.period
  end
  if l.conc > 0 then
    room = math.min(room, l.conc - (tonumber(redis.call('HGET', K_LIMUSE, slot)) or 0))
  end
  return room, again
end

-- run_timers lets jobs held back by a rate go again once their slot's
-- window has room, as many as it has room for (and its concurrency).
-- Returns the next timer, lease-clock ms, or nil.
local function run_timers(limit)
  local lnow = lease_now()
  local slots = redis.call('ZRANGEBYSCORE', K_TIMERS, '-inf', ms(lnow), 'LIMIT', 0, limit)
  for _, slot in ipairs(slots) do
    redis.call('ZREM', K_TIMERS, slot)
    local name = limit_of(slot)
    local spec = redis.call('HGET', K_LIMITS, name)
    local l = spec and parse_limit(name, spec)
    local room, again = UNPARK_MAX, nil -- a deleted limit holds nothing back
    if l then room, again = slot_room(l, slot, lnow, UNPARK_MAX) end
    local k = unpark(slot, room)
    if k == UNPARK_MAX then again = lnow end -- more to let go at once
    if again and redis.call('EXISTS', QK .. 'parked:' .. slot) == 1 then
      redis.call('ZADD', K_TIMERS, ms(again), slot)
    end
  end
  local nxt = redis.call('ZRANGE', K_TIMERS, 0, 0, 'WITHSCORES')
  return tonumber(nxt[2])
end

-- earliest returns the smallest score of the scheduled set, or nil.
local function earliest()
  local r = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if #r == 0 then return nil end
  return tonumber(r[2])
end

-- wake_poller tells pollers that the earliest due time is now `due`, when
-- `due` is earlier than `before` (the earliest before the change).
local function wake_poller(before, due)
  if before == nil or due < before then
    redis.call('PUBLISH', WAKE_CHANNEL, ms(due))
  end
end

-- make_ready puts a job whose run_at has come into its priority list.
local function make_ready(id, prio, group)
  enqueue(id, prio, group, false)
  redis.call('HSET', JOB .. id, 'state', 'queued')
end

-- release starts a job whose dependencies are all done: scheduled when its
-- run_at is still ahead, queued otherwise. Returns 1 when it became queued.
local function release(id)
  local f = job_fields(id, RELEASE_FIELDS)
  if not f[1] then return 0 end
  redis.call('ZREM', K_WAIT, id)
  local run_at = tonumber(f[3] or f[6])
  if run_at > NOW then
    local before = earliest()
    redis.call('ZADD', K_SCHED, run_at, id)
    redis.call('HSET', JOB .. id, 'state', 'scheduled')
    emit(id, f[1], 'scheduled', 'scheduled', f[4], '', '')
    wake_poller(before, run_at)
    return 0
  end
  make_ready(id, f[2], f[5])
  -- Due from now: the end of the dependency that released it, on the
  -- clock that recorded that end. A claim never records a start before
  -- its run_at (claim.lua), so a dependent's start never reads earlier
  -- than its dependency's end, whatever the claimer's clock says.
  redis.call('HSET', JOB .. id, 'run_at', NOW_S)
  emit(id, f[1], 'queued', 'queued', f[4], '', '')
  return 1
end

-- batch_ended reports the end of job id in state `state` to its batch, if
-- it is a live member of one (QK..'blive', written by submit.lua and
-- retry.lua): it appends "<batch>\t<id>\t<state>\t<n>" to QK..'bends',
-- n numbering the member's ends (its field batch_ends; each end's is above
-- the last one's and the lease clock's ms times 1000), which the poller
-- relays to the batch's own slot (batch.go, lua/batchsettle.lua): the
-- member's latest end is the one that counts, and a relay sent twice
-- counts once.
-- batch_members_live reports whether the queue has live batch members,
-- with one EXISTS a call: a queue without batches pays no more for the
-- jobs a call ends.
local function batch_members_live()
  if blive == nil then blive = redis.call('EXISTS', QK .. 'blive') == 1 end
  return blive
end

-- batch_member_live makes job id a live member of its batch (submit.lua,
-- retry.lua).
local function batch_member_live(id)
  redis.call('SADD', QK .. 'blive', id)
  blive = true
end

local function batch_ended(id, state)
  if not batch_members_live() or redis.call('SREM', QK .. 'blive', id) == 0 then return end
  local b = redis.call('HGET', JOB .. id, 'batch')
  if not b then return end
  -- The end's number grows with the lease clock, not only by one: a slot
  -- that rolls back alone (a Cluster failover to a replica that lagged)
  -- forgets the member's last end, which its batch (another slot) counted;
  -- the re-run's end must still be newer than that one (batchsettle.lua).
  local prev = tonumber(redis.call('HGET', JOB .. id, 'batch_ends') or '0') or 0
  local n = ms(math.max(prev + 1, lease_now() * 1000))
  redis.call('HSET', JOB .. id, 'batch_ends', n)
  redis.call('RPUSH', QK .. 'bends', b .. '\t' .. id .. '\t' .. state .. '\t' .. n)
end

-- finish records a final state on a job hash and its place among finished jobs.
-- A cancel ends an active job's lease at once, but its holder hears only
-- at its next renewal (or pub/sub message) and may run on until then: the
-- cancel keeps the lease's token and expiry in the job hash field
-- `cancelled_lease` ("<token> <expiry on the lease clock>"). A retry
-- before that expiry schedules the job for it instead of queueing it
-- (fenced_due), so that no second attempt starts while the first may still
-- be trusted, unless the holder acknowledged: a renewal or an outcome or a
-- release refused for that token (cancel_acknowledged).

-- fenced_due returns when (NOW's clock, ms) a retried job may run again:
-- nil when no cancelled lease holds it back. It forgets a lease past its
-- expiry.
local function fenced_due(id)
  local rec = redis.call('HGET', JOB .. id, 'cancelled_lease')
  if not rec then return nil end
  local exp = tonumber(string.match(rec, ' (%d+)$'))
  local left = exp and exp - lease_now() or 0
  if left <= 0 then
    redis.call('HDEL', JOB .. id, 'cancelled_lease')
    return nil
  end
  return NOW + left
end

-- cancel_acknowledged: the holder of token heard that its lease is gone
-- (a call of its with that token was refused). A cancelled lease of that
-- token no longer holds the job back: a retried job waiting for it is
-- made due now.
local function cancel_acknowledged(id, token)
  local jk = JOB .. id
  local rec = redis.call('HGET', jk, 'cancelled_lease')
  if not rec or string.sub(rec, 1, #token + 1) ~= token .. ' ' then return end
  redis.call('HDEL', jk, 'cancelled_lease')
  if redis.call('HGET', jk, 'state') == 'scheduled' and redis.call('ZSCORE', K_SCHED, id) then
    redis.call('ZADD', K_SCHED, NOW, id)
    redis.call('HSET', jk, 'run_at', NOW_S)
    redis.call('PUBLISH', WAKE_CHANNEL, NOW_S)
  end
end

local function finish(id, state, extra)
  redis.call('HSET', JOB .. id, 'state', state, 'finished_at', NOW_S, unpack(extra))
  batch_ended(id, state)
  if state == 'dead' then
    redis.call('ZADD', K_DEAD, NOW, id)
  else
    redis.call('ZADD', K_FIN, NOW, id)
  end
end

-- unpark_waiting takes ids, which leave the scheduled set, out of the
-- parked sets (park_waiting): one EXISTS for a queue without any.
local function unpark_waiting(ids)
  if #ids == 0 or redis.call('EXISTS', K_SLEEPING, K_AWAITING) == 0 then return end
  call_chunked('SREM', K_SLEEPING, ids)
  call_chunked('SREM', K_AWAITING, ids)
end

-- sequences_ended forgets the sequence keys (submit.lua, "sequence")
-- whose last jobs are among ids, which just ended: K_SEQTAILS maps each
-- key's last job to its key, so that a key is kept only while its last
-- job has not ended. A failure reaches it through settle_dependents (a
-- last job's has_dependents flag is 's' until a job is submitted behind
-- it, which makes it '1'), a success through complete.lua.
local function sequences_ended(ids)
  local keys = hmget_chunked(K_SEQTAILS, ids)
  for k, key in ipairs(keys) do
    if key then
      local sk = QK .. 'seq:' .. key
      if redis.call('GET', sk) == ids[k] then redis.call('DEL', sk) end
      redis.call('HDEL', K_SEQTAILS, ids[k])
    end
  end
end

-- withdraw takes job id, which waits in state (waiting, scheduled or
-- queued; not running) with priority prio and, when a limit holds it
-- back, its slot parked, out of the place it waits in: the waiting set and
-- its dependencies' sets, the scheduled set (and a durable job's parked
-- sets), the slot's parked set, or its list, where it stays as a
-- tombstone that a claim drops (O(1): an LREM would scan the whole list).
-- A cancel (cancel.lua) and an expiry (expire_due) take a job out so.
local function withdraw(id, state, prio, parked)
  if state == 'waiting' then
    redis.call('ZREM', K_WAIT, id)
    local pkey = QK .. 'deps:' .. id
    for _, p in ipairs(redis.call('SMEMBERS', pkey)) do
      redis.call('SREM', QK .. 'dependents:' .. p, id)
    end
    redis.call('DEL', pkey)
    redis.call('SREM', QK .. 'rwait', id)
  elseif state == 'scheduled' then
    redis.call('ZREM', K_SCHED, id)
    unpark_waiting({id})
  elseif state == 'queued' and parked then
    unpark_id(id, parked)
  elseif state == 'queued' then
    redis.call('HSET', K_TOMB, id, prio)
    redis.call('HINCRBY', K_STATS, 'tomb_' .. prio, 1)
  end
end

-- cancel_one cancels waiting job id for reason why, without its dependents;
-- false when it was not waiting.
local function cancel_one(id, why)
  local f = job_fields(id, TYPE_STATE_ATTEMPT)
  if f[2] ~= 'waiting' then return false end
  withdraw(id, 'waiting')
  if redis.call('HEXISTS', K_SEQTAILS, id) == 1 then sequences_ended({id}) end
  finish(id, 'cancelled', {'last_error', why})
  emit(id, f[1], 'cancelled', 'cancelled', f[3], '', why)
  return true
end

-- dependency_done takes dependency entry dep (a job id, or "<queue>|<id>"
-- for a job of another queue) off waiting job id's pending set, and starts
-- id when none is left. Returns 1 when id became queued.
local function dependency_done(id, dep)
  local pkey = QK .. 'deps:' .. id
  if redis.call('SREM', pkey, dep) == 0 then return 0 end
  if redis.call('SCARD', pkey) > 0 or redis.call('HGET', JOB .. id, 'state') ~= 'waiting' then return 0 end
  redis.call('SREM', QK .. 'rwait', id)
  return release(id)
end

-- cancel_tree cancels the dependents of the jobs in ended (whose
-- dependents sets are taken from here), transitively, each with a reason
-- naming the dependency that ended; ended[i]'s reason is whys[i]. It works
-- through a list instead of recursing, so a chain of any length is
-- cancelled whole (recursion overflowed Lua's C stack a few hundred deep
-- and left the rest of the chain waiting).
local function cancel_tree(ended, whys)
  local i = 1
  while ended[i] do
    local id, why = ended[i], whys[i]
    i = i + 1
    local dkey = QK .. 'dependents:' .. id
    local deps = redis.call('SMEMBERS', dkey)
    redis.call('DEL', dkey)
    for _, d in ipairs(deps) do
      if redis.call('HGET', JOB .. d, 'on_dependency_failure') == 'run' then
        -- It runs anyway: the failed dependency counts as done.
        signal(dependency_done(d, id))
      elseif cancel_one(d, why) then
        local n = #ended + 1
        ended[n] = d
        whys[n] = 'dependency ' .. d .. ' ended cancelled'
      end
    end
  end
end

-- settle_dependents runs after job `id` reached a final state: on success
-- each dependent loses one pending dependency (and starts when none is
-- left); on dead or cancelled every dependent is cancelled, transitively,
-- with reason why. Returns how many jobs became queued.
local function settle_dependents(id, ok, why, flag)
  if flag == nil then flag = redis.call('HGET', JOB .. id, 'has_dependents') end
  if flag ~= '1' then
    if flag == 's' then sequences_ended({id}) end
    return 0
  end
  if not ok then
    cancel_tree({id}, {why})
    return 0
  end
  local dkey = QK .. 'dependents:' .. id
  local deps = redis.call('SMEMBERS', dkey)
  redis.call('DEL', dkey)
  local queued = 0
  for _, d in ipairs(deps) do queued = queued + dependency_done(d, id) end
  return queued
end

-- cancel_waiting cancels waiting job id for reason why, and its dependents,
-- transitively.
local function cancel_waiting(id, why)
  if cancel_one(id, why) then
    cancel_tree({id}, {'dependency ' .. id .. ' ended cancelled'})
  end
end

-- backoff_due returns when the retry after failed attempt `attempt` is due,
-- given a uniform random r in [0,1): full jitter over an exponential ceiling.
local function backoff_due(base, max, attempt, r)
  local ceiling = base
  local i = 1
  while i < attempt and ceiling < max do ceiling = ceiling * 2; i = i + 1 end
  if ceiling > max then ceiling = max end
  return NOW + math.floor(r * ceiling * 1000)
end

-- requeue puts job id (type jtype, priority prio, group group), whose
-- attempt just ended, back to wait for its next one, due at ms `due`:
-- queued at once when due, scheduled otherwise; it records `event` with
-- the state reached. Returns the state.
local function requeue(id, jtype, prio, group, due, event, attempt, worker, err)
  if due <= NOW then
    make_ready(id, prio, group)
    emit(id, jtype, event, 'queued', attempt, worker, err)
    signal(1)
    return 'queued'
  end
  local before = earliest()
  redis.call('ZADD', K_SCHED, due, id)
  redis.call('HSET', JOB .. id, 'state', 'scheduled')
  emit(id, jtype, event, 'scheduled', attempt, worker, err)
  wake_poller(before, due)
  return 'scheduled'
end

-- retry_or_bury handles a failed attempt of an active job: a retry after
-- backoff, or the dead set when attempts are exhausted or retry is false.
-- `event` is the event to record for a retry ('failed' or 'lease_expired').
-- delay, when not nil, is the retry's delay in ms chosen by the handler
-- (RetryAfter): it replaces the backoff. Returns the new state.
local function retry_or_bury(id, f, err, retry, r, event, worker, slots, started, delay)
  -- f: type, attempt, max_attempts, backoff_base, backoff_max, priority, group
  -- slots: the concurrency slots the attempt holds (nil: look them up)
  -- started: the attempt's start for a format-2 attempt (see attempt_fields), else nil
  local attempt = tonumber(f[2])
  end_lease(id, slots)
  redis.call('HINCRBY', K_STATS, 'failed_total', 1)
  count_minute('f', 1)
  local due
  local exhausted = (not retry) or attempt >= tonumber(f[3])
  if not exhausted then
    if delay then due = NOW + delay else due = backoff_due(tonumber(f[4]), tonumber(f[5]), attempt, r) end
    -- No retry starts at or past the job's deadline (expire_due).
    local dl = redis.call('HGET', JOB .. id, 'deadline')
    if dl and due >= tonumber(dl) then
      exhausted = true
      err = err .. ' (no retry: ' .. DEADLINE_PASSED .. ')'
    end
  end
  if exhausted then
    count_minute('d', 1)
    finish(id, 'dead', attempt_fields(f[2], started, worker, {'last_error', err, 'token', ''}))
    if event == 'lease_expired' then emit(id, f[1], 'lease_expired', 'dead', attempt, worker, err) end
    emit(id, f[1], 'dead', 'dead', attempt, worker, err)
    redis.call('HINCRBY', K_STATS, 'dead_total', 1)
    settle_dependents(id, false, 'dependency ' .. id .. ' ended dead')
    return 'dead'
  end
  redis.call('HSET', JOB .. id, unpack(attempt_fields(f[2], started, worker, {'last_error', err, 'token', '', 'run_at', ms(due)})))
  return requeue(id, f[1], f[6], f[7], due, event, attempt, worker, err)
end

-- snooze ends an active job's attempt without spending it (the handler
-- asked to run again after delay ms): the attempt counts, as every attempt
-- does, and max_attempts grows by one to give it back, so attempt numbers
-- stay unique per run. f as retry_or_bury's; msg is the handler's reason
-- (recorded on the event, not as an error). Returns the new state.
local function snooze(id, f, delay, msg, worker, slots, started, event)
  end_lease(id, slots)
  local due = NOW + delay
  redis.call('HSET', JOB .. id, unpack(attempt_fields(f[2], started, worker,
    {'token', '', 'run_at', ms(due), 'max_attempts', tonumber(f[3]) + 1})))
  return requeue(id, f[1], f[6], f[7], due, event or 'snoozed', tonumber(f[2]), worker, msg)
end

-- park_waiting ends an attempt of a durable job that waits (docs/durable.md): it
-- is scheduled until delay ms from now (a sleep's end, a wait's deadline)
-- with its attempt given back, as snooze does, and what it waits for in
-- its hash's 'awaits' ("<run_at> <what>", what 'sleep' or
-- 'signal:<name>'), which reads as its wait only while run_at is that. A
-- wait for a signal that arrived meanwhile is queued at once.
local function park_waiting(id, f, delay, what, worker, slots, started)
  local sname = string.match(what, '^signal:(.*)$')
  if sname and redis.call('HEXISTS', JOB .. id, 'sg:' .. sname) == 1 then delay = 0 end
  redis.call('HSET', JOB .. id, 'awaits', ms(NOW + delay) .. ' ' .. what)
  local st = snooze(id, f, delay, what, worker, slots, started, 'parked')
  if st == 'scheduled' then redis.call('SADD', sname and K_AWAITING or K_SLEEPING, id) end
  return st
end

-- cancel_self ends an active job cancelled by its own handler, for reason
-- why: it ends cancelled (not dead), and its dependents are cancelled.
local function cancel_self(id, jtype, attempt, why, worker, slots, started)
  end_lease(id, slots)
  finish(id, 'cancelled', attempt_fields(attempt, started, worker, {'last_error', why, 'token', ''}))
  emit(id, jtype, 'cancelled', 'cancelled', attempt, worker, why)
  settle_dependents(id, false, 'dependency ' .. id .. ' ended cancelled')
  return 'cancelled'
end

-- count_processed adds n finished attempts to this second's throughput counter.
local function count_processed(n)
  if n <= 0 then return end
  local k = QK .. 'tput:' .. math.floor(NOW / 1000)
  if redis.call('INCRBY', k, n) == n then redis.call('EXPIRE', k, 120) end
end

-- Submit (submit.lua). Its helpers are made here, once per library load,
-- not per call: a closure or table made per call costs every submit.
-- FINAL_STATES are the states a job ends in.
local FINAL_STATES = {succeeded = true, dead = true, cancelled = true}
-- NO_FIELDS is an empty list to unpack.
local NO_FIELDS = {}

-- split_list splits a comma-separated list ('' = none).
local function split_list(s)
  local t = {}
  if s == '' then return t end
  for part in string.gmatch(s, '[^,]+') do t[#t + 1] = part end
  return t
end

-- Expiry and deadlines (docs/concepts.md, "Expiry and deadlines"). A job
-- with a start_by or a deadline has an entry in K_EXPIRES, scored by the
-- earlier of the two; the poller's promote pass ends the jobs whose time
-- passed while they waited (expire_due), and a claim checks both times
-- itself (claim.lua), so however late the poller, no attempt starts after
-- them. start_by holds for the first attempt only; a deadline for all.

-- expired_why tells why a job with start_by sb, deadline dl (ms strings,
-- false or nil when unset) and attempt count attempt may not start now:
-- nil when it may.
local function expired_why(sb, dl, attempt)
  if dl and NOW >= tonumber(dl) then return DEADLINE_PASSED end
  if sb and NOW >= tonumber(sb) and (not attempt or attempt == '0') then return EXPIRED end
  return nil
end

-- bury_expired ends job id (of type jtype, attempt count attempt), taken
-- out of where it waited, dead for reason why; its dependents follow the
-- dependency-failure rule.
local function bury_expired(id, jtype, attempt, why)
  finish(id, 'dead', {'last_error', why})
  emit(id, jtype, 'dead', 'dead', attempt, '', why)
  redis.call('HINCRBY', K_STATS, 'dead_total', 1)
  count_minute('d', 1)
  settle_dependents(id, false, 'dependency ' .. id .. ' ended dead')
end

local EXPIRY_FIELDS = {'type', 'state', 'attempt', 'priority', 'parked', 'start_by', 'deadline'}

-- expire_due ends up to limit jobs whose entry in K_EXPIRES is due and
-- which may no longer start (expired_why), wherever they wait. A job
-- running then is left to its attempt (whose timeout ends at the
-- deadline, and whose retry retry_or_bury refuses past it), and looked at
-- again a second later; one that started before its start_by keeps an
-- entry for its deadline. Returns how many ended, and the earliest entry
-- left (ms, or nil).
local function expire_due(limit)
  local ids = redis.call('ZRANGEBYSCORE', K_EXPIRES, '-inf', NOW, 'LIMIT', 0, limit)
  local n = 0
  if #ids > 0 then
    call_chunked('ZREM', K_EXPIRES, ids)
    for _, id in ipairs(ids) do
      local f = job_fields(id, EXPIRY_FIELDS)
      if f[2] and not FINAL_STATES[f[2]] then
        local why = expired_why(f[6], f[7], f[3])
        if running(id) then
          if f[7] then redis.call('ZADD', K_EXPIRES, ms(math.max(tonumber(f[7]), NOW + 1000)), id) end
        elseif why then
          withdraw(id, f[2], f[4], f[5])
          bury_expired(id, f[1], f[3], why)
          n = n + 1
        elseif f[7] then
          redis.call('ZADD', K_EXPIRES, f[7], id)
        end
      end
    end
  end
  local r = redis.call('ZRANGE', K_EXPIRES, 0, 0, 'WITHSCORES')
  return n, tonumber(r[2])
end

-- submit_next_job: a submitted job's arguments start at ARGV[b]; the next
-- job's start 4 on, 8 after a job with extras ('1'), 9 after one with
-- extras and a batch ('2'), 10 after one with those and options ('3').
local function submit_next_job(b)
  local e = ARGV[b + 3]
  if e == '' then return b + 4 end
  if e == '2' then return b + 9 end
  if e == '3' then return b + 10 end
  return b + 8
end

-- submit_options parses a job's options (extras '3', submit.lua): lines
-- of a one-letter code and a value: s start_by ms, d deadline ms, t tags
-- (comma-separated), q sequence key, k debounce key, w debounce window
-- ms, x debounce max wait ms, m debounce mode ('e' extend, else
-- replace). Nil for ''.
local function submit_options(s)
  if s == '' then return nil end
  local o = {}
  for line in string.gmatch(s, '[^\n]+') do o[string.sub(line, 1, 1)] = string.sub(line, 2) end
  return o
end

-- submit_replay answers a submit sent again (submit.lua): {'ok', i, id, …}
-- with a pair for each job of the call that has no hash (a duplicate of
-- the job its idempotency key names), as the first call answered. It
-- returns nil when the call is no replay: a job of it has no hash and no
-- idempotency key naming another job (another call that shares some job
-- ids, as outbox relays' do, goes the usual way).
local function submit_replay(base, n)
  local out = {'ok'}
  local b = base
  for i = 1, n do
    local id = ARGV[b]
    if redis.call('EXISTS', JOB .. id) == 0 then
      local prev = ARGV[b + 3] ~= '' and ARGV[b + 4] ~= '' and redis.call('GET', QK .. 'idem:' .. ARGV[b + 4])
      if not prev or prev == id or redis.call('EXISTS', JOB .. prev) == 0 then return nil end
      out[#out + 1] = tostring(i - 1)
      out[#out + 1] = prev
    end
    b = submit_next_job(b)
  end
  return out
end

-- submit_uniqueness reads the queue's uniqueness (uniqueness.go): how long
-- an idempotency key names its job (its window, else the submit's ARGV[7])
-- and whether only until the job ends ('until' = 'finished').
local function submit_uniqueness()
  local r = redis.call('HMGET', QK .. 'uniqueness', 'window', 'until')
  return {ttl = r[1] or ARGV[7], finished = r[2] == 'finished'}
end

-- submit_profile returns what a submit needs of the profile a job names
-- (its 1-based number, as sent; the profiles start at ARGV[pbase]): at,
-- where its arguments start; due, its run_at as a number; and fields, the
-- fields a format-4 hash holds of it: those unlike JOB_DEFAULTS, and
-- run_at unless it equals created_at. A submit works it out once per
-- profile in a row, not per job (a number conversion per job was ~1 % of
-- a batch's Redis time).
local function submit_profile(pbase, num)
  local pf = pbase + 8 * (tonumber(num) - 1)
  local fields = {}
  for i = 1, 5 do
    local field, v = PROFILE_DEFAULTED[i], ARGV[pf + i]
    if v ~= JOB_DEFAULTS[field] then fields[#fields + 1] = field; fields[#fields + 1] = v end
  end
  if ARGV[pf + 7] ~= ARGV[pf + 6] then fields[#fields + 1] = 'run_at'; fields[#fields + 1] = ARGV[pf + 7] end
  return {at = pf, due = tonumber(ARGV[pf + 7]), fields = fields}
end
