package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// GemmEpilogueRef is the float64 reference of one output value of a GEMM epilogue, given
// v = alpha*acc [* scaleA[row]*scaleB[col]] + beta*C, exactly: the library's Epilogue
// options (EpilogueRef) or a user hook's twin.
type GemmEpilogueRef func(v float64, row, col int) float64

// GemmHook is a user-written epilogue for an emulator run: the hook the kernel is built
// with, its float64 twin, and the values of the parameters it declares (after the gemm's).
type GemmHook struct {
	Hook kernels.EpilogueHook
	Ref  GemmEpilogueRef
	Args []any
}

// ActRef is the float64 activation a (GELU: the tanh approximation, as the kernel).
func ActRef(a kernels.Activation, v float64) float64 {
	switch a {
	case kernels.ReLU:
		return math.Max(v, 0)
	case kernels.SiLU:
		return v / (1 + math.Exp(-v))
	case kernels.GELU:
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	return v
}

// epiData is a problem's epilogue: the options' random operands (bias and the fp8 scales
// f32, the residual of Out) with their device buffers, or a user hook.
type epiData struct {
	e                         kernels.Epilogue
	hook                      *GemmHook
	n                         int
	bias, scaleA, scaleB, res []float64
	hookArgs                  []any         // a hook's parameters, after the gemm's
	ptrs                      [4]jit.AnyPtr // the options' Bias, ScaleA, ScaleB, Residual (null when unused)
}

// newEpiData draws e's operands (bias and residual in [-1, 1], scales in [0.5, 2]) for an
// m x n problem and copies them to GPU 0; with resInD the residual is D's initial contents
// (resAddr, D itself, is passed as the residual). A hook has no operands of its own.
func newEpiData(sys *emu.System, e kernels.Epilogue, hook *GemmHook, out dsl.Type, m, n int, seed int64, resInD bool, dAddr uint64) (*epiData, error) {
	d := &epiData{e: e, hook: hook, n: n}
	if hook != nil {
		d.hookArgs = hook.Args
		return d, nil
	}
	if e.IsZero() {
		return d, nil
	}
	rng := rand.New(rand.NewSource(seed + 17))
	draw := func(dt dsl.Type, k int, lo, hi float64) []float64 {
		v := make([]float64, k)
		for i := range v {
			v[i] = round(dt, lo+(hi-lo)*rng.Float64())
		}
		return v
	}
	put := func(on bool, dt dsl.Type, v []float64) (uint64, error) {
		if !on {
			return 0, nil
		}
		addr, err := sys.Malloc(0, len(v)*dt.Bytes())
		if err != nil {
			return 0, err
		}
		return addr, write(sys, addr, dt, v)
	}
	d.bias = draw(dsl.F32, n, -1, 1)
	d.scaleA, d.scaleB = draw(dsl.F32, m, 0.5, 2), draw(dsl.F32, n, 0.5, 2)
	d.res = draw(out, m*n, -1, 1)
	pb, err := put(e.Bias, dsl.F32, d.bias)
	if err != nil {
		return nil, err
	}
	psa, err := put(e.Scales, dsl.F32, d.scaleA)
	if err != nil {
		return nil, err
	}
	psb, err := put(e.Scales, dsl.F32, d.scaleB)
	if err != nil {
		return nil, err
	}
	var pr uint64
	if resInD && e.Residual {
		pr = dAddr
		if err := write(sys, dAddr, out, d.res); err != nil {
			return nil, err
		}
	} else if pr, err = put(e.Residual, out, d.res); err != nil {
		return nil, err
	}
	f32 := func(a uint64) jit.AnyPtr { return jit.AnyPtr{Addr: jit.DevicePtr(a), Elem: dsl.F32} }
	d.ptrs = [4]jit.AnyPtr{f32(pb), f32(psa), f32(psb), {Addr: jit.DevicePtr(pr), Elem: out}}
	return d, nil
}

// scale is the fp8 scales' factor of element (i, j) (1 without them).
func (d *epiData) scale(i, j int) float64 {
	if !d.e.Scales {
		return 1
	}
	return d.scaleA[i] * d.scaleB[j]
}

// want returns the reference of D[i, j] and its tolerance, given s = the exact sum over K
// and abs the sum of the products' magnitudes: the gemm's bound (GemmTolerance) through the
// epilogue (the activations' slopes are below 1.2), f32 roundings of the additions, and
// one rounding to Out. The emulator computes tanh.approx exactly; on the hardware its 2^-11
// adds up to 2^-12*|v| to SiLU and GELU (torch_gemm.py's GPU check allows it).
func (d *epiData) want(out dsl.Type, k, i, j int, s, abs, alpha, beta, c float64) (float64, float64) {
	sc := d.scale(i, j)
	v := alpha*s*sc + beta*c
	mag := math.Abs(alpha)*abs*math.Abs(sc) + math.Abs(beta*c)
	if d.hook != nil {
		w := d.hook.Ref(v, i, j)
		return w, GemmTolerance(out, k, mag, w) + 0x1p-20*math.Abs(w)
	}
	if d.e.Bias {
		v += d.bias[j]
		mag += math.Abs(d.bias[j])
	}
	errV := float64(k+6)*0x1p-23*mag + 0x1p-22*math.Abs(v)
	a := ActRef(d.e.Act, v)
	errA := errV
	if d.e.Act == kernels.SiLU || d.e.Act == kernels.GELU {
		errA = 1.2*errV + 0x1p-21*math.Abs(a) + 1e-30
	}
	w := a
	if d.e.Residual {
		r := d.res[i*d.n+j]
		w += r
		errA += 0x1p-23 * (math.Abs(a) + math.Abs(r))
	}
	return w, errA + math.Max(ulpTol(out, 1), 0x1p-23)*math.Abs(w) + 1e-30
}

// checkEpi compares D (got) with the epilogue's reference element by element (want); at and
// bt read A (i, l) and B (l, j). It fills res's MaxError and Checked.
func (g *gemmData) checkEpi(res *Result, name string, out dsl.Type, got []float64, alpha, beta float64, d *epiData, at, bt func(int, int) float64) error {
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
			want, tol := d.want(out, K, i, j, s, abs, alpha, beta, g.c[i*N+j])
			e := math.Abs(got[i*N+j] - want)
			res.MaxError = math.Max(res.MaxError, e/tol)
			if !(e <= tol) {
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
