package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
	"github.com/kgen-dev/kgen/tune"
)

func init() {
	register(&command{
		name:    "tune",
		summary: "time a kernel's candidate configurations on the device and cache the fastest",
		usage: `gemm (-m M -n N -k K | -shapes MxNxK,...|llm) [-dtype bf16] [-out T] [--backend cuda|emu] [-device 0] [-force] [-verify [-tolerance 0.03]] [-check] [-bucket] [-warmup W] [-reps R] [-dir D] [-timeout D] [-epilogue bias,silu]

Times every gemm_sm90 candidate (kernels.GemmSM90Candidates) for each shape on the device,
prints each one's median time, the winner and the cache file that keeps it ($KGEN_TUNE_DIR,
else the user cache folder's kgen/tune). A shape whose winner is cached is not timed again
(-force times it again). -verify then times the winner beside every candidate in this
process and reports winner/best, failing when over 1 + -tolerance. -shapes llm is the nine
LLM shapes of docs/bench.md: M in {128, 1024, 8192} x (N, K) in {(4096, 4096), (14336, 4096),
(4096, 14336)}. -epilogue tunes the GEMM with that fused epilogue (bias, activation,
residual, fp8 scales) as a kernel of its own: ops.Matmul with those options takes its winner.`,
		run: runTune,
	})
}

// llmShapes are docs/bench.md's nine LLM GEMM shapes (-shapes llm).
var llmShapes = "128x4096x4096,128x14336x4096,128x4096x14336,1024x4096x4096,1024x14336x4096,1024x4096x14336,8192x4096x4096,8192x14336x4096,8192x4096x14336"

// maxEmuTuneElems bounds the elements of A, B and D on the emulator, which runs every
// thread on the CPU.
const maxEmuTuneElems = 1 << 22

