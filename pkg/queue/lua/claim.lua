-- claim.lua: lease up to n due jobs, highest priority first.
-- ARGV[6] n   ARGV[7] worker id   ARGV[8] lease ttl ms
-- ARGV[9] types: comma-separated job types the caller runs ('' = any). With
--         types, a queued job of another type is parked for a handler
--         (NOHANDLER in lib.lua) and the claim goes on behind it, so
--         workers with different types share a queue, each taking its own
--         types in priority order. Jobs parked for a handler of the
--         caller's types (any, for '') go first: they were ahead in their
--         lists.
-- ARGV[11] the tokens' tags: 12 random hex digits per job, fresh per call
--         (next_token). The first tag also names the call: a call that
--         leased jobs is recorded (record_claim in lib.lua), and the same
--         call sent again (a lost reply, retried) answers the jobs it
--         leased that still run under its tokens, and leases nothing more.
-- ARGV[10] the storage format to write: '2' keeps the attempt's token,
--         number, worker and start in its K_ACTIVE record only, and writes
--         nothing on the job hash; '3' and '4' do the same and also write PAD
--         (lib.lua) into K_LEASES and K_ACTIVE (format 4 changes only what
--         a submit writes); anything else is format 1,
--         which also writes them on the hash (see parse_active in
--         lib.lua). A client passes a format only once every live process
--         reads it (format.go).
-- Each claimed job moves from its priority list into the lease set in this
-- script: only a job found queued and without a K_ACTIVE record is taken
-- (the exclusion a SET NX would give: an active job is never queued), it
-- gets a new fencing token,
-- and its lease entry is scored by its expiry on the lease clock (see
-- lease_now). The holder renews the entry with extend.lua while the job
-- runs; every later transition checks the token. Ids of cancelled jobs still in a
-- list (tombstones, see cancel.lua) are dropped on the way. Returns a flat
-- list of groups of 12: id, token, type, payload, attempt, max_attempts,
-- timeout_seconds, priority, created_at, run_at, group, traceparent.
-- A marker "~<group>" taken off a list stands for its group's next job
-- (see enqueue in lib.lua). A job that one of the queue's limits has no
-- room for is parked (see park), not claimed; at most PARK_MAX are parked
-- per call, so that a long run of held-back jobs never makes one call
-- long (the next call goes on). An empty reply when the
-- queue is paused or empty; the signal list is then cleared, so the caller
-- can block on it and be woken by the next submit.
-- One EXISTS over the pause flag and the limits tells the common case
-- (neither) apart at no extra cost.
-- The same call sent again (its reply was lost): the same answer. A
-- cycle (CYCLE_STATUSES set) looked already, before its outcomes.
local call_id = string.sub(ARGV[11] or '', 1, 12)
local rec = CYCLE_STATUSES == nil and claim_record(ARGV[7], call_id)
if rec then return (replay_claim(rec, ARGV[11])) end
if quarantined(longest_ttl(tonumber(ARGV[8]))) then
  redis.call('DEL', K_SIGNAL) -- callers block until a submit or their wait ends
  return {}
end
local n = tonumber(ARGV[6])
local types = nil
if ARGV[9] and ARGV[9] ~= '' then
  types = {}
  for t in string.gmatch(ARGV[9], '[^,]+') do types[t] = true end
end
local gate = nil
if redis.call('EXISTS', K_PAUSED, K_LIMITS, K_NOHANDLER) > 0 then
  if redis.call('EXISTS', K_PAUSED) == 1 then return {} end
  gate = limits_gate()
  -- Jobs parked for a handler of the caller's types go back to the heads
  -- of their lists, up to n of them, and are taken below.
  if n > 0 and redis.call('EXISTS', K_NOHANDLER) == 1 then unpark_handled(types, n) end
