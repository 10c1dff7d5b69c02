package ref

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// pingPong is the ping-pong configuration of 64 x bn tiles per consumer warpgroup.
func pingPong(in, out dsl.Type, bn, stages int, store bool, e kernels.Epilogue) kernels.GemmSM90Config {
	return kernels.GemmSM90Config{In: in, Out: out, BN: bn, Consumers: 2, Stages: stages, PingPong: true, TMAStore: store, Epilogue: e}
}

// clustered is c in clusters of two blocks along M (B multicast to both).
func clustered(c kernels.GemmSM90Config) kernels.GemmSM90Config {
	c.ClusterM = 2
	return c
}

// TestGemmSM90PingPong runs the ping-pong schedule (two consumer warpgroups, each its own
// 64 x BN tiles, turns by named barriers) on the emulator against the Go reference at odd
// shapes: M, N and K edges; one tile; fewer tiles than blocks (blocks without a tile, a
// block whose second warpgroup has none); an odd number of tiles per block (warpgroup 0
// runs one more); more tiles than twice the blocks, so the ring wraps over both
// warpgroups' tiles; bf16, f16 -> f32, e4m3 and e5m2, beta 0 and not, with and without the
// TMA store and clusters of 2 blocks.
func TestGemmSM90PingPong(t *testing.T) {
	var none kernels.Epilogue
	for _, c := range []struct {
		cfg           kernels.GemmSM90Config
		m, n, k, grid int
		alpha, beta   float64
	}{
		{pingPong(dsl.BF16, dsl.BF16, 256, 3, false, none), 64, 8, 16, 0, 1, 0},        // one tile
		{pingPong(dsl.BF16, dsl.BF16, 256, 3, false, none), 40, 200, 72, 3, 1.5, -0.5}, // one tile, 3 blocks
		{pingPong(dsl.BF16, dsl.BF16, 128, 4, false, none), 200, 136, 72, 3, 1.5, -0.5},
		{pingPong(dsl.BF16, dsl.BF16, 256, 3, false, none), 257, 520, 304, 2, 1, 0.25}, // 15 tiles on 2 blocks
		{pingPong(dsl.F16, dsl.F32, 64, 5, false, none), 130, 200, 328, 4, 0.5, 2},
		{pingPong(dsl.BF16, dsl.BF16, 256, 3, true, none), 257, 520, 304, 3, 1, 0.25},
		{pingPong(dsl.BF16, dsl.BF16, 128, 4, true, none), 200, 136, 72, 5, 1.5, -0.5},
		{pingPong(dsl.F16, dsl.F16, 256, 4, true, none), 136, 264, 200, 0, 1, 0}, // a block per tile
		{pingPong(dsl.E4M3, dsl.BF16, 256, 3, false, none), 200, 136, 80, 2, 0.25, -0.5},
		{pingPong(dsl.E4M3, dsl.F32, 128, 4, true, none), 130, 200, 400, 3, 0.5, 2},
		{pingPong(dsl.E5M2, dsl.F16, 128, 4, false, none), 136, 264, 272, 3, 1, 0},
		// clusters of 2 sharing B: an odd number of row tiles (a block past the last row),
		// fewer cluster tiles than clusters, several tiles per warpgroup
		{clustered(pingPong(dsl.BF16, dsl.BF16, 256, 3, false, none)), 257, 520, 304, 4, 1, 0.25},
		{clustered(pingPong(dsl.BF16, dsl.BF16, 128, 4, true, none)), 200, 136, 72, 6, 1.5, -0.5},
		{clustered(pingPong(dsl.E4M3, dsl.BF16, 256, 3, true, none)), 130, 264, 80, 2, 0.25, -0.5},
	} {
		t.Run(fmt.Sprintf("%s_%dx%dx%d_%d", c.cfg.Name(), c.m, c.n, c.k, c.grid), func(t *testing.T) {
			res, err := RunGemmSM90(GemmSM90Problem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: c.alpha, Beta: c.beta, Seed: 13, Blocks: c.grid})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != c.m*c.n {
				t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
			}
		})
	}
}

