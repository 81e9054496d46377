-- claim.lua: lease up to n due jobs, highest priority first.
-- ARGV[6] n   ARGV[7] worker id   ARGV[8] lease ttl ms
-- Each claimed job moves from its priority list into the lease set in this
-- script, with lock:{id} = fencing token (SET NX PX ttl) and a lease entry
-- scored by its expiry on the lease clock (see lease_now). The holder renews
-- both with extend.lua while the job runs. Ids of cancelled jobs still in a
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
local expiry = nil
local out = {}
local leases = {} -- score, member pairs for the lease set
local fence = nil
-- next_token hands out fencing tokens from one range reserved on first use:
-- at most n claims plus one refused lock per list.
local function next_token()
  if fence == nil then fence = redis.call('INCRBY', K_FENCE, n + 3) - (n + 3) end
  fence = fence + 1
  return fence
end
local popped = false
for _, list in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  local blocked = false
  while need > 0 and not blocked do
    local ids = redis.call('RPOP', list, need)
    if not ids then break end
    popped = true
    for _, id in ipairs(ids) do
      local jk = JOB .. id
      local f = redis.call('HMGET', jk, 'type', 'payload', 'attempt', 'max_attempts', 'timeout', 'priority', 'created_at', 'run_at', 'state')
      if f[9] ~= 'queued' then
        -- A tombstone: cancelled (or pruned) while in the list.
        if redis.call('HDEL', K_TOMB, id) == 1 then
          redis.call('HINCRBY', K_STATS, 'tomb_' .. (f[6] or 'normal'), -1)
        end
      else
        local token = next_token()
        if redis.call('SET', QK .. 'lock:' .. id, token, 'NX', 'PX', ttl) then
          if expiry == nil then expiry = lease_now() + ttl end
          local attempt = tonumber(f[3]) + 1
          leases[#leases + 1] = expiry
          leases[#leases + 1] = id
          redis.call('HSET', jk, 'state', 'active', 'attempt', attempt, 'token', token,
            'worker_id', worker, 'started_at', NOW_S)
          emit(id, f[1], 'started', 'active', attempt, worker, '')
          local o = #out
          out[o + 1] = id; out[o + 2] = tostring(token); out[o + 3] = f[1]; out[o + 4] = f[2]
          out[o + 5] = tostring(attempt); out[o + 6] = f[4]; out[o + 7] = f[5]; out[o + 8] = f[6]
          out[o + 9] = f[7]; out[o + 10] = f[8]
          need = need - 1
        else
          -- Someone still holds this job's lock: leave the job at the head
          -- and take no more from this list in this call.
          redis.call('RPUSH', list, id)
          blocked = true
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
return out