end
local need = n
local worker = ARGV[7]
local ttl = tonumber(ARGV[8])
local format = tonumber(ARGV[10] or '') or 1
local format2 = format >= 2
local pad = format >= 3
local PARK_MAX = 1000
local expiry = nil
local out = {}
local leases = {} -- score, member pairs for the lease set
local actives = {} -- field, value pairs for K_ACTIVE
local parked = 0
local taken = 0 -- jobs claimed so far: leases, actives and out hold their entries
-- next_token hands out fencing tokens, "<fence>-<tag>". The fence is a
-- number from a range reserved on first use, never below the lease
-- clock's ms times 1000: a Redis that comes back from an older snapshot
-- (its counter rolled back) still hands out fences above every earlier
-- one, so long as its clock moves forward. The tag is the caller's: 12
-- random hex digits per token in ARGV[11] (fresh per call), so a token is
-- never handed out twice whatever Redis forgets, and one token tells
-- nothing of another's tag (docs/engine.md, "Fencing tokens").
-- The fence's decimal string is built from its thousands, formatted once
-- per thousand, and its last three digits (dec3 in lib.lua): one
-- concatenation per token instead of a string.format of the whole number.
local fence_hi, fence_hi_s, fence_lo = nil, nil, nil
local tags = ARGV[11] or ''
local issued = 0
local function next_token()
  if fence_hi == nil then
    local last = math.max(tonumber(redis.call('GET', K_FENCE) or '0') or 0, lease_now() * 1000)
    redis.call('SET', K_FENCE, ms(last + n))
    fence_lo = last % 1000
    fence_hi = (last - fence_lo) / 1000
    fence_hi_s = ms(fence_hi)
  end
  fence_lo = fence_lo + 1
  if fence_lo == 1000 then
    fence_lo = 0
    fence_hi = fence_hi + 1
    fence_hi_s = ms(fence_hi)
  end
  issued = issued + 1
  local tag = string.sub(tags, 12 * issued - 11, 12 * issued)
  if #tag < 12 then tag = string.sub(redis.sha1hex(tags .. issued), 1, 12) end
  if fence_hi == 0 then return fence_lo .. '-' .. tag end
  return fence_hi_s .. dec3(fence_lo) .. '-' .. tag
end
-- A job's fields are read with claim_fields (lib.lua): type, payload,
-- attempt, max_attempts, timeout, priority, created_at, run_at, state,
-- group, traceparent, start_by, deadline, in this order (f[1] to f[13]
-- below).

-- drop forgets a tombstone (or the id of a pruned job) taken off a list.
-- The tombstone's own priority is counted down: the job's hash may be gone
-- (pruned after its cancel).
local function drop(id)
  local prio = redis.call('HGET', K_TOMB, id)
  if prio then
    redis.call('HDEL', K_TOMB, id)
    redis.call('HINCRBY', K_STATS, 'tomb_' .. prio, -1)
  end
end

-- Changes to the stats hash's group counts, written once at the end.
local gdelta = {}
local function gcount(field, d) gdelta[field] = (gdelta[field] or 0) + d end

-- group_next takes the next job of the group a marker stands for, just
-- popped from list (priority prio), and puts the marker back at the
-- list's tail while the group has more. Nil for a marker whose group list
-- is empty.
local function group_next(list, prio, marker)
  local gl = group_list(prio, string.sub(marker, 2))
  local id = redis.call('RPOP', gl)
  if id then
    gcount('grouped_' .. prio, -1)
    if redis.call('LLEN', gl) > 0 then
      redis.call('LPUSH', list, marker)
      return id
    end
  end
  gcount('markers_' .. prio, -1)
  return id
end

