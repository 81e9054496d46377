-- plan.lua: write a schedule's definition and plan its next run, in the
-- slot of its queue.
-- KEYS[1] definitions (hash id → JSON)   KEYS[2] next runs (zset id → ms)
-- KEYS[3] runs (hash id → "<last fire ms> <last job id>")
-- KEYS[4] revision (counter of definition changes, read by due.lua)
-- ARGV[1] schedule id
-- ARGV[2] definition JSON
-- ARGV[3] mode: 'set'  = the next run becomes ARGV[4];
--               'keep' = keep the planned next run if there is one, else ARGV[4];
--               'off'  = no next run (disabled)
-- ARGV[4] proposed next run, Unix ms
-- ARGV[5] runs value carried over from another queue ('' = none)
-- Returns {'ok', next run ms or '', runs value or ''}, or {'stale', last fire ms} when the
-- proposed next run is not after the last fire time (a scheduler fired it
-- meanwhile, or the caller's clock is behind): nothing was written, and the
-- caller plans again after that time. So no fire time is planned twice.
local id, def, mode, proposed, carried = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local runs = carried
if runs == '' then runs = redis.call('HGET', KEYS[3], id) or '' end
local next_run = nil
if mode == 'keep' then next_run = redis.call('ZSCORE', KEYS[2], id) end
if mode ~= 'off' and not next_run then
  local last = tonumber(string.match(runs, '^(%d+)') or '0')
  if proposed <= last then return {'stale', string.format('%.0f', last)} end
  next_run = proposed
  redis.call('ZADD', KEYS[2], next_run, id)
end
if mode == 'off' then redis.call('ZREM', KEYS[2], id) end
redis.call('HSET', KEYS[1], id, def)
redis.call('INCR', KEYS[4])
if carried ~= '' then redis.call('HSET', KEYS[3], id, carried) end
if next_run then return {'ok', string.format('%.0f', next_run), runs} end
return {'ok', '', runs}