// TestGemmSM90PingPongEpilogues runs the ping-pong schedule with every epilogue option
// (bias, ReLU, GELU, SiLU, residual, also read from D itself, fp8 row-wise scales) and
// user-written hooks, both store paths, the per-column vectors preloaded at the tile's start
// (bias at BN 64, 128, 256; bias and scaleB) and not, alpha and beta, clusters of 2, at odd
// shapes with
// several tiles per warpgroup, against the float64 reference.
func TestGemmSM90PingPongEpilogues(t *testing.T) {
	bs := kernels.Epilogue{Bias: true, Act: kernels.SiLU}
	for _, c := range []struct {
		cfg         kernels.GemmSM90Config
		m, n, k     int
		alpha, beta float64
		hook        *GemmHook
		resInD      bool
	}{
		{cfg: pingPong(dsl.BF16, dsl.BF16, 256, 3, false, bs), m: 200, n: 264, k: 72, alpha: 1, beta: 0},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 256, 3, true, bs), m: 257, n: 264, k: 136, alpha: 1.5, beta: -0.5},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 128, 4, false, kernels.Epilogue{Residual: true}), m: 200, n: 136, k: 72, alpha: 1, beta: 0.5},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 256, 3, true, kernels.Epilogue{Act: kernels.ReLU, Residual: true}), m: 130, n: 264, k: 72, alpha: 1, beta: 0},
		{cfg: pingPong(dsl.F16, dsl.F16, 128, 4, false, kernels.Epilogue{Bias: true, Act: kernels.GELU}), m: 136, n: 200, k: 200, alpha: 0.5, beta: 2},
		{cfg: pingPong(dsl.F16, dsl.F32, 64, 4, false, kernels.Epilogue{Bias: true, Act: kernels.GELU, Residual: true}), m: 130, n: 200, k: 72, alpha: 1, beta: -0.5},
		{cfg: pingPong(dsl.F16, dsl.F32, 64, 4, true, kernels.Epilogue{Act: kernels.SiLU, Residual: true}), m: 130, n: 200, k: 72, alpha: 1, beta: 0},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 128, 4, true, kernels.Epilogue{Bias: true, Act: kernels.GELU, Residual: true}), m: 257, n: 392, k: 72, alpha: 1, beta: 0.5},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 256, 3, true, kernels.Epilogue{Bias: true, Act: kernels.SiLU, Residual: true}), m: 136, n: 136, k: 72, alpha: 1, beta: 0, resInD: true},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 128, 4, false, kernels.Epilogue{Bias: true, Act: kernels.SiLU, Residual: true}), m: 136, n: 136, k: 72, alpha: 1, beta: 0, resInD: true},
		{cfg: clustered(pingPong(dsl.BF16, dsl.BF16, 256, 3, true, bs)), m: 257, n: 264, k: 136, alpha: 1, beta: 0.5},
		{cfg: clustered(pingPong(dsl.BF16, dsl.BF16, 128, 4, false, kernels.Epilogue{Bias: true, Act: kernels.GELU, Residual: true})), m: 200, n: 264, k: 72, alpha: 1, beta: 0},
		// e4m3 with row-wise scales
		{cfg: pingPong(dsl.E4M3, dsl.BF16, 256, 3, false, kernels.Epilogue{Scales: true}), m: 200, n: 136, k: 80, alpha: 0.25, beta: -0.5},
		{cfg: pingPong(dsl.E4M3, dsl.BF16, 256, 3, false, kernels.Epilogue{Scales: true, Bias: true, Act: kernels.SiLU}), m: 257, n: 520, k: 144, alpha: 1, beta: 0},
		{cfg: pingPong(dsl.E4M3, dsl.BF16, 256, 2, true, kernels.Epilogue{Scales: true, Bias: true, Act: kernels.SiLU}), m: 257, n: 264, k: 144, alpha: 1, beta: 0},
		{cfg: pingPong(dsl.E4M3, dsl.F32, 64, 4, false, kernels.Epilogue{Scales: true, Act: kernels.GELU, Residual: true}), m: 130, n: 200, k: 160, alpha: 0.5, beta: 2},
		// user-written hooks
		{cfg: pingPong(dsl.BF16, dsl.BF16, 256, 3, false, kernels.Epilogue{}), m: 200, n: 136, k: 72, alpha: 1, beta: -0.5, hook: clampHook(0.75)},
		{cfg: pingPong(dsl.BF16, dsl.BF16, 256, 3, true, kernels.Epilogue{}), m: 130, n: 264, k: 72, alpha: 1, beta: 0, hook: coordHook()},
	} {
		name := fmt.Sprintf("%s_%dx%dx%d", c.cfg.Name(), c.m, c.n, c.k)
		if c.hook != nil {
			name += "_hook"
		}
		if c.resInD {
			name += "_resInD"
		}
		t.Run(name, func(t *testing.T) {
			if err := c.cfg.Check(); err != nil {
				t.Fatal(err)
			}
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
