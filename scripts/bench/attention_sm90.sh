#!/usr/bin/env bash
# kgen's sm_90a attention (kernels.AttentionSM90): the library's default, each FlashAttention-3
# overlap alone and both, the default of an earlier build (BASE) and torch SDPA (cuDNN, flash,
# efficient) in one device call on an H100/H200, FA3's protocol (batch x seqlen = 16k tokens,
# hidden 2048, bf16). gpubench checks 64 sampled rows of O and LSE of every kgen run against
# float64; torch_attention.py checks the default's O against float32 and every backend's.
#
#   bash scripts/bench/attention_sm90.sh -build BINDIR [BASE_REF]   # here: builds BINDIR
#   bash scripts/bench/attention_sm90.sh BINDIR                     # on the device machine
#
# -build (this machine; the device machines have no Go) writes BINDIR/gpubench from the
# working tree and BINDIR/gpubench.base from git ref BASE_REF (default f5b90cb: branch varlen, the
# attention before the overlap fixes of issue 27). Each is about 14 MB. Optional:
#   go test -c -tags cuda -o BINDIR/kernels.test ./kernels   # TestGPUAttentionSM90 first
#
# The lead's call: build here with `bash scripts/bench/attention_sm90.sh -build bin/attn`, then
# on the device (carry bin/attn): `bash scripts/bench/attention_sm90.sh bin/attn`. One variant
# under Nsight Compute (the 4th launch: after gpubench's warm-ups):
#   ncu -k regex:attention_sm90 -s 3 -c 1 --set full -o /tmp/attn_ov_pp bin/attn/gpubench \
#     attention -kernel sm90 -tokens 16384 -h 16 -d 128 -s 16384 -reps 3
#
# DIMS (default "64 128 256"), SEQS (default 2048,16384), CAUSAL (default "0 1"), REPS
# (default 20) and TORCH (default 1; 0 skips torch) override; logs go to $OUT (default
# /tmp/attn_sm90); the table of TFLOP/s is $OUT/summary.txt. About 4 minutes as defaulted.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = -build ]; then
	bin=${2:?usage: attention_sm90.sh -build BINDIR [BASE_REF]}
	ref=${3:-f5b90cb}
	root=$(cd "$here/../.." && pwd)
	mkdir -p "$bin" && bin=$(cd "$bin" && pwd)
	eval "$(bash "$root/scripts/cuda-headers.sh")" || exit 1
	(cd "$root" && go build -tags cuda -o "$bin/gpubench" ./bench/gpubench) || exit 1
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	git -C "$root" archive "$ref" | tar -x -C "$src" || exit 1
	(cd "$src" && go build -tags cuda -o "$bin/gpubench.base" ./bench/gpubench) || exit 1
	echo "built $bin/gpubench (working tree) and $bin/gpubench.base ($ref $(git -C "$root" rev-parse --short "$ref"))"
	exit 0
fi
bin=$(cd "${1:?usage: attention_sm90.sh BINDIR (or -build BINDIR [BASE_REF])}" && pwd)
out=${OUT:-/tmp/attn_sm90}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
status=0
if [ -x "$bin/kernels.test" ]; then
	(cd "$here/../../kernels" && KGEN_REQUIRE_GPU=1 timeout 540 "$bin/kernels.test" -test.run 'TestGPUAttentionSM90' -test.v -test.timeout 9m) 2>&1 | tee "$out/gpu_test.log" | grep -E '^(---|    ---|ok|FAIL|PASS)' || status=1
	grep -q '^PASS' "$out/gpu_test.log" || status=1
fi
: >"$out/summary.txt"
for d in ${DIMS:-64 128 256}; do
	for c in ${CAUSAL:-0 1}; do
		log=$out/d${d}_c${c}.log
		base=(-kernel sm90 -tokens 16384 -h $((2048 / d)) -d "$d" -s "${SEQS:-2048,16384}" -reps "${REPS:-20}")
		[ "$c" = 1 ] && base+=(-causal)
		# The library default first (its inputs go to torch), then the other overlap settings.
		runs=("default" "-overlap=true -pingpong=false" "-overlap=false -pingpong=true" "-overlap=true -pingpong=true")
		if [ "$d" -le 128 ]; then unset 'runs[3]'; else unset 'runs[1]'; fi # the default's twin
		[ -x "$bin/gpubench.base" ] && runs+=("base")
		dir=/tmp/attn_sm90-d${d}_c${c}
		for v in "${runs[@]}"; do
			exe=$bin/gpubench flags=()
			case $v in
			default) [ "${TORCH:-1}" = 1 ] && rm -rf "$dir" && mkdir -p "$dir" && flags=(-dir "$dir") ;;
			base) exe=$bin/gpubench.base flags=(-overlap=false -pingpong=true) ;; # its default (its flags default to both on)
			*) read -r -a flags <<<"$v" ;;
			esac
			echo "== d $d causal $c: $v" | tee -a "$log"
			timeout 240 "$exe" attention "${base[@]}" "${flags[@]}" 2>&1 | tee -a "$log" | tee /dev/stderr |
				sed -nE "s/^device: .*kernel ([^,]*),.*/\1/p; s/^attention .* s ([0-9]+) d .*causal (true|false): kgen +[0-9.]+ us +([0-9.]+) TFLOP\/s.*/\1 \3/p" |
				awk -v v="$v" -v d="$d" -v c="$c" 'NR == 1 { k = $0; next } { printf "d %-3s causal %s s %-5s %-32s %-52s %6.1f TFLOP/s\n", d, c, $1, v, k, $2 }' >>"$out/summary.txt"
			[ "${PIPESTATUS[0]}" = 0 ] || status=1
		done
		if [ "${TORCH:-1}" = 1 ]; then
			timeout 300 "$py" "$here/torch_attention.py" "$dir" "${REPS:-20}" 2>&1 | tee -a "$log" | tee -a "$out/summary.txt" || status=1
			rm -rf "$dir"
		fi
	done
done
echo "== summary (kgen TFLOP/s; torch rows: kgen default vs each SDPA backend)"
cat "$out/summary.txt"
exit $status
