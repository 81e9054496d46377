-- promote.lua: move scheduled jobs whose time has come into their priority lists.
-- ARGV[6] limit
-- Returns {moved, earliest remaining due ms or -1}.
local limit = tonumber(ARGV[6])
local ids = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', NOW, 'LIMIT', 0, limit)
if #ids > 0 then
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', JOB .. id, 'type', 'priority', 'attempt')
    if f[1] then
      make_ready(id, f[2])
      emit(id, f[1], 'queued', 'queued', f[3], '', '')
    end
  end
  call_chunked('ZREM', K_SCHED, ids)
  signal(#ids)
end
local nxt = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
return {#ids, nxt[2] or '-1'}
