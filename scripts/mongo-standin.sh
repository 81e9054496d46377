#!/usr/bin/env bash
# The MongoDB stand-in for local runs: a private PostgreSQL cluster and FerretDB v1
# (tools/ferretdb) in front of it, speaking the MongoDB wire protocol. These machines have
# no MongoDB server package and no Docker engine; see docs/mongo-standin.md.
#
#   scripts/mongo-standin.sh [run] [options]   start both, print the URI, stop both on Ctrl-C/SIGTERM
#   scripts/mongo-standin.sh build             only build (or reuse) the FerretDB binary; prints its path
#
# Options (and environment):
#   --port N       FerretDB port on 127.0.0.1          (MONGO_STANDIN_PORT, 27017)
#   --pg-port N    PostgreSQL port on 127.0.0.1        (MONGO_STANDIN_PG_PORT, 54329)
#   --data-dir D   PostgreSQL data directory           (MONGO_STANDIN_DATA_DIR, .local/pg)
#   --log-dir D    where the two logs go               (MONGO_STANDIN_LOG_DIR, .local/logs)
#   --bin-dir D    FerretDB binary cache               (MONGO_STANDIN_BIN_DIR, .local/bin)
#
# The binary is .local/bin/ferretdb-<hash of tools/ferretdb sources> (plus a symlink
# .local/bin/ferretdb); it is rebuilt only when those sources change. internal/mongotest uses
# the same cache. The first build takes several minutes.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmd=run
port=${MONGO_STANDIN_PORT:-27017}
pg_port=${MONGO_STANDIN_PG_PORT:-54329}
data_dir=${MONGO_STANDIN_DATA_DIR:-$repo/.local/pg}
log_dir=${MONGO_STANDIN_LOG_DIR:-$repo/.local/logs}
bin_dir=${MONGO_STANDIN_BIN_DIR:-$repo/.local/bin}

