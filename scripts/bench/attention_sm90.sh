#!/usr/bin/env bash
# kgen's sm_90a attention (kernels.AttentionSM90) with each FlashAttention-3 overlap on and
# off, beside the FA2 kernel, in one device call on an H100/H200 (FA3's protocol: batch x
# seqlen = 16k tokens, hidden 2048, bf16). Each run checks 64 sampled rows against float64.
#
#   bash scripts/bench/attention_sm90.sh BINDIR   # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here (the device machines have no Go):
#   eval "$(bash scripts/cuda-headers.sh)"
#   go build -tags cuda -o BINDIR/gpubench ./bench/gpubench
#   go test -c -tags cuda -o BINDIR/kernels.test ./kernels   # optional: the correctness test
# When BINDIR/kernels.test exists, TestGPUAttentionSM90 (every variant against float64 at
# b 2, s 1024, h 16 and odd shapes) runs first.
#
# DIMS (default "64 128 256"), SEQS (default 1024,4096,16384), CAUSAL (default "0 1") and
# REPS (default 20) override; logs go to $OUT (default /tmp/attn_sm90).
set -uo pipefail
bin=$(cd "${1:?usage: attention_sm90.sh BINDIR}" && pwd)
out=${OUT:-/tmp/attn_sm90}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
status=0
if [ -x "$bin/kernels.test" ]; then
	(cd "$(dirname "$0")/../../kernels" && KGEN_REQUIRE_GPU=1 timeout 540 "$bin/kernels.test" -test.run 'TestGPUAttentionSM90' -test.v -test.timeout 9m) 2>&1 | tee "$out/gpu_test.log" | grep -E '^(---|    ---|ok|FAIL|PASS)' || status=1
	grep -q '^PASS' "$out/gpu_test.log" || status=1
fi
for d in ${DIMS:-64 128 256}; do
	for c in ${CAUSAL:-0 1}; do
		base=(-tokens 16384 -h $((2048 / d)) -d "$d" -s "${SEQS:-1024,4096,16384}" -reps "${REPS:-20}")
		[ "$c" = 1 ] && base+=(-causal)
		for v in "fa2" "sm90 -overlap=false -pingpong=false" "sm90 -overlap=true -pingpong=false" "sm90 -overlap=false -pingpong=true" "sm90 -overlap=true -pingpong=true"; do
			read -r -a kv <<<"$v"
			echo "== d $d causal $c: -kernel ${kv[*]}" | tee -a "$out/d${d}_c${c}.log"
			timeout 300 "$bin/gpubench" attention "${base[@]}" -kernel "${kv[@]}" 2>&1 | tee -a "$out/d${d}_c${c}.log" || status=1
		done
	done
done
exit $status
