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

// MLPProblem is a transformer MLP block on the emulator, bf16 throughout: H = SiLU(X*W1 + b1)
// and Y = H*W2 + X, two GEMMs whose bias, activation and residual are the library's epilogue
// options. X is Tokens x Hidden, W1 Hidden x FF, b1 FF values (f32), W2 FF x Hidden, all
// row-major; Hidden and FF multiples of 8. SM90 runs gemm_sm90 (kernels.GemmSM90For's pick for
// SMs multiprocessors, TMA store included), else the mma.sync gemm (64x64x32 tiles).
type MLPProblem struct {
	Tokens, Hidden, FF int
	SM90               bool
	SMs                int // gemm_sm90's persistent grid (0: 4, so that blocks take several tiles)
	Seed               int64
}

// RunMLP runs the block and checks H against SiLU(X*W1 + b1) and Y against H*W2 + X (from the
// H the first GEMM wrote) in float64, element by element, within the epilogue's bound
// (GemmEpilogueRef's). It returns the two GEMMs' results.
func RunMLP(p MLPProblem) ([2]Result, error) {
	var res [2]Result
	T, Hd, F := p.Tokens, p.Hidden, p.FF
	if T <= 0 || Hd <= 0 || F <= 0 || Hd%8 != 0 || F%8 != 0 {
		return res, fmt.Errorf("mlp: tokens %d, hidden %d, ff %d: want positive sizes, hidden and ff multiples of 8", T, Hd, F)
	}
	if err := checkEmuGemm("mlp", T, max(Hd, F), max(Hd, F), 2); err != nil {
		return res, err
	}
	if err := count("mlp", "SMs", p.SMs, "4 SMs"); err != nil {
		return res, err
	}
	sms := p.SMs
	if sms <= 0 {
		sms = 4
	}
	sys, err := emu.New(1)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewSource(p.Seed + 5))
	draw := func(dt dsl.Type, n int, scale float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = round(dt, scale*(2*rng.Float64()-1))
		}
		return v
	}
	x, w1, w2 := draw(dsl.BF16, T*Hd, 1), draw(dsl.BF16, Hd*F, 2/math.Sqrt(float64(Hd))), draw(dsl.BF16, F*Hd, 2/math.Sqrt(float64(F)))
	b1 := draw(dsl.BF16, F, 1) // bf16 values in f32, as a bf16 model's bias
	put := func(dt dsl.Type, v []float64) (uint64, error) {
		a, err := sys.Malloc(0, max(len(v)*dt.Bytes(), 1))
		if err != nil {
			return 0, err
		}
		return a, write(sys, a, dt, v)
	}
	var px, pw1, pw2, pb1, ph, py uint64
	for _, b := range []struct {
		p  *uint64
		dt dsl.Type
		v  []float64
	}{{&px, dsl.BF16, x}, {&pw1, dsl.BF16, w1}, {&pw2, dsl.BF16, w2}, {&pb1, dsl.F32, b1},
		{&ph, dsl.BF16, make([]float64, T*F)}, {&py, dsl.BF16, make([]float64, T*Hd)}} {
		if *b.p, err = put(b.dt, b.v); err != nil {
			return res, err
		}
	}
	up := kernels.Epilogue{Bias: true, Act: kernels.SiLU}
	down := kernels.Epilogue{Residual: true}
	// gemm runs D (m x n) = A (m x k) * B (k x n) with the epilogue e and its operands (Bias,
	// ScaleA, ScaleB, Residual).
	gemm := func(e kernels.Epilogue, a, b, d uint64, m, n, k int, ops [4]jit.AnyPtr) (string, error) {
		if p.SM90 {
			cfg, err := kernels.GemmSM90For(dsl.BF16, dsl.BF16, m, n, k, sms)
			if err != nil {
				return "", err
			}
			cfg.Epilogue = e
			kb := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
			kernels.GemmSM90(kb, cfg)
			mod, err := kb.Build()
			if err != nil {
				return "", err
			}
			l, err := cfg.Launch(m, n, k, sms)
			if err != nil {
				return "", err
			}
			maps := []emu.TensorMap{emuMap(a, l.A), emuMap(b, l.B)}
			if l.HasD {
				maps = append(maps, emuMap(d, l.D))
			}
			fn, err := entry(mod, cfg.Name())
			if err != nil {
				return "", err
			}
			args, err := gemmSM90Args(fn, kb.Params(), cfg, m, n, k, 1, 0, 0, d, maps, &epiData{ptrs: ops}, nil)
			if err != nil {
				return "", err
			}
			var cluster emu.Dim3
			if l.Cluster > 1 {
				cluster = emu.D1(l.Cluster)
			}
			return cfg.Name(), sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(l.Grid), Block: emu.D1(l.Block),
				Cluster: cluster, SharedBytes: l.SharedBytes, Args: args, Options: emu.Options{Seed: p.Seed}})
		}
		cfg := kernels.GemmConfig{In: dsl.BF16, Out: dsl.BF16, BM: 64, BN: 64, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 3,
			Aligned: m%8 == 0 && n%8 == 0 && k%8 == 0, Epilogue: e}
		kb := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90))
		kernels.Gemm(kb, cfg)
		mod, err := kb.Build()
		if err != nil {
			return "", err
		}
		fn, err := entry(mod, cfg.Name())
		if err != nil {
			return "", err
		}
		bf := func(a uint64) jit.AnyPtr { return anyPtr(a, dsl.BF16) }
		args, err := emuArgs(fn, kb.Params(), launch.GemmEpi{A: bf(a), B: bf(b), M: uint32(m), N: uint32(n), K: uint32(k), Alpha: 1,
			C: bf(0), D: bf(d), Bias: ops[0], ScaleA: ops[1], ScaleB: ops[2], Residual: ops[3]})
		if err != nil {
			return "", err
		}
		return cfg.Name(), sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(cfg.Grid(m, n)), Block: emu.D1(cfg.Threads()),
			SharedBytes: cfg.SharedBytes(), Args: args, Options: emu.Options{Seed: p.Seed}})
	}
	null32, null16 := anyPtr(0, dsl.F32), anyPtr(0, dsl.BF16)
	name1, err := gemm(up, px, pw1, ph, T, F, Hd, [4]jit.AnyPtr{anyPtr(pb1, dsl.F32), null32, null32, null16})
	res[0] = Result{Kernel: name1, DType: dsl.BF16, Shape: fmt.Sprintf("%dx%dx%d", T, F, Hd)}
	if err != nil {
		return res, err
	}
	name2, err := gemm(down, ph, pw2, py, T, Hd, F, [4]jit.AnyPtr{null32, null32, null32, anyPtr(px, dsl.BF16)})
	res[1] = Result{Kernel: name2, DType: dsl.BF16, Shape: fmt.Sprintf("%dx%dx%d", T, Hd, F)}
	if err != nil {
		return res, err
	}
	h, err := read(sys, ph, dsl.BF16, T*F)
	if err != nil {
		return res, err
	}
	y, err := read(sys, py, dsl.BF16, T*Hd)
	if err != nil {
		return res, err
	}
	g1 := &gemmData{m: T, n: F, k: Hd, c: make([]float64, T*F)}
	e1 := &epiData{e: up, bias: b1, n: F}
	if err := g1.checkEpi(&res[0], "mlp up "+name1, dsl.BF16, h, 1, 0, e1,
		func(i, l int) float64 { return x[i*Hd+l] }, func(l, j int) float64 { return w1[l*F+j] }); err != nil {
		return res, err
	}
	g2 := &gemmData{m: T, n: Hd, k: F, c: make([]float64, T*Hd)}
	e2 := &epiData{e: down, res: x, n: Hd}
	return res, g2.checkEpi(&res[1], "mlp down "+name2, dsl.BF16, y, 1, 0, e2,
		func(i, l int) float64 { return h[i*F+l] }, func(l, j int) float64 { return w2[l*Hd+j] })
}
