-- reclaim.lua: put back jobs whose lease expired (their worker died or was cut off).
-- ARGV[6] limit   ARGV[7..] limit random numbers in [0,1) for the backoff jitter
-- Each expired lease counts as an attempt: the job is retried with backoff,
-- or goes dead when its attempts are exhausted; a 'lease_expired' event is
-- recorded either way. Returns {reclaimed, earliest remaining lease ms or -1}.
local limit = tonumber(ARGV[6])
local ids = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', NOW, 'LIMIT', 0, limit)
for i, id in ipairs(ids) do
  local f = redis.call('HMGET', JOB .. id, 'type', 'attempt', 'max_attempts', 'backoff_base', 'backoff_max', 'priority', 'worker_id')
  if f[1] then
    retry_or_bury(id, f, 'lease expired', true, tonumber(ARGV[6 + i]), 'lease_expired', f[7])
  else
    redis.call('ZREM', K_LEASES, id)
  end
end
local nxt = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return {#ids, nxt[2] or '-1'}
