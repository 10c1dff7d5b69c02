package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

func init() { registerOwn("gemm", oneGPU, gemmHarness) }

// GemmProblem is one gemm run on the emulator: D = Alpha*A*B + Beta*C for an M x N x K
// problem with the kernel cfg builds.
type GemmProblem struct {
	Config      kernels.GemmConfig
	Target      ptx.Target // zero: sm_90
	M, N, K     int
	Alpha, Beta float64
	Seed        int64
	// NullC passes C as a null pointer (with Beta 0: the kernel must read no C).
	NullC bool
	// Stats, when set, receives the emulator's statistics of the launch.
	Stats *emu.Stats
	// Hook, when not nil, builds the kernel with kernels.GemmWith (Config.Epilogue zero).
	Hook *GemmHook
	// ResidualInD passes D as Epilogue.Residual's matrix, holding the residual at launch.
	ResidualInD bool
}

// gemmHarness runs `kgen run gemm`: a cube of about size elements per matrix, the
// registry's configuration when every extent is a multiple of 8, else the general one.
func gemmHarness(r *run) error {
	side := max(int(math.Cbrt(float64(r.size(0)))), 1)
	m, n, kk := side+1, side+17, side+33
	if r.p.Size == 0 {
		m, n, kk = 257, 129, 300
	}
	cfg := kernels.DefaultGemmConfig(r.p.DType)
	cfg.Aligned = m%8 == 0 && n%8 == 0 && kk%8 == 0
	res, err := RunGemm(GemmProblem{Config: cfg, Target: r.p.Target, M: m, N: n, K: kk, Alpha: 1.5, Beta: -0.5, Seed: r.p.Seed})
	r.res = res
	return err
}

// MaxEmuElements bounds the matrices of an emulated gemm problem: A, B, C and D together
// hold at most this many elements (2^26; the harness keeps float64 copies and checks
// M*N*K products on the CPU), so that a huge shape is refused before anything is allocated.
const MaxEmuElements = 1 << 26

// checkEmuGemm refuses a problem the emulator harnesses cannot hold (MaxEmuElements),
// naming the shape; m, n, k are already positive. The sums and products saturate (a shape
// of 2^40 extents wrapped to 0 elements and passed).
func checkEmuGemm(name string, m, n, k, copies int) error {
	e := satAdd(satAdd(satMul(m, k), satMul(k, n)), satMul(2, m, n))
	if satMul64(e, int64(max(copies, 1))) > MaxEmuElements {
		return fmt.Errorf("%s: shape %dx%dx%d: A, B, C and D hold %s elements (x %d GPUs); the emulator harness takes at most %d (MaxEmuElements)", name, m, n, k, satText(e), max(copies, 1), MaxEmuElements)
	}
	return nil
}

// satMul is the product of v saturated at math.MaxInt64 (0 when a factor is negative), so
// that a size bound cannot be passed by a wrapped product.
func satMul(v ...int) int64 {
	p := int64(1)
	for _, x := range v {
		if x < 0 {
			return 0
		}
		p = satMul64(p, int64(x))
	}
	return p
}

