package devlib

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/ptx"
)

// LinkOffline links a kernel that calls NVSHMEM the way the CUDA JIT linker does, but with
// the command-line tools and without a GPU:
//
//	ptxas -arch=TARGET -c kernel.ptx -o kernel.cubin     (relocatable)
//	ptxas -arch=TARGET -c devlib.ptx -o devlib.cubin     (relocatable)
//	nvlink -arch=TARGET kernel.cubin devlib.cubin libnvshmem_device.a -o linked.cubin
//
// target is the kernel's target (it may be newer than the devlib's .target; ptxas compiles
// sm_90 PTX for sm_90a and sm_100a). It returns the linked cubin. An unresolved call, a
// declaration ptxas rejects or a missing archive symbol is an error carrying the tool's
// message. The work happens in a temporary folder that is removed afterwards.
func LinkOffline(ctx context.Context, target ptx.Target, kernelPTX []byte, lib *Result) ([]byte, error) {
	if lib == nil {
		return nil, fmt.Errorf("devlib: LinkOffline needs a built device library")
	}
	if _, _, err := ParseTarget(target); err != nil {
		return nil, err
	}
	ptxas, err := toolchain.CUDATool("ptxas")
	if err != nil {
		return nil, err
	}
	nvlink, err := toolchain.CUDATool("nvlink")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kgen-devlib-link-")
	if err != nil {
		return nil, fmt.Errorf("devlib: %w", err)
	}
	defer os.RemoveAll(dir)
	p := func(name string) string { return filepath.Join(dir, name) }
	for name, src := range map[string][]byte{"kernel.ptx": kernelPTX, "devlib.ptx": lib.PTX} {
		if err := os.WriteFile(p(name), src, 0o644); err != nil {
			return nil, fmt.Errorf("devlib: %w", err)
		}
	}
	for _, name := range []string{"kernel", "devlib"} {
		if _, err := runTool(ctx, nil, ptxas, "-arch="+string(target), "-c", p(name+".ptx"), "-o", p(name+".cubin")); err != nil {
			return nil, fmt.Errorf("assembling the %s PTX: %w", name, err)
		}
	}
	if _, err := runTool(ctx, nil, nvlink, "-arch="+string(target), p("kernel.cubin"), p("devlib.cubin"), lib.Archive, "-o", p("linked.cubin")); err != nil {
		return nil, fmt.Errorf("linking: %w", err)
	}
	return os.ReadFile(p("linked.cubin"))
}
