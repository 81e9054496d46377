-- submit.lua: add a batch of jobs to one queue, all or nothing.
-- ARGV[6]  number of jobs n
-- ARGV[7]  idempotency window, ms
-- ARGV[8]  '1' = dry run: check only, write nothing
-- ARGV[9]  the storage format to write: '4' writes compact job hashes (see
--          JOB_DEFAULTS in lib.lua), anything else every field. A client
--          passes 4 only once every live process reads it (format.go).
-- ARGV[10] guard: a sorted set in this queue's slot ('' = no guard); with it
-- ARGV[11] member, ARGV[12] expected score, ARGV[13] new score ('' = remove the member),
-- ARGV[14] a hash in this queue's slot to record in ('' = none),
-- ARGV[15] m, then m field/value pairs for HSET on that hash.
--          The submit happens only while the member's score equals the
--          expected one (compare-and-set); the score then moves to the new one.
-- then p, the number of profiles, and p groups of 8: type, priority,
--          max_attempts, timeout_seconds, backoff_base, backoff_max,
--          created ms, run_at ms (the fields jobs share: a batch built at
--          one instant has one profile);
-- then n jobs: id, payload, profile (1-based), extra ('' = none; '1' =
--          four more follow: idempotency key ('' = none), depends_on
--          (comma-separated ids, '' = none), group ('' = none),
--          traceparent ('' = none); '2' = those four and a batch id: the
--          job is a member of that batch, see batch_ended in lib.lua;
--          '3' = those five (the batch id '' = none) and the job's
--          options, see submit_options in lib.lua: start_by, deadline,
--          tags, a sequence key, a debounce).
-- Every argument is a string Redis makes for the call: sharing the fixed
-- fields costs ~4 instead of 14 per job (docs/benchmarks/2026-11.md).
-- Returns {'ok', i, id, …}: one pair per job whose idempotency key named
-- an earlier job (i its 0-based index, id the earlier job's; nothing was
-- created for it; a debounce, below, names the job it updated as '~'
-- and its id), every other job being new; {'err', i, j, code, detail}
-- when job i's dependency j is unusable (code 'not_found' or 'failed'; i
-- and j are 0-based); then nothing was written; {'guard', current score
-- or ''} when the guard did not match, and nothing was written;
-- {'forgotten'} when the queue was forgotten (forget.lua): the caller
-- registers it again, removes the marker and submits again.
local n = tonumber(ARGV[6])
local dry_run = ARGV[8] == '1'
local compact = ARGV[9] == '4'
local guard_key, guard_member, guard_expect, guard_next = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local rec_key, rec_m = ARGV[14], tonumber(ARGV[15])
local pbase = 17 + 2 * rec_m -- the first profile
local base = pbase + 8 * tonumber(ARGV[16 + 2 * rec_m]) -- the first job
-- The same call sent again (its reply was lost after it ran; go-redis
-- retries a command after a read timeout or EOF): job ids are fresh per
-- submit, so a job of the call that exists already means the call ran,
-- and the answer is the first one's: the jobs are not written again. A
-- job that was a duplicate then has no hash; its idempotency key still
-- names the earlier job. A call that only shares some job ids with an
-- earlier one (outbox relays racing over the same rows) is no replay
-- (submit_replay answers nil): it goes on, its idempotency keys finding
-- the jobs that exist.
if not dry_run then
  local keys, b = {}, base
  for i = 1, n do keys[i] = JOB .. ARGV[b]; b = submit_next_job(b) end
  local found = 0
  for i = 1, n, CHUNK do found = found + redis.call('EXISTS', unpack(keys, i, math.min(i + CHUNK - 1, n))) end
  if found > 0 then
    local replay = submit_replay(base, n)
    if replay then return replay end
  end
end
if guard_key ~= '' then
  local cur = redis.call('ZSCORE', guard_key, guard_member)
  if not cur or tonumber(cur) ~= tonumber(guard_expect) then return {'guard', cur or ''} end
end
-- A forgotten queue (forget.lua) takes a job only once registered again.
if not dry_run and redis.call('EXISTS', QK .. 'forgotten') == 1 then return {'forgotten'} end
-- The queue's fence is made with its first job, not its first claim: a
-- Redis rolled back to a snapshot taken after a submit but before the
-- first claim then still holds it, and the restart quarantine (quarantined
-- in lib.lua) applies to the jobs claimed after that snapshot. This
-- server's library saw the fence made, so its own claims wait for nothing.
if LIBRARY and not dry_run and BOOTED[QK] == nil and redis.call('EXISTS', K_FENCE) == 0 then
  redis.call('SET', K_FENCE, '0')
  BOOTED[QK] = false
