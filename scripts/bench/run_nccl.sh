#!/usr/bin/env bash
# Runs scripts/bench/nccl_allreduce.py on every GPU of this machine (one torchrun process per
# GPU), multicast off. Extra arguments go to the script, e.g.: run_nccl.sh --dtype bfloat16 --json
set -euo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
here=$(cd "$(dirname "$0")" && pwd)
ngpu=${NGPU:-$(nvidia-smi -L | wc -l)}
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
exec "$py" -m torch.distributed.run --standalone --nproc-per-node="$ngpu" "$here/nccl_allreduce.py" "$@"
