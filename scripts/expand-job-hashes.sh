#!/usr/bin/env bash
# Writes back, on every compact job hash (storage format 4) of one Redis,
# the fields format 4 leaves out: id and queue (from the key), attempt 0,
# run_at = created_at, and the format's defaults (lua/lib.lua's
# JOB_DEFAULTS). A hash that has its id already is left alone, and a
# field a hash holds is never overwritten, so running it twice changes
# nothing. This is the step that lets a release reading formats 1 to 3 at
# most read the jobs again: docs/engine.md, "Storage format", "Rolling
# back". Stop every process of this release first.
#
#   scripts/expand-job-hashes.sh [redis-cli connection options]
#   scripts/expand-job-hashes.sh -h 127.0.0.1 -p 6379 -a secret
#
# In Redis Cluster, run it once against each master (SCAN is per node).
# It prints how many hashes it expanded.
set -euo pipefail

# One script per key; the key names the queue (its hash tag) and the id.
read -r -d '' EXPAND <<'LUA' || true
local k = KEYS[1]
if redis.call('HEXISTS', k, 'type') == 0 or redis.call('HEXISTS', k, 'id') == 1 then return 0 end
local q, id = string.match(k, '^sundial:job:{([^}]*)}:(.+)$')
if not q then return 0 end
redis.call('HSETNX', k, 'run_at', redis.call('HGET', k, 'created_at'))
local defaults = {attempt = '0', priority = 'normal', max_attempts = '3', timeout = '30',
  backoff_base = '5', backoff_max = '3600'}
for f, v in pairs(defaults) do redis.call('HSETNX', k, f, v) end
redis.call('HSET', k, 'id', id, 'queue', q)
return 1
LUA

sha=$(redis-cli "$@" SCRIPT LOAD "$EXPAND")
# One EVALSHA per job key, sent through one connection.
redis-cli "$@" --scan --pattern 'sundial:job:*' |
  awk -v sha="$sha" '{ print "EVALSHA " sha " 1 " $0 }' |
  redis-cli "$@" |
  awk '$1 == 1 { n++ } END { printf "expanded %d job hashes\n", n }'
