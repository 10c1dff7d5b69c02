#!/usr/bin/env bash
# NVSHMEM acceptance test on real GPUs: every device operation of package nvshmem at every
# scope (p/g, put/get and their _nbi forms, put_signal(_nbi), signal_op/fetch/wait_until,
# quiet, fence, every AMO on every type, barrier_all/sync_all/barrier/team_sync, reduce of
# every op, fcollect, broadcast, alltoall, queries, nvshmem_ptr, nvshmemx_mc_ptr) plus the
# library's NVSHMEM kernels, checked on every PE (package nvshmem/gputest).
#
#   bash scripts/gpu-nvshmem.sh        here (no GPU): builds .gpu/nvshmem/ (the cuda-tagged
#                                      program, the NVSHMEM device library it links, a copy
#                                      of libnvshmem_device.a), checks the same cases on the
#                                      emulator, and prints the one device command
#   bash scripts/gpu-nvshmem.sh run    on the GPU machine (2 GPUs): runs 2 ranks
#
# The device command (device tool, kind nvidia-h200-x2, carry [".gpu/nvshmem"]):
#   bash scripts/gpu-nvshmem.sh run
# It always sets NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# (nvshmemx_mc_ptr then returns NULL, which the test expects) and never creates multicast
# objects.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=.gpu/nvshmem

if [ "${1:-}" = "run" ]; then
  export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  export KGEN_CACHE_DIR="${KGEN_CACHE_DIR:-$(mktemp -d)}"
  if [ ! -x "$out/nvshmem-gputest" ]; then
    echo "gpu-nvshmem: $out/nvshmem-gputest is missing: run bash scripts/gpu-nvshmem.sh here first and carry $out" >&2
    exit 1
  fi
  nvidia-smi -L || true
  exec "$out/nvshmem-gputest" -ranks "${RANKS:-2}" -devlib "$out/devlib"
fi

mkdir -p "$out" "$(git rev-parse --git-dir)/info"
excl="$(git rev-parse --git-dir)/info/exclude"
grep -qx "/.gpu/" "$excl" 2>/dev/null || echo "/.gpu/" >>"$excl"

bash scripts/tools.sh >/dev/null
# The device library for exactly the functions the cases call (LLVM 19 + the NVSHMEM wheel).
CGO_ENABLED=0 go run ./nvshmem/gputest/cmd/nvshmem-gputest -devlib "$out/devlib"
# Link the cases' module with it offline (ptxas -c + nvlink, about 2 minutes): what the GPU's
# JIT linker does, so a prototype mismatch shows here, not on the GPU.
CGO_ENABLED=0 go run ./nvshmem/gputest/cmd/nvshmem-gputest -link -devlib "$out/devlib"
# The same cases on the emulator, with 2 and 4 PEs.
CGO_ENABLED=0 go run ./nvshmem/gputest/cmd/nvshmem-gputest -emu 2 | tail -1
CGO_ENABLED=0 go run ./nvshmem/gputest/cmd/nvshmem-gputest -emu 4 | tail -1
# The GPU program (cuda tag; CUDA 12 headers from PyPI, libcuda loaded at run time).
eval "$(bash scripts/cuda-headers.sh)"
go build -tags cuda -o "$out/nvshmem-gputest" ./nvshmem/gputest/cmd/nvshmem-gputest
du -sh "$out" >&2
cat <<EOF
Built $out. Run on a machine with 2 GPUs (device tool: kind nvidia-h200-x2, carry [".gpu/nvshmem"]):
  bash scripts/gpu-nvshmem.sh run
EOF
