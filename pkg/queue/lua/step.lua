-- step.lua: record a step of a durable job (docs/durable.md) under its
-- attempt's fencing token, in the job's hash (field 'st:<seq>'), so that
-- a later attempt gets the step's outcome back instead of running it
-- again, and an attempt that lost its lease records nothing.
-- ARGV[6] id   ARGV[7] token   ARGV[8] seq (1, 2, … in the handler's order)
-- ARGV[9] the record: "<status>\t<name>\t<start ms>\t<end ms>\t<value>";
--         status 'ok' (value: the result, JSON), 'err' (value: the final
--         error), 'wait' (a wait that has begun: value its deadline in ms,
--         '' for none), 'timeout' (a wait that ended without its signal)
-- ARGV[10] the most steps a job may record
-- ARGV[13] the most bytes a job's records may hold together (field
--          'st_bytes' counts them)
-- ARGV[11] for a wait for a signal: its name ('' otherwise)
-- ARGV[12] for a wait by key: the key the job chose ('' otherwise); the
--          key then names this job (K_SIGKEYS), and a signal sent to the
--          key before (kept in K_SIGPEND) is the job's from now on.
-- A step is recorded once: a record already there is answered as it is
-- (the same call sent again after its reply was lost answers the same),
-- except a 'wait' record, which a final record replaces.
-- Returns {'stale'} when the token is not the running attempt's,
-- {'too_many'} or {'too_big'} past the limits, else {'ok', record, signal}: the step's
-- record now, and for a wait the signal's record when one arrived
-- ("<idempotency key>\t<at ms>\t<value>", '' when none).
local id, token, seq, rec = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local cur, attempt, jtype, _, _, worker = running(id)
if cur ~= token then return {'stale'} end
local jk = JOB .. id
local field = 'st:' .. seq
local have = redis.call('HGET', jk, field)
local name, key = ARGV[11], ARGV[12]
if key ~= '' then
  local owner = redis.call('HGET', K_SIGKEYS, key)
  if owner ~= id then
    redis.call('HSET', K_SIGKEYS, key, id)
    redis.call('HSET', jk, 'signal_key', key)
  end
  local pend = redis.call('HGET', K_SIGPEND, key .. '\t' .. name)
  if pend then
    if redis.call('HEXISTS', jk, 'sg:' .. name) == 0 then redis.call('HSET', jk, 'sg:' .. name, pend) end
    redis.call('HDEL', K_SIGPEND, key .. '\t' .. name)
  end
end
if have and string.sub(have, 1, 5) ~= 'wait\t' then
  rec = have
elseif have and string.sub(rec, 1, 5) == 'wait\t' then
  rec = have
else
  if not have and tonumber(seq) > tonumber(ARGV[10]) then return {'too_many'} end
  local size = tonumber(redis.call('HGET', jk, 'st_bytes') or '0') + #rec - (have and #have or 0)
  if size > tonumber(ARGV[13]) then return {'too_big'} end
  redis.call('HSET', jk, field, rec, 'st_bytes', size)
  local status, sname = string.match(rec, '^(%a+)\t([^\t]*)')
  emit(id, jtype, 'step', 'active', tonumber(attempt), worker, status == 'err' and string.match(rec, '^[^\t]*\t[^\t]*\t[^\t]*\t[^\t]*\t(.*)$') or '',
    '', seq .. ' ' .. (sname or '') .. ' ' .. (status or ''))
end
local sig = ''
if name ~= '' then sig = redis.call('HGET', jk, 'sg:' .. name) or '' end
return {'ok', rec, sig}
