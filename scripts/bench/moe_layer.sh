#!/usr/bin/env bash
# The whole MoE layer (issue 26): kgen's dist.MoELayer (bench/moelayer) against the same layer
# in PyTorch (torch_moe_layer.py: all_to_all_single + torch._grouped_mm), in one device call,
# on NG GPUs (default: every GPU of the machine), then the slowest rank's times side by side.
#
# Build here first (the GPU machines have no Go; .gpu/ is git-ignored, carry it):
#
#   mkdir -p .gpu && CGO_ENABLED=0 go build -ldflags=-s -o .gpu/kgen ./cmd/kgen
#   eval "$(bash scripts/cuda-headers.sh)"; go build -tags cuda -ldflags=-s -o .gpu/moelayer ./bench/moelayer
#
# Then on the device, from the repository root: NG=4 bash scripts/bench/moe_layer.sh (NG=2 on
# two GPUs). FLAGS passes shape flags to both (kgen's spelling, -name value: -tokens 4096
# -hidden 7168 -ffn 2048 -experts 32 -topk 8 are the defaults); ITERS (20). Logs in $OUT
# (/tmp/moelayer); KFLAGS goes to kgen alone (-gateup 128x256:3s:tma:band8, -down ...: the
# grouped GEMMs' configurations in place of the picks; -capacity; -ll: the low-latency MoE,
# whose masked layout the grouped GEMMs and SwiGLU run over the rows received, -ll -allslots:
# over every slot, as before the masked kernels; torch has no such mode, so compare kgen's
# lines of two runs). About a minute at the default shape (setup and the checks on the host
# included).
set -uo pipefail
cd "$(dirname "$0")/../.."
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# The symmetric heap holds the receive rows and the experts' output rows (2 x Capacity x
# hidden bf16: 3.8 GB at the default shape on 4 GPUs) and the token and partial buffers.
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-12884901888}
ng=${NG:-$(nvidia-smi -L | wc -l)}
out=${OUT:-/tmp/moelayer}
iters=${ITERS:-20}
flags=(${FLAGS:-})
kflags=(${KFLAGS:-})
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -x /opt/torch/.venv/bin/python ] && [ -z "${PYTHON:-}" ]; then py=/opt/torch/.venv/bin/python; fi
tr=("$py" -m torch.distributed.run)
nvidia-smi --query-gpu=index,name --format=csv,noheader | head -n "$ng"
status=0
timeout 300 ./.gpu/kgen launch -n "$ng" --backend cuda -- ./.gpu/moelayer -iters "$iters" "${flags[@]}" "${kflags[@]}" >"$out/kgen.txt" 2>"$out/kgen.err" || { status=1; tail -30 "$out/kgen.err"; }
cat "$out/kgen.txt"
# torch_moe_layer.py takes --name value for the same -name value flags (the shape flags
# only: -tokens, -hidden, -ffn, -experts, -topk, -check).
tflags=()
for f in "${flags[@]}"; do case "$f" in -*) tflags+=("-$f") ;; *) tflags+=("$f") ;; esac; done
timeout 300 "${tr[@]}" --nproc-per-node "$ng" scripts/bench/torch_moe_layer.py --iters "$iters" "${tflags[@]}" >"$out/torch.jsonl" 2>"$out/torch.err" || { status=1; tail -30 "$out/torch.err"; }
cat "$out/torch.jsonl"
"$py" - "$out/kgen.txt" "$out/torch.jsonl" <<'EOF' || status=1
import json, shlex, sys
# kgen launch prefixes each rank's lines with "[rank N] ".
lines = [l.split("] ", 1)[1] if l.startswith("[rank ") else l for l in open(sys.argv[1])]
kg = [dict(kv.split("=", 1) for kv in shlex.split(l)[1:]) for l in lines if l.startswith("moelayer ")]
# The ranks print at once: two objects can share a line ("{...}{...}"), so scan the text.
text, dec, tc, i = open(sys.argv[2]).read(), json.JSONDecoder(), [], 0
while (i := text.find("{", i)) >= 0:
    try:
        obj, i = dec.raw_decode(text, i)
    except json.JSONDecodeError:
        i += 1
        continue
    if isinstance(obj, dict) and "layer_us" in obj:
        tc.append(obj)
if not kg or not tc:
    sys.exit("missing results: kgen %d ranks, torch %d ranks" % (len(kg), len(tc)))
steps = ["layer", "dispatch", "gateup", "swiglu", "down", "combine"]
print("| step (slowest rank, us) | kgen | torch | torch/kgen |")
print("|---|---|---|---|")
for s in steps:
    k = max(float(r[s + "_us"]) for r in kg)
    t = max(float(r[s + "_us"]) for r in tc)
    print(f"| {s} | {k:.1f} | {t:.1f} | {t / k:.2f}x |")
checks = [r["check"] for r in kg] + [r["check"] for r in tc]
ok = all(c == "ok" for c in checks)
k = max(float(r["layer_us"]) for r in kg); t = max(float(r["layer_us"]) for r in tc)
print(f"checks: {'all ok' if ok else checks}; whole layer {t / k:.2f}x (issue 26 asks >= 1.3x)")
sys.exit(0 if ok else 1)
EOF
exit $status
