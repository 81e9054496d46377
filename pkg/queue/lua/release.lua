-- release.lua: a worker shutting down gives back the leases it still holds.
-- ARGV[6] n, then n pairs: id, token
-- Each job still active under its token goes back to the head of its
-- priority list at once, and the interrupted attempt does not count.
-- Returns the number of jobs released.
local n = tonumber(ARGV[6])
local released = 0
for i = 1, n do
  local id, token = ARGV[5 + 2 * i], ARGV[6 + 2 * i]
  local jk = JOB .. id
  local f = redis.call('HMGET', jk, 'type', 'attempt', 'priority', 'state', 'token', 'worker_id', 'group')
  if f[4] == 'active' and f[5] == token then
    local attempt = tonumber(f[2]) - 1
    end_lease(id, nil)
    redis.call('HSET', jk, 'state', 'queued', 'attempt', attempt, 'token', '')
    enqueue(id, f[3], f[7], true)
    emit(id, f[1], 'queued', 'queued', attempt, f[6], 'released by worker shutdown')
    released = released + 1
  end
end
signal(released)
return released
