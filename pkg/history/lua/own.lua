-- own.lua: take or keep the history ownership of one queue.
-- KEYS[1] the queue's owner key (sundial:{q}:history:owner)
-- ARGV[1] this writer's id   ARGV[2] ownership TTL, ms
-- Returns 1 when the caller owns the queue for the next TTL (it already
-- did, or the key was free), 0 when another writer owns it.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