func runTune(e *env, args []string) error {
	c := commands["tune"]
	fs := flags(e, c)
	m := fs.Int("m", 0, "rows of A and D")
	n := fs.Int("n", 0, "columns of B and D")
	k := fs.Int("k", 0, "columns of A, rows of B")
	shapes := fs.String("shapes", "", "comma-separated MxNxK shapes, or llm (docs/bench.md's nine), in place of -m -n -k")
	dtype := fs.String("dtype", "bf16", "input element type: bf16, f16, e4m3 or e5m2")
	outType := fs.String("out", "", "output element type: bf16, f16 or f32 (default: the input's; bf16 for fp8)")
	backend := fs.String("backend", "", "cuda or emu (default: $KGEN_BACKEND, else the GPU when the binary has the cuda tag and one is visible, else emu)")
	device := fs.Int("device", 0, "device ordinal")
	force := fs.Bool("force", false, "time the candidates even when a winner is cached, and replace it")
	verify := fs.Bool("verify", false, "then time the winner beside every candidate and report winner/best")
	tolerance := fs.Float64("tolerance", 0.03, "with -verify: fail when winner/best is over 1 + this")
	check := fs.Bool("check", false, "compare a sample of each candidate's D with a float64 reference before timing it")
	bucket := fs.Bool("bucket", false, "key the winner by the shape's powers of two (nearby shapes share it) instead of the exact shape")
	warmup := fs.Int("warmup", 0, fmt.Sprintf("untimed runs per candidate (0: %d)", tune.DefaultWarmup))
	reps := fs.Int("reps", 0, fmt.Sprintf("timed rounds over the candidates; the median counts (0: %d)", tune.DefaultReps))
	dir := fs.String("dir", "", "cache folder (default $"+tune.DirEnv+", else the user cache folder's kgen/tune)")
	timeout := fs.Duration("timeout", 0, "stop after this long (0: no limit; Ctrl-C stops too)")
	epilogue := fs.String("epilogue", "", "tune the GEMM with this fused epilogue (kernels.ParseEpilogue: options joined by , or +: scales, bias, relu, gelu, silu, residual), a kernel of its own")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "gemm" {
		if len(pos) == 0 {
			return usagef("no kernel given: kgen tune gemm -m M -n N -k K")
		}
		return usagef("kernel %s: want gemm (the sm_90a GEMM is the one tuned so far)", excerpt.Quote(strings.Join(pos, " ")))
	}
	in, ok := ptx.ParseType(*dtype)
	if !ok || (in != dsl.BF16 && in != dsl.F16 && in != dsl.E4M3 && in != dsl.E5M2) {
		return usagef("-dtype %s: want bf16, f16, e4m3 or e5m2", excerpt.Quote(*dtype))
	}
	out := in
	if in == dsl.E4M3 || in == dsl.E5M2 {
		out = dsl.BF16
	}
	if *outType != "" {
		t, ok := ptx.ParseType(*outType)
		if !ok || (t != dsl.BF16 && t != dsl.F16 && t != dsl.F32) {
			return usagef("-out %s: want bf16, f16 or f32", excerpt.Quote(*outType))
		}
		out = t
	}
	epi, err := kernels.ParseEpilogue(*epilogue)
	if err != nil {
		return usagef("-epilogue: %v", err)
	}
	var probs []tune.GemmProblem
	if *shapes != "" {
		if *m != 0 || *n != 0 || *k != 0 {
			return usagef("-shapes with -m, -n or -k: give one or the other")
		}
		list := *shapes
		if list == "llm" {
			list = llmShapes
		}
		for _, s := range strings.Split(list, ",") {
			mnk, err := parseShape(s)
			if err != nil {
				return err
			}
			probs = append(probs, tune.GemmProblem{In: in, Out: out, M: mnk[0], N: mnk[1], K: mnk[2], Epilogue: epi})
		}
	} else {
		if *m <= 0 || *n <= 0 || *k <= 0 {
			return usagef("-m %d -n %d -k %d: want three positive extents (or -shapes)", *m, *n, *k)
		}
		probs = append(probs, tune.GemmProblem{In: in, Out: out, M: *m, N: *n, K: *k, Epilogue: epi})
	}
	tolSet := false
	fs.Visit(func(f *flag.Flag) { tolSet = tolSet || f.Name == "tolerance" })
	if tolSet && !*verify {
		return usagef("-tolerance without -verify: it bounds -verify's winner/best")
	}
	if *tolerance < 0 || math.IsNaN(*tolerance) || math.IsInf(*tolerance, 0) {
		return usagef("-tolerance %g: want a non-negative finite fraction (0.03 is 3%%)", *tolerance)
	}
	if *timeout < 0 {
		return usagef("-timeout %v: want a positive duration (or 0: no limit)", *timeout)
	}
	if *warmup < 0 || *reps < 0 || *warmup > tune.MaxCount || *reps > tune.MaxCount {
		return usagef("-warmup %d -reps %d: want counts from 0 to %d (0: the defaults)", *warmup, *reps, tune.MaxCount)
	}
	if *device < 0 {
		return usagef("-device %d: want a device ordinal, 0 or more", *device)
	}
	b, err := tuneBackend(*backend)
	if err != nil {
		return err
	}
	for _, p := range probs {
		if err := p.Check(); err != nil {
			return usagef("%s: %s", p, strings.TrimPrefix(err.Error(), "tune: "))
		}
		// In float64: the int64 sum of three products of extents up to 2^31 wraps.
		if b == jit.Emulator && float64(p.M)*float64(p.N)+float64(p.M)*float64(p.K)+float64(p.K)*float64(p.N) > maxEmuTuneElems {
			return usagef("%s on the emulator: A, B and D hold more than %d elements (the emulator runs every thread on the CPU; use --backend cuda)", p, maxEmuTuneElems)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	tu, err := tune.New(*dir, tune.Schedule{Warmup: *warmup, Reps: *reps})
	if err != nil {
		return err
	}
	d, err := jit.OpenBackend(b, *device)
	if err != nil {
		return err
	}
	defer d.Close()
	info := d.Info()
	fmt.Fprintf(e.stdout, "device %d: %s (%s, %s, %d SMs, driver %d); cache %s\n", info.Ordinal, info.Name, info.Backend, info.Arch, info.Multiproc, info.DriverVersion, tu.Dir())
	var over, uncached []string // shapes over -verify's tolerance; winners not cached
	for _, p := range probs {
		res, err := tune.TuneGemm(ctx, tu, d, p, tune.GemmOptions{Bucket: *bucket, Force: *force, Check: *check})
		if err != nil && res.Winner.Name == "" {
			return fmt.Errorf("%s: %w", p, err)
		}
		flops := 2 * float64(p.M) * float64(p.N) * float64(p.K)
		if res.Cached {
			fmt.Fprintf(e.stdout, "gemm %s: cached winner %s (%s); nothing timed (-force times again)\n", p, res.Winner.Name, res.Path)
		} else {
			fmt.Fprintf(e.stdout, "gemm %s: %d candidates, median of %d after %d warm-up runs\n", p, len(res.Times), tu.Schedule().Reps, tu.Schedule().Warmup)
			printTimings(e, res.Times, res.Winner.Name, flops)
			if err != nil {
				fmt.Fprintf(e.stdout, "  winner %s, NOT cached: %v\n", res.Winner.Name, err)
				uncached = append(uncached, fmt.Sprintf("%s (%v)", tune.ExactShape(p.M, p.N, p.K), err))
			} else {
				fmt.Fprintf(e.stdout, "  winner %s, cached in %s\n", res.Winner.Name, res.Path)
			}
		}
		if !*verify {
			continue
		}
		v, err := tune.VerifyGemm(ctx, d, p, res.Winner.Name, tu.Schedule(), *check)
		if err != nil {
			return fmt.Errorf("%s: -verify: %w", p, err)
		}
		fmt.Fprintf(e.stdout, "  verify (every candidate timed again beside the winner):\n")
		printTimings(e, v.Times, v.Winner, flops)
		verdict := "ok"
		if v.Ratio > 1+*tolerance {
			verdict = fmt.Sprintf("OVER the %.1f%% tolerance", 100**tolerance)
			over = append(over, fmt.Sprintf("%s (%.3f)", tune.ExactShape(p.M, p.N, p.K), v.Ratio))
		}
		fmt.Fprintf(e.stdout, "  verify %s: winner %s / best %s = %.4f: %s\n", tune.ExactShape(p.M, p.N, p.K), v.Winner, v.Times[v.Best].Name, v.Ratio, verdict)
	}
	var errs []string
	if len(uncached) > 0 {
		// The cache is what tune is for (ops.Matmul reads the winners from it): a winner
		// timed but not kept is a failure, not a success with a remark.
		errs = append(errs, fmt.Sprintf("%d of %d shapes' winners were NOT cached, so nothing will use them: %s", len(uncached), len(probs), strings.Join(uncached, "; ")))
	}
	if len(over) > 0 {
		errs = append(errs, fmt.Sprintf("-verify: %d of %d shapes' winners are over 1 + %g of the best: %s", len(over), len(probs), *tolerance, strings.Join(over, ", ")))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// printTimings prints one line per candidate: its median and rate, or why it failed; the
// winner is marked.
func printTimings(e *env, ts []tune.Timing, winner string, flops float64) {
	for _, t := range ts {
		mark := " "
		if t.Name == winner {
			mark = "*"
		}
		if t.Err != nil {
			msg := excerpt.Cut(t.Err.Error(), maxPrintedErr)
			fmt.Fprintf(e.stdout, "  %s %-48s failed: %s\n", mark, t.Name, strings.ReplaceAll(msg, "\n", "; "))
			continue
		}
		us := float64(t.Median.Nanoseconds()) / 1e3
		fmt.Fprintf(e.stdout, "  %s %-48s %10.1f us %8.3g TFLOP/s\n", mark, t.Name, us, flops/t.Median.Seconds()/1e12)
	}
}

// maxPrintedErr bounds the bytes of a candidate's error printed (a build log may be long).
const maxPrintedErr = 1 << 10

// parseShape reads "MxNxK".
func parseShape(s string) ([3]int, error) {
	var mnk [3]int
	f := strings.Split(strings.TrimSpace(s), "x")
	if strings.TrimSpace(s) == "llm" {
		return mnk, usagef("-shapes: llm stands alone (-shapes llm: docs/bench.md's nine shapes), not in a list of MxNxK")
	}
	if len(f) != 3 {
		return mnk, usagef("-shapes: %s is not MxNxK", excerpt.Quote(s))
	}
	for i, v := range f {
		x, err := strconv.Atoi(v)
		if errors.Is(err, strconv.ErrRange) && v[0] >= '0' && v[0] <= '9' {
			return mnk, usagef("-shapes: %s: %s is too large (an extent is at most 2^31-1)", excerpt.Quote(s), excerpt.Quote(v))
		}
		if err != nil || x <= 0 || v[0] < '0' || v[0] > '9' { // digits only: no sign
			return mnk, usagef("-shapes: %s: %s is not a positive extent", excerpt.Quote(s), excerpt.Quote(v))
		}
		mnk[i] = x
	}
	return mnk, nil
}

// tuneBackend picks the backend: the flag, else jit.DefaultBackend.
func tuneBackend(flag string) (jit.Backend, error) {
	if flag == "" {
		b, err := jit.DefaultBackend()
		if err != nil {
			return "", &usageError{err.Error()}
		}
		return b, nil
	}
	b, err := jit.ParseBackend(flag)
	if err != nil {
		return "", usagef("--backend %s: want cuda or emu", excerpt.Quote(flag))
	}
	return b, nil
}