end
-- What this script needs besides ARGV is made once, when the library
-- loads (lib.lua, "Submit"): a closure or table made per call costs every
-- submit, and most submits are of one job.
local next_job = submit_next_job
local jobs, alias -- job i's fields and phase 1's findings; batch id → effective id (itself, or the job a duplicate names)

-- Phase 1 has work only where a job has an idempotency key or
-- dependencies. Without any (most submits), the jobs are written in one
-- pass straight from ARGV: phase 1's tables were about a sixth of a
-- one-job submit's script time (docs/benchmarks/2026-11.md).
local checks = dry_run
local b = base
for _ = 1, n do
  if ARGV[b + 3] == '3' or (ARGV[b + 3] ~= '' and (ARGV[b + 4] ~= '' or ARGV[b + 5] ~= '')) then checks = true; break end
  b = next_job(b)
end

-- Phase 1: resolve idempotency keys and check dependencies; no writes.
if checks then
  jobs, alias = {}, {}
  local idem_seen = {}
  local seq_seen, deb_seen = {}, {} -- sequence key → this call's last job; debounce key → {id, first}
  local uniq = nil -- the queue's uniqueness (submit_uniqueness), read at most once
  b = base
  for i = 1, n do
    local j = {id = ARGV[b], idem = '', deps_s = ''}
    if ARGV[b + 3] ~= '' then j.idem, j.deps_s = ARGV[b + 4], ARGV[b + 5] end
    if ARGV[b + 3] == '3' then j.o = submit_options(ARGV[b + 9]) end
    b = next_job(b)
    -- A debounce (o.k, docs/concepts.md "Debounce"): while the job its key
    -- names has not started, this submit updates that job instead.
    local o = j.o
    if o and o.k then
      local d = deb_seen[o.k]
      if not d then
        local cur = redis.call('GET', QK .. 'deb:' .. o.k)
        local did, first = string.match(cur or '', '^(%S+) (%d+)$')
        if did then
          local f = job_fields(did, TYPE_STATE_ATTEMPT)
          if f[2] == 'scheduled' and f[3] == '0' then d = {id = did, first = tonumber(first)} end
        end
      end
      if d then j.debounce = d else deb_seen[o.k] = {id = j.id, first = NOW, new = true} end
    end
    -- deps_s starting with '!': the job runs when a dependency fails
    -- (on_dependency_failure "run") instead of being cancelled.
    if string.byte(j.deps_s, 1) == 33 then j.run_anyway, j.deps_s = true, string.sub(j.deps_s, 2) end
    j.deps = split_list(j.deps_s)
    jobs[i] = j
    if j.idem ~= '' then
      local existing = idem_seen[j.idem] or redis.call('GET', QK .. 'idem:' .. j.idem)
      if existing and not idem_seen[j.idem] then
        -- A key names its job while the hash exists, and with 'until
        -- finished' only while the job has not ended.
        local st = redis.call('HGET', JOB .. existing, 'state')
        if st and FINAL_STATES[st] then
          uniq = uniq or submit_uniqueness()
          if uniq.finished then st = nil end
        end
        if not st then existing = nil end
      end
      if existing then j.dup = existing end
    end
    alias[j.id] = j.dup or (j.debounce and j.debounce.id) or j.id
    if not j.dup and not j.debounce then
      if j.idem ~= '' then idem_seen[j.idem] = j.id end
      j.pending = {}
      for k, d in ipairs(j.deps) do
        local eff = alias[d]
        local state
        if string.find(d, '|', 1, true) then
          -- "<queue>|<id>": a job of another queue (another slot on a
          -- Cluster). The client found it; the poller settles the edge
          -- once it ends (settle.lua).
          eff, state = d, 'remote'
          j.remote = true
        elseif eff and eff ~= j.id then
          state = redis.call('HGET', JOB .. eff, 'state') or 'new'
        else
          eff = d
          state = redis.call('HGET', JOB .. d, 'state')
        end
        if not state then return {'err', tostring(i - 1), tostring(k - 1), 'not_found', d} end
        if state == 'dead' or state == 'cancelled' then
          if not j.run_anyway then return {'err', tostring(i - 1), tostring(k - 1), 'failed', state} end
        elseif state ~= 'succeeded' then
          j.pending[#j.pending + 1] = eff
        end
      end
      -- A sequence (o.q): the job waits for its key's last job, while
      -- that one has not ended (sequence_ended forgets it when it does).
      if o and o.q then
        local tail = seq_seen[o.q]
        local state = tail and 'new'
        if not tail then
          tail = redis.call('GET', QK .. 'seq:' .. o.q)
          state = tail and redis.call('HGET', JOB .. tail, 'state')
        end
        if state and not FINAL_STATES[state] then
          local have = false
          for _, p in ipairs(j.pending) do if p == tail then have = true end end
          if not have then
            j.pending[#j.pending + 1] = tail
            j.seq_wait = tail -- written into depends_on (phase 2)
          end
          j.seq_behind = tail
        elseif state then
          j.seq_behind = tail -- ended: no longer its key's last job
        end
        seq_seen[o.q] = j.id
      end
    end
  end
end

if dry_run then return {'ok'} end

-- Phase 2: write.
local out = {'ok'}
local ready, created = 0, 0
local uniq_ttl = nil -- how long an idempotency key names its job, read at most once
b = base
local ready_jobs = ready_batch() -- one LPUSH per list (lib.lua)
local sched = nil -- due ms, id pairs: one ZADD for the batch's scheduled jobs
local before = nil
local min_due = nil
local p_num, p = nil, nil -- the last profile used (a batch built at one instant has one)
local profiles, p_seen = nil, false -- the profiles used, once a job uses a second one
for i = 1, n do
  local j = jobs and jobs[i]
  local jb = b
  b = next_job(b)
  if j and j.dup then
    out[#out + 1] = tostring(i - 1)
    out[#out + 1] = j.dup
  elseif j and j.debounce then
    -- Replace: the pending job takes this payload. Extend: it is due a
    -- window from now, never past its first submit's max wait.
    local d, o = j.debounce, j.o
    if o.m == 'e' then
      local due = math.min(NOW + tonumber(o.w), d.first + tonumber(o.x))
      local before = earliest()
      redis.call('ZADD', K_SCHED, due, d.id)
      redis.call('HSET', JOB .. d.id, 'run_at', ms(due))
      wake_poller(before, due)
    else
      redis.call('HSET', JOB .. d.id, 'payload', ARGV[jb + 1])
    end
    emit(d.id, redis.call('HGET', JOB .. d.id, 'type'), 'debounced', 'scheduled', '0', '', '')
    out[#out + 1] = tostring(i - 1)
    out[#out + 1] = '~' .. d.id
  else
    local id, payload = ARGV[jb], ARGV[jb + 1]
    if ARGV[jb + 2] ~= p_num then
      -- Another profile than the last job's: kept, for batches that mix them.
      p_num = ARGV[jb + 2]
      p = profiles and profiles[p_num]
      if not p then
        p = submit_profile(pbase, p_num)
        if p_seen then profiles = profiles or {}; profiles[p_num] = p end
        p_seen = true
      end
    end
    local pf = p.at
    local idem, deps_s, group, trace = '', '', '', ''
    local opt = nil
    if ARGV[jb + 3] ~= '' then
      idem, deps_s, group, trace = ARGV[jb + 4], ARGV[jb + 5], ARGV[jb + 6], ARGV[jb + 7]
      -- Empty optional fields are left out: every field costs on each write.
      opt = {}
      if idem ~= '' then opt[#opt + 1] = 'idempotency_key'; opt[#opt + 1] = idem end
      if string.byte(deps_s, 1) == 33 then
        deps_s = string.sub(deps_s, 2)
        opt[#opt + 1] = 'on_dependency_failure'; opt[#opt + 1] = 'run'
      end
      -- The job ahead in a sequence is a dependency like the others: the
      -- job's graph, a retry by hand and the history see it.
      if j and j.seq_wait then deps_s = deps_s == '' and j.seq_wait or deps_s .. ',' .. j.seq_wait end
      if deps_s ~= '' then opt[#opt + 1] = 'depends_on'; opt[#opt + 1] = deps_s end
      if group ~= '' then opt[#opt + 1] = 'group'; opt[#opt + 1] = group end
      if trace ~= '' then opt[#opt + 1] = 'traceparent'; opt[#opt + 1] = trace end
      if ARGV[jb + 3] ~= '1' and ARGV[jb + 8] ~= '' then
        opt[#opt + 1] = 'batch'; opt[#opt + 1] = ARGV[jb + 8]
        batch_member_live(id)
      end
      local o = j and j.o
      if o then
        if o.s then opt[#opt + 1] = 'start_by'; opt[#opt + 1] = o.s end
        if o.d then opt[#opt + 1] = 'deadline'; opt[#opt + 1] = o.d end
        if o.s or o.d then
          local sb, dl = tonumber(o.s), tonumber(o.d)
          local at = math.min(sb or dl, dl or sb)
          local first = tonumber(redis.call('ZRANGE', K_EXPIRES, 0, 0, 'WITHSCORES')[2])
          redis.call('ZADD', K_EXPIRES, ms(at), id)
          wake_poller(first, at)
        end
        if o.t then opt[#opt + 1] = 'tags'; opt[#opt + 1] = o.t end
        if o.q then
          -- 's': the key's last job (sequence_ended); a job submitted
          -- behind it makes it '1'.
          opt[#opt + 1] = 'sequence'; opt[#opt + 1] = o.q
          opt[#opt + 1] = 'has_dependents'; opt[#opt + 1] = 's'
          redis.call('SET', QK .. 'seq:' .. o.q, id)
          redis.call('HSET', K_SEQTAILS, id, o.q)
          if j.seq_behind then redis.call('HDEL', K_SEQTAILS, j.seq_behind) end
        end
        if o.k then
          opt[#opt + 1] = 'debounce'; opt[#opt + 1] = o.k
          redis.call('SET', QK .. 'deb:' .. o.k, id .. ' ' .. NOW_S, 'PX', tonumber(o.x) + 60000)
        end
      end
    end
    local jtype, prio, created_at, run_at_s = ARGV[pf], ARGV[pf + 1], ARGV[pf + 6], ARGV[pf + 7]
    local run_at = p.due
    local state
    if j and #j.pending > 0 then state = 'waiting'
    elseif run_at > NOW then state = 'scheduled'
    else state = 'queued' end
    if compact then
      -- Format 4: what a reader knows without it stays out (JOB_DEFAULTS).
      local extra = p.fields
      if opt then
        extra = {unpack(extra)}
        for _, v in ipairs(opt) do extra[#extra + 1] = v end
      end
      redis.call('HSET', JOB .. id, 'state', state, 'type', jtype, 'payload', payload, 'created_at', created_at,
        unpack(extra))
    else
      -- In the order a claim reads them (claim.lua's FIELDS) and a success
      -- writes them, first: a small hash is one flat list that Redis scans
      -- from its start for every field it reads or writes.
      redis.call('HSET', JOB .. id, 'state', state, 'attempt', '0', 'type', jtype, 'payload', payload,
        'max_attempts', ARGV[pf + 2], 'timeout', ARGV[pf + 3], 'priority', prio, 'created_at', created_at,
        'run_at', run_at_s, 'id', id, 'queue', QUEUE, 'backoff_base', ARGV[pf + 4], 'backoff_max', ARGV[pf + 5],
        unpack(opt or NO_FIELDS))
    end
    if idem ~= '' then
      uniq_ttl = uniq_ttl or submit_uniqueness().ttl
      redis.call('SET', QK .. 'idem:' .. idem, id, 'PX', uniq_ttl)
    end
    if state == 'waiting' then
      redis.call('ZADD', K_WAIT, created_at, id)
      call_chunked('SADD', QK .. 'deps:' .. id, j.pending)
      for _, d in ipairs(j.pending) do
        if not string.find(d, '|', 1, true) then
          redis.call('SADD', QK .. 'dependents:' .. d, id)
          -- Batch jobs are written in order, so d's hash exists by now.
          redis.call('HSET', JOB .. d, 'has_dependents', '1')
        end
      end
      if j.remote then redis.call('SADD', QK .. 'rwait', id) end
    elseif state == 'scheduled' then
      if min_due == nil then before = earliest() end
      sched = sched or {}
      sched[#sched + 1] = run_at_s
      sched[#sched + 1] = id
      if min_due == nil or run_at < min_due then min_due = run_at end
    else
      ready_jobs.add(id, prio, group)
      ready = ready + 1
    end
    emit(id, jtype, 'submitted', state, '0', '', '')
    created = created + 1
  end
end
ready_jobs.flush()
if sched then call_chunked('ZADD', K_SCHED, sched) end
if guard_key ~= '' then
  if guard_next == '' then redis.call('ZREM', guard_key, guard_member)
  else redis.call('ZADD', guard_key, guard_next, guard_member) end
end
if rec_key ~= '' and rec_m > 0 then
  redis.call('HSET', rec_key, unpack(ARGV, 16, 15 + 2 * rec_m))
end
if created > 0 then redis.call('HINCRBY', K_STATS, 'submitted_total', created) end
signal(ready)
if min_due then wake_poller(before, min_due) end
return out
