-- cancel.lua: cancel one job, or several (a bulk cancel).
-- ARGV[6] id, ARGV[7..] more ids (a bulk cancel)
-- waiting, scheduled or queued: removed from its place (a queued id stays in
-- its list as a tombstone, see claim.lua); active: its lease is dropped and workers are told (pub/sub) to cancel the running
-- handler, whose late outcome is then refused as stale; the lease's token and
-- expiry stay as `cancelled_lease` for a retry (fenced_due in lib.lua). Dependents are
-- cancelled too. Returns {'ok', previous state}, {'conflict', state} for a
-- job already final, or {'not_found'}; with several ids, {'ok', n}: n were
-- cancelled, the rest (final, or not in this queue) skipped.
local function cancel_id(id)
  local jk = JOB .. id
  local f = job_fields(id, {'type', 'state', 'attempt', 'priority', 'worker_id', 'parked'})
  if not f[2] then return {'not_found'} end
  local state = f[2]
  if state == 'succeeded' or state == 'dead' or state == 'cancelled' then return {'conflict', state} end
  -- A job claimed in storage format 2 is active while its K_ACTIVE record
  -- exists; its hash still says queued.
  local extra = {'token', ''}
  local token, attempt, _, slots, started, worker = running(id)
  if token then
    state = 'active'
    if started then f[3], f[5] = attempt, worker end
    attempt_fields(attempt, started, worker, extra)
  end
  if state == 'waiting' then
    cancel_waiting(id, 'cancelled')
    return {'ok', state}
  elseif state ~= 'active' then
    withdraw(id, state, f[4], f[6])
  else -- active
    -- The holder may run on until it hears (fenced_due in lib.lua).
    local exp = redis.call('ZSCORE', K_LEASES, id)
    if exp then
      extra[#extra + 1] = 'cancelled_lease'
      extra[#extra + 1] = token .. ' ' .. exp
    end
    end_lease(id, slots)
    redis.call('PUBLISH', CANCEL_CHANNEL, id)
  end
  finish(id, 'cancelled', extra)
  emit(id, f[1], 'cancelled', 'cancelled', f[3], f[5], '')
  settle_dependents(id, false, 'dependency ' .. id .. ' ended cancelled')
  return {'ok', state}
end
if #ARGV == 6 then return cancel_id(ARGV[6]) end
local n = 0
for i = 6, #ARGV do
  if cancel_id(ARGV[i])[1] == 'ok' then n = n + 1 end
end
return {'ok', tostring(n)}
