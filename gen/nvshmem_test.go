package gen

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/ptx"
)

var cudaOut = flag.String("nvshmem-cuda-out", "", "also build the generated NVSHMEM program with -tags cuda into this file (scripts/gpu-hostpath.sh)")

// shmemPut: block 0 of every PE puts n floats of src into dst on the next PE
// (nvshmemx_float_put_block), then a block-scope barrier_all.
func shmemPut(k *dsl.Kernel) {
	dst := k.PtrParam("dst", dsl.F32)
	src := k.PtrParam("src", dsl.F32)
	n := k.Param("n", dsl.U32)
	next := nvshmem.MyPE(k).Add(1).Rem(nvshmem.NPEs(k))
	nvshmem.Put(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), next)
	nvshmem.BarrierAll(k, nvshmem.Block)
}

// nvshmemProgram runs the generated launcher on every rank (RunRanks: the emulator's ranks,
// or this process's GPU) and checks what each PE received from the previous one.
const nvshmemProgram = `package main

import (
	"fmt"
	"os"

	"github.com/kgen-dev/kgen/jit"
)

func main() {
	const n = 1000
	err := jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error {
		k, err := Load(r.Device)
		if err != nil {
			return err
		}
		defer k.Close()
		dst, err := jit.SymAlloc[float32](r.NVSHMEM, n)
		if err != nil {
			return err
		}
		src, err := jit.SymAlloc[float32](r.NVSHMEM, n)
		if err != nil {
			return err
		}
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(r.Rank*10000 + i)
		}
		if err := src.CopyFromHost(xs); err != nil {
			return err
		}
		if err := k.ShmemPut.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(256)}, ShmemPutArgs{Dst: dst, Src: src, N: n}); err != nil {
			return err
		}
		if err := r.Device.Synchronize(); err != nil {
			return err
		}
		if err := r.NVSHMEM.BarrierAll(); err != nil {
			return err
		}
		if err := dst.CopyToHost(xs); err != nil {
			return err
		}
		prev := (r.Rank + r.World - 1) % r.World
		for i, v := range xs {
			if v != float32(prev*10000+i) {
				return fmt.Errorf("PE %d: dst[%d] = %v, want %v", r.Rank, i, v, prev*10000+i)
			}
		}
		fmt.Printf("PE %d of %d (%s, NVSHMEM %s): received PE %d's %d floats\n", r.Rank, r.World, r.Backend, r.NVSHMEM.Version(), prev, n)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`

// TestGeneratedNVSHMEMLauncher generates a package whose kernel calls NVSHMEM (with the
// real device library), runs it on 3 emulated PEs, then again with the emulator claiming
// another NVSHMEM version, which must fail naming both versions.
func TestGeneratedNVSHMEMLauncher(t *testing.T) {
	gobin := tooltest.Go(t)
	tooltest.Require(t, func() (string, error) { return toolchain.LLVMTool("llc") })
	tooltest.Require(t, toolchain.NVSHMEMHome)
	dir, err := os.MkdirTemp(".", "_nvshmemtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	files, err := Files(Package{Name: "main", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{{Name: "shmem_put", Build: shmemPut}}})
	if err != nil {
		t.Fatal(err)
	}
	var goSrc, version string
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f.Name, "_kgen.go") {
			goSrc = string(f.Data)
		}
	}
	for _, want := range []string{"//go:embed nvshmem_devlib.sm_90.ptx", "const NVSHMEMVersion = \"", "genrt.LoadNVSHMEM(d, \"shmem_put\"", "\"nvshmemx_float_put_block\""} {
		if !strings.Contains(goSrc, want) {
			t.Errorf("the generated Go lacks %q", want)
		}
	}
	if _, rest, ok := strings.Cut(goSrc, "const NVSHMEMVersion = \""); ok {
		version, _, _ = strings.Cut(rest, "\"")
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(nvshmemProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "shmemput")
	build := exec.Command(gobin, "build", "-o", bin, "./"+filepath.Base(dir))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(env ...string) (string, error) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), append([]string{"KGEN_BACKEND=emu", "WORLD_SIZE=3", "RANK=", "LOCAL_RANK="}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err != nil || strings.Count(out, "received PE") != 3 {
		t.Fatalf("3 emulated PEs: %v\n%s", err, out)
	}
	out, err = run("KGEN_EMU_NVSHMEM_VERSION=0.0.1")
	if err == nil || !strings.Contains(out, "generated for NVSHMEM "+version) || !strings.Contains(out, "is 0.0.1") {
		t.Fatalf("against NVSHMEM 0.0.1: %v\n%s", err, out)
	}
	t.Logf("against another version: %s", strings.TrimSpace(out))
	if *cudaOut != "" {
		cmd := exec.Command(gobin, "build", "-tags", "cuda", "-o", *cudaOut, "./"+filepath.Base(dir))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags cuda: %v\n%s", err, out)
		}
	}
}
