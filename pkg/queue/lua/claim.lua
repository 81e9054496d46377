-- claim.lua: lease up to n due jobs, highest priority first.
-- ARGV[6] n   ARGV[7] worker id   ARGV[8] lease ttl ms
-- ARGV[9] types: comma-separated job types the caller runs ('' = any). With
--         types, a list whose next job is of another type is passed over
--         (its order is kept: types guard a claim, queues route work).
-- Each claimed job moves from its priority list into the lease set in this
-- script: only a job found queued is taken (the exclusion a SET NX would
-- give: an active job is never queued), its hash gets a new fencing token,
-- and its lease entry is scored by its expiry on the lease clock (see
-- lease_now). The holder renews the entry with extend.lua while the job
-- runs; every later transition checks the token. Ids of cancelled jobs still in a
-- list (tombstones, see cancel.lua) are dropped on the way. Returns a flat
-- list of groups of 10: id, token, type, payload, attempt, max_attempts,
-- timeout_seconds, priority, created_at, run_at. An empty reply when the
-- queue is paused or empty; the signal list is then cleared, so the caller
-- can block on it and be woken by the next submit.
if redis.call('EXISTS', K_PAUSED) == 1 then return {} end
local n = tonumber(ARGV[6])
local need = n
local worker = ARGV[7]
local ttl = tonumber(ARGV[8])
local types = nil
if ARGV[9] and ARGV[9] ~= '' then
  types = {}
  for t in string.gmatch(ARGV[9], '[^,]+') do types[t] = true end
end
local expiry = nil
local out = {}
local leases = {} -- score, member pairs for the lease set
local actives = {} -- field, value pairs for K_ACTIVE
local fence = nil
-- next_token hands out fencing tokens from one range reserved on first use.
local function next_token()
  if fence == nil then fence = redis.call('INCRBY', K_FENCE, n) - n end
  fence = fence + 1
  return fence
end
local FIELDS = {'type', 'payload', 'attempt', 'max_attempts', 'timeout', 'priority', 'created_at', 'run_at', 'state'}

-- drop forgets a tombstone (or the id of a pruned job) taken off a list.
local function drop(id, prio)
  if redis.call('HDEL', K_TOMB, id) == 1 then
    redis.call('HINCRBY', K_STATS, 'tomb_' .. (prio or 'normal'), -1)
  end
end

-- take claims id, just popped from its list, whose hash fields are f (a
-- queued job).
-- Numbers are turned into strings once here: Lua formats a number with
-- sprintf each time one is passed to redis.call.
local function take(id, f)
  local token = ms(next_token())
  if expiry == nil then expiry = ms(lease_now() + ttl) end
  local attempt = tostring(tonumber(f[3]) + 1)
  leases[#leases + 1] = expiry
  leases[#leases + 1] = id
  actives[#actives + 1] = id
  actives[#actives + 1] = token .. ' ' .. attempt .. ' ' .. f[1]
  redis.call('HSET', JOB .. id, 'state', 'active', 'attempt', attempt, 'token', token,
    'worker_id', worker, 'started_at', NOW_S)
  emit(id, f[1], 'started', 'active', attempt, worker, '')
  local o = #out
  out[o + 1] = id; out[o + 2] = token; out[o + 3] = f[1]; out[o + 4] = f[2]
  out[o + 5] = attempt; out[o + 6] = f[4]; out[o + 7] = f[5]; out[o + 8] = f[6]
  out[o + 9] = f[7]; out[o + 10] = f[8]
  need = need - 1
end

local popped = false
for _, list in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  if types then
    -- One at a time: look at the next job before taking it.
    while need > 0 do
      local id = redis.call('LINDEX', list, -1)
      if not id then break end
      popped = true
      local f = redis.call('HMGET', JOB .. id, unpack(FIELDS))
      if f[9] ~= 'queued' then
        redis.call('RPOP', list)
        drop(id, f[6])
      elseif not types[f[1]] then
        break
      else
        redis.call('RPOP', list)
        take(id, f)
      end
    end
  else
    while need > 0 do
      local ids = redis.call('RPOP', list, need)
      if not ids then break end
      popped = true
      for _, id in ipairs(ids) do
        local f = redis.call('HMGET', JOB .. id, unpack(FIELDS))
        if f[9] ~= 'queued' then
          drop(id, f[6])
        else
          take(id, f)
        end
      end
    end
  end
  if need <= 0 then break end
end
if #leases == 0 then
  if not popped then redis.call('DEL', K_SIGNAL) end
  return out
end
call_chunked('ZADD', K_LEASES, leases)
call_chunked('HSET', K_ACTIVE, actives)
return out
