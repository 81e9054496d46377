-- prune.lua: delete the hashes of jobs finished before a cutoff.
-- ARGV[6] cutoff ms   ARGV[7] limit
-- Returns the number deleted.
local ids = redis.call('ZRANGEBYSCORE', K_FIN, '-inf', ARGV[6], 'LIMIT', 0, tonumber(ARGV[7]))
for _, id in ipairs(ids) do
  redis.call('DEL', JOB .. id, QK .. 'dependents:' .. id)
end
if #ids > 0 then redis.call('ZREM', K_FIN, unpack(ids)) end
return #ids
