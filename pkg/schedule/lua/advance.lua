-- advance.lua: move a schedule's next run without submitting anything
-- (misfires skipped, or an unusable definition put aside), as a
-- compare-and-set like a guarded submit.
-- KEYS[1] next runs (zset id → ms)
-- ARGV[1] schedule id   ARGV[2] expected next run ms
-- ARGV[3] new next run ms ('' = remove the schedule from the zset)
-- Returns 1 when the next run was ARGV[2] and moved, 0 otherwise (someone
-- else moved it; nothing was written).
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1
