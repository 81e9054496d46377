-- retry.lua: requeue dead (or cancelled) jobs by hand, attempts reset to 0.
-- ARGV[6] 'dead' = only dead jobs qualify, 'any' = dead or cancelled
-- ARGV[7] n, ARGV[8..] ids
-- Returns {'ok', requeued} — ids that do not qualify are skipped —
-- or, when n = 1, {'conflict', state} / {'not_found'} for that one id.
local dead_only = ARGV[6] == 'dead'
local n = tonumber(ARGV[7])
local count = 0
local fields = {'type', 'state', 'priority', 'group'}
for i = 1, n do
  local id = ARGV[7 + i]
  local jk = JOB .. id
  local f = job_fields(id, fields)
  if not f[2] then
    if n == 1 then return {'not_found'} end
  elseif f[2] ~= 'dead' and (dead_only or f[2] ~= 'cancelled') then
    if n == 1 then return {'conflict', f[2]} end
  else
    redis.call('ZREM', K_DEAD, id)
    redis.call('ZREM', K_FIN, id)
    redis.call('HSET', jk, 'state', 'queued', 'attempt', '0', 'token', '', 'run_at', NOW_S)
    redis.call('HDEL', jk, 'finished_at', 'started_at', 'worker_id', 'result')
    if redis.call('HDEL', K_TOMB, id) == 1 then
      -- Cancelled while queued: its id is still in its list, which now
      -- serves it again.
      redis.call('HINCRBY', K_STATS, 'tomb_' .. f[3], -1)
    else
      enqueue(id, f[3], f[4], false)
    end
    emit(id, f[1], 'retried', 'queued', 0, '', '')
    count = count + 1
  end
end
signal(count)
return {'ok', tostring(count)}
