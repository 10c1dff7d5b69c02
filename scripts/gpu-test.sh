#!/usr/bin/env bash
# Builds jit's cuda-tagged GPU tests here (no GPU, no CUDA toolkit needed) into the git-ignored
# folder .gpu/, with what they need, and prints the one command that runs them on a GPU
# machine (x86-64, NVIDIA driver, NVSHMEM 3.4 wheel; no Go there). The tests:
#   TestGPUVectorAdd         kernels/vector_add on GPU 0: cold link, warm cache, cache off,
#                            streams, events, D2D, checked results and argument errors
#   TestGPUNoDeviceIsAnError CUDA_VISIBLE_DEVICES='' gives an error from jit.Open, not an exit
#   TestGPUNVSHMEMPut        2 ranks (jit.LaunchRanks) put 1 MiB to each other with
#                            jit/testdata/put_block.ptx -> nvshmemx_putmem_block, linked with
#                            the NVSHMEM device library; checked on both ranks
# Timings are printed as "TIMING ..." lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=.gpu
mkdir -p "$out" "$(git rev-parse --git-dir)/info"
excl="$(git rev-parse --git-dir)/info/exclude"
grep -qx "/$out/" "$excl" 2>/dev/null || echo "/$out/" >>"$excl"

eval "$(bash scripts/cuda-headers.sh)"
go test -c -tags cuda -o "$out/jit.test" ./jit
go test -c -tags cuda -o "$out/cudrv.test" ./jit/internal/cudrv

# The NVSHMEM device library for the put test: built by nvshmem/devlib when it is there and
# builds; otherwise by the two commands DESIGN.md verified (llvm-extract + llc on the bitcode).
bash scripts/tools.sh >/dev/null
nvshmem="${NVSHMEM_HOME:-$root/.tools/py/nvidia/nvshmem}"
version=$(ls -d "$root"/.tools/py/nvidia_nvshmem_cu13-*.dist-info 2>/dev/null | sed -E 's/.*cu13-([0-9.]+)\.dist-info/\1/' | head -1)
devlib_note=""
rm -f "$out/devlib.ptx"
if [ -f nvshmem/devlib/run.go ]; then
  # Through the devlib builder (package nvshmem/devlib), by a throw-away main in .gpu/.
  mkdir -p "$out/devlibgen"
  cat >"$out/devlibgen/main.go" <<'GO'
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kgen-dev/kgen/nvshmem/devlib"
)

func main() {
	err := devlib.Run(context.Background(), devlib.Options{Target: "sm_90",
		Funcs: []string{"nvshmemx_putmem_block"}, Output: os.Args[1]}, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
GO
  if go run "./$out/devlibgen/main.go" "$out/devlib.ptx" >&2; then
    devlib_note="device library built by nvshmem/devlib"
  else
    rm -f "$out/devlib.ptx"
    echo "gpu-test: nvshmem/devlib failed; falling back to llvm-extract/llc" >&2
  fi
  rm -rf "$out/devlibgen"
fi
if [ ! -s "$out/devlib.ptx" ]; then
  llvm-extract-19 --recursive --func=nvshmemx_putmem_block "$nvshmem/lib/libnvshmem_device.bc" -o "$out/devlib.bc"
  llc-19 -march=nvptx64 -mcpu=sm_90 -mattr=+ptx80 "$out/devlib.bc" -o "$out/devlib.ptx"
  rm -f "$out/devlib.bc"
  devlib_note="device library built with llvm-extract-19/llc-19 as DESIGN.md verified (nvshmem/devlib absent or failing)"
fi
cp "$nvshmem/lib/libnvshmem_device.a" "$out/"
echo "$version" >"$out/nvshmem-version"
echo "gpu-test: built $(du -sh "$out" | cut -f1) in $out: $(ls "$out" | tr '\n' ' ')" >&2
echo "gpu-test: $devlib_note, NVSHMEM $version" >&2
cat <<CMD

Run on a GPU machine (device tool: kind nvidia-h200-x2, carry [".gpu"], timeout_s 360):

export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 KGEN_REQUIRE_GPU=1; G=\$PWD/.gpu; export KGEN_TEST_DEVLIB_PTX=\$G/devlib.ptx KGEN_TEST_DEVLIB_ARCHIVE=\$G/libnvshmem_device.a KGEN_TEST_DEVLIB_VERSION=\$(cat \$G/nvshmem-version); nvidia-smi -L; cd jit && \$G/cudrv.test -test.v && echo '== cold (CUDA_CACHE_DISABLE=1) ==' && CUDA_CACHE_DISABLE=1 \$G/jit.test -test.v -test.count=1 -test.run 'GPU' 2>&1 | tee \$OUT/gpu-cold.log && echo '== again ==' && \$G/jit.test -test.v -test.count=1 2>&1 | tee \$OUT/gpu-warm.log; echo "exit \${PIPESTATUS[0]}"
CMD
