-- due.lua: what a scheduler needs to fire one queue's schedules, read as
-- one consistent snapshot.
-- KEYS[1] definitions (hash id → JSON)   KEYS[2] next runs (zset id → ms)
-- KEYS[3] revision (counter, bumped by every change of a definition)
-- ARGV[1] now, Unix ms   ARGV[2] how many due schedules at most
-- ARGV[3] the revision the caller's cached definitions are of ('' = none)
-- Returns {revision, earliest next run after now ('' = none), n,
--          id1, next run1, definition1, …} for the n schedules due
-- (next run ≤ now, earliest first); the definitions are '' when the
-- caller's revision is current (it has them cached).
local rev = redis.call('GET', KEYS[3]) or '0'
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local later = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local out = {rev, later[2] or '', #due / 2}
local fresh = ARGV[3] ~= rev
for i = 1, #due, 2 do
  out[#out + 1] = due[i]
  out[#out + 1] = due[i + 1]
  if fresh then
    out[#out + 1] = redis.call('HGET', KEYS[1], due[i]) or ''
  else
    out[#out + 1] = ''
  end
end
return out