// satMul64 is a*b for non-negative a and b, saturated at math.MaxInt64.
func satMul64(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// satAdd is a+b for non-negative a and b, saturated at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satText prints a saturated count: "over 2^63" where it saturated.
func satText(n int64) string {
	if n == math.MaxInt64 {
		return "over 2^63"
	}
	return fmt.Sprint(n)
}

// RunGemm builds the problem's kernel, runs it on one emulated GPU with random inputs and
// checks D element by element against a float64 reference within the bound of f32
// accumulation in any order (see GemmTolerance).
func RunGemm(p GemmProblem) (Result, error) {
	cfg := p.Config
	res := Result{Kernel: cfg.Name(), DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d", p.M, p.N, p.K)}
	if p.Target == "" {
		p.Target = ptx.SM90
	}
	if err := cfg.CheckShape(p.M, p.N, p.K); err != nil {
		return res, err
	}
	if err := checkEmuGemm(cfg.Name(), p.M, p.N, p.K, 1); err != nil {
		return res, err
	}
	if err := scalars(cfg.Name(), p.Alpha, p.Beta); err != nil {
		return res, err
	}
	k := dsl.New(cfg.Name(), dsl.WithTarget(p.Target))
	if p.Hook != nil {
		kernels.GemmWith(k, cfg, p.Hook.Hook)
	} else {
		kernels.Gemm(k, cfg)
	}
	mod, err := k.Build()
	if err != nil {
		return res, err
	}
	sys, err := emu.New(1)
	if err != nil {
		return res, err
	}
	M, N, K := p.M, p.N, p.K
	g, err := newGemmData(sys, cfg.In, cfg.Out, M, N, K, p.Seed)
	if err != nil {
		return res, err
	}
	pa, pb, pc, pd := g.ptrs[0], g.ptrs[1], g.ptrs[2], g.ptrs[3]
	if p.NullC {
		pc = 0
	}
	epi, err := newEpiData(sys, cfg.Epilogue, p.Hook, cfg.Out, M, N, p.Seed, p.ResidualInD, pd)
	if err != nil {
		return res, err
	}
	fn, err := entry(mod, cfg.Name())
	if err != nil {
		return res, err
	}
	in, out := func(a uint64) jit.AnyPtr { return anyPtr(a, cfg.In) }, func(a uint64) jit.AnyPtr { return anyPtr(a, cfg.Out) }
	var args []any
	if cfg.Epilogue.IsZero() {
		args, err = emuArgsMaps(fn, k.Params(), launch.Gemm{A: in(pa), B: in(pb), M: uint32(M), N: uint32(N), K: uint32(K),
			Alpha: float32(p.Alpha), Beta: float32(p.Beta), C: out(pc), D: out(pd)}, nil, epi.hookArgs)
	} else {
		e := epi.ptrs
		args, err = emuArgs(fn, k.Params(), launch.GemmEpi{A: in(pa), B: in(pb), M: uint32(M), N: uint32(N), K: uint32(K),
			Alpha: float32(p.Alpha), Beta: float32(p.Beta), C: out(pc), D: out(pd), Bias: e[0], ScaleA: e[1], ScaleB: e[2], Residual: e[3]})
	}
	if err != nil {
		return res, err
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(cfg.Grid(M, N)), Block: emu.D1(cfg.Threads()),
		SharedBytes: cfg.SharedBytes(), Args: args, Options: emu.Options{Seed: p.Seed}})
	if err != nil {
		return res, err
	}
	if p.Stats != nil {
		*p.Stats = sys.LastStats()
	}
	got, err := read(sys, pd, cfg.Out, M*N)
	if err != nil {
		return res, err
	}
	// A (i, l) and B (l, j) in their layouts.
	at := func(i, l int) float64 {
		if cfg.A == kernels.RowMajor {
			return g.a[i*K+l]
		}
		return g.a[l*M+i]
	}
	bt := func(l, j int) float64 {
		if cfg.B == kernels.RowMajor {
			return g.b[l*N+j]
		}
		return g.b[j*K+l]
	}
	if p.Hook != nil || !cfg.Epilogue.IsZero() {
		return res, g.checkEpi(&res, cfg.Name(), cfg.Out, got, p.Alpha, p.Beta, epi, at, bt)
	}
	return res, g.check(&res, cfg.Name(), cfg.Out, got, p.Alpha, p.Beta, at, bt)
}

// gemmData is a gemm problem's random inputs (A, B, C in [-1, 1], rounded to their types)
// and its four device buffers on GPU 0 of the emulator (A, B, C and a zeroed D).
type gemmData struct {
	m, n, k int
	a, b, c []float64
	ptrs    [4]uint64
}

func newGemmData(sys *emu.System, in, out dsl.Type, m, n, k int, seed int64) (*gemmData, error) {
	rng := rand.New(rand.NewSource(seed + 1))
	rnd := func(dt dsl.Type, n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = round(dt, 2*rng.Float64()-1)
		}
		return v
	}
	g := &gemmData{m: m, n: n, k: k, a: rnd(in, m*k), b: rnd(in, k*n), c: rnd(out, m*n)}
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{in, g.a}, {in, g.b}, {out, g.c}, {out, make([]float64, m*n)}} {
		addr, err := sys.Malloc(0, max(len(x.v)*x.dt.Bytes(), 1))
		if err != nil {
			return nil, err
		}
		if err := write(sys, addr, x.dt, x.v); err != nil {
			return nil, err
		}
		g.ptrs[i] = addr
	}
	return g, nil
}

// check compares D (got) with alpha*A*B + beta*C in float64, element by element, within
// GemmTolerance; at and bt read A (i, l) and B (l, j). It fills res's MaxError and Checked.
func (g *gemmData) check(res *Result, name string, out dsl.Type, got []float64, alpha, beta float64, at, bt func(int, int) float64) error {
	M, N, K := g.m, g.n, g.k
	bad := 0
	var first string
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			s, abs := 0.0, 0.0
			for l := 0; l < K; l++ {
				x := at(i, l) * bt(l, j)
				s += x
				abs += math.Abs(x)
			}
			want := alpha*s + beta*g.c[i*N+j]
			tol := GemmTolerance(out, K, math.Abs(alpha)*abs+math.Abs(beta*g.c[i*N+j]), want)
			d := math.Abs(got[i*N+j] - want)
			res.MaxError = math.Max(res.MaxError, d/tol)
			if !(d <= tol) {
				if bad == 0 {
					first = fmt.Sprintf("D[%d,%d] = %v, want %v (tolerance %.3g)", i, j, got[i*N+j], want, tol)
				}
				bad++
			}
		}
	}
	res.Checked = M * N
	if bad > 0 {
		return fmt.Errorf("%s %s: %d of %d values differ; first: %s", name, res.Shape, bad, M*N, first)
	}
	return nil
}

// GemmTolerance bounds |D - exact| for one element: products of f16/bf16 inputs are exact
// in f32; K of them summed in f32 in any order (the hardware's order is not the emulator's,
// and the tensor cores may keep fewer guard bits) err by at most K units of 2^-23 of the
// sum of their magnitudes scale (|alpha|*sum|a*b| + |beta*c|); scaling and the FMA add a
// few more; rounding to the output type adds one unit in its last place of want.
func GemmTolerance(out dsl.Type, k int, scale, want float64) float64 {
	return float64(k+4)*0x1p-23*scale + math.Max(ulpTol(out, 1), 0x1p-23)*math.Abs(want) + 1e-30
}
