// Command ltolink compares two ways of linking NVSHMEM's device code into a kernel, on this
// machine (no GPU), for the 5-function kernel and the 169-function acceptance module:
//
//   - objects: nvshmem/devlib's per-function relocatable cubins (llvm-extract, llc, ptxas -c;
//     cached on disk), linked with the kernel's PTX and libnvshmem_device.a;
//   - LTO: the functions' bitcode (llvm-extract --recursive) compiled by libNVVM with
//     -gen-lto, linked by nvJitLink with -lto.
//
// Both links go through nvJitLink, so the linker is the same. Cold = nothing cached (the
// objects built, the LTO-IR compiled); warm = the objects or the LTO-IR reused. Each linked
// cubin is checked: every kernel defined, no undefined function left. It prints TIMING lines.
//
//	ltolink [-target sm_100a] [-lto DIR]
//
// libNVVM reads NVSHMEM's LLVM 18/19 bitcode only for Blackwell (compute_100 and newer; the
// legacy LLVM 7 dialect serves older targets), so for sm_90 ltolink prints libNVVM's
// refusal and measures the objects alone.
package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/nvshmem/devlib"
	"github.com/kgen-dev/kgen/nvshmem/gputest"
	"github.com/kgen-dev/kgen/ptx"
)

func main() {
	target := flag.String("target", "sm_100a", "target (sm_90: LTO is refused by libNVVM, objects only)")
	lto := flag.String("lto", "", "folder of the nvidia-nvjitlink and nvidia-nvvm wheels (default $KGEN_TOOLS/lto)")
	only := flag.String("only", "", "run one module: five or accept")
	flag.Parse()
	if err := run(ptx.Target(*target), *lto, *only); err != nil {
		fmt.Fprintln(os.Stderr, "ltolink:", err)
		os.Exit(1)
	}
}

