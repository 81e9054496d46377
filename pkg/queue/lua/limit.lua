-- limit.lua: set or delete one of the queue's limits, or let go the jobs a
-- limit holds back (see the limits section of lib.lua).
-- ARGV[6] op: 'set', 'del' or 'free'   ARGV[7] limit name
-- ARGV[8] (set) the definition, in K_LIMITS' form
-- ARGV[9] (set) how many limits the queue may hold
-- set: a new or raised limit lets go at once as many held-back jobs as it
--   now has room for; a change of types or key lets go every job it holds
--   back (claims sort them again under the new definition).
-- del: the limit goes, and so does every job it held back.
-- free: lets go jobs the limit holds back, all of them.
-- At most UNPARK_MAX jobs are let go per call; the caller calls 'free'
-- again while the answer says some must still go.
-- Returns {'ok', jobs let go, jobs that must still go, '1' when set
-- created the limit else '0'}; {'not_found'} for 'del' of a limit that
-- does not exist; {'full'} for 'set' of a new limit when the queue holds
-- ARGV[9] already (nothing is written then).
local op, name = ARGV[6], ARGV[7]
local old = redis.call('HGET', K_LIMITS, name)
local l = nil -- set: the new definition, when it covers the same jobs
if op == 'set' then
  l = parse_limit(name, ARGV[8])
  if not l then return redis.error_reply('bad limit definition') end
  if not old and redis.call('HLEN', K_LIMITS) >= tonumber(ARGV[9]) then return {'full'} end
  redis.call('HSET', K_LIMITS, name, ARGV[8])
  local was = old and parse_limit(name, old)
  if not was or was.types ~= l.types or was.key ~= l.key then l = nil end
elseif op == 'del' then
  if not old then return {'not_found'} end
  redis.call('HDEL', K_LIMITS, name)
elseif op ~= 'free' then
  return redis.error_reply('unknown op')
end
-- Let go what each slot has room for under the same jobs' new numbers
-- (l), or every held-back job of the limit; UNPARK_MAX at most.
local lnow = l and lease_now()
local budget = UNPARK_MAX
local freed = 0
for _, slot in ipairs(redis.call('SMEMBERS', QK .. 'pslots:' .. name)) do
  if budget <= 0 then break end
  local room = budget
  if l then room = slot_room(l, slot, lnow, budget) end
  local k = unpark(slot, room)
  freed = freed + k
  budget = budget - k
end
local created = (op == 'set' and not old) and '1' or '0'
if l then return {'ok', tostring(freed), '0', created} end
local left = tonumber(redis.call('HGET', K_LIMSTAT, 'p:' .. name)) or 0
if left <= 0 then redis.call('HDEL', K_LIMSTAT, 'p:' .. name) end
return {'ok', tostring(freed), tostring(math.max(left, 0)), created}
