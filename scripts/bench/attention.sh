#!/usr/bin/env bash
# kgen's forward attention (kernels.Attention, mma.sync FlashAttention-2) against torch SDPA
# (cuDNN, flash, efficient) on one H100/H200, in one device call, FA3's protocol: batch x
# seqlen = 16k tokens, hidden 2048 (heads = 2048 / d), bf16:
#
#   bash scripts/bench/attention.sh BINDIR     # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/gpubench
# ./bench/gpubench. Per (head dim, causal): gpubench times kgen and checks 64 sampled rows of O
# and LSE against float64, writes the inputs to /tmp, torch_attention.py times each SDPA
# backend on them and compares every output with a float32 reference; the directory is then
# removed (about 1.6 GB each). DIMS (default "64 128"), SEQS (default
# 512,1024,2048,4096,8192,16384), CAUSAL (default "0 1"), DTYPE (default bf16) and REPS
# (default 20) override; KERNEL (auto, sm90 or fa2; default auto: sm90 on an H100/H200) picks
# gpubench's kernel and ATTN_FLAGS adds gpubench flags (e.g. "-overlap=false -pingpong=false");
# logs go to $OUT (default /tmp/attn).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: attention.sh BINDIR}" && pwd)
out=${OUT:-/tmp/attn}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
seqs=${SEQS:-512,1024,2048,4096,8192,16384}
reps=${REPS:-20}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
for d in ${DIMS:-64 128}; do
	for c in ${CAUSAL:-0 1}; do
		name=d${d}_c${c}
		dir=/tmp/attn-$name
		rm -rf "$dir"; mkdir -p "$dir"
		flags=(-tokens 16384 -h $((2048 / d)) -d "$d" -s "$seqs" -dtype "${DTYPE:-bf16}" -reps "$reps" -dir "$dir" -kernel "${KERNEL:-auto}")
		# shellcheck disable=SC2206
		flags+=(${ATTN_FLAGS:-})
		[ "$c" = 1 ] && flags+=(-causal)
		echo "== gpubench attention ${flags[*]}" | tee -a "$out/$name.log"
		timeout 300 "$bin/gpubench" attention "${flags[@]}" 2>&1 | tee -a "$out/$name.log" || status=1
		timeout 600 "$py" "$here/torch_attention.py" "$dir" "$reps" 2>&1 | tee -a "$out/$name.log" || status=1
		rm -rf "$dir"
	done
done
exit $status
