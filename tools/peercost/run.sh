#!/usr/bin/env bash
# tools/peercost/run.sh [peercost flags, e.g. -n 100000 -submits 50000 -json]
#
# Redis memory per job and Redis time per single submit, Sundial beside
# asynq and BullMQ, each on a private loopback redis-server the tool starts
# and stops. Installs the BullMQ side (npm ci), builds the Go side (its own
# module: asynq never enters the main go.mod) and runs it; the report goes
# to stdout, progress to stderr. ~5-10 min with the defaults on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "peercost: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is required"
command -v node >/dev/null || die "node is required"
command -v npm >/dev/null || die "npm is required"
if ! command -v redis-server >/dev/null; then
	[ "$(id -u)" = 0 ] || die "redis-server is required (apt-get install redis-server)"
	echo "peercost: installing redis-server" >&2
	apt-get -o DPkg::Lock::Timeout=600 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq redis-server >/dev/null
fi
if [ ! -d "$here/node/node_modules/bullmq" ]; then
	echo "peercost: npm ci (bullmq, ioredis)" >&2
	(cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error)
fi
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd "$here" && GOWORK=off go build -o "$bin/peercost" .)
commit="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"$bin/peercost" -node-script "$here/node/bullmq.js" -commit "$commit" "$@"
