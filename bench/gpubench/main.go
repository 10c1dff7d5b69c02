// Command gpubench measures kgen's kernels on a GPU against the hardware's reference paths,
// with CUDA events, warm-up runs and the median of repeated runs:
//
//	gpubench copy [-bytes 1073741824] [-reps 20]   tiled_copy vs a device-to-device cuMemcpy
//	gpubench lib [-reps 30] [-sweep] [-only k,..]  every single-GPU library kernel at the
//	                                               shapes of docs/bench.md (TSV; see lib.go)
//	gpubench mlp [-tokens 128,1024,8192]          an MLP block (GEMM + bias + SiLU, GEMM +
//	                                               residual, bf16) checked on samples (gemm_mlp.go)
//	gpubench fused [-sizes ...] [-json]            ag_gemm, gemm_rs, gemm_ar vs kgen's unfused
//	                                               pair and plain gemm, per rank (fused.go)
//	gpubench attention [-b 16 -s 1024 -h 16 -d 128] [-tokens 16384] [-causal] [-dir DIR]
//	                   [-persistent[=false]] [-schedule strided|lpt|dynamic]
//	                                               forward attention vs float64 samples; with
//	                                               -dir, inputs for torch_attention.py (attention.go)
//	gpubench decode [-b 1,16,64 -ctx 1024,8192,32768 -q 1 -h 32 -hkv 8 -d 128 -page 16] [-dir DIR]
//	                [-splits N] [-bm 16 -bn 64 -warps 4 -stages 3 -prefetch]
//	                                               paged-KV decode attention (ops.AttentionDecode)
//	                                               vs float64 samples, forced splits or tiling to
//	                                               A/B; with -dir, inputs for torch_decode.py
//	                                               (attention_decode.go)
//	gpubench grouped [-groups 8 -rows 4096 -n 4096 -k 7168] [-counts ..] [-skew 0.5] [-dir DIR]
//	                 [-variants pick,128x256:3s:tma:band8,..] [-dense]
//	                                               the MoE experts' grouped gemm (ops.GroupedMatmul)
//	                                               in each configuration vs float64 samples; with
//	                                               -dir, kgen.json for torch_grouped.py (grouped.go)
//	gpubench collsim [-ranks 2,4] [-bytes ...] [-old DIR]  the p2p collectives with N ranks
//	                                               simulated on one GPU, current vs old PTX
//	                                               (see collsim.go)
//
// GPUBENCH_TIMING=queued times runs enqueued back to back (the GPU's time, launch latency
// hidden) instead of each run alone (see timeIt).
//
// Build it with the cuda tag (see docs/jit.md) and run it on a GPU machine; built without the
// tag it runs on the emulator, which is only useful to check that it works.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// commands are gpubench's subcommands: each parses its own flags.
var commands = map[string]func(args []string) error{
	"copy":      runCopy,
	"lib":       runLib,
	"gemm":      runGemm,
	"mlp":       runMLP,
	"fused":     runFused,
	"collsim":   runCollsim,
	"ops":       runOps,
	"attention": runAttention,
	"decode":    runAttentionDecode,
	"grouped":   runGrouped,
}

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		var names []string
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		log.Fatalf("usage: gpubench COMMAND [flags] (commands: %v)", names)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		log.Print("gpubench ", os.Args[1], ": ", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2) // a bad flag, as the flag package exits
		}
		os.Exit(1)
	}
}

// usageError is a bad flag or flag value: gpubench exits 2 for it.
type usageError struct{ error }

// usagef returns a usageError of the formatted text.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func runCopy(args []string) error {
	fs := flag.NewFlagSet("copy", flag.ExitOnError)
	bytes := fs.Int64("bytes", 1<<30, "bytes to copy")
	reps := fs.Int("reps", 20, "timed repetitions (after 3 warm-ups)")
	fs.Parse(args)
	return benchCopy(*bytes, *reps)
}

