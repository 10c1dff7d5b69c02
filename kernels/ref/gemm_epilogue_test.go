package ref

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// clampHook is a user-written epilogue with a parameter of its own: D = clamp(v, -limit,
// limit), limit an f32 kernel parameter after the gemm's.
func clampHook(limit float32) *GemmHook {
	type clampArgs struct {
		Limit dsl.Value `kgen:"f32"`
	}
	return &GemmHook{
		Hook: func(k *dsl.Kernel, out dsl.Type) kernels.EpilogueFunc {
			a := dsl.Params[clampArgs](k, out)
			return func(f *kernels.EpilogueFrag) []dsl.Value {
				v := make([]dsl.Value, len(f.V))
				for i, x := range f.V {
					v[i] = x.Min(a.Limit).Max(a.Limit.Neg())
				}
				return v
			}
		},
		Ref:  func(v float64, _, _ int) float64 { return math.Max(math.Min(v, float64(limit)), -float64(limit)) },
		Args: []any{limit},
	}
}

// coordHook is a user-written epilogue over the coordinates: D = v + row - 2*col (as f32),
// so that a wrong Row or Col in any path shows.
func coordHook() *GemmHook {
	return &GemmHook{
		Hook: func(k *dsl.Kernel, out dsl.Type) kernels.EpilogueFunc {
			return func(f *kernels.EpilogueFrag) []dsl.Value {
				v := make([]dsl.Value, len(f.V))
				for i, x := range f.V {
					c := f.Col.Add(uint32(i))
					v[i] = x.Add(f.Row.To(dsl.F32)).Sub(c.To(dsl.F32).Mul(float32(2)))
				}
				return v
			}
		},
		Ref: func(v float64, i, j int) float64 { return v + float64(i) - 2*float64(j) },
	}
}

// TestGemmSM90Epilogues runs gemm_sm90 with each epilogue option and combinations on the
// emulator at odd shapes (M, N, K edges; more tiles than blocks), register and TMA-store
// epilogues, bf16, f16 and f32 outputs, e4m3 with row-wise scales, a residual read from D
// itself and user-written hooks, against the float64 reference.
func TestGemmSM90Epilogues(t *testing.T) {
	bf := kernels.DefaultGemmSM90Config(dsl.BF16)
	small := kernels.GemmSM90Config{In: dsl.F16, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 3}
	f8 := kernels.DefaultGemmSM90Config(dsl.E4M3)
	with := func(c kernels.GemmSM90Config, e kernels.Epilogue, store bool, cluster int) kernels.GemmSM90Config {
		c.Epilogue, c.TMAStore, c.ClusterM = e, store, cluster
		for c.Stages > 2 && c.Check() != nil {
			c.Stages--
		}
		return c
	}
	bs := kernels.Epilogue{Bias: true, Act: kernels.SiLU}
	for _, c := range []struct {
		cfg         kernels.GemmSM90Config
		m, n, k     int
		alpha, beta float64
		hook        *GemmHook
		resInD      bool
	}{
		{cfg: with(bf, bs, false, 0), m: 200, n: 136, k: 72, alpha: 1, beta: 0},
		{cfg: with(bf, bs, true, 0), m: 257, n: 264, k: 136, alpha: 1.5, beta: -0.5},
		{cfg: with(bf, kernels.Epilogue{Residual: true}, false, 2), m: 200, n: 136, k: 72, alpha: 1, beta: 0.5},
		{cfg: with(bf, kernels.Epilogue{Act: kernels.ReLU, Residual: true}, true, 0), m: 130, n: 264, k: 72, alpha: 1, beta: 0},
		{cfg: with(kernels.GemmSM90Config{In: dsl.F16, Out: dsl.F16, BN: 128, Consumers: 2, Stages: 4}, kernels.Epilogue{Bias: true, Act: kernels.GELU}, false, 0), m: 136, n: 200, k: 200, alpha: 0.5, beta: 2},
		{cfg: with(small, kernels.Epilogue{Bias: true, Act: kernels.GELU, Residual: true}, false, 0), m: 130, n: 200, k: 72, alpha: 1, beta: -0.5},
		{cfg: with(small, kernels.Epilogue{Act: kernels.SiLU, Residual: true}, true, 0), m: 130, n: 200, k: 72, alpha: 1, beta: 0},
		{cfg: with(bf, kernels.Epilogue{Bias: true, Act: kernels.SiLU, Residual: true}, true, 0), m: 136, n: 136, k: 72, alpha: 1, beta: 0, resInD: true},
		// e4m3 with row-wise scales
		{cfg: with(f8, kernels.Epilogue{Scales: true}, false, 0), m: 200, n: 136, k: 80, alpha: 0.25, beta: -0.5},
		{cfg: with(f8, kernels.Epilogue{Scales: true, Bias: true, Act: kernels.SiLU}, true, 2), m: 257, n: 264, k: 144, alpha: 1, beta: 0},
		{cfg: with(kernels.GemmSM90Config{In: dsl.E4M3, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 4}, kernels.Epilogue{Scales: true, Act: kernels.GELU, Residual: true}, false, 0), m: 130, n: 200, k: 160, alpha: 0.5, beta: 2},
		// user-written hooks
		{cfg: with(bf, kernels.Epilogue{}, false, 0), m: 200, n: 136, k: 72, alpha: 1, beta: -0.5, hook: clampHook(0.75)},
		{cfg: with(bf, kernels.Epilogue{}, true, 0), m: 130, n: 264, k: 72, alpha: 1, beta: 0, hook: coordHook()},
		{cfg: with(small, kernels.Epilogue{}, false, 0), m: 130, n: 200, k: 72, alpha: 1, beta: 0.5, hook: coordHook()},
	} {
		name := fmt.Sprintf("%s_%dx%dx%d", c.cfg.Name(), c.m, c.n, c.k)
		if c.hook != nil {
			name += "_hook"
		}
		if c.resInD {
			name += "_resInD"
		}
		t.Run(name, func(t *testing.T) {
			res, err := RunGemmSM90(GemmSM90Problem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: c.alpha, Beta: c.beta, Seed: 11, Blocks: 2 * c.cfg.Cluster(),
				Hook: c.hook, ResidualInD: c.resInD})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != c.m*c.n {
				t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
			}
		})
	}
}

