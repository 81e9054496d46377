-- limit.lua: set or delete one of the queue's limits, or let go the jobs a
-- limit holds back (see the limits section of lib.lua).
-- ARGV[6] op: 'set', 'del' or 'free'   ARGV[7] limit name
-- ARGV[8] (set) the definition, in K_LIMITS' form
-- set: a new or raised limit lets go at once as many held-back jobs as it
--   now has room for; a change of types or key lets go every job it holds
--   back (claims sort them again under the new definition).
-- del: the limit goes, and so does every job it held back.
-- free: lets go jobs the limit holds back, all of them.
-- At most UNPARK_MAX jobs are let go per call; the caller calls 'free'
-- again while the answer says some must still go.
-- Returns {'ok', jobs let go, jobs that must still go}, or {'not_found'}
-- for 'del' of a limit that does not exist.
local op, name = ARGV[6], ARGV[7]
local old = redis.call('HGET', K_LIMITS, name)
local all = false
if op == 'set' then
  local l = parse_limit(name, ARGV[8])
  if not l then return redis.error_reply('bad limit definition') end
  redis.call('HSET', K_LIMITS, name, ARGV[8])
  local was = old and parse_limit(name, old)
  all = not was or was.types ~= l.types or was.key ~= l.key
  if not all then
    -- Same jobs, new numbers: each slot lets go what it has room for.
    local lnow = lease_now()
    local budget = UNPARK_MAX
    local freed = 0
    for _, slot in ipairs(redis.call('SMEMBERS', QK .. 'pslots:' .. name)) do
      local room = budget
      if l.conc > 0 then room = math.min(room, l.conc - (tonumber(redis.call('HGET', K_LIMUSE, slot)) or 0)) end
      if l.rate > 0 then
        local rk = QK .. 'rate:' .. slot
        redis.call('ZREMRANGEBYSCORE', rk, '-inf', ms(lnow - l.period))
        room = math.min(room, l.rate - redis.call('ZCARD', rk))
      end
      local k = unpark(slot, room)
      freed = freed + k
      budget = budget - k
      if budget <= 0 then break end
    end
    return {'ok', tostring(freed), '0'}
  end
elseif op == 'del' then
  if not old then return {'not_found'} end
  redis.call('HDEL', K_LIMITS, name)
  all = true
elseif op == 'free' then
  all = true
else
  return redis.error_reply('unknown op')
end
-- Let every held-back job of the limit go, UNPARK_MAX at most.
local budget = UNPARK_MAX
local freed = 0
for _, slot in ipairs(redis.call('SMEMBERS', QK .. 'pslots:' .. name)) do
  if budget <= 0 then break end
  local k = unpark(slot, budget)
  freed = freed + k
  budget = budget - k
end
local left = tonumber(redis.call('HGET', K_LIMSTAT, 'p:' .. name)) or 0
if left <= 0 then redis.call('HDEL', K_LIMSTAT, 'p:' .. name) end
return {'ok', tostring(freed), tostring(math.max(left, 0))}
