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

// LinkOfflineUnits is LinkOffline over a per-function build (BuildEach with Objects): the
// kernel PTX is assembled, the units' cached relocatable cubins are linked as they are
// (nothing of NVSHMEM is compiled again), then libnvshmem_device.a:
//
//	ptxas -arch=TARGET -c kernel.ptx -o kernel.cubin
//	nvlink -arch=TARGET kernel.cubin F1.o F2.o ... libnvshmem_device.a -o linked.cubin
func LinkOfflineUnits(ctx context.Context, target ptx.Target, kernelPTX []byte, set *Set) ([]byte, error) {
	if set == nil || !set.Objects {
		return nil, fmt.Errorf("devlib: LinkOfflineUnits needs a per-function build with objects (BuildEach with Objects)")
	}
	if target != set.Target {
		return nil, fmt.Errorf("devlib: the units were built for %s, the kernel is linked for %s", set.Target, target)
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
	if err := os.WriteFile(p("kernel.ptx"), kernelPTX, 0o644); err != nil {
		return nil, fmt.Errorf("devlib: %w", err)
	}
	if _, err := runTool(ctx, nil, ptxas, "-arch="+string(target), "-c", p("kernel.ptx"), "-o", p("kernel.cubin")); err != nil {
		return nil, fmt.Errorf("assembling the kernel PTX: %w", err)
	}
	args := []string{"-arch=" + string(target), p("kernel.cubin")}
	for _, u := range set.Units {
		if err := os.WriteFile(p(u.Func+".o"), u.Object, 0o644); err != nil {
			return nil, fmt.Errorf("devlib: %w", err)
		}
		args = append(args, p(u.Func+".o"))
	}
	args = append(args, set.Archive, "-o", p("linked.cubin"))
	if _, err := runTool(ctx, nil, nvlink, args...); err != nil {
		return nil, fmt.Errorf("linking: %w", err)
	}
	return os.ReadFile(p("linked.cubin"))
}
