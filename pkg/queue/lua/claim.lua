-- claim.lua: lease up to n due jobs, highest priority first.
-- ARGV[6] n   ARGV[7] worker id   ARGV[8] lease grace ms (added to each job's timeout)
-- Each claimed job moves from its priority list into the lease set in this
-- script, with lock:{id} = fencing token (SET NX PX). Returns a flat list of
-- groups of 10: id, token, type, payload, attempt, max_attempts,
-- timeout_seconds, priority, created_at, run_at. An empty reply when the queue is
-- paused or empty; the signal list is then cleared, so the caller can block
-- on it and be woken by the next submit.
if redis.call('EXISTS', K_PAUSED) == 1 then return {} end
local need = tonumber(ARGV[6])
local worker = ARGV[7]
local grace = tonumber(ARGV[8])
local out = {}
-- Take the ids first (highest priority first), then one fencing-token range.
local taken = {}
for _, list in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  if need <= 0 then break end
  local ids = redis.call('RPOP', list, need)
  if ids then
    for _, id in ipairs(ids) do taken[#taken + 1] = {id, list} end
    need = need - #ids
  end
end
if #taken == 0 then
  redis.call('DEL', K_SIGNAL)
  return out
end
local token = redis.call('INCRBY', K_FENCE, #taken) - #taken
local leases = {} -- score, member pairs for one ZADD
for _, t in ipairs(taken) do
  local id, list = t[1], t[2]
  token = token + 1
  local jk = JOB .. id
  local f = redis.call('HMGET', jk, 'type', 'payload', 'attempt', 'max_attempts', 'timeout', 'priority', 'created_at', 'run_at')
  if f[1] then
    local ttl = tonumber(f[5]) * 1000 + grace
    if redis.call('SET', QK .. 'lock:' .. id, token, 'NX', 'PX', ttl) then
      local attempt = tonumber(f[3]) + 1
      leases[#leases + 1] = NOW + ttl
      leases[#leases + 1] = id
      redis.call('HSET', jk, 'state', 'active', 'attempt', attempt, 'token', token,
        'worker_id', worker, 'started_at', NOW_S)
      emit(id, f[1], 'started', 'active', attempt, worker, '')
      local o = #out
      out[o + 1] = id; out[o + 2] = tostring(token); out[o + 3] = f[1]; out[o + 4] = f[2]
      out[o + 5] = tostring(attempt); out[o + 6] = f[4]; out[o + 7] = f[5]; out[o + 8] = f[6]
      out[o + 9] = f[7]; out[o + 10] = f[8]
    else
      -- Someone still holds this job's lock: leave the job at the head.
      redis.call('RPUSH', list, id)
    end
  end
end
if #leases > 0 then redis.call('ZADD', K_LEASES, unpack(leases)) end
return out