// five: every thread of block 0 reads my_pe and n_pes, puts n floats to the next PE at
// block scope, thread 0 stores 1 into flag on the next PE, then quiet: five functions.
func five(t ptx.Target) (*ptx.Module, error) {
	k := dsl.New("five_calls", dsl.WithTarget(t))
	dst := k.PtrParam("dst", dsl.F32)
	src := k.PtrParam("src", dsl.F32)
	flag := k.PtrParam("flag", dsl.I32)
	n := k.Param("n", dsl.U32)
	next := nvshmem.MyPE(k).Add(1).Rem(nvshmem.NPEs(k))
	nvshmem.Put(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), next)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() { nvshmem.P(k, flag.At(0), int32(1), next) })
	nvshmem.Quiet(k)
	return k.Build()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func run(target ptx.Target, ltoDir, only string) error {
	ctx := context.Background()
	if ltoDir == "" {
		ltoDir = filepath.Join(toolchain.ToolsDir(), "lto")
	}
	lib := filepath.Join(ltoDir, "nvidia", "cu13", "lib")
	if err := openLTO(filepath.Join(lib, "libnvvm.so.4"), filepath.Join(lib, "libnvJitLink.so.13")); err != nil {
		return fmt.Errorf("%w (scripts/tools.sh installs them into $KGEN_TOOLS/lto)", err)
	}
	l, err := devlib.Open("")
	if err != nil {
		return err
	}
	extract, err := toolchain.LLVMTool("llvm-extract")
	if err != nil {
		return err
	}
	fmt.Printf("target %s, NVSHMEM %s (%s), %d CPUs, libNVVM and nvJitLink from %s\n", target, l.Version, l.Path, runtime.NumCPU(), lib)
	fm, err := five(target)
	if err != nil {
		return err
	}
	am, err := gputest.Module(target)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range []struct {
		name string
		m    *ptx.Module
	}{{"five", fm}, {"accept", am}} {
		if only != "" && only != c.name {
			continue
		}
		if err := compare(ctx, l, extract, target, c.name, c.m); err != nil {
			fmt.Printf("FAIL %s: %v\n", c.name, err)
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

func compare(ctx context.Context, l *devlib.Library, extract string, target ptx.Target, name string, m *ptx.Module) error {
	funcs := jit.NVSHMEMCalls(m)
	sort.Strings(funcs)
	kernel := []byte(m.String())
	label := fmt.Sprintf("%s(%d functions)", name, len(funcs))
	arch := "-arch=" + string(target)
	var entries []string
	for _, f := range m.Funcs {
		if f.Entry {
			entries = append(entries, f.Name)
		}
	}

	// Objects: cold in an empty cache, then warm.
	cache, err := os.MkdirTemp("", "ltolink-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	l.CacheDir = cache
	for _, round := range []string{"cold", "warm"} {
		t0 := time.Now()
		set, err := l.BuildEach(ctx, target, funcs, devlib.EachOptions{Objects: true})
		if err != nil {
			return err
		}
		build := time.Since(t0)
		ins := []input{{kind: inputPTX, data: append(kernel, 0), name: name + ".ptx"}}
		for i, o := range set.ObjectList() {
			ins = append(ins, input{kind: inputCubin, data: o, name: fmt.Sprintf("%s.o", set.Units[i].Func)})
		}
		ins = append(ins, input{kind: inputLibrary, path: set.Archive, name: "libnvshmem_device.a"})
		t1 := time.Now()
		cubin, err := njlLink([]string{arch}, ins)
		if err != nil {
			return fmt.Errorf("objects, %s: %w", round, err)
		}
		link := time.Since(t1)
		if err := checkCubin(cubin, entries); err != nil {
			return fmt.Errorf("objects, %s: %w", round, err)
		}
		fmt.Printf("TIMING ltolink %s objects %s: %.0f ms (BuildEach %.0f ms, %d built; nvJitLink %.0f ms; cubin %d bytes)\n",
			label, round, ms(build+link), ms(build), set.Misses, ms(link), len(cubin))
	}

	// LTO: extract the functions' bitcode, libNVVM -gen-lto, nvJitLink -lto.
	tmp, err := os.MkdirTemp("", "ltolink-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	t0 := time.Now()
	sub := filepath.Join(tmp, "sub.bc")
	args := []string{"--recursive"}
	for _, f := range funcs {
		args = append(args, "--func="+f)
	}
	args = append(args, l.Path, "-o", sub)
	if out, err := exec.CommandContext(ctx, extract, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("llvm-extract: %v: %s", err, bytes.TrimSpace(out))
	}
	bc, err := os.ReadFile(sub)
	if err != nil {
		return err
	}
	extracted := time.Since(t0)
	if !legacyNVVM(target) {
		// nvJitLink's LTO code generator refuses the bitcode's own (LLVM's NVPTX) data layout:
		// "Can't create a MachineFunction using a Module with a Target-incompatible DataLayout".
		t := time.Now()
		if bc, err = withDataLayout(ctx, bc, tmp, nvvmDataLayout); err != nil {
			return err
		}
		fmt.Printf("  (the bitcode's data layout replaced by NVVM's in %.0f ms)\n", ms(time.Since(t)))
		extracted += time.Since(t)
	}
	compute := "-arch=compute_" + strings.TrimPrefix(string(target), "sm_")
	t1 := time.Now()
	ltoir, err := nvvmCompile(bc, []string{compute, "-gen-lto"})
	if err != nil {
		fmt.Printf("TIMING ltolink %s lto: refused by libNVVM: %v\n", label, err)
		return nil
	}
	gen := time.Since(t1)
	for _, round := range []string{"cold", "warm"} {
		ins := []input{
			{kind: inputPTX, data: append(kernel, 0), name: name + ".ptx"},
			{kind: inputLTOIR, data: ltoir, name: "nvshmem.ltoir"},
			{kind: inputLibrary, path: l.Archive, name: "libnvshmem_device.a"},
		}
		t2 := time.Now()
		cubin, err := njlLink([]string{arch, "-lto"}, ins)
		if err != nil {
			return fmt.Errorf("lto, %s: %w", round, err)
		}
		link := time.Since(t2)
		if err := checkCubin(cubin, entries); err != nil {
			return fmt.Errorf("lto, %s: %w", round, err)
		}
		if round == "cold" {
			fmt.Printf("TIMING ltolink %s lto cold: %.0f ms (llvm-extract %.0f ms, libNVVM -gen-lto %.0f ms, %d bytes of LTO-IR; nvJitLink -lto %.0f ms; cubin %d bytes)\n",
				label, ms(extracted+gen+link), ms(extracted), ms(gen), len(ltoir), ms(link), len(cubin))
		} else {
			fmt.Printf("TIMING ltolink %s lto warm (LTO-IR reused): %.0f ms (nvJitLink -lto; cubin %d bytes)\n", label, ms(link), len(cubin))
		}
	}
	return nil
}

// driverProvided are the device functions a cubin may leave undefined: the driver's loader
// supplies them (printf's vprintf, the device heap, assert).
var driverProvided = map[string]bool{"vprintf": true, "malloc": true, "free": true, "__assertfail": true}

// checkCubin checks that the linked cubin defines every kernel and leaves no function
// undefined but driverProvided ones.
func checkCubin(cubin []byte, entries []string) error {
	f, err := elf.NewFile(bytes.NewReader(cubin))
	if err != nil {
		return fmt.Errorf("the linked cubin is not ELF: %w", err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("the linked cubin's symbols: %w", err)
	}
	defined := map[string]bool{}
	var undefined []string
	for _, s := range syms {
		switch {
		case s.Section == elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC && !driverProvided[s.Name]:
			undefined = append(undefined, s.Name)
		case s.Section != elf.SHN_UNDEF:
			defined[s.Name] = true
		}
	}
	if len(undefined) > 0 {
		return fmt.Errorf("the linked cubin leaves %d functions undefined: %s", len(undefined), strings.Join(undefined, " "))
	}
	for _, e := range entries {
		if !defined[e] {
			return fmt.Errorf("the linked cubin does not define kernel %s", e)
		}
	}
	return nil
}

// nvvmDataLayout is the data layout nvJitLink's LTO code generator requires (its error
// message names it) for 64-bit NVPTX.
const nvvmDataLayout = "e-p:64:64:64-p6:32:32:32-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-f128:128:128-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64-a:8:8"

// legacyNVVM reports whether libNVVM reads target's IR in its legacy (LLVM 7) dialect:
// every target before sm_100.
func legacyNVVM(t ptx.Target) bool {
	var sm int
	fmt.Sscanf(strings.TrimPrefix(string(t), "sm_"), "%d", &sm)
	return sm < 100
}

// withDataLayout rewrites bitcode bc's data layout to dl (llvm-dis, then llvm-as).
func withDataLayout(ctx context.Context, bc []byte, dir, dl string) ([]byte, error) {
	dis, err := toolchain.LLVMTool("llvm-dis")
	if err != nil {
		return nil, err
	}
	as, err := toolchain.LLVMTool("llvm-as")
	if err != nil {
		return nil, err
	}
	in, ll, out := filepath.Join(dir, "dl.bc"), filepath.Join(dir, "dl.ll"), filepath.Join(dir, "dl.out.bc")
	if err := os.WriteFile(in, bc, 0o644); err != nil {
		return nil, err
	}
	if b, err := exec.CommandContext(ctx, dis, in, "-o", ll).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("llvm-dis: %v: %s", err, bytes.TrimSpace(b))
	}
	text, err := os.ReadFile(ll)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(text), "\n")
	found := false
	for i, line := range lines {
		if strings.HasPrefix(line, "target datalayout = ") {
			lines[i], found = fmt.Sprintf("target datalayout = %q", dl), true
		}
	}
	if !found {
		return nil, errors.New("the extracted bitcode has no target datalayout line")
	}
	if err := os.WriteFile(ll, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return nil, err
	}
	if b, err := exec.CommandContext(ctx, as, ll, "-o", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("llvm-as: %v: %s", err, bytes.TrimSpace(b))
	}
	return os.ReadFile(out)
}
