#!/usr/bin/env bash
# Collectives on GPUs, in one device call, on every GPU of the machine (or NGPU), multicast
# off: the anchors (NCCL eager and in CUDA graphs, PyTorch symmetric memory in graphs;
# coll_anchors.py under torchrun), kgen's all-reduce algorithms, reduce-scatter and
# all-gather timed three ways (bench/collbench: loop, call, graph), a no-hang soak of
# every kgen operation, then the joined tables (coll_join.py). docs/bench.md, "Collectives
# on 2 and 4 GPUs (this round)", has the method.
#
#   scripts/bench/build_collbench.sh               # here: builds .gpu/kgen, .gpu/collbench
#   bash scripts/bench/coll_suite.sh               # on the GPU machine, from the repo root
#
# Knobs (environment):
#   PHASES   anchors kgen soak           which phases, in this order
#   OPS      lamport,oneshot,twoshot,push,auto,reducescatter,rs_push,allgather (and push8:
#            the general push kernel where push runs p2p_allreduce_push4)
#            (kgen's operations; the anchors run the ops among allreduce, reducescatter,
#            allgather that these cover)
#   DTYPES   f32,bf16
#   SIZES    4K,16K,64K,256K,1M,4M,16M,64M,256M   (bytes of the larger buffer, nccl-tests' way)
#   MODES    loop,call,graph             kgen's timing modes
#   ANCHORS  nccl_eager,nccl_graph,symm
#   ITERS 50, GRAPH_CALLS 50, GRAPH_CALLS_BIG 10 (above BIG_BYTES 4M), GRAPH_REPS 5
#   SOAK 1000 calls per size up to SOAK_BIG_BYTES (1M), SOAK_BIG 100 above; SOAK_MODES loop,graph
#   BUDGET 450 (s, the whole suite); ANCHORS_CAP 170, KGEN_CAP 240, SOAK_CAP 150 (s per
#   phase); KGEN_OP_LIMIT 75, SOAK_OP_LIMIT 50 (s per kgen launch: one operation;
#            expected 5-15 s each)
#   OUT /tmp/collsuite (anchors-N.jsonl kgen-N.jsonl soak-N.jsonl suite-N.log tables-N.md env-N.txt)
#   BIN .gpu, NGPU, PYTHON, BACKEND (cuda; emu runs the kgen phases on the emulator, for tests)
#
# Every step runs under a time limit (kgen launch --timeout, and `timeout` around it): a
# hang ends as a named failure ("HANG ...", with the last progress line of the step) and
# the suite goes on. The budget: each step gets at most what is left of its phase's cap
# and of BUDGET; a step with under 20 s left is skipped, and says so.
set -uo pipefail
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-8589934592}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.." || exit 2
t0=$(date +%s)
backend=${BACKEND:-cuda}
if [ -z "${NGPU:-}" ]; then
	ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
else
	ngpu=$NGPU
fi
[ "$ngpu" -ge 1 ] 2>/dev/null || { echo "coll_suite: no GPU found (set NGPU)"; exit 2; }
bin=$(cd "${BIN:-.gpu}" && pwd) || { echo "coll_suite: no ${BIN:-.gpu}: run scripts/bench/build_collbench.sh here and carry .gpu"; exit 2; }
out=${OUT:-/tmp/collsuite}
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
phases=${PHASES:-anchors kgen soak}
ops=${OPS:-lamport,oneshot,twoshot,push,auto,reducescatter,rs_push,allgather}
dtypes=${DTYPES:-f32,bf16}
sizes=${SIZES:-4K,16K,64K,256K,1M,4M,16M,64M,256M}
modes=${MODES:-loop,call,graph}
anchors=${ANCHORS:-nccl_eager,nccl_graph,symm}
iters=${ITERS:-50}
gcalls=${GRAPH_CALLS:-50}
gbig=${GRAPH_CALLS_BIG:-10}
bigb=${BIG_BYTES:-4M}
greps=${GRAPH_REPS:-5}
soak=${SOAK:-1000}
soakbig=${SOAK_BIG:-100}
soakbigb=${SOAK_BIG_BYTES:-1M}
soakmodes=${SOAK_MODES:-loop,graph}
budget=${BUDGET:-450}
deadline=$((t0 + budget))
A=$out/anchors-$ngpu.jsonl K=$out/kgen-$ngpu.jsonl S=$out/soak-$ngpu.jsonl L=$out/suite-$ngpu.log
: >"$A"; : >"$K"; : >"$S"; : >"$L"
work=$(mktemp -d /tmp/collsuite-work.XXXXXX)
failures=()

