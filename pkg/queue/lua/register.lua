-- register: records a process in the registry of readers of the storage
-- format, unless this Redis holds a format the process does not read
-- (format.go). It does not use lib.lua: its keys are not a queue's.
-- KEYS[1] format marker (hash: format = the format written here; absent
--         means format 1)
-- KEYS[2] readers (zset id → registration expiry, ms of Redis' clock)
-- KEYS[3] reader information (hash id → JSON)
-- ARGV[1] the process's id   ARGV[2] the registration's lifetime, ms
-- ARGV[3] the process's information (JSON)
-- ARGV[4..] the formats the process reads
-- Returns {1, format, writable} when registered, {0, format, 0} when refused
-- (and the process's entry removed); format is the marker's value as
-- stored, writable 1 once the marker's writable_at has passed (switch.lua).
local marker, readers, info = KEYS[1], KEYS[2], KEYS[3]
local id, ttl = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stored = redis.call('HGET', marker, 'format')
local format = 1
if stored then format = tonumber(stored) end
local reads = false
for i = 4, #ARGV do
  if tonumber(ARGV[i]) == format then reads = true end
end
if not reads then
  redis.call('ZREM', readers, id)
  redis.call('HDEL', info, id)
  return {0, stored or '1', 0}
end
-- Forget registrations that lapsed, a bounded number per call.
local lapsed = redis.call('ZRANGEBYSCORE', readers, '-inf', now, 'LIMIT', 0, 100)
if #lapsed > 0 then
  redis.call('ZREM', readers, unpack(lapsed))
  redis.call('HDEL', info, unpack(lapsed))
end
redis.call('ZADD', readers, now + ttl, id)
redis.call('HSET', info, id, ARGV[3])
local writable = 0
local at = redis.call('HGET', marker, 'writable_at')
if stored and at and tonumber(at) <= now then writable = 1 end
return {1, stored or '1', writable}
