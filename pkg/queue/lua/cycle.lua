-- cycle.lua: record a batch of outcomes, then claim up to n jobs, in one
-- call: a worker serving one queue writes its finished jobs and takes new
-- ones for the freed slots in one round trip (complete.lua and claim.lua,
-- run as complete_part and claim_part, see scripts.go).
-- ARGV[6..11] as claim.lua's (n, worker id, lease ttl ms, types, format,
-- tags); ARGV[12] m, then m groups of 6 as complete.lua's.
-- Returns {the statuses of complete.lua, the leases of claim.lua}.
-- The same call sent again (its reply was lost): the same answer, the
-- outcomes not applied twice (claim_record in lib.lua).
local rec = claim_record(ARGV[7], string.sub(ARGV[11] or '', 1, 12))
if rec then
  local leases, statuses = replay_claim(rec, ARGV[11])
  return {statuses, leases}
end
local cargs = {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]}
for i = 12, #ARGV do cargs[i - 6] = ARGV[i] end
local statuses = complete_part(cargs)
if tonumber(ARGV[6]) <= 0 then return {statuses, {}} end
CYCLE_STATUSES = statuses
return {statuses, claim_part(ARGV)}
