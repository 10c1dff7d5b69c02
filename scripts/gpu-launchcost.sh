#!/usr/bin/env bash
# Launch and graph-replay host cost on one GPU (issue 17), in one device call:
#   launchcost       jit's plain and co-resident launches, graphs of 1 and 8 of each, and the
#                    driver's floors from C (cuLaunchKernel, cuLaunchCooperativeKernel,
#                    cuLaunchKernelEx + COOPERATIVE, the occupancy query, cuGraphLaunch of
#                    1/8-node graphs with and without cuGraphUpload), host and GPU time
#   collectives.test TestGPUGraphHostCost: the all-reduce (1024 f32, 1 rank) direct and
#                    replayed from graphs of 1 and 8, results checked; a CPU profile of the
#                    direct calls in $OUT/direct.pprof
#   jit.test         TestGPUCoResident and TestGPUGraphReplay (the cached occupancy, the upload)
#
#   bash scripts/gpu-launchcost.sh        here (no GPU): builds the three into $DEST
#                                         (default .dev/launchcost of this checkout)
#   bash scripts/gpu-launchcost.sh paths  prints the folders it would use, builds nothing
#   bash DIR/gpu-launchcost.sh run        on the GPU machine (device tool, one GPU, carry DIR)
#
# Every path comes from the script's own location (its checkout's root) or the environment
# (DEST, KGEN_TOOLS, default the checkout's .tools), never from the machine it was written on.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = "run" ]; then
  export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  export KGEN_REQUIRE_GPU=1 KGEN_BACKEND=cuda
  out=${OUT:-/tmp/gpu-launchcost}
  mkdir -p "$out"
  nvidia-smi -L || true
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv || true
  lscpu | grep -E 'Model name|^CPU\(s\)' || true
  for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nvshmem; do
    [ -d "$d/lib" ] && export NVSHMEM_HOME=$d
  done
  echo "NVSHMEM_HOME=${NVSHMEM_HOME:-unset}"
  rc=0
  cd "$here"
  for i in 1 2; do
    echo "== launchcost run $i"
    timeout 60 ./launchcost -n 2000 2>&1 | tee "$out/launchcost.$i.log" || rc=$?
  done
  echo "== collectives TestGPUGraphHostCost (profiled), then again"
  KGEN_GRAPHCOLL_CPUPROFILE=$out/direct.pprof timeout 90 ./collectives.test -test.run 'TestGPUGraphHostCost' -test.v -test.count=1 2>&1 | tee "$out/graphcoll.1.log" || rc=$?
  timeout 60 ./collectives.test -test.run 'TestGPUGraphHostCost' -test.v -test.count=1 2>&1 | tee "$out/graphcoll.2.log" || rc=$?
  echo "== jit GPU tests"
  timeout 60 ./jit.test -test.run 'TestGPUCoResident|TestGPUGraphReplay' -test.v -test.count=1 2>&1 | tee "$out/jit.log" || rc=$?
  echo "== summary"
  grep -h TIMING "$out"/*.log || true
  echo "gpu-launchcost: exit $rc"
  exit "$rc"
fi

root=$(cd "$here/.." && pwd)
cd "$root"
dest=${DEST:-$root/.dev/launchcost}
export KGEN_TOOLS=${KGEN_TOOLS:-$root/.tools}
case "${1:-}" in
  paths|--dry-run)
    echo "root=$root"; echo "dest=$dest"; echo "KGEN_TOOLS=$KGEN_TOOLS"; exit 0 ;;
  -h|--help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
  "") ;;
  *) echo "gpu-launchcost.sh: unknown argument '$1' (run, paths, --help)" >&2; exit 2 ;;
esac
mkdir -p "$dest"
eval "$(bash scripts/cuda-headers.sh)"
go build -tags cuda -ldflags="-s -w" -o "$dest/launchcost" ./bench/launchcost
go test -c -tags cuda -ldflags="-s -w" -o "$dest/collectives.test" ./collectives
go test -c -tags cuda -ldflags="-s -w" -o "$dest/jit.test" ./jit
cp scripts/gpu-launchcost.sh "$dest/gpu-launchcost.sh"
du -sh "$dest" >&2
rel=${dest#"$root"/}
echo "Built $dest. Run on one GPU (device tool, carry [\"$rel\"]): bash $rel/gpu-launchcost.sh run"
