-- disown.lua: give up the history ownership of one queue, if still held.
-- KEYS[1] the queue's owner key   ARGV[1] this writer's id
-- Returns 1 when the key was deleted, 0 when another writer owns it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
