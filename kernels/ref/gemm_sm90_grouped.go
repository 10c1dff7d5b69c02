package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	registerOwn("gemm_sm90_grouped", oneGPU, gemmSM90GroupedHarness)
	registerOwn("gemm_sm90_grouped_masked", oneGPU, gemmSM90GroupedMaskedHarness)
}

// gemmSM90GroupedHarness runs `kgen run gemm_sm90_grouped`: 4 groups of random row counts
// (one of them empty) of about size rows in all, N and K multiples of 8, on two blocks.
func gemmSM90GroupedHarness(r *run) error {
	side := max(int(math.Cbrt(float64(r.size(0)))), 1)
	up8 := func(x int) int { return (x + 7) / 8 * 8 }
	counts := []int{side + 3, 0, 2*side + 1, side/2 + 1}
	n, kk := up8(side+17), up8(side+9)
	if r.p.Size == 0 {
		counts, n, kk = []int{70, 0, 131, 5}, 136, 80
	}
	kk = (kk + 15) / 16 * 16 // fp8: K a multiple of 16
	res, err := RunGemmSM90Grouped(GemmSM90GroupedProblem{Config: kernels.DefaultGemmSM90GroupedConfig(r.p.DType),
		Counts: counts, Lead: 3, Tail: 2, N: n, K: kk, Alpha: 1.5, Beta: -0.5, Seed: r.p.Seed, Blocks: 2})
	r.res = res
	return err
}

// gemmSM90GroupedMaskedHarness runs `kgen run gemm_sm90_grouped_masked`: 5 groups at a
// stride of about size^(1/3)+9 rows, their counts 0, the stride, one past it (clamped),
// stride-1 and a few rows, and -3 (clamped to 0), on two blocks.
func gemmSM90GroupedMaskedHarness(r *run) error {
	side := max(int(math.Cbrt(float64(r.size(0)))), 1)
	up8 := func(x int) int { return (x + 7) / 8 * 8 }
	stride, n, kk := side+9, up8(side+17), up8(side+9)
	if r.p.Size == 0 {
		stride, n, kk = 150, 136, 80
	}
	kk = (kk + 15) / 16 * 16 // fp8: K a multiple of 16
	// As kernels registers gemm_sm90_grouped_masked: the default tiles, TMA store, bands of 8.
	cfg := kernels.DefaultGemmSM90GroupedConfig(r.p.DType)
	cfg.TMAStore, cfg.BandM, cfg.Masked = true, 8, true
	res, err := RunGemmSM90Grouped(GemmSM90GroupedProblem{Config: cfg, Stride: stride,
		Counts: []int{0, stride, stride + 1, stride - 1, side/2 + 1, -3}, Tail: 2, N: n, K: kk, Alpha: 1.5, Beta: -0.5, Seed: r.p.Seed, Blocks: 2})
	r.res = res
	return err
}

// GemmSM90GroupedProblem is one grouped sm_90a gemm run on the emulator: group g has
// Counts[g] rows of A and D, after Lead rows that belong to no group and before Tail such
// rows (the offsets are Lead, Lead+Counts[0], ...; M = Lead + sum(Counts) + Tail). B holds
// len(Counts) K x N matrices (N x K for fp8 inputs). With Config.Scales, ScaleA (per row)
// and ScaleB (per group and column) are random in [0.5, 2). D starts as a sentinel, which the
// rows outside every group must keep. Blocks persistent blocks (0: Config.Grid for a GPU of
// 132 multiprocessors).
//
// With Config.Masked the groups lie in the masked layout instead: group g's slots are rows
// g*Stride.. of A and D (M = len(Counts)*Stride + Tail; Lead must be 0), Counts are the
// device counts (any int32: the kernel clamps them to [0, Stride], and so does the
// reference), and A's rows outside every group hold NaN, so that a tile that read them into
// a stored row, or a store of such a row, fails the check.
type GemmSM90GroupedProblem struct {
	Config      kernels.GemmSM90GroupedConfig
	Counts      []int
	Lead, Tail  int
	Stride      int
	N, K        int
	Alpha, Beta float64
	Seed        int64
	Blocks      int
}

// gemmSM90GroupedSentinel is what D holds before the launch (exact in 16-bit types).
const gemmSM90GroupedSentinel = 7.0