el() { echo $(($(date +%s) - t0)); }
say() { echo "[suite $(el)s] $*" | tee -a "$L"; }
bytes() { # 4K -> 4096
	local s=${1,,}
	s=${s%b}; s=${s%i}
	case $s in *k) echo $((${s%k} << 10)) ;; *m) echo $((${s%m} << 20)) ;; *g) echo $((${s%g} << 30)) ;; *) echo "$s" ;; esac
}
# limit CAP_END WANT: seconds a step may take (0: skip it).
limit() {
	local now left
	now=$(date +%s)
	left=$(($1 < deadline ? $1 - now : deadline - now))
	left=$((left - 10)) # kgen launch's grace and the tables
	[ "$left" -lt 20 ] && { echo 0; return; }
	echo $(($2 < left ? $2 : left))
}

{
	echo "date: $(date -u +%FT%TZ)  gpus: $ngpu  backend: $backend"
	echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null
	nvidia-smi topo -m 2>/dev/null
	echo "PHASES=$phases OPS=$ops DTYPES=$dtypes SIZES=$sizes MODES=$modes ANCHORS=$anchors ITERS=$iters"
	echo "GRAPH_CALLS=$gcalls GRAPH_CALLS_BIG=$gbig BIG_BYTES=$bigb GRAPH_REPS=$greps SOAK=$soak SOAK_BIG=$soakbig SOAK_BIG_BYTES=$soakbigb"
} >"$out/env-$ngpu.txt"
say "collectives suite: $ngpu GPU(s), phases: $phases; budget ${budget}s; files in $out"

# kgen STEPNAME LIMIT JSONL COLLBENCH-FLAGS...: one kgen launch under a time limit; its
# stdout (JSON lines) goes to JSONL, its stderr to the log; a failure or hang is named.
kgen() {
	local name=$1 lim=$2 dst=$3
	shift 3
	local err=$work/$name.err
	say "$name: start (limit ${lim}s)"
	timeout -s TERM -k 10 $((lim + 10)) "$bin/kgen" launch -n "$ngpu" --backend "$backend" --timeout "${lim}s" -- \
		"$bin/collbench" "$@" >>"$dst" 2>"$err"
	local rc=$?
	cat "$err" >>"$L"
	local last
	last=$(grep -a 'collbench .*s: ' "$err" | tail -1 | sed 's/^\[rank [0-9]*\] //')
	if [ $rc = 0 ]; then
		say "$name: ok"
		return 0
	fi
	# 124: kgen launch --timeout (or timeout) ended the ranks; 137/143: timeout killed it.
	local what=FAILED
	case $rc in 124 | 137 | 143) what=HANG ;; esac
	failures+=("$what $name (exit $rc); last progress: ${last:-none}")
	say "$what: $name (exit $rc); last progress: ${last:-none}"
	grep -av 'collbench .*s: ' "$err" | tail -8 | tee -a "$L"
	printf '{"impl":"kgen","step":"%s","%s":true,"rc":%d,"last":"%s"}\n' "$name" "$(echo $what | tr A-Z a-z)" "$rc" \
		"$(echo "${last:-none}" | tr -d '"\\')" >>"$dst"
	return 1
}

IFS=, read -r -a oplist <<<"$ops"
common=(-dtypes "$dtypes" -sizes "$sizes")

