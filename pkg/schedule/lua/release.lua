-- release.lua: delete a lock, but only for its holder.
-- KEYS[1] lock key   ARGV[1] holder token
-- Returns 1 when released, 0 when the lock is held by another or by no one.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
