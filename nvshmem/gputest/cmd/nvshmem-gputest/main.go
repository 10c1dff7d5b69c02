// Command nvshmem-gputest runs kgen's NVSHMEM acceptance test (package nvshmem/gputest) on
// real GPUs: every device operation at every scope, checked on every PE.
//
// It has three modes:
//
//	nvshmem-gputest -devlib DIR          build the NVSHMEM device library the cases call
//	                                     (LLVM 19 and the NVSHMEM wheel; no GPU) into DIR
//	nvshmem-gputest -link -devlib DIR    link the cases' module with it offline (ptxas -c,
//	                                     nvlink; no GPU): what the GPU's JIT linker will do
//	nvshmem-gputest -ranks 2 -devlib DIR start 2 ranks of itself (jit.LaunchRanks); each runs
//	                                     every case on its GPU and reports
//	nvshmem-gputest -emu 4               run every case on the emulator with 4 PEs
//
// The ranks need a binary built with -tags cuda (scripts/gpu-nvshmem.sh builds it).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/nvshmem/devlib"
	"github.com/kgen-dev/kgen/nvshmem/gputest"
	"github.com/kgen-dev/kgen/ptx"
)

func main() {
	dir := flag.String("devlib", "", "folder of the device library (devlib.ptx, libnvshmem_device.a, version)")
	ranks := flag.Int("ranks", 0, "start this many ranks of this program, one per GPU")
	emuPEs := flag.Int("emu", 0, "run the cases on the emulator with this many PEs")
	link := flag.Bool("link", false, "link the cases offline with the device library in -devlib")
	flag.Parse()
	var err error
	switch {
	case *emuPEs > 0:
		err = runEmu(*emuPEs)
	case *link:
		err = linkOffline(*dir)
	case *ranks > 0:
		err = launch(*ranks, *dir)
	case os.Getenv("RANK") != "":
		err = runRank(*dir)
	case *dir != "":
		err = buildDevLib(*dir)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nvshmem-gputest:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Printf(format+"\n", a...) }

func runEmu(n int) error {
	m, err := gputest.NewEmuMachine(n)
	if err != nil {
		return err
	}
	if err := gputest.RunAll(m, ptx.SM90, logf); err != nil {
		return err
	}
	logf("PASS: %d cases on the emulator with %d PEs", len(gputest.Cases()), n)
	return nil
}

// Functions returns the NVSHMEM functions the cases call.
func functions() ([]string, error) {
	m, err := gputest.Module(ptx.SM90)
	if err != nil {
		return nil, err
	}
	out := jit.NVSHMEMCalls(m)
	sort.Strings(out)
	return out, nil
}

func buildDevLib(dir string) error {
	funcs, err := functions()
	if err != nil {
		return err
	}
	l, err := devlib.Open("")
	if err != nil {
		return err
	}
	logf("building the NVSHMEM %s device library for %d functions (sm_90)", l.Version, len(funcs))
	r, err := l.Build(context.Background(), ptx.SM90, funcs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "devlib.ptx"), r.PTX, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "version"), []byte(r.Version+"\n"), 0o644); err != nil {
		return err
	}
	in, err := os.Open(r.Archive)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, "libnvshmem_device.a"))
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	logf("wrote %s (devlib.ptx %d bytes, libnvshmem_device.a, version %s)", dir, len(r.PTX), r.Version)
	return nil
}

func linkOffline(dir string) error {
	dl, err := loadDevLib(dir)
	if err != nil {
		return err
	}
	m, err := gputest.Module(ptx.SM90)
	if err != nil {
		return err
	}
	t0 := time.Now()
	cubin, err := devlib.LinkOffline(context.Background(), ptx.SM90, []byte(m.String()), &devlib.Result{PTX: dl.PTX, Archive: dl.Archive, Version: dl.Version})
	if err != nil {
		return err
	}
	logf("linked the cases (%d NVSHMEM functions) offline for sm_90 in %s: %d-byte cubin", len(jit.NVSHMEMCalls(m)), time.Since(t0).Round(time.Millisecond), len(cubin))
	return nil
}

// loadDevLib reads what buildDevLib wrote.
func loadDevLib(dir string) (*jit.DevLib, error) {
	if dir == "" {
		return nil, fmt.Errorf("-devlib DIR is required (build it with nvshmem-gputest -devlib DIR)")
	}
	p, err := os.ReadFile(filepath.Join(dir, "devlib.ptx"))
	if err != nil {
		return nil, err
	}
	v, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return nil, err
	}
	a, err := filepath.Abs(filepath.Join(dir, "libnvshmem_device.a"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(a); err != nil {
		return nil, err
	}
	return &jit.DevLib{PTX: p, Archive: a, Version: strings.TrimSpace(string(v))}, nil
}

func launch(n int, dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{}
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		args = append(args, "-devlib", abs)
	}
	code, err := jit.LaunchRanks(context.Background(), jit.LaunchOptions{N: n, Prog: exe, Args: args,
		Env: []string{"KGEN_BOOTSTRAP_TIMEOUT=60s"}})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("ranks exited with %d", code)
	}
	logf("PASS: %d ranks ran %d NVSHMEM acceptance cases", n, len(gputest.Cases()))
	return nil
}
