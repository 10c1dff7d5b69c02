package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

func init() { register("gemm", gemmHarness) }

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

// RunGemm builds the problem's kernel, runs it on one emulated GPU with random inputs and
// checks D element by element against a float64 reference within the bound of f32
// accumulation in any order (see GemmTolerance).
func RunGemm(p GemmProblem) (Result, error) {
	cfg := p.Config
	res := Result{Kernel: cfg.Name(), DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d", p.M, p.N, p.K)}
	if p.Target == "" {
		p.Target = ptx.SM90
	}
	if cfg.Aligned && (p.M%8 != 0 || p.N%8 != 0 || p.K%8 != 0) {
		return res, fmt.Errorf("%s needs M, N, K multiples of 8; got %s", cfg.Name(), res.Shape)
	}
	k := dsl.New(cfg.Name(), dsl.WithTarget(p.Target))
	kernels.Gemm(k, cfg)
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
	M, N, K := p.M, p.N, p.K
	a, b, c := rnd(cfg.In, M*K), rnd(cfg.In, K*N), rnd(cfg.Out, M*N)
	alloc := func(dt dsl.Type, v []float64) (uint64, error) {
		addr, err := sys.Malloc(0, max(len(v)*dt.Bytes(), 1))
		if err != nil {
			return 0, err
		}
		return addr, write(sys, addr, dt, v)
	}
	pa, err := alloc(cfg.In, a)
	if err != nil {
		return res, err
	}
	pb, err := alloc(cfg.In, b)
	if err != nil {
		return res, err
	}
	pc, err := alloc(cfg.Out, c)
	if err != nil {
		return res, err
	}
	if p.NullC {
		pc = 0
	}
	pd, err := alloc(cfg.Out, make([]float64, M*N))
	if err != nil {
		return res, err
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(cfg.Grid(M, N)), Block: emu.D1(cfg.Threads()),
		SharedBytes: cfg.SharedBytes(),
		Args:        []any{pa, pb, uint32(M), uint32(N), uint32(K), float32(p.Alpha), float32(p.Beta), pc, pd},
		Options:     emu.Options{Seed: p.Seed}})
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
			return a[i*K+l]
		}
		return a[l*M+i]
	}
	bt := func(l, j int) float64 {
		if cfg.B == kernels.RowMajor {
			return b[l*N+j]
		}
		return b[j*K+l]
	}
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
			want := p.Alpha*s + p.Beta*c[i*N+j]
			tol := GemmTolerance(cfg.Out, K, math.Abs(p.Alpha)*abs+math.Abs(p.Beta*c[i*N+j]), want)
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
		return res, fmt.Errorf("%s %s: %d of %d values differ; first: %s", cfg.Name(), res.Shape, bad, M*N, first)
	}
	return res, nil
}

// GemmTolerance bounds |D - exact| for one element: products of f16/bf16 inputs are exact
// in f32; K of them summed in f32 in any order (the hardware's order is not the emulator's,
// and the tensor cores may keep fewer guard bits) err by at most K units of 2^-23 of the
// sum of their magnitudes scale (|alpha|*sum|a*b| + |beta*c|); scaling and the FMA add a
// few more; rounding to the output type adds one unit in its last place of want.
func GemmTolerance(out dsl.Type, k int, scale, want float64) float64 {
	return float64(k+4)*0x1p-23*scale + math.Max(ulpTol(out, 1), 0x1p-23)*math.Abs(want) + 1e-30
}
