#!/usr/bin/env bash
# Fused GEMMs at the Llama-3-70B TP shapes not run before (M 1024 and 16384), with 100
# back-to-back calls of every implementation checked after the last (-soak 100).
#   BIN=DIR NG=4 bash scripts/bench/fused_tp.sh   (TP=4 shapes; NG=2: TP=2 shapes)
# DIR holds kgen and a cuda-tagged gpubench (see fused_bench.sh); AG and RS override the sizes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${BIN:-.gpu}" && pwd) || exit 2
NG=${NG:-4}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_SYMMETRIC_SIZE=8589934592
O=${OUT:-/tmp/o}/f$NG; mkdir -p $O
py=python3; [ -x /opt/torch/.venv/bin/python ] && py=/opt/torch/.venv/bin/python
nvidia-smi -L > $O/gpus.txt
run() { # name ngpu ops sizes
  timeout 280 "$bin/kgen" launch -n $2 --backend cuda --timeout 270s -- "$bin/gpubench" fused -json -sm90 -reps 10 -soak 100 -ops $3 -sizes $4 > $O/kgen-$1.jsonl 2> $O/kgen-$1.err; echo "$1 kgen rc $?" >> $O/rc.txt
  timeout 200 $py -m torch.distributed.run --standalone --nproc-per-node=$2 "$here/torch_fused.py" --ops $3 --sizes $4 > $O/torch-$1.jsonl 2> $O/torch-$1.err; echo "$1 torch rc $?" >> $O/rc.txt
  $py "$here/fused_join.py" $O/kgen-$1.jsonl $O/torch-$1.jsonl > $O/table-$1.md 2>&1
}
if [ "$NG" = 4 ]; then
  run ag $NG ag_gemm ${AG:-1024x14336x8192,16384x14336x8192}
  run rsar $NG gemm_rs,gemm_ar ${RS:-1024x8192x7168,16384x8192x7168}
else
  run ag $NG ag_gemm ${AG:-1024x28672x8192,16384x28672x8192}
  run rsar $NG gemm_rs,gemm_ar ${RS:-1024x8192x14336,16384x8192x14336}
fi
grep -h "^soak" $O/kgen-*.err | sort | uniq -c | head -40 > $O/soak.txt
cat $O/rc.txt; cat $O/table-*.md
