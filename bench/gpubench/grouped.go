package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ops"
)

// runGrouped is `gpubench grouped`: times ops.GroupedMatmul (gemm_sm90_grouped, bf16, or
// e4m3 -> bf16 with per-row and per-expert, per-column scales: the MoE experts' gemm) with CUDA events (median of -reps after 3 warm-ups) for -groups
// experts of -rows rows each (or the -counts given, or with -skew random counts of the
// same total), N x K weights per expert; checks 64 sampled outputs against float64 and
// prints µs and TFLOP/s (2*rows*N*K). -variants times several kernel configurations in
// turn on the same inputs (GroupedMatmulOptions.Config; each checked the same way, D
// cleared before each): "pick" is GemmSM90GroupedFor's, BMxBN:<stages>s[:tma][:band<b>]
// forces one (128x256:3s:tma:band8: 128x256 tiles, 3 stages, the TMA-store epilogue, bands
// of 8 row tiles). -dense also times ops.Matmul on A (every row) times expert 0's B (e4m3:
// without the scales): the same flops as one dense gemm, the bound a grouped kernel aims at. With -dir it writes
// kgen.json (the counts, shape, each variant's µs) for scripts/bench/torch_grouped.py, which
// times torch._grouped_mm on the same shape and prints every variant against it.
func runGrouped(args []string) error {
	fs := flag.NewFlagSet("grouped", flag.ExitOnError)
	groups := fs.Int("groups", 8, "experts")
	rows := fs.Int("rows", 4096, "rows per expert (the total is groups*rows)")
	countsFlag := fs.String("counts", "", "rows per expert, comma-separated (overrides -groups and -rows)")
	skew := fs.Float64("skew", 0, "0: equal counts; in (0, 1]: random counts of the same total, each within (1 +- skew) of the mean")
	n := fs.Int("n", 4096, "N: each expert's output columns")
	k := fs.Int("k", 7168, "K: each expert's input columns")
	reps := fs.Int("reps", 30, "timed repetitions (after 3 warm-ups)")
	dir := fs.String("dir", "", "write kgen.json here for torch_grouped.py")
	dtype := fs.String("dtype", "bf16", "bf16, or e4m3 (B each expert's N x K, bf16 out, ScaleA and ScaleB)")
	variantsFlag := fs.String("variants", "pick", "configurations, comma-separated: pick, or BMxBN:<stages>s[:tma][:band<b>] (BM 64 or 128, BN 64, 128 or 256)")
	dense := fs.Bool("dense", false, "also time ops.Matmul of all rows by expert 0's B (the same flops, one dense gemm)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var counts []int
	if *countsFlag != "" {
		for _, f := range strings.Split(*countsFlag, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 0 || c > 1<<24 {
				return usagef("-counts: bad value %q (want integers 0..2^24)", f)
			}
			counts = append(counts, c)
		}
	} else {
		if *groups < 1 || *groups > kernels.GemmSM90MaxGroups || *rows < 0 || *rows > 1<<24 {
			return usagef("-groups %d -rows %d: want 1..%d groups of 0..2^24 rows", *groups, *rows, kernels.GemmSM90MaxGroups)
		}
		counts = make([]int, *groups)
		for i := range counts {
			counts[i] = *rows
		}
	}
	switch {
	case len(counts) < 1 || len(counts) > kernels.GemmSM90MaxGroups:
		return usagef("%d groups: want 1..%d", len(counts), kernels.GemmSM90MaxGroups)
	case *skew < 0 || *skew > 1:
		return usagef("-skew %g: want 0..1", *skew)
	case *n < 8 || *k < 8 || *n%8 != 0 || *k%8 != 0 || *n > 1<<20 || *k > 1<<20:
		return usagef("-n %d -k %d: want multiples of 8 up to 2^20", *n, *k)
	case *reps < 1:
		return usagef("-reps %d: want at least one timed repetition", *reps)
	case *dtype != "bf16" && *dtype != "e4m3":
		return usagef("-dtype %q: want bf16 or e4m3", *dtype)
	case *dtype == "e4m3" && *k%16 != 0:
		return usagef("-k %d: e4m3 wants a multiple of 16", *k)
	}
	in := dsl.BF16
	if *dtype == "e4m3" {
		in = dsl.E4M3
	}
	var variants []groupedVariant
	for _, v := range strings.Split(*variantsFlag, ",") {
		gv, err := parseGroupedVariant(strings.TrimSpace(v), in)
		if err != nil {
			return err
		}
		variants = append(variants, gv)
	}
	if *skew > 0 {
		skewCounts(counts, *skew, rand.New(rand.NewSource(1)))
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	if int64(total)*int64(*k)+int64(len(counts))*int64(*k)*int64(*n)+int64(total)*int64(*n) > 24<<30 {
		return usagef("A, B and D hold more than 24 Gi elements: make the problem smaller")
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Printf("device: %s (%s, %d SMs)\n", d.Info().Name, d.Info().Arch, d.Info().Multiproc)
	if *dtype == "e4m3" {
		return benchGrouped[fp.E4M3](d, counts, *n, *k, *reps, *dir, variants, *dense, fp.E4M3Of)
	}
	return benchGrouped[fp.BF16](d, counts, *n, *k, *reps, *dir, variants, *dense, fp.BF16Of)
}

// groupedVariant is one configuration -variants names: Config's BN 0 for the pick.
type groupedVariant struct {
	Name   string
	Config kernels.GemmSM90GroupedConfig
}

// parseGroupedVariant reads "pick" or BMxBN:<stages>s[:tma][:band<b>] for inputs in (bf16
// out), checked by the configuration's Check.
func parseGroupedVariant(s string, in dsl.Type) (groupedVariant, error) {
	if s == "pick" {
		return groupedVariant{Name: s}, nil
	}
	bad := func(why string) (groupedVariant, error) {
		return groupedVariant{}, usagef("-variants: %q: %s (want pick or BMxBN:<stages>s[:tma][:band<b>], e.g. 128x256:3s:tma:band8)", s, why)
	}
	f := strings.Split(s, ":")
	var bm, bn, stages int
	if len(f) < 2 {
		return bad("no stages")
	}
	if _, err := fmt.Sscanf(f[0], "%dx%d", &bm, &bn); err != nil || (bm != 64 && bm != 128) {
		return bad("the tile is BMxBN with BM 64 or 128")
	}
	if !strings.HasSuffix(f[1], "s") {
		return bad("stages are <n>s")
	}
	stages, err := strconv.Atoi(strings.TrimSuffix(f[1], "s"))
	if err != nil {
		return bad("stages are <n>s")
	}
	c := kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: in, Out: dsl.BF16, BN: bn, Consumers: bm / 64, Stages: stages}}
	for _, o := range f[2:] {
		switch {
		case o == "tma":
			c.TMAStore = true
		case strings.HasPrefix(o, "band"):
			if c.BandM, err = strconv.Atoi(strings.TrimPrefix(o, "band")); err != nil {
				return bad("band<b> takes a number of row tiles")
			}
		default:
			return bad(fmt.Sprintf("option %q (want tma or band<b>)", o))
		}
	}
	c.Scales = c.FP8()
	if err := c.Check(); err != nil {
		return bad(err.Error())
	}
	return groupedVariant{Name: s, Config: c}, nil
}

// skewCounts redistributes counts' total at random, each count within (1 +- skew) of the
// mean before the last fixes the total (clamped at 0).
func skewCounts(counts []int, skew float64, rng *rand.Rand) {
	total := 0
	for _, c := range counts {
		total += c
	}
	mean := float64(total) / float64(len(counts))
	left := total
	for i := range counts {
		if i == len(counts)-1 {
			counts[i] = left
			break
		}
		c := min(max(int(mean*(1+skew*(2*rng.Float64()-1))), 0), left)
		counts[i] = c
		left -= c
	}
}

// groupedRecord is what torch_grouped.py reads back: Kernel, KgenUS, TFLOPs and SampleErr
// are the first variant's; Variants holds every variant (and the dense gemm with -dense).
type groupedRecord struct {
	Counts     []int
	N, K       int
	DType      string // bf16 or e4m3
	Kernel     string
	KgenUS     float64
	TFLOPs     float64
	SampleErr  float64 // the largest sampled |D - ref| / tolerance
	DeviceName string
	Variants   []groupedTiming
}

// groupedTiming is one variant's result.
type groupedTiming struct {
	Variant, Kernel string
	US, TFLOPs      float64
	SampleErr       float64
}

func benchGrouped[T interface{ fp.BF16 | fp.E4M3 }](d *jit.Device, counts []int, n, k, reps int, dir string, variants []groupedVariant, dense bool, conv func(float32) T) error {
	ctx := context.Background()
	g := len(counts)
	offs := make([]int32, g+1)
	for i, c := range counts {
		offs[i+1] = offs[i] + int32(c)
	}
	total := int(offs[g])
	rng := rand.New(rand.NewSource(int64(total*7 + n*3 + k)))
	in := jit.ElemType[T]()
	fp8 := in == jit.ElemType[fp.E4M3]()
	host := func(cnt int) []T {
		v := make([]T, cnt)
		for i := range v {
			v[i] = conv(2*rng.Float32() - 1)
		}
		return v
	}
	val := func(x T) float64 {
		if v, ok := any(x).(fp.E4M3); ok {
			return float64(v.Float32())
		}
		return float64(any(x).(fp.BF16).Float32())
	}
	// hb holds each expert's K x N matrix (bf16) or N x K (e4m3: B K-major).
	ha, hb := host(total*k), host(g*k*n)
	bAt := func(e, l, c int) float64 {
		if fp8 {
			return val(hb[(e*n+c)*k+l])
		}
		return val(hb[(e*k+l)*n+c])
	}
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	buffer := func(h []T) (*jit.Buffer[T], error) {
		b, err := jit.Alloc[T](d, max(len(h), 1))
		if err != nil {
			return nil, err
		}
		frees = append(frees, func() { b.Free() })
		return b, b.CopyFromHost(h)
	}
	ab, err := buffer(ha)
	if err != nil {
		return err
	}
	a, err := ops.New(ab, total, k)
	if err != nil {
		return err
	}
	bb, err := buffer(hb)
	if err != nil {
		return err
	}
	b, err := ops.New(bb, g, k, n)
	if fp8 { // each expert's N x K row-major matrix, seen as K x N
		b, err = ops.Strided(bb, 0, []int{g, k, n}, []int{n * k, 1, k})
	}
	if err != nil {
		return err
	}
	ob, err := jit.Alloc[fp.BF16](d, max(total*n, 1))
	if err != nil {
		return err
	}
	frees = append(frees, func() { ob.Free() })
	out, err := ops.New(ob, total, n)
	if err != nil {
		return err
	}
	var opt *ops.GroupedMatmulOptions[fp.BF16]
	var hsa, hsb []float32
	if fp8 {
		hsa, hsb = make([]float32, total), make([]float32, g*n)
		for _, v := range [][]float32{hsa, hsb} {
			for i := range v {
				v[i] = 0.5 + 1.5*rng.Float32()
			}
		}
		opt = &ops.GroupedMatmulOptions[fp.BF16]{Alpha: 1}
		for _, x := range []struct {
			h     []float32
			t     *ops.Tensor[float32]
			shape []int
		}{{hsa, &opt.ScaleA, []int{total}}, {hsb, &opt.ScaleB, []int{g, n}}} {
			sb, err := jit.Alloc[float32](d, len(x.h))
			if err != nil {
				return err
			}
			frees = append(frees, func() { sb.Free() })
			if err := sb.CopyFromHost(x.h); err != nil {
				return err
			}
			if *x.t, err = ops.New(sb, x.shape...); err != nil {
				return err
			}
		}
	}
	offBuf, err := jit.Alloc[int32](d, g+1)
	if err != nil {
		return err
	}
	frees = append(frees, func() { offBuf.Free() })
	if err := offBuf.CopyFromHost(offs); err != nil {
		return err
	}
	off, err := ops.New(offBuf, g+1)
	if err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	hd := make([]fp.BF16, total*n)
	zeros := make([]fp.BF16, total*n)
	// 64 sampled outputs against float64 (the same samples for every variant).
	grp := func(r int) int {
		for i := 0; i < g; i++ {
			if r < int(offs[i+1]) {
				return i
			}
		}
		return g - 1
	}
	type sample struct {
		r, c      int
		want, tol float64
	}
	var samples []sample
	for i := 0; i < 64 && total > 0; i++ {
		r, c := rng.Intn(total), rng.Intn(n)
		e := grp(r)
		want, abs := 0.0, 0.0
		for l := 0; l < k; l++ {
			x := val(ha[r*k+l]) * bAt(e, l, c)
			want += x
			abs += math.Abs(x)
		}
		if fp8 {
			f := float64(hsa[r]) * float64(hsb[e*n+c])
			want, abs = want*f, abs*f
		}
		samples = append(samples, sample{r, c, want, ref.GemmTolerance(jit.ElemType[fp.BF16](), k, abs, want)})
	}
	flops := 2 * float64(total) * float64(n) * float64(k)
	rec := groupedRecord{Counts: counts, N: n, K: k, DType: in.String(), DeviceName: d.Info().Name}
	var bad []string
	for _, v := range variants {
		if err := ob.CopyFromHost(zeros); err != nil { // a variant that writes nothing fails the check
			return err
		}
		cfg := v.Config
		if cfg.BN == 0 {
			if cfg, err = kernels.GemmSM90GroupedFor(in, jit.ElemType[fp.BF16](), total, n, k, g, max(d.Info().Multiproc, 1)); err != nil {
				return err
			}
		}
		cfg.Scales = fp8
		o := ops.GroupedMatmulOptions[fp.BF16]{Alpha: 1, Config: cfg}
		if opt != nil {
			o.ScaleA, o.ScaleB = opt.ScaleA, opt.ScaleB
		}
		t, err := timeIt(d, s, reps, func() error { return ops.GroupedMatmul(ctx, s, out, a, b, off, &o) })
		if err != nil {
			return fmt.Errorf("variant %s (%s): %w", v.Name, cfg.Name(), err)
		}
		if err := ob.CopyToHost(hd); err != nil {
			return err
		}
		worst := 0.0
		for _, p := range samples {
			worst = math.Max(worst, math.Abs(float64(hd[p.r*n+p.c].Float32())-p.want)/p.tol)
		}
		us := float64(t.Nanoseconds()) / 1e3
		tm := groupedTiming{Variant: v.Name, Kernel: cfg.Name(), US: us, TFLOPs: flops / (us * 1e-6) / 1e12, SampleErr: worst}
		rec.Variants = append(rec.Variants, tm)
		fmt.Printf("grouped %d experts, %d rows (%v), N %d, K %d, %s: %-8s %s: %9.1f us %7.1f TFLOP/s (median of %d), sampled error %.3g of tolerance\n",
			g, total, counts, n, k, in, v.Name, cfg.Name(), us, tm.TFLOPs, reps, worst)
		if !(worst <= 1) {
			bad = append(bad, fmt.Sprintf("%s: worst %.3g of tolerance", v.Name, worst))
		}
	}
	rec.Kernel, rec.KgenUS, rec.TFLOPs, rec.SampleErr = rec.Variants[0].Kernel, rec.Variants[0].US, rec.Variants[0].TFLOPs, rec.Variants[0].SampleErr
	if dense && total > 0 {
		tm, err := denseGrouped(ctx, d, s, out, a, bb, fp8, n, k, reps)
		if err != nil {
			return err
		}
		tm.TFLOPs = flops / (tm.US * 1e-6) / 1e12
		rec.Variants = append(rec.Variants, tm)
		fmt.Printf("dense ops.Matmul %dx%dx%d (expert 0's B for every row, the same flops): %s: %9.1f us %7.1f TFLOP/s (median of %d)\n",
			total, n, k, tm.Kernel, tm.US, tm.TFLOPs, reps)
	}
	if len(bad) > 0 {
		return fmt.Errorf("sampled outputs wrong: %s", strings.Join(bad, "; "))
	}
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kgen.json"), js, 0o644)
}

// denseGrouped times ops.Matmul of a (every row) by expert 0's B (bb's first K x N, or for
// e4m3 its N x K seen K-major; no scales) into out: one dense gemm of the grouped problem's
// flops. Its Kernel names the configuration GemmSM90For picks.
func denseGrouped[T interface{ fp.BF16 | fp.E4M3 }](ctx context.Context, d *jit.Device, s *jit.Stream, out ops.Tensor[fp.BF16], a ops.Tensor[T], bb *jit.Buffer[T], fp8 bool, n, k, reps int) (groupedTiming, error) {
	b, err := ops.New(bb, k, n)
	if fp8 {
		b, err = ops.Strided(bb, 0, []int{k, n}, []int{1, k})
	}
	if err != nil {
		return groupedTiming{}, err
	}
	o := &ops.MatmulOptions[fp.BF16]{Alpha: 1}
	t, err := timeIt(d, s, reps, func() error { return ops.Matmul(ctx, s, out, a, b, o) })
	if err != nil {
		return groupedTiming{}, fmt.Errorf("dense ops.Matmul: %w", err)
	}
	rows := a.Shape()[0]
	cfg, err := kernels.GemmSM90For(jit.ElemType[T](), jit.ElemType[fp.BF16](), rows, n, k, max(d.Info().Multiproc, 1))
	name := "gemm_sm90 (pick)"
	if err == nil {
		name = cfg.Name()
	}
	return groupedTiming{Variant: "dense", Kernel: name, US: float64(t.Nanoseconds()) / 1e3}, nil
}