// timeIt runs f reps times between events on s and returns the median duration. By default
// each run is timed alone (events around it, then a synchronize), so a run's time includes
// the host's launch latency where the run is short; with GPUBENCH_TIMING=queued the runs are
// enqueued back to back with an event between each two and synchronized once, so each
// interval is the GPU's time for the run with the queue kept full (what a CUDA graph or a
// busy stream sees).
func timeIt(d *jit.Device, s *jit.Stream, reps int, f func() error) (time.Duration, error) {
	if reps < 1 {
		return 0, usagef("-reps %d: want at least one timed repetition", reps)
	}
	switch mode := os.Getenv("GPUBENCH_TIMING"); mode {
	case "", "sync":
	case "queued":
		return timeQueued(d, s, reps, f)
	default:
		return 0, usagef("GPUBENCH_TIMING=%q: want sync (the default) or queued", mode)
	}
	e0, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e0.Close()
	e1, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e1.Close()
	for i := 0; i < 3; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	var ts []time.Duration
	for i := 0; i < reps; i++ {
		if err := e0.Record(s); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
		if err := e1.Record(s); err != nil {
			return 0, err
		}
		if err := e1.Synchronize(); err != nil {
			return 0, err
		}
		t, err := e0.Elapsed(e1)
		if err != nil {
			return 0, err
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[len(ts)/2], nil
}

// timeQueued is timeIt with GPUBENCH_TIMING=queued: reps+1 events recorded between reps runs
// enqueued back to back after the warm-ups, one synchronize, the median interval.
func timeQueued(d *jit.Device, s *jit.Stream, reps int, f func() error) (time.Duration, error) {
	evs := make([]*jit.Event, reps+1)
	defer func() {
		for _, e := range evs {
			if e != nil {
				e.Close()
			}
		}
	}()
	for i := range evs {
		var err error
		if evs[i], err = d.NewEvent(); err != nil {
			return 0, err
		}
	}
	for i := 0; i < 3; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	for i := 0; i < reps; i++ {
		if err := evs[i].Record(s); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := evs[reps].Record(s); err != nil {
		return 0, err
	}
	if err := evs[reps].Synchronize(); err != nil {
		return 0, err
	}
	ts := make([]time.Duration, reps)
	for i := range ts {
		t, err := evs[i].Elapsed(evs[i+1])
		if err != nil {
			return 0, err
		}
		ts[i] = t
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[len(ts)/2], nil
}

// loadKernel builds the library kernel id for sm_90 and loads it on d with its declared
// parameters (launches check their element types); the returned func unloads it.
func loadKernel(d *jit.Device, id kernels.ID) (*jit.Function, func() error, error) {
	spec, err := kernels.Find(id)
	if err != nil {
		return nil, nil, err
	}
	b, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: id.DType})
	if err != nil {
		return nil, nil, err
	}
	m, err := d.Load(jit.Source{Module: b.Module, Params: map[string][]jit.ParamInfo{b.Entry: jit.ParamInfos(b.Params)}})
	if err != nil {
		return nil, nil, err
	}
	fn, err := m.Function(b.Entry)
	if err != nil {
		return nil, nil, errors.Join(err, m.Close())
	}
	return fn, m.Close, nil
}

func benchCopy(nbytes int64, reps int) error {
	n := int(nbytes / 4)
	if n <= 0 || int64(n) >= 1<<31 {
		return fmt.Errorf("-bytes %d: want 4 .. 8 GiB", nbytes)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	fn, closeFn, err := loadKernel(d, kernels.ID{Family: kernels.FamilyTiledCopy, DType: dsl.F32})
	if err != nil {
		return err
	}
	defer closeFn()
	src, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	defer src.Free()
	dst, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	defer dst.Free()
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i % 1000003)
	}
	if err := src.CopyFromHost(host); err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	tile := kernels.TiledCopyElems(dsl.F32)
	cfg := jit.LaunchConfig{Grid: jit.D1((n + tile - 1) / tile), Block: jit.D1(256), Stream: s}
	tk, err := timeIt(d, s, reps, func() error { return fn.LaunchArgs(cfg, launch.Copy[float32]{Src: src, Dst: dst, N: uint32(n)}) })
	if err != nil {
		return err
	}
	check := make([]float32, n)
	if err := dst.CopyToHost(check); err != nil {
		return err
	}
	for i := range check {
		if check[i] != host[i] {
			return fmt.Errorf("tiled_copy: dst[%d] = %v, want %v", i, check[i], host[i])
		}
	}
	tm, err := timeIt(d, s, reps, func() error { return s.CopyDtoD(dst.DevPtr(), src.DevPtr(), int64(n)*4) })
	if err != nil {
		return err
	}
	bw := func(t time.Duration) float64 { return 2 * float64(int64(n)*4) / t.Seconds() / 1e9 }
	fmt.Printf("device: %s (%s)\n", d.Info().Name, d.Info().Arch)
	fmt.Printf("copy %d bytes, median of %d after 3 warm-ups (GB/s = bytes read + written per second)\n", int64(n)*4, reps)
	fmt.Printf("  tiled_copy f32 (256 threads x 4 x 128-bit): %8.1f us  %7.1f GB/s\n", float64(tk.Nanoseconds())/1e3, bw(tk))
	fmt.Printf("  cuMemcpyDtoD:                               %8.1f us  %7.1f GB/s\n", float64(tm.Nanoseconds())/1e3, bw(tm))
	fmt.Printf("  tiled_copy / memcpy bandwidth: %.1f%%\n", 100*tm.Seconds()/tk.Seconds())
	return nil
}
