#!/usr/bin/env bash
# Makes `go build -tags cuda` work on a machine without CUDA (no GPU, no toolkit, no driver).
#
# gorgonia.org/cu, the GPU backend of package jit, compiles against cuda.h from CUDA <= 12.x
# (CUDA 13's header breaks it) and links -lcuda. This script installs, into the git-ignored
# tool folder ($KGEN_TOOLS, default .tools):
#   .tools/cuda12/include/cuda.h   from the PyPI wheel nvidia-cuda-runtime-cu12 ($CUDA12_RUNTIME)
#   .tools/cuda12/lib/libcuda.a    an empty archive: jit/internal/cudrv defines every cu* symbol
#                                  itself (trampolines into a dlopen'ed libcuda.so.1), so the
#                                  binary carries no link-time dependency on the driver.
# and prints the environment to build with. Typical use:
#   eval "$(bash scripts/cuda-headers.sh)" && go build -tags cuda ./...
# Idempotent: a stamp records what is installed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="${KGEN_TOOLS:-$root/.tools}"
CUDA12_RUNTIME="${CUDA12_RUNTIME:-12.8.90}"
dir="$tools/cuda12"
stamp="$dir/.kgen-stamp"
want="nvidia-cuda-runtime-cu12==$CUDA12_RUNTIME"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "cuda-headers: installing $want into $dir" >&2
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  python3 -m pip install --disable-pip-version-check --no-warn-script-location -q --no-deps \
    --target "$dir.tmp/py" "$want" >&2
  mkdir -p "$dir.tmp/lib"
  ln -s py/nvidia/cuda_runtime/include "$dir.tmp/include"
  test -f "$dir.tmp/include/cuda.h" || { echo "cuda-headers: the wheel has no include/cuda.h" >&2; exit 1; }
  # An archive with no members: -lcuda resolves, adds nothing, and records no DT_NEEDED.
  ar rc "$dir.tmp/lib/libcuda.a"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "$want" >"$stamp"
fi

v=$(grep -m1 '#define CUDA_VERSION' "$dir/include/cuda.h" | awk '{print $3}')
echo "cuda-headers: cuda.h of CUDA_VERSION $v in $dir/include" >&2
echo "export CGO_ENABLED=1"
echo "export CGO_CFLAGS='-I$dir/include -Wno-deprecated-declarations'"
echo "export CGO_LDFLAGS='-L$dir/lib'"