die() { echo "mongo-standin: $*" >&2; exit 1; }
usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case $1 in
    run|build) cmd=$1 ;;
    --port) port=${2:?}; shift ;;
    --pg-port) pg_port=${2:?}; shift ;;
    --data-dir) data_dir=${2:?}; shift ;;
    --log-dir) log_dir=${2:?}; shift ;;
    --bin-dir) bin_dir=${2:?}; shift ;;
    --port=*) port=${1#*=} ;;
    --pg-port=*) pg_port=${1#*=} ;;
    --data-dir=*) data_dir=${1#*=} ;;
    --log-dir=*) log_dir=${1#*=} ;;
    --bin-dir=*) bin_dir=${1#*=} ;;
    -h|--help|help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

# ferretdb_bin builds tools/ferretdb into the cache unless a binary for the current sources
# is there, and prints its path. The key must match internal/mongotest's (sha256 of go.mod,
# go.sum and the *.go files in byte order, first 16 hex digits).
ferretdb_bin() {
  local src=$repo/tools/ferretdb key bin tmp
  [ -f "$src/go.mod" ] || die "missing $src/go.mod"
  key=$(cd "$src" && cat go.mod go.sum $(LC_ALL=C ls -- *.go) | sha256sum | cut -c1-16)
  bin=$bin_dir/ferretdb-$key
  mkdir -p "$bin_dir"
  if [ ! -x "$bin" ]; then
    # One build at a time (tests take the same lock).
    exec 9>"$bin_dir/.ferretdb-build.lock"
    flock 9
    if [ ! -x "$bin" ]; then
      echo "mongo-standin: building FerretDB into $bin (the first build takes several minutes)" >&2
      tmp=$bin.tmp.$$
      (cd "$src" && go build -trimpath -tags ferretdb_no_sqlite -o "$tmp" .) || { rm -f "$tmp"; die "FerretDB build failed"; }
      mv -f "$tmp" "$bin"
      # Drop binaries built from older sources.
      find "$bin_dir" -maxdepth 1 -name 'ferretdb-*' ! -name "ferretdb-$key" ! -name '*.lock' -type f -delete
    fi
    exec 9>&-
  fi
  ln -sfn "ferretdb-$key" "$bin_dir/ferretdb"
  echo "$bin"
}

if [ "$cmd" = build ]; then
  ferretdb_bin
  exit 0
fi

# PostgreSQL binaries: PATH first (the image links them into /usr/local/bin), then Debian's.
pg_bin=""
if command -v initdb >/dev/null && command -v postgres >/dev/null; then
  pg_bin=$(dirname "$(command -v postgres)")
else
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { pg_bin=$d; break; }
  done
fi
[ -n "$pg_bin" ] || die "PostgreSQL not found (apt-get install -y postgresql)"

# initdb and postgres refuse to run as root: use the postgres system user then. setpriv
# execs in place, so $! below is the server's own pid.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id -u postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' user (apt-get install -y postgresql)"
  command -v setpriv >/dev/null || die "running as root needs setpriv (util-linux)"
  as_pg=(setpriv --reuid=postgres --regid=postgres --clear-groups --)
fi

bin=$(ferretdb_bin)
mkdir -p "$data_dir" "$log_dir"
data_dir=$(cd "$data_dir" && pwd)
if [ ${#as_pg[@]} -gt 0 ]; then
  chown postgres: "$data_dir"
  "${as_pg[@]}" test -x "$data_dir" ||
    die "the postgres user cannot reach $data_dir (a parent directory is not world-searchable); use --data-dir under /tmp"
fi
chmod 700 "$data_dir"

if [ ! -f "$data_dir/PG_VERSION" ]; then
  echo "mongo-standin: initdb $data_dir"
  "${as_pg[@]}" "$pg_bin/initdb" -D "$data_dir" -U postgres --auth=trust -E UTF8 --no-locale --no-sync \
    >"$log_dir/initdb.log" 2>&1 || { cat "$log_dir/initdb.log" >&2; die "initdb failed"; }
fi
if [ -f "$data_dir/postmaster.pid" ] && kill -0 "$(head -1 "$data_dir/postmaster.pid")" 2>/dev/null; then
  die "a PostgreSQL server (pid $(head -1 "$data_dir/postmaster.pid")) already runs on $data_dir"
fi

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_busy "$pg_port" && die "127.0.0.1:$pg_port is already in use; pick another with --pg-port"
port_busy "$port" && die "127.0.0.1:$port is already in use; pick another with --port"

pg_pid="" fdb_pid=""
stop() {
  trap - INT TERM EXIT
  # Only the two processes started below, FerretDB first, then a fast PostgreSQL shutdown.
  if [ -n "$fdb_pid" ] && kill -0 "$fdb_pid" 2>/dev/null; then kill -TERM "$fdb_pid" 2>/dev/null || true; wait "$fdb_pid" 2>/dev/null || true; fi
  if [ -n "$pg_pid" ] && kill -0 "$pg_pid" 2>/dev/null; then kill -INT "$pg_pid" 2>/dev/null || true; wait "$pg_pid" 2>/dev/null || true; fi
  echo "mongo-standin: stopped"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_until() { # description, pid that must stay alive, log, command… (up to 60 s)
  local what=$1 pid=$2 log=$3; shift 3
  local deadline=$((SECONDS + 60))
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$log" >&2; die "$what exited; log: $log"; }
    [ $SECONDS -lt $deadline ] || { tail -20 "$log" >&2; die "timed out waiting for $what; log: $log"; }
    sleep 0.1
  done
}

"${as_pg[@]}" "$pg_bin/postgres" -D "$data_dir" -p "$pg_port" \
  -c listen_addresses=127.0.0.1 -c unix_socket_directories= \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
  >>"$log_dir/postgresql.log" 2>&1 &
pg_pid=$!
# Ready when our postmaster's pid file says so (what pg_ctl -w checks).
pg_ready() {
  [ "$(sed -n 1p "$data_dir/postmaster.pid" 2>/dev/null)" = "$pg_pid" ] &&
    [ "$(sed -n 8p "$data_dir/postmaster.pid" 2>/dev/null | tr -d ' ')" = ready ]
}
wait_until "PostgreSQL" "$pg_pid" "$log_dir/postgresql.log" pg_ready

pg_url="postgres://postgres@127.0.0.1:$pg_port/postgres"
"$bin" -listen "127.0.0.1:$port" -postgresql-url "$pg_url" >>"$log_dir/ferretdb.log" 2>&1 &
fdb_pid=$!
wait_until "FerretDB" "$fdb_pid" "$log_dir/ferretdb.log" port_busy "$port"

cat <<EOF
mongo-standin: ready: mongodb://127.0.0.1:$port/
  FerretDB    pid $fdb_pid on 127.0.0.1:$port ($bin), log $log_dir/ferretdb.log
  PostgreSQL  pid $pg_pid on 127.0.0.1:$pg_port, data $data_dir, log $log_dir/postgresql.log
Ctrl-C (or SIGTERM) stops both.
EOF

# Run until a signal arrives or one of the two exits; either way the EXIT trap stops the other.
set +e
wait -n "$pg_pid" "$fdb_pid"
status=$?
echo "mongo-standin: a server exited (status $status); see $log_dir" >&2
exit 1
