-- complete.lua: record the outcome of a batch of attempts.
-- ARGV[6] n, then n groups of 6: id, token, outcome, detail, worker id, r
--   outcome 'ok'    detail = result JSON                 → succeeded
--   outcome 'fail'  detail = error message, r = random   → retry with backoff, or dead when exhausted
--   outcome 'dead'  detail = error message               → dead at once (not retryable)
-- An outcome is applied only while the job is active under that token (the
-- fencing check); otherwise it is refused as stale.
-- Returns one status per job: 'succeeded', 'scheduled', 'queued', 'dead' or 'stale'.
local n = tonumber(ARGV[6])
local out = {}
local processed, succeeded = 0, 0
-- Batched writes for the successes: one ZREM and one ZADD in all.
local done_ids, fin = {}, {}
for i = 1, n do
  local b = 7 + (i - 1) * 6
  local id, token, outcome, detail, worker, r = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  local jk = JOB .. id
  -- What a success needs; a failure reads the retry policy too.
  local f = redis.call('HMGET', jk, 'state', 'token', 'type', 'attempt', 'has_dependents')
  if f[1] ~= 'active' or f[2] ~= token then
    out[i] = 'stale'
  else
    processed = processed + 1
    if outcome == 'ok' then
      done_ids[#done_ids + 1] = id
      fin[#fin + 1] = NOW_S
      fin[#fin + 1] = id
      redis.call('HSET', jk, 'state', 'succeeded', 'finished_at', NOW_S, 'result', detail, 'token', '')
      succeeded = succeeded + 1
      emit(id, f[3], 'succeeded', 'succeeded', f[4], worker, '')
      signal(settle_dependents(id, true, '', f[5] or ''))
      out[i] = 'succeeded'
    else
      local p = redis.call('HMGET', jk, 'max_attempts', 'backoff_base', 'backoff_max', 'priority')
      out[i] = retry_or_bury(id, {f[3], f[4], p[1], p[2], p[3], p[4]}, detail, outcome == 'fail', tonumber(r), 'failed', worker)
    end
  end
end
if succeeded > 0 then
  call_chunked('ZREM', K_LEASES, done_ids)
  call_chunked('ZADD', K_FIN, fin)
  redis.call('HINCRBY', K_STATS, 'succeeded_total', succeeded)
  count_minute('s', succeeded)
end
count_processed(processed)
return out
