#!/usr/bin/env bash
# gemm_sm90 (issue 15) against cuBLAS on one H100/H200, in one device call:
#
#   bash scripts/bench/gemm_sm90.sh BINDIR     # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/gpubench
# ./bench/gpubench (docs/bench.md, "GEMM on sm_90a"). Steps, each under `timeout`:
# 1) correctness at odd shapes (edges in M, N, K): kernels.GemmSM90For's pick with the whole D
#    compared with torch.matmul, every candidate configuration with gpubench's sampled check
#    against float64 sums; stops on a failure;
# 2) the issue's shapes M in {128, 1024, 8192} x (N, K) in {(4096, 4096), (14336, 4096),
#    (4096, 14336)} and 8192^3 with GemmSM90For's pick, each timed against cuBLAS in this call
#    (torch_gemm.py) and compared element by element;
# 3) every candidate configuration at those shapes, kgen timing only (step "sweep");
# 4) e4m3 (B N x K, bf16 out) against torch._scaled_mm: odd shapes (step "odd8", stops on a
#    failure), FP8SIZES (default 4096,8192) with GemmSM90For's pick (step "fp8"), and every
#    candidate at FP8SIZES (step "sweep8");
# then gemm_sm90_table.py's table. Inputs/outputs go to /tmp (hundreds of MB); logs to $OUT.
# SIZES overrides step 2's shapes; STEPS (default "odd table sweep odd8 fp8 sweep8") picks
# steps.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: gemm_sm90.sh BINDIR}" && pwd)
out=${OUT:-/tmp/gemmsm90}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
sizes=${SIZES:-8192,128x4096x4096,128x14336x4096,128x4096x14336,1024x4096x4096,1024x14336x4096,1024x4096x14336,8192x4096x4096,8192x14336x4096,8192x4096x14336}
fp8sizes=${FP8SIZES:-4096,8192}
steps=${STEPS:-odd table sweep odd8 fp8 sweep8}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
# step NAME SECONDS TORCH(0|1) gpubench-gemm-flags...: with TORCH=1 the inputs and D go to a
# directory that torch_gemm.py reads (cuBLAS timing and the whole-D comparison).
step() {
	local name=$1 limit=$2 torch=$3; shift 3
	local dir=/tmp/gemmsm90-$name
	rm -rf "$dir"; mkdir -p "$dir"
	local dirflag=()
	[ "$torch" = 1 ] && dirflag=(-dir "$dir")
	echo "== $name: gpubench gemm $*"
	timeout "$limit" "$bin/gpubench" gemm "${dirflag[@]}" "$@" 2>&1 | tee "$out/$name.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: $name (kgen side)"; status=1; rm -rf "$dir"; return; }
	if [ "$torch" = 1 ]; then
		timeout "$limit" "$py" "$here/torch_gemm.py" "$dir" 20 2>&1 | tee "$out/$name-torch.txt"
		[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: $name (torch side)"; status=1; }
	fi
	rm -rf "$dir"
}
cands=("-sm90-consumers 2 -sm90-bn 256 -sm90-stages 4" "-sm90-consumers 2 -sm90-bn 256 -sm90-stages 3"
	"-sm90-consumers 2 -sm90-bn 128 -sm90-stages 7" "-sm90-consumers 1 -sm90-bn 256 -sm90-stages 5"
	"-sm90-consumers 1 -sm90-bn 128 -sm90-stages 8" "-sm90-consumers 1 -sm90-bn 64 -sm90-stages 8")
odd=64x8x16,200x136x72,257x520x304,1000x1032x1016
if [[ " $steps " == *" odd "* ]]; then
	step odd 90 1 -sm90 -sizes $odd -reps 3
	step odd-f16 60 1 -sm90 -dtype f16 -sizes 200x136x72,257x520x304 -reps 3
	i=0
	for c in "${cands[@]}"; do
		# shellcheck disable=SC2086
		step "odd-c$i" 60 0 -sm90 $c -sizes $odd -reps 3
		i=$((i + 1))
	done
	# A kernel that hangs or computes wrong here would waste the rest of the call: stop.
	[ "$status" = 0 ] || { echo "status $status (stopped after the odd shapes)"; exit $status; }
fi
if [[ " $steps " == *" table "* ]]; then
	step table 300 1 -sm90 -sizes "$sizes" -reps 20
fi
if [[ " $steps " == *" sweep "* ]]; then
	i=0
	for c in "${cands[@]}"; do
		# shellcheck disable=SC2086
		step "sweep-c$i" 120 0 -sm90 $c -sizes "$sizes" -reps 20
		i=$((i + 1))
	done
fi
if [[ " $steps " == *" odd8 "* ]]; then
	# torch._scaled_mm takes K and N multiples of 16 only: the odd shapes it checks have
	# such K and N (M odd); 64x8x16 and 200x136x80 get gpubench's sampled check.
	step odd8 90 1 -sm90 -dtype e4m3 -sizes 200x144x80,257x528x304,1000x1040x1024 -reps 3
	step odd8-sampled 60 0 -sm90 -dtype e4m3 -sizes 64x8x16,200x136x80 -reps 3
	i=0
	for c in "${cands[@]}"; do
		# shellcheck disable=SC2086
		step "odd8-c$i" 60 0 -sm90 -dtype e4m3 $c -sizes 64x8x16,200x136x80,1000x1032x1024 -reps 3
		i=$((i + 1))
	done
	[ "$status" = 0 ] || { echo "status $status (stopped after the e4m3 odd shapes)"; exit $status; }
fi
if [[ " $steps " == *" fp8 "* ]]; then
	step table8 150 1 -sm90 -dtype e4m3 -sizes "$fp8sizes" -reps 20
fi
if [[ " $steps " == *" sweep8 "* ]]; then
	i=0
	for c in "${cands[@]}"; do
		# shellcheck disable=SC2086
		step "sweep8-c$i" 90 0 -sm90 -dtype e4m3 $c -sizes "$fp8sizes" -reps 20
		i=$((i + 1))
	done
fi
"$py" "$here/gemm_sm90_table.py" "$out" | tee "$out/table.md"
echo "status $status"
exit $status