for phase in $phases; do
	case $phase in
	anchors)
		capend=$(($(date +%s) + ${ANCHORS_CAP:-170}))
		aops=()
		[[ ",$ops," =~ ,(lamport|oneshot|twoshot|push|push8|auto), ]] && aops+=(allreduce)
		[[ ",$ops," == *,reducescatter,* ]] && aops+=(reducescatter)
		[[ ",$ops," == *,allgather,* ]] && aops+=(allgather)
		lim=$(limit "$capend" 170)
		if [ ${#aops[@]} = 0 ]; then
			say "anchors: no op among OPS"
		elif [ "$lim" = 0 ]; then
			say "SKIPPED anchors (budget)"; failures+=("SKIPPED anchors (budget)")
		else
			say "anchors: torchrun coll_anchors.py ${aops[*]} (limit ${lim}s)"
			sizes_py=$sizes
			timeout -s TERM -k 10 "$lim" "$py" -m torch.distributed.run --standalone --nproc-per-node="$ngpu" \
				"$here/coll_anchors.py" --ops "$(IFS=,; echo "${aops[*]}")" --dtypes "$dtypes" --sizes "$sizes_py" \
				--anchors "$anchors" --iters "$iters" --graph-calls "$gcalls" --graph-calls-big "$gbig" \
				--big-bytes "$bigb" --graph-reps "$greps" >>"$A" 2>"$work/anchors.err"
			rc=$?
			cat "$work/anchors.err" >>"$L"
			last=$(grep -a '^anchors .*s: ' "$work/anchors.err" | tail -1)
			if [ $rc = 0 ]; then
				say "anchors: ok ($(grep -c time_us "$A") results, $(grep -c '"error"' "$A") errors)"
			else
				what=FAILED; [ $rc = 124 ] || [ $rc = 137 ] && what=HANG
				failures+=("$what anchors (exit $rc); last progress: ${last:-none}")
				say "$what: anchors (exit $rc; $(grep -c time_us "$A") results kept); last progress: ${last:-none}"
				grep -av '^anchors .*s: ' "$work/anchors.err" | grep -a -i "error\|Traceback" | tail -6 | tee -a "$L"
			fi
		fi
		;;
	kgen)
		capend=$(($(date +%s) + ${KGEN_CAP:-240}))
		for op in "${oplist[@]}"; do
			lim=$(limit "$capend" "${KGEN_OP_LIMIT:-75}")
			if [ "$lim" = 0 ]; then
				say "SKIPPED kgen $op (budget)"; failures+=("SKIPPED kgen $op (budget)"); continue
			fi
			kgen "time-$op" "$lim" "$K" -ops "$op" "${common[@]}" -modes "$modes" -iters "$iters" \
				-graph-calls "$gcalls" -graph-calls-big "$gbig" -big-bytes "$(bytes "$bigb")" -graph-reps "$greps"
		done
		;;
	soak)
		capend=$(($(date +%s) + ${SOAK_CAP:-150}))
		for op in "${oplist[@]}"; do
			lim=$(limit "$capend" "${SOAK_OP_LIMIT:-50}")
			if [ "$lim" = 0 ]; then
				say "SKIPPED soak $op (budget)"; failures+=("SKIPPED soak $op (budget)"); continue
			fi
			kgen "soak-$op" "$lim" "$S" -ops "$op" "${common[@]}" -modes "$soakmodes" -soak "$soak" \
				-soak-big "$soakbig" -soak-big-bytes "$(bytes "$soakbigb")"
		done
		;;
	*) say "unknown phase $phase (want anchors, kgen, soak)" ;;
	esac
done

if command -v nvidia-smi >/dev/null; then
	left=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null)
	[ -n "$left" ] && say "WARNING: processes still on the GPUs: $left"
fi
say "tables"
"$py" "$here/coll_join.py" "$out" --gpus "$ngpu" >"$out/tables-$ngpu.md" 2>>"$L" || say "coll_join.py failed"
cat "$out/tables-$ngpu.md"
echo
if [ ${#failures[@]} = 0 ]; then
	say "no failures, no hangs, nothing skipped"
else
	say "${#failures[@]} problem(s):"
	for f in "${failures[@]}"; do echo "  $f" | tee -a "$L"; done
fi
rm -rf "$work"
say "done in $(el)s"
[ ${#failures[@]} = 0 ]
