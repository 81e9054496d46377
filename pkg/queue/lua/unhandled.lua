-- unhandled.lua: end dead the queued jobs of one type that have waited for
-- a handler since before a cutoff (parked by typed claims, NOHANDLER in
-- lib.lua). The caller (the poller) runs it only when no live worker of
-- the queue handles the type.
-- ARGV[6] type   ARGV[7] cutoff, ms: jobs parked at or before it go
-- ARGV[8] at most this many
-- Each ends dead with last_error 'no handler for type "<type>"' (retry
-- from the dead set brings it back), and its dependents are cancelled.
-- Returns how many ended.
local jtype, cutoff, limit = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local slot = NOHANDLER .. '|' .. jtype
local pk = QK .. 'parked:' .. slot
local err = 'no handler for type "' .. jtype .. '"'
local n = 0
-- A parked job's score is its priority rank * 1e13 + when it was parked.
for rank = 0, 2 do
  if n >= limit then break end
  local ids = redis.call('ZRANGEBYSCORE', pk, ms(rank * 1e13), ms(rank * 1e13 + cutoff), 'LIMIT', 0, limit - n)
  for _, id in ipairs(ids) do
    unpark_id(id, slot)
    local f = job_fields(id, TYPE_STATE_ATTEMPT)
    if f[2] == 'queued' then
      n = n + 1
      finish(id, 'dead', {'last_error', err})
      emit(id, f[1], 'dead', 'dead', f[3], '', err)
      redis.call('HINCRBY', K_STATS, 'dead_total', 1)
      settle_dependents(id, false, 'dependency ' .. id .. ' ended dead')
    end
  end
end
count_minute('d', n)
if redis.call('EXISTS', pk) == 0 then redis.call('SREM', K_NOHANDLER, slot) end
return n