// RunGemmSM90Grouped builds the problem's kernel, runs it on one emulated GPU with random
// inputs and checks every element of D against the float64 reference within
// GemmTolerance: alpha*A*B[g] + beta*C on each group's rows, the sentinel elsewhere.
func RunGemmSM90Grouped(p GemmSM90GroupedProblem) (Result, error) {
	cfg := p.Config
	groups := len(p.Counts)
	if p.Lead < 0 || p.Tail < 0 || (cfg.Masked && p.Lead != 0) {
		return Result{}, fmt.Errorf("gemm_sm90_grouped: Lead %d, Tail %d: want >= 0 (Lead 0 with Masked)", p.Lead, p.Tail)
	}
	if err := scalars("gemm_sm90_grouped", p.Alpha, p.Beta); err != nil {
		return Result{}, err
	}
	if err := count("gemm_sm90_grouped", "Blocks", p.Blocks, "the configuration's grid"); err != nil {
		return Result{}, err
	}
	// lo, hi: each group's rows; dev: what the kernel reads (offsets, or the masked counts).
	lo, hi := make([]int, groups), make([]int, groups)
	var dev []int32
	M := p.Lead
	if cfg.Masked {
		M = groups*p.Stride + p.Tail
		for g, c := range p.Counts {
			lo[g], hi[g] = g*p.Stride, g*p.Stride+min(max(c, 0), p.Stride)
			dev = append(dev, int32(c))
		}
	} else {
		dev = append(dev, int32(p.Lead))
		for g, c := range p.Counts {
			if c < 0 {
				return Result{}, fmt.Errorf("gemm_sm90_grouped: Counts[%d] = %d: want >= 0", g, c)
			}
			lo[g], hi[g] = M, M+c
			M += c
			dev = append(dev, int32(M))
		}
		M += p.Tail
	}
	N, K := p.N, p.K
	res := Result{Kernel: cfg.Name(), DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d/%d groups", M, N, K, groups)}
	if cfg.Masked {
		res.Shape += fmt.Sprintf(" at stride %d", p.Stride)
		if err := cfg.CheckMasked(M, N, K, groups, p.Stride); err != nil {
			return res, err
		}
	} else if err := cfg.CheckShape(M, N, K, groups); err != nil {
		return res, err
	}
	if err := checkEmuGemm(cfg.Name(), max(M, 1), N, K*groups, 1); err != nil {
		return res, err
	}
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90Grouped(k, cfg)
	mod, err := k.Build()
	if err != nil {
		return res, err
	}
	sys, err := emu.New(1)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewSource(p.Seed + 1))
	rnd := func(dt dsl.Type, n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = round(dt, 2*rng.Float64()-1)
		}
		return v
	}
	a, b, c := rnd(cfg.In, M*K), rnd(cfg.In, groups*K*N), rnd(cfg.Out, M*N)
	if cfg.Masked {
		in := make([]bool, M)
		for g := range lo {
			for r := lo[g]; r < hi[g]; r++ {
				in[r] = true
			}
		}
		for r, ok := range in {
			for l := 0; !ok && l < K; l++ {
				a[r*K+l] = math.NaN()
			}
		}
	}
	var scaleA, scaleB []float64
	if cfg.Scales {
		scaleA, scaleB = make([]float64, M), make([]float64, groups*N)
		for _, v := range [][]float64{scaleA, scaleB} {
			for i := range v {
				v[i] = 0.5 + 1.5*rng.Float64()
			}
		}
	}
	d0 := make([]float64, M*N)
	for i := range d0 {
		d0[i] = gemmSM90GroupedSentinel
	}
	var ptrs [7]uint64
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{cfg.In, a}, {cfg.In, b}, {cfg.Out, c}, {cfg.Out, d0}, {dsl.I32, nil}, {dsl.F32, scaleA}, {dsl.F32, scaleB}} {
		if i == 4 { // the offsets: below
			continue
		}
		if ptrs[i], err = sys.Malloc(0, max(len(x.v)*x.dt.Bytes(), 1)); err != nil {
			return res, err
		}
		if err := write(sys, ptrs[i], x.dt, x.v); err != nil {
			return res, err
		}
	}
	if ptrs[4], err = sys.Malloc(0, 4*len(dev)); err != nil {
		return res, err
	}
	if err := emu.WriteSlice(sys, ptrs[4], dev); err != nil {
		return res, err
	}
	l, err := cfg.Launch(M, N, K, groups, 132)
	if err != nil {
		return res, err
	}
	blocks := p.Blocks
	if blocks <= 0 {
		blocks = l.Grid
	}
	fn, err := entry(mod, cfg.Name())
	if err != nil {
		return res, err
	}
	u := func(x int) uint32 { return uint32(x) }
	offp, cp, dp := anyPtr(ptrs[4], dsl.I32), anyPtr(ptrs[2], cfg.Out), anyPtr(ptrs[3], cfg.Out)
	sa, sb := anyPtr(ptrs[5], dsl.F32), anyPtr(ptrs[6], dsl.F32)
	al, be := float32(p.Alpha), float32(p.Beta)
	var twin any
	st, none := u(p.Stride), anyPtr(0, dsl.I32) // with Masked the offsets are not read: null
	switch {
	case cfg.Masked && cfg.Scales && cfg.TMAStore:
		twin = launch.GemmSM90GroupedScaledStoreMasked{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: none, Alpha: al, Beta: be, C: cp, D: dp, ScaleA: sa, ScaleB: sb, Counts: offp, Stride: st}
	case cfg.Masked && cfg.Scales:
		twin = launch.GemmSM90GroupedScaledMasked{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: none, Alpha: al, Beta: be, C: cp, D: dp, ScaleA: sa, ScaleB: sb, Counts: offp, Stride: st}
	case cfg.Masked && cfg.TMAStore:
		twin = launch.GemmSM90GroupedStoreMasked{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: none, Alpha: al, Beta: be, C: cp, D: dp, Counts: offp, Stride: st}
	case cfg.Masked:
		twin = launch.GemmSM90GroupedMasked{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: none, Alpha: al, Beta: be, C: cp, D: dp, Counts: offp, Stride: st}
	case cfg.Scales && cfg.TMAStore:
		twin = launch.GemmSM90GroupedScaledStore{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: offp, Alpha: al, Beta: be, C: cp, D: dp, ScaleA: sa, ScaleB: sb}
	case cfg.Scales:
		twin = launch.GemmSM90GroupedScaled{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: offp, Alpha: al, Beta: be, C: cp, D: dp, ScaleA: sa, ScaleB: sb}
	case cfg.TMAStore:
		twin = launch.GemmSM90GroupedStore{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: offp, Alpha: al, Beta: be, C: cp, D: dp}
	default:
		twin = launch.GemmSM90Grouped{M: u(M), N: u(N), K: u(K), Groups: u(groups), Offsets: offp, Alpha: al, Beta: be, C: cp, D: dp}
	}
	maps := []emu.TensorMap{emuMap(ptrs[0], l.A), emuMap(ptrs[1], l.B)}
	if l.HasD {
		maps = append(maps, emuMap(ptrs[3], l.D))
	}
	args, err := emuArgsMaps(fn, k.Params(), twin, maps, nil)
	if err != nil {
		return res, err
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(blocks), Block: emu.D1(l.Block),
		SharedBytes: l.SharedBytes, Args: args, Options: emu.Options{Seed: p.Seed}})
	if err != nil {
		return res, err
	}
	res.WarpInstructions = sys.LastStats().WarpInstructions
	got, err := read(sys, ptrs[3], cfg.Out, M*N)
	if err != nil {
		return res, err
	}
	if cfg.FP8() { // the reference takes B K x N: b holds each group's N x K
		bt := make([]float64, len(b))
		for g := 0; g < groups; g++ {
			for j := 0; j < N; j++ {
				for l := 0; l < K; l++ {
					bt[(g*K+l)*N+j] = b[(g*N+j)*K+l]
				}
			}
		}
		b = bt
	}
	want, scale := groupedMatmulRows(a, b, c, lo, hi, M, N, K, p.Alpha, p.Beta, scaleA, scaleB)
	bad := 0
	var first string
	for i := range want {
		w := want[i]
		if math.IsNaN(w) { // outside every group: untouched
			w = gemmSM90GroupedSentinel
		}
		tol := GemmTolerance(cfg.Out, K, scale[i], w)
		d := math.Abs(got[i] - w)
		res.MaxError = math.Max(res.MaxError, d/tol)
		if !(d <= tol) {
			if bad == 0 {
				first = fmt.Sprintf("D[%d,%d] = %v, want %v (tolerance %.3g)", i/max(N, 1), i%max(N, 1), got[i], w, tol)
			}
			bad++
		}
	}
	res.Checked = M * N
	if bad > 0 {
		return res, fmt.Errorf("%s %s: %d of %d elements wrong; first %s", cfg.Name(), res.Shape, bad, M*N, first)
	}
	return res, nil
}

