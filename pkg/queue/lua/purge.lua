-- purge.lua: delete dead jobs from Redis (their history stays in MongoDB).
-- ARGV[6] n, ARGV[7..] ids. Ids not in the dead set are skipped.
-- Returns the number deleted.
local n = tonumber(ARGV[6])
local count = 0
for i = 1, n do
  local id = ARGV[6 + i]
  if redis.call('ZREM', K_DEAD, id) == 1 then
    redis.call('DEL', JOB .. id, QK .. 'dependents:' .. id, QK .. 'log:' .. id)
    count = count + 1
  end
end
return count
