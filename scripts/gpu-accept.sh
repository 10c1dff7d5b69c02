#!/usr/bin/env bash
# The whole GPU acceptance run in one device call: jit's GPU tests (vector_add; with 2 GPUs
# the NVSHMEM put and peer-to-peer ranks), both examples through their generated launchers
# (vadd on GPU 0; allreduce on every GPU through `kgen launch --backend cuda`), NVSHMEM's
# every-operation test (2 ranks, or 1 on a one-GPU machine), the DSL's tiled copy against
# cuMemcpyDtoD (1 GiB), (STEPS includes bench) the all-reduce benchmark against NCCL, and
# (STEPS includes big) the gemms past 2^31 and 2^32 elements of D, checked whole.
#
#   bash scripts/gpu-accept.sh          here (no GPU): builds everything into .gpu/ and packs
#                                       it into .gpu.tar.xz (the device tool carries at most
#                                       64 MiB), then prints the device command
#   bash scripts/gpu-accept.sh run      on the GPU machine, from the repository root
#
# Device command (device tool, kind nvidia-h200-x2 or -x4, carry [".gpu.tar.xz"]):
#   tar xJf .gpu.tar.xz && bash scripts/gpu-accept.sh run
# Multicast stays off (NVSHMEM_DISABLE_NVLS=1 ...): the lent machines must never create
# multicast objects. Logs go to $OUT (the device tool brings them back).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "${1:-}" = "run" ]; then
  export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  out=${OUT:-/tmp/gpu-accept}
  mkdir -p "$out"
  steps=${STEPS:-jit,examples,nvshmem,copy}
  ngpu=$(nvidia-smi -L | wc -l)
  nvidia-smi -L
  status=0
  step() { # step NAME LIMIT_S CMD...: runs CMD in $DIR with a time limit, logs it, records failure
    local name=$1 limit=$2
    shift 2
    echo "== $name"
    local t0=$SECONDS rc=0
    (cd "${DIR:-$root}" && timeout "$limit" "$@") >"$out/$name.log" 2>&1 || rc=$?
    tail -n "${TAIL:-15}" "$out/$name.log"
    echo "== $name: exit $rc in $((SECONDS - t0)) s"
    [ "$rc" = 0 ] || status=1
  }
  G=$root/.gpu
  if [[ $steps == *jit* ]]; then
    export KGEN_REQUIRE_GPU=1 KGEN_TEST_DEVLIB_PTX=$G/devlib.ptx KGEN_TEST_DEVLIB_ARCHIVE=$G/libnvshmem_device.a
    KGEN_TEST_DEVLIB_VERSION=$(cat "$G/nvshmem-version")
    export KGEN_TEST_DEVLIB_VERSION
    DIR=jit step cudrv 120 "$G/cudrv.test" -test.v
    DIR=jit step jit-cold 240 env CUDA_CACHE_DISABLE=1 "$G/jit.test" -test.v -test.count=1 -test.run GPU
    DIR=jit step jit-warm 240 "$G/jit.test" -test.v -test.count=1 -test.run GPU
    grep -h TIMING "$out"/jit-*.log || true
  fi
  if [[ $steps == *examples* ]]; then
    step vadd 120 "$G/vadd" -n 10000000
    step allreduce 240 "$G/kgen" launch -n "$ngpu" --backend cuda -- "$G/allreduce" -n 1000000 -steps 10
  fi
  if [[ $steps == *nvshmem* ]]; then
    TAIL=40 KGEN_CACHE_DIR=$(mktemp -d) step nvshmem 420 "$G/nvshmem/nvshmem-gputest" -ranks "$((ngpu < 2 ? ngpu : 2))" -devlib "$G/nvshmem/devlib"
  fi
  if [[ $steps == *copy* ]]; then
    for b in 268435456 1073741824; do step "copy-$b" 120 "$G/gpubench" copy -bytes "$b" -reps 20; done
  fi
  if [[ $steps == *big* ]]; then
    # 64-bit row offsets into D: the mma.sync gemm at M*N >= 2^31 (it failed with
    # IllegalAddress) and gemm_sm90's pick at M*N = 2^32 + 512 (its last row wrapped onto the
    # first), each run once with D filled with NaN first and every element of D compared with
    # a float64 reference computed on the host's cores (gpubench gemm -full; no cuBLAS, no
    # torch). Host memory: ~20 GB; GPU memory: ~35 GB.
    TAIL=6 step big-gemm 280 "$G/gpubench" gemm -dtype f16 -sizes 46400x46400x64 -reps 1 -full
    TAIL=6 step big-gemm-sm90 280 "$G/gpubench" gemm -sm90 -dtype bf16 -sizes 64x67108872x64 -reps 1 -full
  fi
  if [[ $steps == *bench* ]]; then
    TAIL=60 OUT=$out/collbench step collbench 540 bash scripts/bench/device_collbench.sh
  fi
  exit $status
fi

# A clean, stripped build (-s also drops DWARF): the working tree and .gpu.tar.xz travel
# within the device tool's 64 MiB.
rm -rf .gpu .gpu.tar.xz
mkdir -p .gpu
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-ldflags=-s"
bash scripts/gpu-test.sh >/dev/null
bash scripts/gpu-nvshmem.sh >/dev/null
bash scripts/bench/build_collbench.sh
eval "$(bash scripts/cuda-headers.sh)"
go build -tags cuda -o .gpu/vadd ./examples/vadd
go build -tags cuda -o .gpu/allreduce ./examples/allreduce
go build -tags cuda -o .gpu/gpubench ./bench/gpubench
tar cJf .gpu.tar.xz .gpu
ls -la .gpu.tar.xz >&2
cat <<'EOF'
Run on the GPU machine (device tool, kind nvidia-h200-x2, carry [".gpu.tar.xz"]):
  tar xJf .gpu.tar.xz && bash scripts/gpu-accept.sh run
(STEPS=jit,examples,nvshmem,bench selects the steps; bench adds the all-reduce vs NCCL sweep;
 STEPS=big runs the gemms past 2^31 / 2^32 elements of D with a full check, on one H100.)
EOF
