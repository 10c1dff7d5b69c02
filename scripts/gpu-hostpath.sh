#!/usr/bin/env bash
# Host-path measurements on one GPU (issue 17): a kernel calling 5 NVSHMEM functions loaded
# with an empty and a warm cache, the 169-function NVSHMEM acceptance module linked cold,
# each through per-function relocatable objects (nvshmem/devlib BuildEach) and through the
# devlib PTX, and the host time per launch replayed from a CUDA graph (bench/hostpath).
#
#   bash scripts/gpu-hostpath.sh        here (no GPU): builds bench/hostpath with the cuda tag
#                                       and the device libraries into /work/main-relative
#                                       $DEST (default .dev/hostpath), prints the device command
#   bash scripts/gpu-hostpath.sh run    on the GPU machine, from the repository root
#
# Device command (device tool, one GPU, carry [".dev/hostpath"]):
#   bash .dev/hostpath/gpu-hostpath.sh run
# Multicast stays off; logs go to $OUT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = "run" ]; then
  export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  out=${OUT:-/tmp/gpu-hostpath}
  mkdir -p "$out"
  nvidia-smi -L || true
  # NVSHMEM's host library: the wheel of the machine's PyTorch environment.
  for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nvshmem; do
    [ -d "$d/lib" ] && export NVSHMEM_HOME=$d
  done
  echo "NVSHMEM_HOME=${NVSHMEM_HOME:-unset}"
  rc=0
  lib=$(mktemp -d)
  tar -C "$lib" -xJf "$here/devlib.tar.xz"
  # Cold: the driver's own JIT cache off, so every link compiles.
  CUDA_CACHE_DISABLE=1 timeout "${LIMIT:-250}" "$here/hostpath" -devlib "$lib/devlib" 2>&1 | tee "$out/hostpath.log" || rc=$?
  grep -h TIMING "$out/hostpath.log" || true
  # The generated NVSHMEM launcher on the GPU, 1 PE, and against another version.
  KGEN_BACKEND=cuda KGEN_STARTUP=1 timeout 60 "$here/shmemput" 2>&1 | tee "$out/shmemput.log" || rc=$?
  echo "gpu-hostpath: exit $rc"
  exit "$rc"
fi

root=$(cd "$here/.." && pwd)
cd "$root"
dest=${DEST:-/work/main/.dev/hostpath}
mkdir -p "$dest"
export KGEN_TOOLS=${KGEN_TOOLS:-/work/main/.tools}
# The device libraries (LLVM 19, ptxas; per-function units come from the devlib cache).
rm -rf "$dest/devlib" "$dest/devlib.tar.xz"
CGO_ENABLED=0 go run ./bench/hostpath -prepare "$dest/devlib"
tar -C "$dest" -cJf "$dest/devlib.tar.xz" devlib && rm -rf "$dest/devlib"
eval "$(bash scripts/cuda-headers.sh)"
go build -tags cuda -ldflags="-s -w" -o "$dest/hostpath" ./bench/hostpath
# A generated package whose kernel calls NVSHMEM (gen's test), built with the cuda tag.
go test ./gen -count=1 -run TestGeneratedNVSHMEMLauncher -args -nvshmem-cuda-out "$dest/shmemput"
cp scripts/gpu-hostpath.sh "$dest/gpu-hostpath.sh"
du -sh "$dest" >&2
cat <<MSG
Built $dest. Run on one GPU (device tool, carry [".dev/hostpath"]):
  bash .dev/hostpath/gpu-hostpath.sh run
MSG
