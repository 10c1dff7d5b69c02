#!/usr/bin/env bash
# GEMM epilogues (issue 25) on one H100/H200, in one device call:
#
#   bash scripts/bench/gemm_epi.sh BINDIR     # BINDIR holds a cuda-tagged gpubench
#
# Build BINDIR here: eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -o BINDIR/gpubench
# ./bench/gpubench. Steps, each under `timeout`:
# 1) correctness at odd shapes: gemm_sm90 (kernels.GemmSM90For's pick, and with the TMA store)
#    and the mma.sync gemm with bias+silu, bias+gelu+residual and relu, each D compared whole
#    with the float64 epilogue by torch_gemm.py; stops on a failure;
# 2) the 9 LLM shapes of docs/bench.md (SIZES overrides), gemm_sm90 as GemmSM90For picks, with
#    bias+silu and with residual (EPILOGUES overrides: space-separated option lists), each beside
#    the plain gemm (kgen, same call) and torch's matmul + bias + silu (+ residual) eager and
#    with addmm, on the same inputs, compared element by element;
# 3) `gpubench mlp`: the MLP block H = SiLU(X*W1 + b1), Y = H*W2 + X (bf16, hidden 4096, ff
#    14336, 128/1024/8192 tokens), timed and checked on samples against float64 (step "mlp").
# 4) "ab" (not by default): the table's shapes with AB_EPILOGUE (default bias,silu) beside the
#    plain gemm, by this BINDIR's gpubench and then by BASE's (a gpubench built at the commit
#    to compare with), no torch: a markdown table of both plain/epilogue ratios per shape.
#    STEPS="odd ab" BASE=BASEDIR bash scripts/bench/gemm_epi.sh BINDIR (about 2 minutes on an H100).
# The torch lines end with a markdown table; logs go to $OUT. STEPS (default "odd table mlp")
# picks steps.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: gemm_epi.sh BINDIR}" && pwd)
out=${OUT:-/tmp/gemmepi}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
sizes=${SIZES:-128x4096x4096,128x14336x4096,128x4096x14336,1024x4096x4096,1024x14336x4096,1024x4096x14336,8192x4096x4096,8192x14336x4096,8192x4096x14336}
epilogues=${EPILOGUES:-bias,silu residual}
steps=${STEPS:-odd table mlp}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
status=0
# step NAME SECONDS gpubench-gemm-flags...: kgen's side, then torch_gemm.py on its directory.
step() {
	local name=$1 limit=$2; shift 2
	local dir=/tmp/gemmepi-$name
	rm -rf "$dir"; mkdir -p "$dir"
	echo "== $name: gpubench gemm $*"
	timeout "$limit" "$bin/gpubench" gemm -dir "$dir" "$@" 2>&1 | tee "$out/$name.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: $name (kgen side)"; status=1; rm -rf "$dir"; return; }
	timeout "$limit" "$py" "$here/torch_gemm.py" "$dir" 20 2>&1 | tee "$out/$name-torch.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: $name (torch side)"; status=1; }
	rm -rf "$dir"
}
odd=200x136x72,257x520x304,1000x1032x1016
if [[ " $steps " == *" odd "* ]]; then
	step odd-silu 120 -sm90 -epilogue bias,silu -sizes $odd -reps 3
	step odd-gelu-res 120 -sm90 -epilogue bias,gelu,residual -sizes $odd -reps 3
	step odd-store 120 -sm90 -sm90-tma-store -epilogue bias,silu,residual -sizes $odd -reps 3
	step odd-relu 120 -sm90 -sm90-tma-store=false -epilogue relu -sizes $odd -reps 3
	step odd-mma 120 -epilogue bias,silu,residual -sizes 200x136x72,257x520x304,1000x1032x1016 -reps 3
	[ "$status" = 0 ] || { echo "status $status (stopped after the odd shapes)"; exit $status; }
fi
if [[ " $steps " == *" table "* ]]; then
	for e in $epilogues; do
		step "table-${e//,/-}" 420 -sm90 -epilogue "$e" -sizes "$sizes" -reps 20
	done
fi
if [[ " $steps " == *" ab "* ]]; then
	[ -n "${BASE:-}" ] || { echo "step ab needs BASE: a directory with a gpubench built at the commit to compare"; exit 2; }
	base=$(cd "$BASE" && pwd)
	for who in new base; do
		b=$bin
		[ "$who" = base ] && b=$base
		echo "== ab-$who: $b/gpubench gemm -sm90 -epilogue ${AB_EPILOGUE:-bias,silu}"
		timeout 300 "$b/gpubench" gemm -sm90 -epilogue "${AB_EPILOGUE:-bias,silu}" -sizes "$sizes" -reps "${AB_REPS:-20}" 2>&1 | tee "$out/ab-$who.txt"
		[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: ab-$who"; status=1; }
	done
	# gemm MxNxK bf16 +bias+silu: kgen E us ...; plain P us: plain/epilogue speed R; ...
	awk 'function grab(line, who,   s, e, p, r) {
			s = line; sub(/^gemm /, "", s); sub(/ .*/, "", s)
			e = line; sub(/.*: kgen +/, "", e); sub(/ us.*/, "", e)
			p = line; sub(/.*; plain +/, "", p); sub(/ us.*/, "", p)
			r = line; sub(/.*plain\/epilogue speed /, "", r); sub(/;.*/, "", r)
			if (!(s in seen)) { seen[s] = 1; order[++n] = s }
			v[s, who] = p " | " e " | " r
		}
		FNR == 1 { who = FILENAME ~ /ab-base/ ? "base" : "new" }
		/plain\/epilogue speed/ { grab($0, who) }
		END {
			print "| M x N x K | new plain us | new epilogue us | new plain/epilogue | base plain us | base epilogue us | base plain/epilogue |"
			print "|---|---|---|---|---|---|---|"
			for (i = 1; i <= n; i++) print "| " order[i] " | " v[order[i], "new"] " | " v[order[i], "base"] " |"
		}' "$out/ab-new.txt" "$out/ab-base.txt" | tee "$out/ab.md"
fi
if [[ " $steps " == *" mlp "* ]]; then
	echo "== mlp: gpubench mlp"
	timeout 300 "$bin/gpubench" mlp -tokens 128,1024,8192 -hidden 4096 -ff 14336 -reps 20 2>&1 | tee "$out/mlp.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: mlp"; status=1; }
fi
echo "status $status"
exit $status
