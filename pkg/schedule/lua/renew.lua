-- renew.lua: extend a lock, but only for its holder.
-- KEYS[1] lock key   ARGV[1] holder token   ARGV[2] new TTL, ms
-- Returns 1 when renewed, 0 when the lock is held by another or by no one.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