// TestGemmEpilogues runs the mma.sync gemm with epilogue options and user hooks on the
// emulator, aligned (16-byte runs, whole inside N) and not (runs across N's edge, loads
// predicated per element), bf16 and f32 outputs.
func TestGemmEpilogues(t *testing.T) {
	al := kernels.GemmConfig{In: dsl.BF16, Out: dsl.BF16, A: kernels.RowMajor, B: kernels.RowMajor, BM: 64, BN: 64, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 3, Aligned: true}
	un := al
	un.Aligned = false
	f32 := kernels.GemmConfig{In: dsl.F16, Out: dsl.F32, A: kernels.ColMajor, B: kernels.RowMajor, BM: 64, BN: 64, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 2}
	with := func(c kernels.GemmConfig, e kernels.Epilogue) kernels.GemmConfig { c.Epilogue = e; return c }
	for _, c := range []struct {
		cfg         kernels.GemmConfig
		m, n, k     int
		alpha, beta float64
		hook        *GemmHook
		resInD      bool
	}{
		{cfg: with(al, kernels.Epilogue{Bias: true, Act: kernels.SiLU}), m: 136, n: 200, k: 72, alpha: 1, beta: 0},
		{cfg: with(al, kernels.Epilogue{Act: kernels.ReLU, Residual: true}), m: 136, n: 72, k: 64, alpha: 1.5, beta: -0.5},
		{cfg: with(un, kernels.Epilogue{Bias: true, Act: kernels.GELU, Residual: true}), m: 130, n: 131, k: 77, alpha: 1, beta: 0.5},
		{cfg: with(f32, kernels.Epilogue{Bias: true, Act: kernels.SiLU, Residual: true}), m: 99, n: 70, k: 45, alpha: 0.5, beta: 2},
		{cfg: with(al, kernels.Epilogue{Bias: true, Residual: true}), m: 72, n: 136, k: 40, alpha: 1, beta: 0, resInD: true},
		{cfg: un, m: 130, n: 131, k: 77, alpha: 1, beta: -0.5, hook: clampHook(0.75)},
		{cfg: un, m: 70, n: 99, k: 33, alpha: 1, beta: 0, hook: coordHook()},
		{cfg: f32, m: 70, n: 99, k: 33, alpha: 1, beta: 1, hook: coordHook()},
	} {
		name := fmt.Sprintf("%s_%dx%dx%d", c.cfg.Name(), c.m, c.n, c.k)
		if c.hook != nil {
			name += "_hook"
		}
		if c.resInD {
			name += "_resInD"
		}
		t.Run(name, func(t *testing.T) {
			res, err := RunGemm(GemmProblem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: c.alpha, Beta: c.beta, Seed: 13, Hook: c.hook, ResidualInD: c.resInD})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != c.m*c.n {
				t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
			}
		})
	}
}

// TestActRef pins the float64 activations at a few points (torch's values).
func TestActRef(t *testing.T) {
	for _, c := range []struct {
		a       kernels.Activation
		x, want float64
	}{
		{kernels.ReLU, -1, 0}, {kernels.ReLU, 2, 2},
		{kernels.SiLU, 1, 0.7310585786300049}, {kernels.SiLU, -3, -0.14227761953270035},
		{kernels.GELU, 1, 0.8411919906082768}, {kernels.GELU, -2, -0.04540230591222298},
	} {
		if got := ActRef(c.a, c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s(%v) = %v, want %v", c.a, c.x, got, c.want)
		}
	}
}

// TestMLPBlock runs an MLP block, H = SiLU(X*W1 + b1) then Y = H*W2 + X, bf16, through the
// library's epilogue options on both gemm paths at odd token counts, against float64.
func TestMLPBlock(t *testing.T) {
	for _, p := range []MLPProblem{
		{Tokens: 130, Hidden: 136, FF: 264, SM90: true, Seed: 3},
		{Tokens: 257, Hidden: 64, FF: 520, SM90: true, SMs: 3, Seed: 4},
		{Tokens: 70, Hidden: 72, FF: 136, Seed: 5},
	} {
		t.Run(fmt.Sprintf("sm90=%v_%dx%dx%d", p.SM90, p.Tokens, p.Hidden, p.FF), func(t *testing.T) {
			res, err := RunMLP(p)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Checked != p.Tokens*p.FF || res[1].Checked != p.Tokens*p.Hidden {
				t.Fatalf("checked %d and %d values, want %d and %d", res[0].Checked, res[1].Checked, p.Tokens*p.FF, p.Tokens*p.Hidden)
			}
			t.Logf("%v; %v", res[0], res[1])
		})
	}
	if _, err := RunMLP(MLPProblem{Tokens: 8, Hidden: 12, FF: 16}); err == nil || !strings.Contains(err.Error(), "multiples of 8") {
		t.Errorf("hidden 12: err %v, want the multiple-of-8 rule", err)
	}
}
