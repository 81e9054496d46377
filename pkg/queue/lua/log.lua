-- log.lua: keep lines a running attempt logged (docs/concepts.md, "Job logs").
-- ARGV[6] id   ARGV[7] the attempt's fencing token   ARGV[8] cap: the most
-- lines the job keeps   ARGV[9] the call's tag (12 random hex digits,
-- fresh per call)   ARGV[10..] the lines, each a JSON object.
-- The lines go to the job's list QK..'log:'..id as "<seq> <attempt> <ms>
-- <json>", seq counting every line the job ever logged (log_seq on its
-- hash); past the cap the oldest are dropped and counted (log_dropped).
-- log_lines on the hash is how many the list keeps. One 'log' event per
-- call, its message "<first seq> <n>", so that the stream and the history
-- writer know which lines are new.
-- The same call sent again (its reply was lost after it ran; go-redis
-- retries a command after a read timeout or EOF) finds its tag in the
-- job's log_call ("<tag> <first seq>") and answers as the first time,
-- keeping nothing twice.
-- Returns {'ok', first seq} or {'stale'} when token is not the running
-- attempt's (nothing kept).
local id, token, cap, tag = ARGV[6], ARGV[7], tonumber(ARGV[8]), ARGV[9]
local jk = JOB .. id
local cur, attempt, jtype, _, _, worker = running(id)
if not cur or cur ~= token then return {'stale'} end
local n = #ARGV - 9
if n == 0 then return {'ok', '0'} end
local prev = redis.call('HGET', jk, 'log_call')
if prev and string.sub(prev, 1, #tag + 1) == tag .. ' ' then return {'ok', string.sub(prev, #tag + 2)} end
local last = redis.call('HINCRBY', jk, 'log_seq', n)
local first = last - n + 1
local lines = {}
for i = 1, n do lines[i] = ms(first + i - 1) .. ' ' .. attempt .. ' ' .. NOW_S .. ' ' .. ARGV[9 + i] end
local lk = QK .. 'log:' .. id
local len = 0
for c = 1, n, CHUNK do len = redis.call('RPUSH', lk, unpack(lines, c, math.min(c + CHUNK - 1, n))) end
local dropped = 0
if len > cap then
  dropped = len - cap
  redis.call('LTRIM', lk, dropped, -1)
  redis.call('HINCRBY', jk, 'log_dropped', dropped)
end
redis.call('HSET', jk, 'log_lines', ms(len - dropped), 'log_call', tag .. ' ' .. ms(first))
emit(id, jtype, 'log', 'active', attempt, worker or '', '', '', ms(first) .. ' ' .. n)
return {'ok', ms(first)}
