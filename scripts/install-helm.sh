#!/usr/bin/env bash
# Installs a pinned helm from the Go module proxy (the only place helm can come
# from on machines without Docker or outside downloads) and prints its path.
# The build takes about 3 minutes on 2 cores, so the binary is cached in
# $HELM_BIN_DIR (default $(go env GOPATH)/bin, which outlives a clone) under a versioned name and reused.
#
#   scripts/install-helm.sh            build or reuse, print the path of helm
#
# HELM_VERSION overrides the pinned version (the chart is tested with it).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${HELM_VERSION:-v3.22.0}
bin_dir=${HELM_BIN_DIR:-$(go env GOPATH)/bin}
bin=$bin_dir/helm-$version

if [ ! -x "$bin" ]; then
  mkdir -p "$bin_dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "install-helm: building helm $version with go install (about 3 minutes, once)" >&2
  # CGO off: a static binary, and no C toolchain in the build.
  CGO_ENABLED=0 GOBIN="$tmp" go install "helm.sh/helm/v3/cmd/helm@$version" >&2
  mv "$tmp/helm" "$bin"
fi
echo "$bin"
