#!/usr/bin/env bash
# What the tests need on a fresh Debian/Ubuntu machine, installed if
# missing: redis-server (+ redis-sentinel), PostgreSQL (for the MongoDB
# stand-in), Chromium (the dashboard's end-to-end run), Node.js and npm,
# Python 3 (the example HTTP worker; venv and pip for the Python SDK), the Go modules, the FerretDB stand-in
# binary, a pinned helm, promtool, and the dashboard's npm packages. make test runs it first (and .ci/run runs make
# test); it is quick when everything is there. Without root or passwordless
# sudo it installs nothing and fails naming what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "== $*"; }

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server redis-tools)
command -v redis-sentinel >/dev/null || need_apt+=(redis-sentinel)
if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi
# Debian's Chromium for the dashboard's end-to-end run (playwright-core drives it;
# Playwright cannot download its own browsers here).
[ -x /usr/bin/chromium ] || need_apt+=(chromium chromium-driver)
command -v node >/dev/null || need_apt+=(nodejs)
command -v python3 >/dev/null || need_apt+=(python3)   # examples/python_worker.py (internal/e2e), on sdk/python
command -v npm >/dev/null || need_apt+=(npm)
# promtool (Debian's prometheus package) checks and unit-tests the alert rules
# (deploy/prometheus, make test-deploy).
command -v promtool >/dev/null || need_apt+=(prometheus)
# The Python SDK's tests (make test-sdk) make a virtual environment and build sdk/python
# without a package index: Debian's python3 with venv and pip (the SDK builds with its own
# backend, no setuptools or wheel).
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null ||
  need_apt+=(python3-venv python3-pip)

if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      SUDO="sudo"
    else
      echo "install-deps: the tests need ${need_apt[*]}, and this user cannot install them." >&2
      echo "install-deps: run: sudo apt-get install ${need_apt[*]}   (then make test again)" >&2
      exit 1
    fi
  fi
  say "installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

say "go $(go version | awk '{print $3}'), $(redis-server --version | awk '{print $3}'), node $(node --version)"
go mod download

# The FerretDB stand-in, built once (its own module; cached after).
say "the MongoDB stand-in (FerretDB on PostgreSQL): $(bash scripts/mongo-standin.sh build)"

# helm for the chart checks of make test (test-deploy): no package exists, so a
# pinned version is built from the Go module proxy once (~3 min) and cached.
say "helm for the deploy checks: $(bash scripts/install-helm.sh)"
(cd tools/deploycheck && go mod download)

# The dashboard's npm packages, when web/package-lock.json changed since the
# last npm ci (make's web target keys on the same file).
if [ ! web/node_modules/.package-lock.json -nt web/package-lock.json ]; then
  say "npm ci in web/"
  (cd web && npm ci --no-audit --no-fund)
fi

# tools/grafanacheck's packages (@grafana/schema, typescript: the dashboards' type
# check in make test-deploy), when its lock file changed.
if [ ! tools/grafanacheck/node_modules/.package-lock.json -nt tools/grafanacheck/package-lock.json ]; then
  say "npm ci in tools/grafanacheck"
  (cd tools/grafanacheck && npm ci --no-audit --no-fund)
fi

# The TypeScript SDK's packages and build (sdk/typescript/dist), which
# examples/node_worker.mjs imports (internal/e2e runs it): npm ci when its lock
# file changed, tsc when a source is newer than the build.
if [ ! sdk/typescript/node_modules/.package-lock.json -nt sdk/typescript/package-lock.json ]; then
  say "npm ci in sdk/typescript"
  (cd sdk/typescript && npm ci --no-audit --no-fund)
fi
if [ ! -f sdk/typescript/dist/index.js ] || [ -n "$(find sdk/typescript/src sdk/typescript/tsconfig.json -newer sdk/typescript/dist/index.js -print -quit)" ]; then
  say "building the TypeScript SDK (sdk/typescript/dist)"
  (cd sdk/typescript && npm run --silent build)
fi
