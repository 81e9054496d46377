-- forget.lua: agree to forget an empty, idle queue: one that holds no job
-- in Redis (queued, scheduled, waiting, active, dead or finished), is not
-- paused, has no limits, and whose event stream saw nothing for ARGV[6] ms.
-- It writes the marker QK..'forgotten', which makes a submit to the queue
-- register it again first (submit.lua), and the caller takes the queue off
-- the set of known queues: pollers and job lookups no longer visit it.
-- Returns {'ok'}, or {'busy', why} and writes nothing.
local idle = tonumber(ARGV[6])
for _, k in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  if redis.call('LLEN', k) > 0 then return {'busy', 'it has queued jobs'} end
end
if redis.call('EXISTS', K_NOHANDLER) == 1 then return {'busy', 'it has queued jobs waiting for a worker that handles their type'} end
if redis.call('ZCARD', K_SCHED) > 0 then return {'busy', 'it has scheduled jobs'} end
if redis.call('ZCARD', K_WAIT) > 0 then return {'busy', 'it has jobs waiting for dependencies'} end
if redis.call('ZCOUNT', K_LEASES, '-inf', '(' .. PAD_SCORE) > 0 then return {'busy', 'it has running jobs'} end
if redis.call('ZCARD', K_DEAD) > 0 then return {'busy', 'it has dead jobs (retry or purge them first)'} end
if redis.call('ZCARD', K_FIN) > 0 then return {'busy', 'it still holds finished jobs (they go after their retention)'} end
if redis.call('EXISTS', K_PAUSED) == 1 then return {'busy', 'it is paused'} end
if redis.call('EXISTS', K_LIMITS) == 1 then return {'busy', 'it has limits'} end
if idle > 0 and redis.call('EXISTS', K_EVENTS) == 1 then
  local info = redis.call('XINFO', 'STREAM', K_EVENTS)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      local last = tonumber(string.match(info[i + 1], '^(%d+)'))
      if last and lease_now() - last < idle then return {'busy', 'it was used recently'} end
    end
  end
end
redis.call('SET', QK .. 'forgotten', '1')
return {'ok'}
