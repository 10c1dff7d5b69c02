#!/usr/bin/env bash
# kgen's grouped GEMM for MoE experts (ops.GroupedMatmul: gemm_sm90_grouped) against
# torch._grouped_mm and a loop of torch.matmul on one H100/H200, in one device call:
#
#   bash scripts/bench/grouped.sh BINDIR     # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/gpubench
# ./bench/gpubench. Runs 8 experts x 4096 rows at each SHAPES entry KxN (default the layer's
# gate/up projection 7168x4096 and its down projection 2048x7168), for each dtype in DTYPES
# (bf16; e4m3 with row and per-expert column scales, bf16 out) and each skew in SKEWS (0:
# equal counts; 0.5: random counts of the same total). gpubench times every configuration
# of VARIANTS (bf16) or E4M3_VARIANTS on the same inputs, each checked on 64 sampled outputs
# against float64 (D cleared before each), and the same-flop dense ops.Matmul (DENSE=0 drops
# it); torch_grouped.py then times torch._grouped_mm / torch._scaled_grouped_mm and a
# per-expert loop on the same shape and prints every variant against the best torch path.
# A variant is pick (GemmSM90GroupedFor's) or BMxBN:<stages>s[:tma][:band<b>] (tma: the
# TMA-store epilogue; band<b>: bands of b row tiles, m fastest; neither: row tile by row
# tile, the kernel before the TMA store). EXPERTS (8), ROWS (4096), REPS (30) override; logs
# go to $OUT (default /tmp/grouped). About 25 s per (shape, dtype, skew) on an H100: the
# defaults (2 shapes x 2 dtypes, skew 0) take under 2 minutes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: grouped.sh BINDIR}" && pwd)
out=${OUT:-/tmp/grouped}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
reps=${REPS:-30}
variants=${VARIANTS:-pick,128x256:3s,128x256:3s:tma,128x256:3s:band8,128x256:3s:tma:band8,128x256:3s:tma:band4,128x256:3s:tma:band16,128x128:5s:tma:band8}
variants8=${E4M3_VARIANTS:-pick,128x256:3s,128x256:3s:tma:band8}
dense=()
if [ "${DENSE:-1}" != 0 ]; then dense=(-dense); fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
for shape in ${SHAPES:-7168x4096 2048x7168}; do
	k=${shape%x*} n=${shape#*x}
	for dt in ${DTYPES:-bf16 e4m3}; do
		v=$variants
		if [ "$dt" = e4m3 ]; then v=$variants8; fi
		for skew in ${SKEWS:-0}; do
			dir=/tmp/grouped-$dt-$shape-skew$skew
			rm -rf "$dir"; mkdir -p "$dir"
			flags=(-groups "${EXPERTS:-8}" -rows "${ROWS:-4096}" -n "$n" -k "$k" -dtype "$dt" -skew "$skew" -reps "$reps" -dir "$dir" -variants "$v" "${dense[@]}")
			echo "== gpubench grouped ${flags[*]}" | tee -a "$out/grouped.log"
			timeout 150 "$bin/gpubench" grouped "${flags[@]}" 2>&1 | tee -a "$out/grouped.log" || status=1
			timeout 120 "$py" "$here/torch_grouped.py" "$dir" "$reps" 2>&1 | tee -a "$out/grouped.log" || status=1
			rm -rf "$dir"
		done
	done
done
exit $status
