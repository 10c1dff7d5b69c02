#!/usr/bin/env bash
# The library benchmark in one device call: `gpubench lib -sweep` (kgen's kernels, checked,
# then timed) and torch_lib.py (PyTorch's equivalents, then the joined table) on GPU 0, one
# after the other in the same call. Logs and the table go to $OUT.
#
#   bash run_lib.sh GPUBENCH_BINARY [gpubench lib flags...]
#
# Build the binary here with the cuda tag (docs/bench.md), carry it with this folder.
set -euo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: run_lib.sh GPUBENCH_BINARY [flags]}
shift
out=${OUT:-/tmp/gpubench-lib}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
"$bin" lib -sweep "$@" | tee "$out/kgen.tsv"
"$py" "$here/torch_lib.py" "$out/kgen.tsv" | tee "$out/table.md"
