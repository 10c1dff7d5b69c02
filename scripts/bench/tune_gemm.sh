#!/usr/bin/env bash
# The autotuner's acceptance (issue 25) on one H100/H200, in one device call:
#
#   bash scripts/bench/tune_gemm.sh BINDIR     # BINDIR holds a cuda-tagged kgen
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/kgen
# ./cmd/kgen. Two processes on a fresh cache folder ($KGEN_TUNE_DIR):
# 1) `kgen tune gemm -shapes llm -check -verify`: for each of docs/bench.md's nine LLM shapes
#    (bf16), every gemm_sm90 candidate is checked against float64 sums on a sample of D,
#    timed (median of 15 after 2 warm-ups), the fastest cached; then every candidate is timed
#    again beside the winner, and the run fails when winner/best is over 1.03 on any shape;
# 2) `kgen tune gemm -shapes llm`: a second process must print "cached winner" for all nine
#    shapes and time nothing.
# Logs and the cache entries go to $OUT. The exit status is 0 only when both hold.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
bin=$(cd "${1:?usage: tune_gemm.sh BINDIR}" && pwd)
out=${OUT:-/tmp/tune-gemm}
mkdir -p "$out"
KGEN_TUNE_DIR=$(mktemp -d)
export KGEN_TUNE_DIR
chmod 700 "$KGEN_TUNE_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
timeout 480 "$bin/kgen" tune gemm -shapes llm -check -verify --backend cuda 2>&1 | tee "$out/tune.txt"
s=${PIPESTATUS[0]}
[ "$s" = 0 ] || { echo "tune_gemm: the tuning run exited $s"; status=1; }
timeout 60 "$bin/kgen" tune gemm -shapes llm --backend cuda 2>&1 | tee "$out/cached.txt"
s=${PIPESTATUS[0]}
[ "$s" = 0 ] || { echo "tune_gemm: the cached run exited $s"; status=1; }
cached=$(grep -c "cached winner" "$out/cached.txt")
timed=$(grep -c " us " "$out/cached.txt")
echo "tune_gemm: second process: $cached of 9 shapes from the cache, $timed timings"
[ "$cached" = 9 ] && [ "$timed" = 0 ] || status=1
grep "verify .*: winner" "$out/tune.txt" | tee "$out/verify.txt"
cp "$KGEN_TUNE_DIR"/*.json "$out/" 2>/dev/null
exit $status
