#!/usr/bin/env bash
# kgen's grouped GEMM for MoE experts (ops.GroupedMatmul: gemm_sm90_grouped) against
# torch._grouped_mm and a loop of torch.matmul on one H100/H200, in one device call:
#
#   bash scripts/bench/grouped.sh BINDIR     # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/gpubench
# ./bench/gpubench. Runs 8 experts x 4096 rows, K 7168 -> N 4096, bf16 and e4m3 (row and
# per-expert column scales, bf16 out), each with equal counts and with -skew 0.5 (random
# counts of the same total): gpubench checks 64 sampled outputs against float64,
# torch_grouped.py times torch._grouped_mm / torch._scaled_grouped_mm and a per-expert loop
# on the same shape. EXPERTS (8), ROWS (4096), N (4096), K (7168), DTYPES ("bf16 e4m3"),
# SKEWS ("0 0.5"), REPS (30) override; logs go to $OUT (default /tmp/grouped). About 1-2
# minutes per (dtype, skew) on an H100: within one 10-minute device call.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: grouped.sh BINDIR}" && pwd)
out=${OUT:-/tmp/grouped}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
reps=${REPS:-30}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
for dt in ${DTYPES:-bf16 e4m3}; do
	for skew in ${SKEWS:-0 0.5}; do
		dir=/tmp/grouped-$dt-skew$skew
		rm -rf "$dir"; mkdir -p "$dir"
		flags=(-groups "${EXPERTS:-8}" -rows "${ROWS:-4096}" -n "${N:-4096}" -k "${K:-7168}" -dtype "$dt" -skew "$skew" -reps "$reps" -dir "$dir")
		echo "== gpubench grouped ${flags[*]}" | tee -a "$out/grouped.log"
		timeout 120 "$bin/gpubench" grouped "${flags[@]}" 2>&1 | tee -a "$out/grouped.log" || status=1
		timeout 120 "$py" "$here/torch_grouped.py" "$dir" "$reps" 2>&1 | tee -a "$out/grouped.log" || status=1
		rm -rf "$dir"
	done
done
exit $status
