-- batchadd.lua: create a batch, add members to it, seal it or mark it
-- cancelled (batch.go). It runs in the batch's own slot, without lib.lua's
-- begin(): KEYS are the batch's keys (keys.go, batchKeys):
--   KEYS[1] meta (hash)   KEYS[2] members (zset id → position)
--   KEYS[3] queues (hash id → queue)   KEYS[4] done (hash id → "<n>\t<state>")
-- ARGV[1] now ms, ARGV[2] what: 'create', 'add', 'seal' or 'cancel',
-- ARGV[3] on_success job JSON ('' = none), ARGV[4] on_complete job JSON
-- ('' = none) (create only), ARGV[5] n, then n pairs id, queue (create
-- and add).
-- create: then ARGV[6 + 2n] a nonce, fresh per call ('' or absent: none):
-- the same call sent again (its reply lost, retried) finds its own nonce
-- and answers as the first did, instead of {'exists'}.
-- create refuses an existing batch ({'exists'}); the others a missing one
-- ({'not_found'}); add refuses a sealed batch ({'sealed'}); seal and
-- cancel of a sealed batch are harmless. A member already listed is not
-- counted again. cancel seals the batch and records when it was cancelled.
-- Returns {'ok', total, due}: due '1' when a callback became due.
local meta, members, queues = KEYS[1], KEYS[2], KEYS[3]
local what = ARGV[2]
local exists = redis.call('EXISTS', meta) == 1
if what == 'create' then
  local nonce = ARGV[6 + 2 * tonumber(ARGV[5])] or ''
  if exists then
    if nonce ~= '' and redis.call('HGET', meta, 'creator') == nonce then
      return {'ok', redis.call('HGET', meta, 'total'), '0'}
    end
    return {'exists'}
  end
  redis.call('HSET', meta, 'created_at', ARGV[1], 'total', 0, 'done', 0, 'sealed', 0,
    'n_succeeded', 0, 'n_dead', 0, 'n_cancelled', 0)
  if nonce ~= '' then redis.call('HSET', meta, 'creator', nonce) end
  if ARGV[3] ~= '' then redis.call('HSET', meta, 'on_success', ARGV[3], 'success', 'pending') end
  if ARGV[4] ~= '' then redis.call('HSET', meta, 'on_complete', ARGV[4], 'complete', 'pending') end
  -- A parent awaiting the first of its children to end (batch.go,
  -- SignalTarget.First): on_complete is then due at the first end.
  if string.sub(ARGV[4], 1, 10) == '{"signal":' and string.sub(ARGV[4], -14) == '"first":true}}' then
    redis.call('HSET', meta, 'complete_first', 1)
  end
elseif not exists then
  return {'not_found'}
elseif what == 'add' and redis.call('HGET', meta, 'sealed') == '1' then
  return {'sealed'}
end
local n = tonumber(ARGV[5])
if n > 0 then
  local pos = tonumber(redis.call('HGET', meta, 'total'))
  local added = 0
  for i = 0, n - 1 do
    local id, q = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
    if redis.call('HSETNX', queues, id, q) == 1 then
      redis.call('ZADD', members, pos + added, id)
      added = added + 1
    end
  end
  redis.call('HINCRBY', meta, 'total', added)
end
if what == 'cancel' then redis.call('HSETNX', meta, 'cancelled', ARGV[1]) end
if what == 'seal' or what == 'cancel' then redis.call('HSET', meta, 'sealed', 1) end
return {'ok', redis.call('HGET', meta, 'total'), batch_due(meta)}
