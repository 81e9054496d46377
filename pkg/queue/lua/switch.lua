-- switch: moves the storage format marker to a newer format once no live
-- process lacks it (format.go, "the gate"). Like register.lua it uses
-- nothing of lib.lua: its keys are the registry's.
-- KEYS[1] format marker (hash: format, moved_at, writable_at; absent = format 1)
-- KEYS[2] readers (zset id → registration expiry, ms of Redis' clock)
-- KEYS[3] reader information (hash id → JSON with "reads")
-- ARGV[1] the format to move to   ARGV[2] settle, ms: the format becomes
--         writable that long after the move (the registrations' lifetime)
-- The settle covers a process of an older release whose registration
-- Redis lost (a restart without persistence, a failover to a replica that
-- lacked the write): by then it has renewed and been refused, or stopped
-- running scripts by its own clock. It is skipped where no older release
-- was ever seen: no call found a live registration lacking the format (the
-- marker's held_back_at, set below) and none lacking it is on record, live
-- or lapsed. A new deployment then writes the format from its first claim.
-- Returns {moved, writable, writable_at}: moved 1 when this call moved the
-- marker, writable 1 when the format may be written now; {0, 0, id} when
-- the live registration id lacks the format.
local marker, readers, info = KEYS[1], KEYS[2], KEYS[3]
local target, settle = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = tonumber(redis.call('HGET', marker, 'format') or '1')
if cur >= target then
  local at = tonumber(redis.call('HGET', marker, 'writable_at') or '0')
  if cur == target and at > 0 and at <= now then return {0, 1, at} end
  return {0, 0, at}
end
-- reads tells whether a registration's information lists the format.
local function reads(id)
  local s = redis.call('HGET', info, id)
  if not s then return false end
  local ok, v = pcall(cjson.decode, s)
  if not ok or type(v) ~= 'table' or type(v.reads) ~= 'table' then return false end
  for _, f in ipairs(v.reads) do
    if tonumber(f) == target then return true end
  end
  return false
end
local fresh = redis.call('HEXISTS', marker, 'held_back_at') == 0
local all = redis.call('ZRANGE', readers, 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  local id, expiry = all[i], tonumber(all[i + 1])
  if expiry > now then
    if not reads(id) then
      redis.call('HSET', marker, 'held_back_at', tostring(now))
      return {0, 0, id}
    end
  elseif fresh and not reads(id) then
    fresh = false
  end
end
local at = now + settle
if fresh then at = now end
redis.call('HSET', marker, 'format', tostring(target), 'moved_at', tostring(now), 'writable_at', tostring(at))
local writable = 0
if fresh then writable = 1 end
return {1, writable, at}
