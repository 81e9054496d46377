-- retry.lua: requeue dead (or cancelled) jobs by hand, attempts reset to 0.
-- ARGV[6] 'dead' = only dead jobs qualify, 'any' = dead or cancelled
-- ARGV[7] n, ARGV[8..] ids
-- A job with dependencies (depends_on) goes back to waiting for those that
-- have not succeeded yet; one whose dependency ended dead or cancelled
-- does not qualify (retry the dependency first), unless the job runs
-- anyway (on_dependency_failure "run"). A dependency whose hash is gone
-- ended long ago (only ended jobs are pruned) and counts as done. A
-- dependency of another queue ("<queue>|<id>") is waited for again: the
-- poller settles it.
-- A job cancelled while it ran, whose holder may not have heard yet, is
-- scheduled for its cancelled lease's expiry instead of queued (fenced_due
-- in lib.lua).
-- A retry by hand is a new decision to run the job: its start_by and
-- deadline, which may be what ended it, no longer apply (they are
-- removed).
-- Returns {'ok', requeued} — ids that do not qualify are skipped —
-- or, when n = 1, {'conflict', state[, why]} / {'not_found'} for that one id.
local dead_only = ARGV[6] == 'dead'
local n = tonumber(ARGV[7])
local count, queued = 0, 0
local fields = {'type', 'state', 'priority', 'group'}
for i = 1, n do
  local id = ARGV[7 + i]
  local jk = JOB .. id
  local f = job_fields(id, fields)
  if not f[2] then
    if n == 1 then return {'not_found'} end
  elseif f[2] ~= 'dead' and (dead_only or f[2] ~= 'cancelled') then
    if n == 1 then return {'conflict', f[2]} end
  else
    local pending, failed, remote = {}, nil, false
    local deps = redis.call('HGET', jk, 'depends_on')
    local anyway = deps and redis.call('HGET', jk, 'on_dependency_failure') == 'run'
    if deps then
      for d in string.gmatch(deps, '[^,]+') do
        if string.find(d, '|', 1, true) then
          -- A job of another queue: waited for again, the poller settles
          -- it (settle.lua) whether it ended or not.
          pending[#pending + 1] = d
          remote = true
        else
          local ds = redis.call('HGET', JOB .. d, 'state')
          if (ds == 'dead' or ds == 'cancelled') and not anyway then
            failed = 'its dependency ' .. d .. ' ended ' .. ds .. ': retry that first'
            break
          elseif ds and ds ~= 'succeeded' and ds ~= 'dead' and ds ~= 'cancelled' then
            pending[#pending + 1] = d
          end
        end
      end
    end
    if failed then
      if n == 1 then return {'conflict', f[2], failed} end
    else
      redis.call('ZREM', K_DEAD, id)
      redis.call('ZREM', K_FIN, id)
      redis.call('HDEL', jk, 'finished_at', 'started_at', 'worker_id', 'result', 'start_by', 'deadline')
      -- A member of a batch is live again: its next end is reported.
      if redis.call('HEXISTS', jk, 'batch') == 1 then batch_member_live(id) end
      local fdue = nil
      if #pending == 0 then fdue = fenced_due(id) end
      if #pending > 0 then
        -- A tombstone left in a list, if any, is dropped by the claim that
        -- meets it (the job is not queued).
        redis.call('HSET', jk, 'state', 'waiting', 'attempt', '0', 'token', '', 'run_at', NOW_S)
        redis.call('ZADD', K_WAIT, NOW, id)
        redis.call('SADD', QK .. 'deps:' .. id, unpack(pending))
        for _, d in ipairs(pending) do
          if not string.find(d, '|', 1, true) then
            redis.call('SADD', QK .. 'dependents:' .. d, id)
            redis.call('HSET', JOB .. d, 'has_dependents', '1')
          end
        end
        if remote then redis.call('SADD', QK .. 'rwait', id) end
        emit(id, f[1], 'retried', 'waiting', 0, '', '')
        count = count + 1
      elseif fdue then
        -- Cancelled while running, its holder not yet told: it waits for
        -- the lease's expiry, or for the holder's acknowledgement.
        local due = fdue
        redis.call('HSET', jk, 'state', 'scheduled', 'attempt', '0', 'token', '', 'run_at', ms(due))
        local before = earliest()
        redis.call('ZADD', K_SCHED, ms(due), id)
        wake_poller(before, due)
        emit(id, f[1], 'retried', 'scheduled', 0, '', 'waits until the cancelled attempt\'s lease can no longer be trusted')
        count = count + 1
      else
        redis.call('HSET', jk, 'state', 'queued', 'attempt', '0', 'token', '', 'run_at', NOW_S)
        if redis.call('HDEL', K_TOMB, id) == 1 then
          -- Cancelled while queued: its id is still in its list, which now
          -- serves it again.
          redis.call('HINCRBY', K_STATS, 'tomb_' .. f[3], -1)
        else
          enqueue(id, f[3], f[4], false)
        end
        emit(id, f[1], 'retried', 'queued', 0, '', '')
        count = count + 1
        queued = queued + 1
      end
    end
  end
end
signal(queued)
return {'ok', tostring(count)}
