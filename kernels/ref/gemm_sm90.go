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

func init() { register("gemm_sm90", gemmSM90Harness) }

// gemmSM90Harness runs `kgen run gemm_sm90`: about size elements per matrix, M odd, N and K
// rounded up to multiples of 8 (the kernel's rule), on two persistent blocks.
func gemmSM90Harness(r *run) error {
	side := max(int(math.Cbrt(float64(r.size(0)))), 1)
	up8 := func(x int) int { return (x + 7) / 8 * 8 }
	m, n, kk := side+1, up8(side+17), up8(side+33)
	if r.p.Size == 0 {
		m, n, kk = 257, 136, 304
	}
	res, err := RunGemmSM90(GemmSM90Problem{Config: kernels.DefaultGemmSM90Config(r.p.DType), M: m, N: n, K: kk,
		Alpha: 1.5, Beta: -0.5, Seed: r.p.Seed, Blocks: 2})
	r.res = res
	return err
}

// GemmSM90Problem is one sm_90a gemm run on the emulator: D = Alpha*A*B + Beta*C for an
// M x N x K problem (row-major A and B) on Blocks persistent blocks (0: one per tile).
type GemmSM90Problem struct {
	Config      kernels.GemmSM90Config
	M, N, K     int
	Alpha, Beta float64
	Seed        int64
	Blocks      int
}

// RunGemmSM90 builds the problem's kernel, runs it on one emulated GPU with random inputs
// (the tensor maps built from the config's boxes) and checks D element by element against
// the float64 reference within GemmTolerance.
func RunGemmSM90(p GemmSM90Problem) (Result, error) {
	cfg := p.Config
	res := Result{Kernel: cfg.Name(), DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d", p.M, p.N, p.K)}
	if err := cfg.CheckShape(p.M, p.N, p.K); err != nil {
		return res, err
	}
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(k, cfg)
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
	var ptrs [4]uint64
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{cfg.In, a}, {cfg.In, b}, {cfg.Out, c}, {cfg.Out, make([]float64, M*N)}} {
		if ptrs[i], err = alloc(x.dt, x.v); err != nil {
			return res, err
		}
	}
	es := uint64(cfg.In.Bytes())
	tmap := func(g uint64, inner, outer int, box [2]int) emu.TensorMap {
		return emu.TensorMap{Elem: ptx.Type(cfg.In), Rank: 2, Global: g, Dims: [5]uint64{uint64(inner), uint64(outer)},
			Strides: [5]uint64{0, uint64(inner) * es}, Box: [5]uint32{uint32(box[0]), uint32(box[1])}, Swizzle: cfg.SwizzleBytes()}
	}
	blocks := p.Blocks
	if blocks <= 0 {
		blocks = cfg.Tiles(M, N)
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(blocks), Block: emu.D1(cfg.Threads()),
		SharedBytes: cfg.SharedBytes(),
		Args: []any{tmap(ptrs[0], K, M, cfg.TMABoxA()), tmap(ptrs[1], N, K, cfg.TMABoxB()),
			uint32(M), uint32(N), uint32(K), float32(p.Alpha), float32(p.Beta), ptrs[2], ptrs[3]},
		Options: emu.Options{Seed: p.Seed}})
	if err != nil {
		return res, err
	}
	got, err := read(sys, ptrs[3], cfg.Out, M*N)
	if err != nil {
		return res, err
	}
	bad := 0
	var first string
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			s, abs := 0.0, 0.0
			for l := 0; l < K; l++ {
				x := a[i*K+l] * b[l*N+j]
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