// GroupedMatmulRef is the float64 reference of the grouped gemm: for the rows
// offs[g] <= r < offs[g+1] of group g, D[r,:] = alpha*A[r,:]*B[g] + beta*C[r,:] (A M x K,
// B groups x K x N, C M x N, all row-major; C may be nil when beta is 0), the product
// scaled by scaleA[r]*scaleB[g*n+j] when scaleA is not nil, and NaN on the rows of no
// group. scale[i] is the sum of the absolute terms of D[i] (for GemmTolerance). Inputs that
// do not match the shapes (an extent below 1, no group among them, a slice shorter than its
// shape, a group's rows outside [0, m)) give nil, nil: the reference computes nothing rather
// than panic.
func GroupedMatmulRef(a, b, c []float64, offs []int32, m, n, k int, alpha, beta float64, scaleA, scaleB []float64) (d, scale []float64) {
	g := max(len(offs)-1, 0)
	lo, hi := make([]int, g), make([]int, g)
	for i := range lo {
		lo[i], hi[i] = int(offs[i]), int(offs[i+1])
	}
	return groupedMatmulRows(a, b, c, lo, hi, m, n, k, alpha, beta, scaleA, scaleB)
}

// MaskedGroupedMatmulRef is GroupedMatmulRef over the masked layout: group g's rows are
// g*stride <= r < g*stride + counts[g], each count clamped to [0, stride] as the kernel
// clamps it; NaN on every other row. Inputs that do not match the shapes give nil, nil, as
// GroupedMatmulRef's.
func MaskedGroupedMatmulRef(a, b, c []float64, counts []int32, stride, m, n, k int, alpha, beta float64, scaleA, scaleB []float64) (d, scale []float64) {
	if stride < 1 || refProduct(len(counts), stride) < 0 {
		return nil, nil
	}
	lo, hi := make([]int, len(counts)), make([]int, len(counts))
	for g, cnt := range counts {
		lo[g], hi[g] = g*stride, g*stride+min(max(int(cnt), 0), stride)
	}
	return groupedMatmulRows(a, b, c, lo, hi, m, n, k, alpha, beta, scaleA, scaleB)
}

