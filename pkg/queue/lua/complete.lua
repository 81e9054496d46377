-- complete.lua: record the outcome of a batch of attempts.
-- ARGV[6] n, then n groups of 6: id, token, outcome, detail, worker id, r
--   outcome 'ok'    detail = result JSON                 → succeeded
--   outcome 'fail'  detail = error message, r = random   → retry with backoff, or dead when exhausted
--   outcome 'dead'  detail = error message               → dead at once (not retryable)
--   outcome 'fail'  with r = '+<ms>'                     → retry after that delay (RetryAfter), or dead when exhausted
--   outcome 'snooze' detail = reason, r = delay ms       → run again after the delay; the attempt is given back
--   outcome 'cancel' detail = reason                     → cancelled by its handler
--   outcome 'park'   detail = what it waits for, r = ms  → parked until then (lib.lua, park_waiting)
-- An outcome is applied only while the job is active under that token (the
-- fencing check); otherwise it is refused as stale.
-- Returns one status per job: 'succeeded', 'scheduled', 'queued', 'dead',
-- 'cancelled' or 'stale'.
local n = tonumber(ARGV[6])
local out = {}
local processed, succeeded = 0, 0
-- succeed writes a success on job hash jk, then the fields given. An
-- empty result is not written: a missing field reads the same everywhere
-- (no result), and a field added to the hash costs a scan of it and a
-- copy (~0.6 of 2.5 µs per success).
-- The end is never before the start (started: the attempt's start, when
-- known), whichever clocks the two came from.
local function succeed(jk, detail, started, ...)
  local fin = NOW_S
  if started and later(started, fin) then fin = started end
  if detail == '' then
    redis.call('HSET', jk, 'state', 'succeeded', 'finished_at', fin, ...)
  else
    redis.call('HSET', jk, 'state', 'succeeded', 'finished_at', fin, 'result', detail, ...)
  end
end
-- The fencing check of the whole batch: one HMGET of the active-lease hash.
local ids = {}
for i = 1, n do ids[i] = ARGV[7 + (i - 1) * 6] end
local act = hmget_chunked(K_ACTIVE, ids)
-- Batched writes for the successes: one ZREM, HDEL and ZADD in all.
local done_ids, fin = {}, {}
local freed = {} -- concurrency slots the successes held: slot → count
for i = 1, n do
  local b = 7 + (i - 1) * 6
  local id, token, outcome, detail, worker, r = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  local jk = JOB .. id
  local cur, attempt, jtype, slots, started, rworker = running(id, act[i])
  if cur ~= token then
    out[i] = 'stale'
    cancel_acknowledged(id, token)
  else
    processed = processed + 1
    if outcome == 'ok' then
      local s1 = succeeded + 1 -- succeeded counts this one below
      done_ids[s1] = id
      fin[2 * s1 - 1] = NOW_S
      fin[2 * s1] = id
      if started then
        -- Format 2: no token on the hash to clear (a format-1 attempt's
        -- end cleared it).
        succeed(jk, detail, started, 'attempt', attempt, 'worker_id', rworker, 'started_at', started)
      else
        succeed(jk, detail, nil, 'token', '')
      end
      count_slots(freed, slots)
      succeeded = succeeded + 1
      emit(id, jtype, 'succeeded', 'succeeded', attempt, worker, '')
      out[i] = 'succeeded'
    elseif outcome == 'cancel' then
      out[i] = cancel_self(id, jtype, attempt, detail, rworker or worker, slots, started)
    else
      local p = job_fields(id, RETRY_FIELDS)
      local f = {jtype, attempt, p[1], p[2], p[3], p[4], p[5]}
      if outcome == 'snooze' then
        out[i] = snooze(id, f, tonumber(r) or 0, detail, rworker or worker, slots, started)
      elseif outcome == 'park' then
        out[i] = park_waiting(id, f, tonumber(r) or 0, detail, rworker or worker, slots, started)
      elseif string.byte(r, 1) == 43 then -- '+': the handler's delay
        out[i] = retry_or_bury(id, f, detail, outcome == 'fail', 0, 'failed', rworker or worker, slots, started, tonumber(string.sub(r, 2)) or 0)
      else
        out[i] = retry_or_bury(id, f, detail, outcome == 'fail', tonumber(r), 'failed', rworker or worker, slots, started)
      end
    end
  end
end
if succeeded > 0 then
  call_chunked('ZREM', K_LEASES, done_ids)
  call_chunked('HDEL', K_ACTIVE, done_ids)
  call_chunked('ZADD', K_FIN, fin)
  free_slot_counts(freed)
  -- Members of batches (lib.lua, batch_ended): one EXISTS for a queue
  -- without any.
  if batch_members_live() then
    for _, id in ipairs(done_ids) do batch_ended(id, 'succeeded') end
  end
  -- Dependents. Every job in a dependents set waits in K_WAIT (submit
  -- adds it to both; release and cancel_waiting in lib.lua take it out
  -- of both), so a queue with no waiting job has none to settle: one
  -- EXISTS decides for the usual queue. Otherwise one EXISTS over the
  -- batch's dependents sets, and only a job that has some is looked at.
  local any = 0
  if redis.call('EXISTS', K_WAIT) == 1 then
    local deps_keys = {}
    for k, id in ipairs(done_ids) do deps_keys[k] = QK .. 'dependents:' .. id end
    for c = 1, #deps_keys, CHUNK do
      any = any + redis.call('EXISTS', unpack(deps_keys, c, math.min(c + CHUNK - 1, #deps_keys)))
    end
  end
  if any > 0 then
    local queued = 0
    for _, id in ipairs(done_ids) do queued = queued + settle_dependents(id, true, '') end
    signal(queued)
  end
  -- The last jobs of sequence keys (sequences_ended): one EXISTS for a
  -- queue without sequences.
  if redis.call('EXISTS', K_SEQTAILS) == 1 then sequences_ended(done_ids) end
  redis.call('HINCRBY', K_STATS, 'succeeded_total', succeeded)
  count_minute('s', succeeded)
end
count_processed(processed)
return out
