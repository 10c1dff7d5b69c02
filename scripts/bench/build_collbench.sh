#!/usr/bin/env bash
# Builds, here, what scripts/bench/device_collbench.sh runs on a GPU machine: .gpu/kgen (the
# CLI, for `kgen launch`) and .gpu/collbench (cuda-tagged). .gpu/ is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu
# .gitignore lists /.gpu/; the exclude line covers older checkouts (--git-path: a worktree's
# info/exclude is the common one).
excl="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$excl")"
grep -qx "/.gpu/" "$excl" 2>/dev/null || echo "/.gpu/" >>"$excl"
CGO_ENABLED=0 go build -o .gpu/kgen ./cmd/kgen
eval "$(bash scripts/cuda-headers.sh)"
go build -tags cuda -o .gpu/collbench ./bench/collbench
echo "built .gpu/kgen .gpu/collbench; run on the device: bash scripts/bench/coll_suite.sh (carry .gpu)" >&2
