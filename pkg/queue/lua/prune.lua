-- prune.lua: delete the hashes of jobs that ended long enough ago.
-- ARGV[6] cutoff ms   ARGV[7] limit   ARGV[8] 'finished' or 'dead'
-- ARGV[9] keep: the most entries the set may hold (0 = no count bound)
-- ARGV[10] floor ms: never delete a job that ended at or after it (its
--          events may still wait for the history writer); '' = no floor
-- Deletes up to limit of the oldest jobs of the set (succeeded and
-- cancelled, or dead) that ended before the cutoff, or that are beyond the
-- count bound. Returns the number deleted.
local set = K_FIN
if ARGV[8] == 'dead' then set = K_DEAD end
local limit = tonumber(ARGV[7])
local keep = tonumber(ARGV[9])
local cutoff = tonumber(ARGV[6])
if ARGV[10] ~= '' and tonumber(ARGV[10]) - 1 < cutoff then cutoff = tonumber(ARGV[10]) - 1 end
local ids = redis.call('ZRANGEBYSCORE', set, '-inf', ms(cutoff), 'LIMIT', 0, limit)
if keep > 0 and #ids < limit then
  local over = redis.call('ZCARD', set) - #ids - keep
  if over > 0 then
    local more = redis.call('ZRANGE', set, #ids, #ids + math.min(over, limit - #ids) - 1, 'WITHSCORES')
    for i = 1, #more, 2 do
      if ARGV[10] == '' or tonumber(more[i + 1]) < tonumber(ARGV[10]) then ids[#ids + 1] = more[i] end
    end
  end
end
local keys = {}
for _, id in ipairs(ids) do
  keys[#keys + 1] = JOB .. id
  keys[#keys + 1] = QK .. 'dependents:' .. id
  keys[#keys + 1] = QK .. 'log:' .. id
end
-- The claim records (K_LASTCLAIM, claim.lua) of workers that claimed
-- nothing for ten minutes: a lost reply is sent again within seconds.
if ARGV[8] ~= 'dead' then
  local recs = redis.call('HGETALL', K_LASTCLAIM)
  for i = 1, #recs, 2 do
    local at = tonumber(string.match(recs[i + 1], '^%S+ (%d+)'))
    if at and at < NOW - 600000 then redis.call('HDEL', K_LASTCLAIM, recs[i]) end
  end
end
-- The signal keys durable jobs chose (K_SIGKEYS, step.lua) go with them.
if redis.call('EXISTS', K_SIGKEYS) == 1 then
  for _, id in ipairs(ids) do
    local key = redis.call('HGET', JOB .. id, 'signal_key')
    if key and redis.call('HGET', K_SIGKEYS, key) == id then redis.call('HDEL', K_SIGKEYS, key) end
  end
end
-- The parked sets (park_waiting) hold only scheduled jobs: a few members
-- a call are checked, so that a job that left them by a path that did not
-- take it out (there should be none) is not counted for ever.
for _, set in ipairs({K_SLEEPING, K_AWAITING}) do
  for _, id in ipairs(redis.call('SRANDMEMBER', set, 20)) do
    if redis.call('ZSCORE', K_SCHED, id) == false then redis.call('SREM', set, id) end
  end
end
call_chunked('DEL', nil, keys)
call_chunked('ZREM', set, ids)
return #ids
