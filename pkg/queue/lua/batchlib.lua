-- batchlib.lua: what the batch scripts (batchadd.lua, batchsettle.lua)
-- share. They run in a batch's slot, not a queue's: lib.lua's begin() is
-- not theirs.

-- batch_due marks the callbacks of batch meta due once the batch is
-- sealed and every member ended: on_complete then (or at the first end,
-- for a parent awaiting the first of its children), on_success when every
-- member succeeded. A callback moves pending → due here, due → fired in
-- batch.go (after its job was submitted), never back: each is due once.
-- Returns '1' when one became due.
local function batch_due(meta)
  local m = redis.call('HMGET', meta, 'sealed', 'total', 'done', 'n_succeeded', 'success', 'complete', 'complete_first')
  local due = '0'
  -- complete_first (batchadd.lua): on_complete is due at the first end.
  if m[7] == '1' and m[6] == 'pending' and m[1] == '1' and tonumber(m[3] or '0') >= 1 then
    redis.call('HSET', meta, 'complete', 'due')
    m[6], due = 'due', '1'
  end
  if m[1] ~= '1' or m[2] ~= m[3] then return due end
  if m[6] == 'pending' then
    redis.call('HSET', meta, 'complete', 'due')
    due = '1'
  end
  if m[5] == 'pending' and m[4] == m[2] then
    redis.call('HSET', meta, 'success', 'due')
    due = '1'
  end
  return due
end