// groupedRefFits reports whether the grouped reference's inputs match its shapes: positive
// extents, slices as long as their shapes, every group's rows within [0, m).
func groupedRefFits(a, b, c []float64, lo, hi []int, m, n, k int, beta float64, scaleA, scaleB []float64) bool {
	g := len(lo)
	mn, mk, bn := refProduct(m, n), refProduct(m, k), refProduct(g, k, n)
	switch {
	case g < 1 || m < 1 || n < 1 || k < 1 || mn < 0 || mk < 0 || bn < 0 || refProduct(g, n) < 0:
		// No group leaves n bound by no slice: an n of 2^31 had the reference allocate
		// m*n NaN rows (a fatal out of memory, with 2 values of A).
		return false
	case len(a) < mk || len(b) < bn || beta != 0 && len(c) < mn:
		return false
	case scaleA != nil && (len(scaleA) < m || len(scaleB) < g*n):
		return false
	}
	for i := range lo {
		if hi[i] > lo[i] && (lo[i] < 0 || hi[i] > m) {
			return false
		}
	}
	return true
}

// groupedMatmulRows is the grouped reference for group g's rows lo[g] <= r < hi[g].
func groupedMatmulRows(a, b, c []float64, lo, hi []int, m, n, k int, alpha, beta float64, scaleA, scaleB []float64) (d, scale []float64) {
	if !groupedRefFits(a, b, c, lo, hi, m, n, k, beta, scaleA, scaleB) {
		return nil, nil
	}
	d, scale = make([]float64, m*n), make([]float64, m*n)
	for i := range d {
		d[i] = math.NaN()
	}
	for g := range lo {
		bg := b[g*k*n:]
		for r := lo[g]; r < hi[g]; r++ {
			for j := 0; j < n; j++ {
				s, abs := 0.0, 0.0
				for l := 0; l < k; l++ {
					x := a[r*k+l] * bg[l*n+j]
					s += x
					abs += math.Abs(x)
				}
				f := alpha
				if scaleA != nil {
					f *= scaleA[r] * scaleB[g*n+j]
				}
				v, sc := f*s, math.Abs(f)*abs
				if beta != 0 {
					v += beta * c[r*n+j]
					sc += math.Abs(beta * c[r*n+j])
				}
				d[r*n+j], scale[r*n+j] = v, sc
			}
		}
	}
	return d, scale
}
