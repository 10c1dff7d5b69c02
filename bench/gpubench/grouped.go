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

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ops"
)

// runGrouped is `gpubench grouped`: times ops.GroupedMatmul (gemm_sm90_grouped, bf16, the
// MoE experts' gemm) with CUDA events (median of -reps after 3 warm-ups) for -groups
// experts of -rows rows each (or the -counts given, or with -skew random counts of the
// same total), N x K weights per expert; checks 64 sampled outputs against float64 and
// prints µs and TFLOP/s (2*rows*N*K). With -dir it writes kgen.json (the counts, shape, µs)
// for scripts/bench/torch_grouped.py, which times torch._grouped_mm on the same shape.
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
	return benchGrouped(d, counts, *n, *k, *reps, *dir)
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

// groupedRecord is what torch_grouped.py reads back.
type groupedRecord struct {
	Counts     []int
	N, K       int
	Kernel     string
	KgenUS     float64
	TFLOPs     float64
	SampleErr  float64 // the largest sampled |D - ref| / tolerance
	DeviceName string
}

func benchGrouped(d *jit.Device, counts []int, n, k, reps int, dir string) error {
	ctx := context.Background()
	g := len(counts)
	offs := make([]int32, g+1)
	for i, c := range counts {
		offs[i+1] = offs[i] + int32(c)
	}
	total := int(offs[g])
	rng := rand.New(rand.NewSource(int64(total*7 + n*3 + k)))
	host := func(cnt int) []fp.BF16 {
		v := make([]fp.BF16, cnt)
		for i := range v {
			v[i] = fp.BF16Of(2*rng.Float32() - 1)
		}
		return v
	}
	ha, hb := host(total*k), host(g*k*n)
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	up := func(h []fp.BF16, shape ...int) (ops.Tensor[fp.BF16], *jit.Buffer[fp.BF16], error) {
		b, err := jit.Alloc[fp.BF16](d, max(len(h), 1))
		if err != nil {
			return ops.Tensor[fp.BF16]{}, nil, err
		}
		frees = append(frees, func() { b.Free() })
		if err := b.CopyFromHost(h); err != nil {
			return ops.Tensor[fp.BF16]{}, nil, err
		}
		t, err := ops.New(b, shape...)
		return t, b, err
	}
	a, _, err := up(ha, total, k)
	if err != nil {
		return err
	}
	b, _, err := up(hb, g, k, n)
	if err != nil {
		return err
	}
	out, ob, err := up(make([]fp.BF16, total*n), total, n)
	if err != nil {
		return err
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
	t, err := timeIt(d, s, reps, func() error { return ops.GroupedMatmul(ctx, s, out, a, b, off, nil) })
	if err != nil {
		return err
	}
	hd := make([]fp.BF16, total*n)
	if err := ob.CopyToHost(hd); err != nil {
		return err
	}
	// 64 sampled outputs against float64.
	worst := 0.0
	grp := func(r int) int {
		for i := 0; i < g; i++ {
			if r < int(offs[i+1]) {
				return i
			}
		}
		return g - 1
	}
	for i := 0; i < 64 && total > 0; i++ {
		r, c := rng.Intn(total), rng.Intn(n)
		e := grp(r)
		want, abs := 0.0, 0.0
		for l := 0; l < k; l++ {
			x := float64(ha[r*k+l].Float32()) * float64(hb[(e*k+l)*n+c].Float32())
			want += x
			abs += math.Abs(x)
		}
		tol := ref.GemmTolerance(jit.ElemType[fp.BF16](), k, abs, want)
		worst = math.Max(worst, math.Abs(float64(hd[r*n+c].Float32())-want)/tol)
	}
	us := float64(t.Nanoseconds()) / 1e3
	tflops := 2 * float64(total) * float64(n) * float64(k) / (us * 1e-6) / 1e12
	cfg, err := kernels.GemmSM90GroupedFor(jit.ElemType[fp.BF16](), jit.ElemType[fp.BF16](), total, n, k, g, max(d.Info().Multiproc, 1))
	if err != nil {
		return err
	}
	fmt.Printf("grouped %d experts, %d rows (%v), N %d, K %d, bf16: %s: %9.1f us %7.1f TFLOP/s (median of %d), sampled error %.3g of tolerance\n",
		g, total, counts, n, k, cfg.Name(), us, tflops, reps, worst)
	if worst > 1 {
		return fmt.Errorf("sampled outputs wrong: worst %.3g of tolerance", worst)
	}
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(groupedRecord{Counts: counts, N: n, K: k, Kernel: cfg.Name(), KgenUS: us, TFLOPs: tflops, SampleErr: worst, DeviceName: d.Info().Name}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kgen.json"), js, 0o644)
}
