#!/usr/bin/env bash
# The fused-GEMM benchmark in one device call, on NGPU GPUs (default: every GPU; NGPU=1 runs
# on one): `gpubench fused -json` on every rank (started by `kgen launch --backend cuda`:
# ag_gemm, gemm_rs, gemm_ar vs kgen's unfused pair and plain gemm), then torch_fused.py under
# torchrun (NCCL + cuBLAS in sequence, and cuBLAS alone), then fused_join.py's table. Multicast
# off. Logs, JSON lines and table.md go to $OUT.
#
#   bash fused_bench.sh BINDIR [gpubench fused flags...]   # BINDIR holds kgen and gpubench
#
# Build BINDIR here (docs/bench.md, "Fused GEMMs"); SIZES (default
# 4096,8192,8192x4096x14336) goes to both sides.
set -euo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-8589934592}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: fused_bench.sh BINDIR [gpubench fused flags...]}" && pwd)
shift
ngpu=${NGPU:-$(nvidia-smi -L | wc -l)}
sizes=${SIZES:-4096,8192,8192x4096x14336}
out=${OUT:-/tmp/fusedbench}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader
status=0
"$bin/kgen" launch -n "$ngpu" --backend cuda -- "$bin/gpubench" fused -json -sizes "$sizes" "$@" \
  >"$out/kgen-$ngpu.jsonl" 2>"$out/kgen-$ngpu.err" || { status=1; tail -30 "$out/kgen-$ngpu.err"; }
"$py" -m torch.distributed.run --standalone --nproc-per-node="$ngpu" "$here/torch_fused.py" --sizes "$sizes" \
  >"$out/torch-$ngpu.jsonl" 2>"$out/torch-$ngpu.err" || { status=1; tail -30 "$out/torch-$ngpu.err"; }
echo "== fused GEMMs on $ngpu GPU(s), bf16: slowest rank's median (us); ratio < 1: fused is faster"
"$py" "$here/fused_join.py" "$out/kgen-$ngpu.jsonl" "$out/torch-$ngpu.jsonl" | tee "$out/table-${ngpu}gpu.md"
exit $status
