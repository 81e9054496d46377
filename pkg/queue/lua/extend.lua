-- extend.lua: renew the leases of running jobs (the holder's heartbeat).
-- ARGV[6] lease ttl ms   ARGV[7] n, then n pairs: id, token
-- A lease is renewed only while the job is active under that token: its
-- lock is set again to the token with the new ttl and its lease entry moves
-- to the new expiry. Returns one status per pair: 'ok', or 'stale' when the
-- lease was lost (expired and reclaimed, cancelled, finished): the holder
-- must stop the job, and its outcome would be refused anyway.
local ttl = tonumber(ARGV[6])
local n = tonumber(ARGV[7])
local expiry = lease_now() + ttl
local out = {}
local leases = {}
for i = 1, n do
  local id, token = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
  local f = redis.call('HMGET', JOB .. id, 'state', 'token')
  if f[1] == 'active' and f[2] == token and redis.call('ZSCORE', K_LEASES, id) then
    redis.call('SET', QK .. 'lock:' .. id, token, 'PX', ttl)
    leases[#leases + 1] = expiry
    leases[#leases + 1] = id
    out[i] = 'ok'
  else
    out[i] = 'stale'
  end
end
call_chunked('ZADD', K_LEASES, leases)
return out
