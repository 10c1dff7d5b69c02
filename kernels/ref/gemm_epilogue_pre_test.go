package ref

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestGemmSM90EpiloguePreload runs the sm_90a epilogues whose per-column vectors (bias,
// scaleB) load at each tile's start, on the emulator against the float64 reference: the
// register epilogue's pairs in registers (BN 64, 128 and 256), the TMA-store epilogue's
// staging in shared memory (BN 64, where half the threads stage, 128 and 256), the fused
// FMA form with beta*C, and the register epilogue that still loads in the epilogue (scales
// and bias at BN 256). The shapes leave partial tiles in M and N, and two blocks take
// several tiles each, so a staged vector is reused across tiles.
func TestGemmSM90EpiloguePreload(t *testing.T) {
	bs := kernels.Epilogue{Bias: true, Act: kernels.SiLU}
	cfg := func(in, out dsl.Type, bn, cons, stages int, store bool, e kernels.Epilogue) kernels.GemmSM90Config {
		return kernels.GemmSM90Config{In: in, Out: out, BN: bn, Consumers: cons, Stages: stages, TMAStore: store, Epilogue: e}
	}
	for _, c := range []struct {
		cfg         kernels.GemmSM90Config
		m, n, k     int
		alpha, beta float64
	}{
		{cfg(dsl.BF16, dsl.BF16, 64, 1, 4, false, bs), 200, 328, 72, 1, 0},
		{cfg(dsl.BF16, dsl.BF16, 64, 1, 4, true, bs), 200, 328, 72, 1.5, -0.5},
		{cfg(dsl.BF16, dsl.BF16, 128, 2, 4, false, bs), 257, 520, 136, 0.5, 0},
		{cfg(dsl.BF16, dsl.BF16, 128, 2, 4, true, kernels.Epilogue{Bias: true, Act: kernels.GELU, Residual: true}), 257, 392, 72, 1, 0.5},
		{cfg(dsl.BF16, dsl.BF16, 256, 1, 4, false, bs), 130, 776, 72, 1, -1},
		{cfg(dsl.F16, dsl.F32, 128, 2, 4, true, kernels.Epilogue{Bias: true, Act: kernels.ReLU}), 257, 520, 72, 2, 0},
		{cfg(dsl.F16, dsl.F16, 128, 2, 4, false, kernels.Epilogue{Bias: true}), 136, 264, 72, 1, 0.25},
		{cfg(dsl.E4M3, dsl.BF16, 256, 2, 3, false, kernels.Epilogue{Scales: true, Bias: true, Act: kernels.SiLU}), 257, 520, 144, 1, 0},
		{cfg(dsl.E4M3, dsl.BF16, 64, 1, 4, true, kernels.Epilogue{Scales: true, Bias: true, Act: kernels.GELU}), 130, 200, 160, 0.5, 0.5},
	} {
		name := fmt.Sprintf("%s_%dx%dx%d_b%g", c.cfg.Name(), c.m, c.n, c.k, c.beta)
		t.Run(name, func(t *testing.T) {
			if err := c.cfg.Check(); err != nil {
				t.Fatal(err)
			}
			res, err := RunGemmSM90(GemmSM90Problem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: c.alpha, Beta: c.beta, Seed: 5, Blocks: 2})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != c.m*c.n {
				t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
			}
		})
	}
}
