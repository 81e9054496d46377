-- promote.lua: move scheduled jobs whose time has come into their priority lists.
-- ARGV[6] limit
-- Also lets go the jobs limits held back whose rate window has room again
-- (run_timers in lib.lua), and ends the jobs whose start_by or deadline
-- passed while they waited (expire_due in lib.lua).
-- Returns {moved, earliest remaining due ms or -1}: the earliest of the
-- scheduled set's, the rate timers' and the expiry entries'.
local limit = tonumber(ARGV[6])
local ids = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', NOW, 'LIMIT', 0, limit)
if #ids > 0 then
  local ready_jobs = ready_batch() -- one LPUSH per list (lib.lua)
  local fields = {'type', 'priority', 'attempt', 'group'}
  for _, id in ipairs(ids) do
    local f = job_fields(id, fields)
    if f[1] then
      ready_jobs.add(id, f[2], f[4])
      redis.call('HSET', JOB .. id, 'state', 'queued')
      emit(id, f[1], 'queued', 'queued', f[3], '', '')
    end
  end
  ready_jobs.flush()
  -- ids are the set's first #ids members: removing them by rank skips
  -- a lookup per member.
  redis.call('ZREMRANGEBYRANK', K_SCHED, 0, #ids - 1)
  unpark_waiting(ids)
  signal(#ids)
end
local timer = run_timers(limit)
local _, expiry = expire_due(limit)
local nxt = tonumber(redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')[2])
if timer and (nxt == nil or timer < nxt) then nxt = timer end
if expiry and (nxt == nil or expiry < nxt) then nxt = expiry end
return {#ids, nxt and ms(nxt) or '-1'}
