#!/usr/bin/env bash
# Runs on a GPU machine (device tool), from any folder, after
# scripts/bench/build_collbench.sh built .gpu/kgen and .gpu/collbench in the repository root: NCCL's all-reduce
# through torch.distributed and kgen's all-reduce algorithms in the same call, on every GPU of
# the machine (or NGPU), multicast off, timed two ways (the median of single calls between
# events, and back-to-back loops as nccl-tests time them), then the joined tables.
set -euo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-4294967296}
ngpu=${NGPU:-$(nvidia-smi -L | wc -l)}
out=${OUT:-/tmp/collbench}
mkdir -p "$out"
out=$(cd "$out" && pwd) # $OUT as given from the caller's folder, before the cd below
cd "$(dirname "$0")/../.." # the repository root, wherever this is called from
nvidia-smi --query-gpu=index,name --format=csv,noheader
nccl() { NGPU=$ngpu bash scripts/bench/run_nccl.sh --json "$@" 2>>"$out/nccl.err" || { tail -20 "$out/nccl.err"; exit 1; }; }
kgen() { ./.gpu/kgen launch -n "$ngpu" --backend cuda -- ./.gpu/collbench -inplace "$@" 2>>"$out/kgen.err" || { tail -30 "$out/kgen.err"; exit 1; }; }
nccl >"$out/nccl-call.jsonl"
nccl --loop >"$out/nccl-loop.jsonl"
kgen >"$out/kgen-call.jsonl"
kgen -loop >"$out/kgen-loop.jsonl"
for b in ${BLOCKS:-64}; do kgen -loop -blocks "$b" -min-bytes 1048576 -algs oneshot,twoshot >>"$out/kgen-loop.jsonl"; done
for m in call loop; do
  echo "== all-reduce f32 on $ngpu GPUs, $m timing: slowest rank's time (us); ratio < 1: kgen is faster"
  python3 scripts/bench/join.py "$out/nccl-$m.jsonl" "$out/kgen-$m.jsonl" --markdown | tee "$out/table-${ngpu}gpu-$m.md"
done
