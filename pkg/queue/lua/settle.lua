-- settle.lua: settle dependencies of this queue's waiting jobs on jobs of
-- other queues (entries "<queue>|<id>" of their deps sets, listed in
-- QK..'rwait'), whose end the poller read there (settle.go).
-- ARGV[6] n, then n triples: job id, dependency entry, how the dependency
-- ended: 'succeeded', 'dead', 'cancelled' or 'missing' (its hash is gone).
-- A success takes the entry off the job's pending set (it starts when none
-- is left); any other end cancels the job and its dependents, unless the
-- job runs anyway (on_dependency_failure "run"). Each triple applies once:
-- an entry no longer pending, or a job no longer waiting, is skipped, so
-- the poller may send the same triple again after a crash.
-- Returns how many jobs it started or cancelled.
local n = tonumber(ARGV[6])
local changed, queued = 0, 0
for i = 0, n - 1 do
  local id, dep, ended = ARGV[7 + 3 * i], ARGV[8 + 3 * i], ARGV[9 + 3 * i]
  if redis.call('HGET', JOB .. id, 'state') ~= 'waiting' then
    redis.call('SREM', QK .. 'rwait', id)
  elseif redis.call('SISMEMBER', QK .. 'deps:' .. id, dep) == 1 then
    local run = ended == 'succeeded' or redis.call('HGET', JOB .. id, 'on_dependency_failure') == 'run'
    if run then
      local q = dependency_done(id, dep)
      queued = queued + q
      changed = changed + q
    else
      local pid = string.match(dep, '|(.*)$') or dep
      local why = 'dependency ' .. pid .. ' ended ' .. ended
      if ended == 'missing' then why = 'dependency ' .. pid .. ' was not found' end
      cancel_waiting(id, why)
      changed = changed + 1
    end
  end
end
signal(queued)
return changed
