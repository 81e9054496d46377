-- reclaim.lua: put back jobs whose lease expired (their worker died or was cut off).
-- ARGV[6] limit   ARGV[7..] limit random numbers in [0,1) for the backoff jitter,
-- then the clock-step guard (below)
-- Expiry is judged on the lease clock (Redis' TIME), never the caller's. An
-- entry is acted on only while its job is still active under a token (the
-- entry's score is the current lease's: claim and extend rewrite it);
-- otherwise the entry is stale and only removed, so a finished job is never
-- run again. Each expired lease counts as an attempt:
-- the job is retried with backoff, or goes dead when its attempts are
-- exhausted; a 'lease_expired' event is recorded either way.
-- Returns {reclaimed, earliest remaining lease expiry ms or -1}; PAD (lib.lua)
-- is no lease.
local limit = tonumber(ARGV[6])
-- ARGV[7 + limit]: the clock-step guard, ms ('' or absent: none). A lease
-- counts as expired only once the caller's clock (NOW) also says it could
-- be, give or take that much: a forward step of Redis' clock alone expires
-- nothing early.
local cut = lease_now()
local tol = tonumber(ARGV[7 + limit] or '')
if tol and NOW + tol < cut then cut = NOW + tol end
local ids = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', ms(cut), 'LIMIT', 0, limit)
local reclaimed = 0
local fields = {'type', 'attempt', 'max_attempts', 'backoff_base', 'backoff_max', 'priority', 'group', 'worker_id'}
for i, id in ipairs(ids) do
  if id == PAD then break end -- only past PAD_SCORE (year ~287,000): never a lease
  local f = job_fields(id, fields)
  local token, attempt, _, slots, started, worker = running(id)
  if f[1] and token then
    f[2] = attempt
    retry_or_bury(id, f, 'lease expired', true, tonumber(ARGV[6 + i]), 'lease_expired', worker or f[8], slots, started)
    reclaimed = reclaimed + 1
  else
    end_lease(id, nil)
  end
end
local nxt = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
if nxt[1] == PAD then nxt[2] = nil end
if nxt[2] and tonumber(nxt[2]) <= cut and tol then
  -- Held back by the guard: look again in a quarter second, not at once.
  return {reclaimed, ms(NOW + 250)}
end
return {reclaimed, nxt[2] or '-1'}
