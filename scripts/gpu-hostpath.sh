#!/usr/bin/env bash
# Host-path measurements on one GPU (issue 17): a kernel calling 5 NVSHMEM functions loaded
# with an empty and a warm cache, the 169-function NVSHMEM acceptance module linked cold,
# each through per-function relocatable objects (nvshmem/devlib BuildEach) and through the
# devlib PTX, and the host time per launch replayed from a CUDA graph (bench/hostpath).
#
#   bash scripts/gpu-hostpath.sh        here (no GPU): builds bench/hostpath with the cuda tag
#                                       and the device libraries into $DEST (default
#                                       .dev/hostpath of this checkout), prints the device command
#   bash scripts/gpu-hostpath.sh paths  prints the folders it would use, builds nothing
#   bash scripts/gpu-hostpath.sh run    on the GPU machine, from the repository root
#
# Every path comes from the script's own location (its checkout's root) or the environment
# (DEST, KGEN_TOOLS, default the checkout's .tools), never from the machine it was written on.
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
dest=${DEST:-$root/.dev/hostpath}
export KGEN_TOOLS=${KGEN_TOOLS:-$root/.tools}
case "${1:-}" in
  paths|--dry-run)
    echo "root=$root"; echo "dest=$dest"; echo "KGEN_TOOLS=$KGEN_TOOLS"; exit 0 ;;
  -h|--help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
  "") ;;
  *) echo "gpu-hostpath.sh: unknown argument '$1' (run, paths, --help)" >&2; exit 2 ;;
esac
mkdir -p "$dest"
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
rel=${dest#"$root"/}
cat <<MSG
Built $dest. Run on one GPU (device tool, carry ["$rel"]):
  bash $rel/gpu-hostpath.sh run
MSG
