#!/usr/bin/env bash
# gemm_sm90's options (ClusterM 2 with B multicast; the TMA-store epilogue) against the
# plain kernel and cuBLAS on one H100/H200, in one device call:
#
#   bash scripts/bench/gemm_sm90_options.sh BINDIR   # BINDIR: a cuda-tagged gpubench and
#                                                    # torch_gemm.py beside this script
#
# 1) correctness at odd shapes for each option set (bf16: whole D against torch.matmul;
#    e4m3: whole D against the exact product where torch._scaled_mm takes the shape, the
#    sampled check elsewhere); stops on a failure;
# 2) the issue's shapes and 8192^3 (bf16; SIZES overrides), and e4m3 FP8SIZES: the plain
#    kernel (kernels.GemmSM90For's pick) against cuBLAS (torch_gemm.py, same call), then the
#    same picks with each option set, kgen timing only (gpubench's sampled check); clusters
#    also with the grid sized for 128 and 120 SMs (-sm90-grid-sms) at M = 8192.
# Logs go to $OUT: odd-*.txt, base.txt/base-torch.txt, opt-*.txt, and base8/opt8 for e4m3.
# STEPS (default "odd base opts grid fp8") picks steps; OPTS (default "c2 tmas c2tmas") the
# option sets.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: gemm_sm90_options.sh BINDIR}" && pwd)
out=${OUT:-/tmp/gemmsm90opts}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
sizes=${SIZES:-8192,128x4096x4096,128x14336x4096,128x4096x14336,1024x4096x4096,1024x14336x4096,1024x4096x14336,8192x4096x4096,8192x14336x4096,8192x4096x14336}
fp8sizes=${FP8SIZES:-4096,8192}
steps=${STEPS:-odd base opts grid fp8}
want=${OPTS:-c2 tmas c2tmas}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
step() { # step NAME SECONDS TORCH(0|1) gpubench-gemm-flags...
	local name=$1 limit=$2 torch=$3; shift 3
	local dir=/tmp/gemmsm90o-$name
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
opts=()
for o in "c2:-sm90-cluster 2 -sm90-tma-store=false" "tmas:-sm90-tma-store=true" "c2tmas:-sm90-cluster 2 -sm90-tma-store=true"; do
	[[ " $want " == *" ${o%%:*} "* ]] && opts+=("$o")
done
has() { [[ " $steps " == *" $1 "* ]]; }
has odd && for o in "${opts[@]}"; do
	# shellcheck disable=SC2086
	step "odd-${o%%:*}" 60 1 -sm90 ${o#*:} -sizes 64x8x16,200x136x72,257x520x304,1000x1032x1016 -reps 3
	# shellcheck disable=SC2086
	step "odd64-${o%%:*}" 60 0 -sm90 ${o#*:} -sm90-bn 64 -sm90-consumers 1 -sm90-stages 4 -sizes 200x136x72,257x520x304 -reps 3
	# shellcheck disable=SC2086
	step "odd8-${o%%:*}" 60 1 -sm90 -dtype e4m3 ${o#*:} -sizes 200x144x80,257x528x304 -reps 3
	# shellcheck disable=SC2086
	step "odd8s-${o%%:*}" 60 0 -sm90 -dtype e4m3 ${o#*:} -sizes 64x8x16,200x136x80 -reps 3
done
[ "$status" = 0 ] || { echo "status $status (stopped after the odd shapes)"; exit $status; }
has base && step base 150 1 -sm90 -sm90-tma-store=false -sizes "$sizes" -reps 20
has opts && for o in "${opts[@]}"; do
	# shellcheck disable=SC2086
	step "opt-${o%%:*}" 90 0 -sm90 ${o#*:} -sizes "$sizes" -reps 20
done
# Clusters need two free SMs of one GPC each: a grid sized for fewer SMs than the GPU has
# may run in one wave where the full one does not.
big=8192,8192x4096x4096,8192x14336x4096,8192x4096x14336
has grid && for g in 128 120; do
	step "opt-c2-g$g" 60 0 -sm90 -sm90-cluster 2 -sm90-tma-store=false -sm90-grid-sms $g -sizes "$big" -reps 20
done
has fp8 && step base8 60 1 -sm90 -dtype e4m3 -sm90-tma-store=false -sizes "$fp8sizes" -reps 20
has fp8 && for o in "${opts[@]}"; do
	# shellcheck disable=SC2086
	step "opt8-${o%%:*}" 40 0 -sm90 -dtype e4m3 ${o#*:} -sizes "$fp8sizes" -reps 20
done
echo "status $status"
exit $status
