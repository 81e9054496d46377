-- release.lua: a worker shutting down gives back the leases it still holds.
-- ARGV[6] n, then n pairs: id, token
-- Each job still active under its token goes back to the head of its
-- priority list at once, and the interrupted attempt does not count.
-- Returns the number of jobs released.
local n = tonumber(ARGV[6])
local released = 0
local fields = {'type', 'priority', 'worker_id', 'group'}
for i = 1, n do
  local id, token = ARGV[5 + 2 * i], ARGV[6 + 2 * i]
  local jk = JOB .. id
  local f = job_fields(id, fields)
  local cur, attempt, _, slots, started, worker = running(id)
  if f[1] and cur == token then
    attempt = tonumber(attempt) - 1
    end_lease(id, slots)
    if started then
      -- Format 2: the hash still holds the attempt count from before the claim.
      redis.call('HSET', jk, 'state', 'queued', 'token', '')
    else
      redis.call('HSET', jk, 'state', 'queued', 'attempt', attempt, 'token', '')
    end
    enqueue(id, f[2], f[4], true)
    emit(id, f[1], 'queued', 'queued', attempt, worker or f[3], 'released by worker shutdown')
    released = released + 1
  elseif f[1] then
    cancel_acknowledged(id, token)
  end
end
signal(released)
return released
