-- signal.lua: deliver a signal to a durable job (docs/durable.md): a named
-- JSON value kept in the job's hash (field 'sg:<name>') until the job's
-- wait for it reads it. A job parked waiting for that signal is queued at
-- once. A signal is kept when it comes before the wait begins, and a job
-- takes one signal of each name: the same signal sent again (the same
-- idempotency key) is answered as delivered, another one is refused.
-- ARGV[6] the job's id, or '' to find the job by key
-- ARGV[7] the key a job chose (WaitSignal's key) when ARGV[6] is ''
-- ARGV[8] name   ARGV[9] value (JSON)   ARGV[10] idempotency key ('' none)
-- ARGV[11] the most signals kept for keys no job chose yet
-- Returns {status, job id}: status 'delivered', 'duplicate' (sent before
-- with this idempotency key), 'conflict' (the job has a signal of this
-- name already, from another sender), 'finished' (the job ended),
-- 'missing' (no such job), 'pending' (by key: no job chose the key yet;
-- kept for the job that will), 'full' (too many kept for keys).
local id, key, name, value, idem = ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local rec = idem .. '\t' .. NOW_S .. '\t' .. value
local function same(have)
  if idem ~= '' and string.sub(have, 1, #idem + 1) == idem .. '\t' then return 'duplicate' end
  return 'conflict'
end
if id == '' then
  id = redis.call('HGET', K_SIGKEYS, key)
  if (not id) or redis.call('EXISTS', JOB .. id) == 0 then
    local pk = key .. '\t' .. name
    local have = redis.call('HGET', K_SIGPEND, pk)
    if have then return {same(have) == 'duplicate' and 'duplicate' or 'conflict', ''} end
    if redis.call('HLEN', K_SIGPEND) >= tonumber(ARGV[11]) then return {'full', ''} end
    redis.call('HSET', K_SIGPEND, pk, rec)
    return {'pending', ''}
  end
end
local jk = JOB .. id
local f = job_fields(id, {'state', 'type', 'awaits', 'run_at', 'priority', 'group', 'attempt'})
if not f[1] then return {'missing', id} end
local have = redis.call('HGET', jk, 'sg:' .. name)
if have then return {same(have), id} end
if FINAL_STATES[f[1]] then return {'finished', id} end
redis.call('HSET', jk, 'sg:' .. name, rec)
-- A running job's hash does not say so (storage format 2 on: its active
-- record does), so the event's state and attempt come from the record.
local state, attempt = f[1], tonumber(f[7]) or 0
local cur, ratt = running(id)
if cur then state, attempt = 'active', tonumber(ratt) or attempt end
emit(id, f[2], 'signal', state, attempt, '', '', '', name)
-- Parked for this signal (park_waiting in lib.lua): queued now.
if f[1] == 'scheduled' and f[3] and f[3] == (f[4] or '') .. ' signal:' .. name then
  redis.call('ZREM', K_SCHED, id)
  unpark_waiting({id})
  make_ready(id, f[5], f[6] or '')
  emit(id, f[2], 'queued', 'queued', tonumber(f[7]) or 0, '', '')
  signal(1)
end
return {'delivered', id}
