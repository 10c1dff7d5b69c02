package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestGemmSM90Shapes runs the sm_90a gemm on the emulator at odd shapes (edges in M, N and
// K, more tiles than blocks so the persistent loop and the stage ring wrap) against the Go
// reference, with beta 0 and not.
func TestGemmSM90Shapes(t *testing.T) {
	for _, c := range []struct {
		cfg           kernels.GemmSM90Config
		m, n, k, grid int
		alpha, beta   float64
	}{
		{kernels.DefaultGemmSM90Config(dsl.BF16), 64, 8, 16, 0, 1, 0},
		{kernels.DefaultGemmSM90Config(dsl.BF16), 200, 136, 72, 2, 1.5, -0.5},
		{kernels.GemmSM90Config{In: dsl.F16, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 3}, 130, 200, 328, 3, 0.5, 2},
		{kernels.DefaultGemmSM90Config(dsl.BF16), 257, 520, 304, 5, 1, 0.25},
		{kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 3}, 136, 264, 200, 3, 1, 0},
		// fp8: B is N x K; K a multiple of 16
		{kernels.DefaultGemmSM90Config(dsl.E4M3), 64, 8, 16, 0, 1, 0},
		{kernels.DefaultGemmSM90Config(dsl.E4M3), 200, 136, 80, 2, 0.25, -0.5},
		{kernels.DefaultGemmSM90Config(dsl.E4M3), 257, 520, 304, 5, 1.5, 0},
		{kernels.GemmSM90Config{In: dsl.E4M3, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 4}, 130, 200, 400, 3, 0.5, 2},
		{kernels.GemmSM90Config{In: dsl.E5M2, Out: dsl.F16, BN: 128, Consumers: 2, Stages: 4}, 136, 264, 272, 3, 1, 0},
	} {
		t.Run(fmt.Sprintf("%s_%dx%dx%d", c.cfg.Name(), c.m, c.n, c.k), func(t *testing.T) {
			res, err := RunGemmSM90(GemmSM90Problem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: c.alpha, Beta: c.beta, Seed: 3, Blocks: c.grid})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != c.m*c.n {
				t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
			}
		})
	}
}

// TestGemmSM90Candidates runs every configuration kernels.GemmSM90For can pick on the
// emulator at an odd shape (M, N and K edges, the persistent loop wrapping over 3 blocks),
// bf16 -> bf16 with beta 0, bf16 -> f32 with beta != 0, e4m3 -> bf16.
func TestGemmSM90Candidates(t *testing.T) {
	for _, io := range [][2]dsl.Type{{dsl.BF16, dsl.BF16}, {dsl.BF16, dsl.F32}, {dsl.E4M3, dsl.BF16}} {
		for _, cfg := range kernels.GemmSM90Candidates(io[0], io[1]) {
			m, n, k, beta := 200, 136, 72, 0.0
			switch {
			case io[1] == dsl.F32:
				m, n, k, beta = 257, 264, 200, -0.5
			case cfg.FP8():
				m, n, k = 200, 136, 400
			}
			t.Run(fmt.Sprintf("%s_%dx%dx%d", cfg.Name(), m, n, k), func(t *testing.T) {
				res, err := RunGemmSM90(GemmSM90Problem{Config: cfg, M: m, N: n, K: k, Alpha: 1.5, Beta: beta, Seed: 5, Blocks: 3})
				if err != nil {
					t.Fatal(err)
				}
				if res.Checked != m*n {
					t.Fatalf("checked %d values, want %d", res.Checked, m*n)
				}
			})
		}
	}
}

// TestGemmSM90ShapeErrors: K or N not a multiple of 8 is refused with the reason.
func TestGemmSM90ShapeErrors(t *testing.T) {
	cfg := kernels.DefaultGemmSM90Config(dsl.BF16)
	for _, s := range [][3]int{{64, 12, 16}, {64, 16, 20}} {
		_, err := RunGemmSM90(GemmSM90Problem{Config: cfg, M: s[0], N: s[1], K: s[2]})
		if err == nil || !strings.Contains(err.Error(), "multiples of 8") {
			t.Errorf("%v: err %v, want the multiple-of-8 rule", s, err)
		}
	}
	f8 := kernels.DefaultGemmSM90Config(dsl.E4M3)
	for _, s := range [][3]int{{257, 520, 300}, {64, 12, 32}} {
		_, err := RunGemmSM90(GemmSM90Problem{Config: f8, M: s[0], N: s[1], K: s[2]})
		if err == nil || !strings.Contains(err.Error(), "K must be a multiple of 16") {
			t.Errorf("e4m3 %v: err %v, want the fp8 shape rule", s, err)
		}
	}
}

// TestGemmSM90Options runs the cluster (ClusterM 2, B multicast) and TMA-store options,
// alone and together, on the emulator at odd shapes (an odd number of row tiles, so a
// cluster's second block gets the empty row past M; M, N and K edges; more tiles than
// blocks, so the persistent loop and the stage ring wrap) against the Go reference, bf16 and
// e4m3, beta 0 and not.
func TestGemmSM90Options(t *testing.T) {
	type opt struct {
		cluster int
		store   bool
	}
	for _, o := range []opt{{2, false}, {0, true}, {2, true}} {
		for _, c := range []struct {
			cfg           kernels.GemmSM90Config
			m, n, k, grid int
			alpha, beta   float64
		}{
			{kernels.DefaultGemmSM90Config(dsl.BF16), 64, 8, 16, 2, 1, 0},
			{kernels.DefaultGemmSM90Config(dsl.BF16), 257, 520, 304, 4, 1, 0.25},
			{kernels.GemmSM90Config{In: dsl.F16, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 3}, 130, 200, 328, 4, 0.5, 2},
			{kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 2, Stages: 4}, 200, 136, 72, 2, 1.5, -0.5},
			{kernels.DefaultGemmSM90Config(dsl.E4M3), 200, 136, 80, 2, 0.25, -0.5},
			{kernels.DefaultGemmSM90Config(dsl.E4M3), 257, 520, 304, 4, 1.5, 0},
			{kernels.GemmSM90Config{In: dsl.E4M3, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 4}, 130, 200, 400, 4, 0.5, 2},
		} {
			cfg := c.cfg
			cfg.ClusterM, cfg.TMAStore = o.cluster, o.store
			if cfg.Check() != nil { // the epilogue tile may not fit beside the stages
				cfg.Stages--
			}
			t.Run(fmt.Sprintf("%s_%dx%dx%d", cfg.Name(), c.m, c.n, c.k), func(t *testing.T) {
				res, err := RunGemmSM90(GemmSM90Problem{Config: cfg, M: c.m, N: c.n, K: c.k, Alpha: c.alpha, Beta: c.beta, Seed: 7, Blocks: c.grid})
				if err != nil {
					t.Fatal(err)
				}
				if res.Checked != c.m*c.n {
					t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
				}
			})
		}
	}
}
