-- promote.lua: move scheduled jobs whose time has come into their priority lists.
-- ARGV[6] limit
-- Also lets go the jobs limits held back whose rate window has room again
-- (run_timers in lib.lua).
-- Returns {moved, earliest remaining due ms or -1}: the earliest of the
-- scheduled set's and the rate timers'.
local limit = tonumber(ARGV[6])
local ids = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', NOW, 'LIMIT', 0, limit)
if #ids > 0 then
  -- Ungrouped jobs go into their lists with one LPUSH per list (in order:
  -- the same as one LPUSH each); pending pushes are written before a
  -- grouped job's, so the lists keep the due order.
  local push, lists = {}, {}
  local function flush_push()
    for _, l in ipairs(lists) do call_chunked('LPUSH', l, push[l]) end
    push, lists = {}, {}
  end
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', JOB .. id, 'type', 'priority', 'attempt', 'group')
    if f[1] then
      if f[4] and f[4] ~= '' then
        flush_push()
        enqueue(id, f[2], f[4], false)
      else
        local l = list_for(f[2])
        if not push[l] then
          push[l] = {}
          lists[#lists + 1] = l
        end
        push[l][#push[l] + 1] = id
      end
      redis.call('HSET', JOB .. id, 'state', 'queued')
      emit(id, f[1], 'queued', 'queued', f[3], '', '')
    end
  end
  flush_push()
  call_chunked('ZREM', K_SCHED, ids)
  signal(#ids)
end
local timer = run_timers(limit)
local nxt = tonumber(redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')[2])
if timer and (nxt == nil or timer < nxt) then nxt = timer end
return {#ids, nxt and ms(nxt) or '-1'}
