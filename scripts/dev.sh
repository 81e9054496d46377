#!/usr/bin/env bash
# The whole Sundial stack on one machine, for trying it out and for local
# development: a private Redis, the MongoDB stand-in (FerretDB on
# PostgreSQL), the API (with its live page), a poller and two workers.
# State lives in .local/ and survives restarts. Ctrl-C stops everything
# this script started (and nothing else).
#
# Knobs (environment): SUNDIAL_DEV_REDIS_PORT (6390), SUNDIAL_DEV_MONGO_PORT
# (27027), SUNDIAL_HTTP_ADDR (127.0.0.1:8080), SUNDIAL_DEV_NO_MONGO=1 to run
# without history, plus every SUNDIAL_* variable of docs/configuration.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state="$root/.local"
mkdir -p "$state/bin" "$state/redis" "$state/logs"

redis_port=${SUNDIAL_DEV_REDIS_PORT:-6390}
mongo_port=${SUNDIAL_DEV_MONGO_PORT:-27027}
export SUNDIAL_HTTP_ADDR=${SUNDIAL_HTTP_ADDR:-127.0.0.1:8080}

say() { printf '\033[1m%s\033[0m\n' "$*"; }

# A fresh Debian machine lacks redis-server (and maybe PostgreSQL).
if ! command -v redis-server >/dev/null; then
  say "installing redis-server (apt)"
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi

say "building binaries into .local/bin"
pkgs=(./services/api ./services/worker ./services/poller)
[ -d cmd/sundial ] && pkgs+=(./cmd/sundial)
go build -o "$state/bin/" "${pkgs[@]}"

pids=()      # everything started, in order
stage1=()    # API and workers: stopped first, and waited for (they report outcomes)
stage2=()    # poller (writes the history of what stage 1 reported)
stage3=()    # the MongoDB stand-in; Redis is stopped last of all
redis_pid=""
stop_wait() { # pids…: SIGTERM, then wait for each to exit
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
}
cleanup() {
  # A second INT or TERM must not cut the stop short (make passes its own
  # signal on to this script, and Ctrl-C may come twice): ignore them from
  # here on, or the parts started with setsid would be left running.
  trap '' INT TERM
  trap - EXIT
  say "stopping: API and workers, then the poller, then MongoDB, then Redis"
  stop_wait "${stage1[@]}"
  stop_wait "${stage2[@]}"
  stop_wait "${stage3[@]}"
  [ -n "$redis_pid" ] && stop_wait "$redis_pid"
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

start() { # stage (1, 2, 3 or redis), name, command…
  local stage=$1 name=$2; shift 2
  # setsid: a terminal's Ctrl-C goes to this script only, which then stops
  # the parts in order (a shared process group would stop them all at once).
  setsid "$@" >>"$state/logs/$name.log" 2>&1 &
  pids+=($!)
  case $stage in
    1) stage1+=($!) ;; 2) stage2+=($!) ;; 3) stage3+=($!) ;; redis) redis_pid=$! ;;
  esac
  echo "  $name (pid $!, log .local/logs/$name.log)"
}

wait_for() { # description, command… (up to 60 s)
  local what=$1; shift
  for _ in $(seq 1 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for $what; see .local/logs/" >&2
  exit 1
}

say "starting Redis on 127.0.0.1:$redis_port"
start redis redis redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$state/redis" \
  --appendonly yes --appendfsync everysec --save "" --hash-max-listpack-value 1024
wait_for "Redis" redis-cli -p "$redis_port" ping
export SUNDIAL_REDIS_URL="redis://127.0.0.1:$redis_port/0"

if [ "${SUNDIAL_DEV_NO_MONGO:-}" != 1 ] && [ -f scripts/mongo-standin.sh ]; then
  if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    say "installing postgresql (apt)"
    SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
    $SUDO apt-get update -qq && $SUDO DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  # The stand-in starts in the background: its first build takes about five
  # minutes, and the queue does not need it — the API answers at once, the
  # poller's history writer catches up when MongoDB comes (events wait in
  # Redis meanwhile), and /readyz says history is down until then.
  say "starting the MongoDB stand-in (FerretDB on PostgreSQL) on 127.0.0.1:$mongo_port in the background"
  start 3 mongo bash scripts/mongo-standin.sh --port "$mongo_port"
  export SUNDIAL_MONGO_URI="mongodb://127.0.0.1:$mongo_port"
else
  say "running without MongoDB history (SUNDIAL_DEV_NO_MONGO=1 or no stand-in)"
  export SUNDIAL_MONGO_URI="${SUNDIAL_MONGO_URI:-mongodb://127.0.0.1:$mongo_port}"
fi

say "starting the API, a poller and two workers"
start 1 api "$state/bin/api"
SUNDIAL_METRICS_ADDR=127.0.0.1:9091 start 2 poller "$state/bin/poller"
SUNDIAL_WORKER_ID="$(hostname)-worker-1" SUNDIAL_METRICS_ADDR=127.0.0.1:9092 start 1 worker-1 "$state/bin/worker"
SUNDIAL_WORKER_ID="$(hostname)-worker-2" SUNDIAL_METRICS_ADDR=127.0.0.1:9093 start 1 worker-2 "$state/bin/worker"
wait_for "the API" bash -c "exec 3<>/dev/tcp/${SUNDIAL_HTTP_ADDR%:*}/${SUNDIAL_HTTP_ADDR##*:}"
history_note=""
if [ ${#stage3[@]} -gt 0 ] && ! bash -c "exec 3<>/dev/tcp/127.0.0.1/$mongo_port" 2>/dev/null; then
  history_note="  History:  the MongoDB stand-in is still starting (its first build takes ~5 min; .local/logs/mongo.log);
            jobs run meanwhile and their history is written when it is up."
fi

cat <<MSG

$(say "Sundial is running: http://$SUNDIAL_HTTP_ADDR/  (live page)")
  API:      http://$SUNDIAL_HTTP_ADDR/v1/   (OpenAPI: /v1/openapi.json, metrics: /metrics)
  CLI:      .local/bin/sundial queues
  Try:      curl -s -XPOST http://$SUNDIAL_HTTP_ADDR/v1/jobs -H 'Content-Type: application/json' \\
              -d '{"type":"sundial.echo","payload":{"hello":"world"}}'
  Metrics:  poller http://127.0.0.1:9091/metrics, workers :9092 and :9093
$history_note
  Logs:     .local/logs/
Press Ctrl-C to stop.
MSG
# Exit (and stop the rest) when any part dies.
wait -n "${pids[@]}"
say "a process exited; see .local/logs/"
