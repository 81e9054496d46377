-- batchsettle.lua: count the ends of a batch's members, relayed by the
-- poller from the members' queues (batch.go, RelayBatchEnds; lib.lua's
-- batch_ended writes them). KEYS as batchadd.lua's.
-- ARGV[1] n, then n triples: member id, state ('succeeded', 'dead' or
-- 'cancelled'), n: the member's count of ends ('0' for a member whose job
-- is gone, which a cancel of the batch counts as cancelled).
-- A triple counts only when it is the member's latest end so far: sent
-- again (a relay repeated after a crash), or older than one counted, it
-- changes nothing. A member's new end (after a retry) replaces its
-- previous one in the counts. Ids that are not members (a callback of the
-- batch) are skipped.
-- Returns {'gone'} when the batch no longer exists, else {'ok', counted, due}.
local meta, members, done = KEYS[1], KEYS[2], KEYS[4]
if redis.call('EXISTS', meta) == 0 then return {'gone'} end
local n = tonumber(ARGV[1])
local counted = 0
for i = 0, n - 1 do
  local id, state, ends = ARGV[2 + 3 * i], ARGV[3 + 3 * i], tonumber(ARGV[4 + 3 * i])
  if redis.call('ZSCORE', members, id) then
    local prev = redis.call('HGET', done, id)
    local apply = true
    if prev then
      local pn, pstate = string.match(prev, '^(%d+)\t(.*)$')
      if tonumber(pn) >= ends then
        apply = false
      else
        redis.call('HINCRBY', meta, 'n_' .. pstate, -1)
      end
    else
      redis.call('HINCRBY', meta, 'done', 1)
    end
    if apply then
      -- As sent (a large count in a Lua number would print as 1.7e+15).
      redis.call('HSET', done, id, ARGV[4 + 3 * i] .. '\t' .. state)
      redis.call('HINCRBY', meta, 'n_' .. state, 1)
      counted = counted + 1
    end
  end
end
return {'ok', tostring(counted), batch_due(meta)}
