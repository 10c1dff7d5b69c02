#!/usr/bin/env bash
# kgen's paged-KV decode attention (ops.AttentionDecode: kernels.AttentionDecode + combine)
# against torch SDPA on the gathered K/V and flash_attn_with_kvcache (when importable) on one
# H100/H200, in one device call:
#
#   bash scripts/bench/decode.sh BINDIR     # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/gpubench
# ./bench/gpubench. For each (qLen, d): gpubench decode times kgen and checks 32 sampled rows
# against float64, writes the inputs to /tmp, torch_decode.py times torch on them and compares
# every output with a float32 reference; the directory is then removed. Llama-3-8B-like heads
# (32 query heads over 8 kv heads) by default. BATCHES (default 1,16,64), CTXS (default
# 1024,8192,32768), QLENS (default "1 4"), DIMS (default 128), PAGE (default 16), HEADS (32),
# KVHEADS (8), DTYPE (bf16), REPS (50) and MAXGB (4.5: larger K/V caches are skipped) override;
# EXTRA adds gpubench decode flags (an A/B: EXTRA="-splits 3", EXTRA="-prefetch -stages 2");
# logs go to $OUT (default /tmp/decode). One qLen takes up to ~9 minutes: within a 10-minute
# device call, run QLENS=1 and QLENS=4 as two calls.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: decode.sh BINDIR}" && pwd)
out=${OUT:-/tmp/decode}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
reps=${REPS:-50}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
for q in ${QLENS:-1 4}; do
	for d in ${DIMS:-128}; do
		name=q${q}_d${d}
		dir=/tmp/decode-$name
		rm -rf "$dir"; mkdir -p "$dir"
		flags=(-b "${BATCHES:-1,16,64}" -ctx "${CTXS:-1024,8192,32768}" -q "$q" -h "${HEADS:-32}" -hkv "${KVHEADS:-8}"
			-d "$d" -page "${PAGE:-16}" -dtype "${DTYPE:-bf16}" -reps "$reps" -max-gb "${MAXGB:-4.5}" -dir "$dir")
		read -r -a extra <<< "${EXTRA:-}"
		flags+=(${extra[@]+"${extra[@]}"})
		echo "== gpubench decode ${flags[*]}" | tee -a "$out/$name.log"
		timeout 250 "$bin/gpubench" decode "${flags[@]}" 2>&1 | tee -a "$out/$name.log" || status=1
		timeout 280 "$py" "$here/torch_decode.py" "$dir" "$reps" 2>&1 | tee -a "$out/$name.log" || status=1
		rm -rf "$dir"
	done
done
exit $status
