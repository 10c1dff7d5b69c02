#!/usr/bin/env bash
# Provisions the toolchain kgen's tests and CLI use, into a git-ignored folder.
# Idempotent: a stamp records what is installed, so a second run does nothing.
#   ptxas, nvlink   from the PyPI wheel nvidia-cuda-nvcc   ($NVCC_VERSION)
#   NVSHMEM         from the PyPI wheel nvidia-nvshmem-cu13 ($NVSHMEM_VERSION)
#   llc, llvm-*     from Debian's llvm-19 (apt, when root and missing)
#   staticcheck     from the Go module proxy ($STATICCHECK_VERSION), into $dir/bin (make lint)
#   nvJitLink, libNVVM  from the PyPI wheels nvidia-nvjitlink and nvidia-nvvm ($LTO_VERSION),
#                   into $dir/lto, for bench/ltolink (NVSHMEM's bitcode linked with LTO). Its own
#                   folder and stamp, so adding it reinstalls nothing else. Not 13.0.88: that
#                   nvJitLink refuses LTO-IR, even nvcc 13.0.88's, with NVJITLINK_ERROR_OUTDATED_LIBRARY
#                   ("ERROR 4 in nvvmAddNVVMContainerToProgram"); 13.5.37 links it.
# Users with a system CUDA toolkit and NVSHMEM set CUDA_HOME / NVSHMEM_HOME and need none of this.
# `tools.sh staticcheck` installs only staticcheck (what `make lint` needs).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="${KGEN_TOOLS:-$root/.tools}"
NVCC_VERSION="${NVCC_VERSION:-13.0.88}"
NVSHMEM_VERSION="${NVSHMEM_VERSION:-3.4.5}"
LLVM_VERSION=19
STATICCHECK_VERSION="${STATICCHECK_VERSION:-v0.8.2}"
LTO_VERSION="${LTO_VERSION:-13.5.37}"

mkdir -p "$dir"

# staticcheck: installed when missing or of another version (`staticcheck -version` prints it).
sc="$dir/bin/staticcheck"
if [ ! -x "$sc" ] || ! "$sc" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})"; then
  echo "tools: installing staticcheck $STATICCHECK_VERSION into $dir/bin" >&2
  GOBIN="$dir/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
[ "${1:-}" = staticcheck ] && exit 0

stamp="$dir/py/.kgen-stamp"
want="nvidia-cuda-nvcc==$NVCC_VERSION nvidia-nvshmem-cu13==$NVSHMEM_VERSION"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "tools: installing $want into $dir/py" >&2
  rm -rf "$dir/py.tmp"
  python3 -m pip install --disable-pip-version-check --no-warn-script-location -q \
    --target "$dir/py.tmp" $want
  rm -rf "$dir/py"
  mv "$dir/py.tmp" "$dir/py"
  echo "$want" >"$stamp"
fi

lto_stamp="$dir/lto/.kgen-stamp"
lto_want="nvidia-nvjitlink==$LTO_VERSION nvidia-nvvm==$LTO_VERSION"
if [ ! -f "$lto_stamp" ] || [ "$(cat "$lto_stamp")" != "$lto_want" ]; then
  echo "tools: installing $lto_want into $dir/lto" >&2
  rm -rf "$dir/lto.tmp"
  python3 -m pip install --disable-pip-version-check --no-warn-script-location -q --no-deps \
    --target "$dir/lto.tmp" $lto_want
  rm -rf "$dir/lto"
  mv "$dir/lto.tmp" "$dir/lto"
  echo "$lto_want" >"$lto_stamp"
fi

have_llvm() {
  command -v "llc-$LLVM_VERSION" >/dev/null 2>&1 && command -v "llvm-extract-$LLVM_VERSION" >/dev/null 2>&1 && return 0
  [ -x "/usr/lib/llvm-$LLVM_VERSION/bin/llc" ] && [ -x "/usr/lib/llvm-$LLVM_VERSION/bin/llvm-extract" ]
}
if ! have_llvm; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "tools: installing llvm-$LLVM_VERSION with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "llvm-$LLVM_VERSION" >/dev/null
  else
    echo "tools: llvm-$LLVM_VERSION is missing; install it (apt-get install llvm-$LLVM_VERSION) or put llc-$LLVM_VERSION on PATH" >&2
    exit 1
  fi
fi

"$dir/py/nvidia/cu13/bin/ptxas" --version | tail -1 >&2
