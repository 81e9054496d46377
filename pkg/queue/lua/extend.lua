-- extend.lua: renew the leases of running jobs (the holder's heartbeat),
-- optionally recording progress.
-- ARGV[6] lease ttl ms   ARGV[7] grace ms   ARGV[8] n, then n triples: id, token, progress
--   progress: '' = none, else "<0..100>|<message>": stored on the job hash
--   (progress, progress_message, progress_at, progress_attempt: a new
--   attempt shows none until it reports) and sent as a 'progress'
--   event at most once a second per job (and always at 100).
-- A lease is renewed only while the job is active under that token: its
-- lease entry moves to the new expiry. Nor is it renewed past the
-- attempt's start plus the job's timeout plus the grace: a holder that
-- renews forever (an HTTP worker's heartbeat) cannot keep a job past its
-- timeout; the lease then runs out and the job is retried.
-- Returns one status per triple: 'ok'; 'stale' when
-- the lease was lost (expired and reclaimed, cancelled, finished): the
-- holder must stop the job, and its outcome would be refused anyway; or
-- 'late' when the attempt is past its timeout and grace: the holder must
-- stop, and its outcome is accepted only until the lease runs out. The
-- last element is the new expiry (lease clock, ms).
-- The longest TTL in use in the queue, not only the caller's (longest_ttl
-- in lib.lua): a renewal never shortens a lease another process granted.
local ttl = longest_ttl(tonumber(ARGV[6]))
local grace = tonumber(ARGV[7])
local n = tonumber(ARGV[8])
local expiry = lease_now() + ttl
local out = {}
local leases = {}
-- The running attempts: one HMGET of the active records for the batch (a
-- format-2 claim leaves the hash as it was); the job hash is read only to
-- record progress.
local ids = {}
for i = 1, n do ids[i] = ARGV[6 + 3 * i] end
local act = hmget_chunked(K_ACTIVE, ids)
for i = 1, n do
  local b = 6 + 3 * i
  local id, token, progress = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local jk = JOB .. id
  local cur, attempt, jtype, _, started, worker = running(id, act[i])
  local late = false
  if cur and cur == token then
    local f = job_fields(id, {'timeout', 'started_at'})
    local since = tonumber(started or f[2])
    late = since ~= nil and NOW > since + tonumber(f[1]) * 1000 + grace
  end
  if late then
    out[i] = 'late'
  elseif cur and cur == token and redis.call('ZSCORE', K_LEASES, id) then
    leases[#leases + 1] = expiry
    leases[#leases + 1] = id
    if progress ~= '' then
      local f = redis.call('HMGET', jk, 'worker_id', 'progress_event_at')
      local sep = string.find(progress, '|', 1, true)
      local pct, msg = string.sub(progress, 1, sep - 1), string.sub(progress, sep + 1)
      redis.call('HSET', jk, 'progress', pct, 'progress_message', msg, 'progress_at', NOW_S, 'progress_attempt', attempt)
      if pct == '100' or not f[2] or NOW - tonumber(f[2]) >= 1000 then
        redis.call('HSET', jk, 'progress_event_at', NOW_S)
        emit(id, jtype, 'progress', 'active', attempt, worker or f[1], '', pct, msg)
      end
    end
    out[i] = 'ok'
  else
    out[i] = 'stale'
    cancel_acknowledged(id, token)
  end
end
call_chunked('ZADD', K_LEASES, leases)
if #leases > 0 then keep_ttl(tonumber(ARGV[6])) end
out[n + 1] = ms(expiry)
return out
