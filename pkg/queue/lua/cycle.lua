-- cycle.lua: record a batch of outcomes, then claim up to n jobs, in one
-- call: a worker serving one queue writes its finished jobs and takes new
-- ones for the freed slots in one round trip (complete.lua and claim.lua,
-- run as complete_part and claim_part, see scripts.go).
-- ARGV[6..11] as claim.lua's (n, worker id, lease ttl ms, types, format,
-- tags); ARGV[12] m, then m groups of 6 as complete.lua's.
-- Returns {the statuses of complete.lua, the leases of claim.lua}.
local cargs = {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]}
for i = 12, #ARGV do cargs[i - 6] = ARGV[i] end
local statuses = complete_part(cargs)
if tonumber(ARGV[6]) <= 0 then return {statuses, {}} end
return {statuses, claim_part(ARGV)}