-- take claims id, just taken off its list, whose hash fields are f (a
-- queued job), or parks it when a limit has no room for it.
-- Numbers are turned into strings once here: Lua formats a number with
-- sprintf each time one is passed to redis.call.
local function take(id, f)
  local picks = nil
  if gate then
    local ok, p, at = gate.check(f[1], f[2])
    if not ok then
      park(id, f[6], p, at)
      parked = parked + 1
      return
    end
    picks = p
  end
  local token = next_token()
  if expiry == nil then expiry = ms(lease_now() + ttl) end
  local attempt = next_attempt(f[3])
  -- The start, never before the job was due (see release in lib.lua): the
  -- claimer's clock may be behind the one that made it due.
  local started = NOW_S
  local due = f[8] or f[7]
  if due and later(due, NOW_S) then started = due end
  local held = ''
  if picks and #picks > 0 then held = gate.take(picks, id .. ':' .. token) end
  local o = 12 * taken
  taken = taken + 1
  local l = 2 * taken
  leases[l - 1] = expiry
  leases[l] = id
  actives[l - 1] = id
  -- The record (parse_active's forms), built in one concatenation.
  if format2 then
    actives[l] = token .. ' ' .. attempt .. ' ' .. f[1] .. ' ' .. held .. ' ' .. started .. ' ' .. worker
  else
    if held ~= '' then
      actives[l] = token .. ' ' .. attempt .. ' ' .. f[1] .. ' ' .. held
    else
      actives[l] = token .. ' ' .. attempt .. ' ' .. f[1]
    end
    redis.call('HSET', JOB .. id, 'state', 'active', 'attempt', attempt, 'token', token,
      'worker_id', worker, 'started_at', started)
  end
  emit(id, f[1], 'started', 'active', attempt, worker, '')
  out[o + 1] = id; out[o + 2] = token; out[o + 3] = f[1]; out[o + 4] = f[2]
  out[o + 5] = attempt; out[o + 6] = f[4]; out[o + 7] = f[13] and claim_timeout(f) or f[5]; out[o + 8] = f[6]
  out[o + 9] = f[7]; out[o + 10] = f[8] or f[7]; out[o + 11] = f[10] or ''; out[o + 12] = f[11] or ''
  need = need - 1
end

-- consider claims (or drops, or parks) one id taken off a list; active
-- tells that it has a K_ACTIVE record (running, claimed in format 2).
local function consider(id, f, active)
  -- Its start_by or deadline passed before the poller saw it.
  local why = (f[12] or f[13]) and expired_why(f[12], f[13], f[3])
  if f[9] ~= 'queued' or active then
    drop(id)
  elseif why then
    bury_expired(id, f[1], f[3], why)
  elseif types and not types[f[1]] then
    park(id, f[6], NOHANDLER .. '|' .. f[1], nil)
    parked = parked + 1
  else
    take(id, f)
  end
end

local popped = false
for pi, list in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  local prio = PRIORITIES[pi]
  while need > 0 and parked < PARK_MAX do
    local ids = redis.call('RPOP', list, need)
    if not ids then break end
    popped = true
    for k, id in ipairs(ids) do
      if string.byte(id, 1) == 126 then
        id = group_next(list, prio, id)
        ids[k] = id or ''
      end
    end
    -- One HMGET of K_ACTIVE for the batch: an id with a record is
    -- running (a format-2 claim leaves its hash saying queued).
    local act = hmget_chunked(K_ACTIVE, ids)
    for k, id in ipairs(ids) do
      if id ~= '' then consider(id, claim_fields(id), act[k]) end
    end
  end
  if need <= 0 or parked >= PARK_MAX then break end
end
for field, d in pairs(gdelta) do
  if d ~= 0 then redis.call('HINCRBY', K_STATS, field, d) end
end
if gate then gate.flush() end
if taken == 0 then
  if not popped then redis.call('DEL', K_SIGNAL) end
  return out
end
if pad then
  -- Written with every claim: a key whose last entry went is deleted, and
  -- one of the same score or value costs one lookup to write again.
  leases[#leases + 1] = PAD_SCORE
  leases[#leases + 1] = PAD
  actives[#actives + 1] = PAD
  actives[#actives + 1] = PAD
end
call_chunked('ZADD', K_LEASES, leases)
call_chunked('HSET', K_ACTIVE, actives)
keep_ttl(ttl)
if call_id ~= '' then
  local ids = {}
  for i = 1, taken do ids[i] = out[12 * i - 11] end
  record_claim(worker, call_id, ids)
end
return out
