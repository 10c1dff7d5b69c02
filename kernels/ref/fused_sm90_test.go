package ref

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
)

var sm90Fused = []kernels.Family{kernels.FamilyAGGemmSM90, kernels.FamilyGemmRSSM90, kernels.FamilyGemmARSM90, kernels.FamilyGemmARMCSM90}

// smallSM90 is the sm_90a fused kernels' test tile: 64x64x64 on one consumer warpgroup, 2
// stages.
func smallSM90(in, out dsl.Type) kernels.GemmSM90Config {
	return kernels.GemmSM90Config{In: in, Out: out, BN: 64, Consumers: 1, Stages: 2}
}

// TestFusedSM90Gemms runs ag_gemm_sm90, gemm_rs_sm90, gemm_ar_sm90 and gemm_ar_mc_sm90 at 1, 2, 3, 4 and 8
// GPUs, strict and weak, with per-GPU rows not a multiple of the tile (72: a full and a
// partial row tile), N = 72 and K = 88 (odd multiples of 8, partial tiles in N and K), two
// launches in a row on 2 persistent blocks per GPU.
func TestFusedSM90Gemms(t *testing.T) {
	for _, f := range sm90Fused {
		for _, g := range []int{1, 2, 3, 4, 8} {
			for _, weak := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dgpu/weak=%v", f, g, weak), func(t *testing.T) {
					res, err := RunFusedSM90(FusedSM90Problem{Family: f, Config: smallSM90(dsl.BF16, dsl.F32), GPUs: g, M: 72 * g, N: 72, K: 88, Blocks: 2, Seed: int64(g), Weak: weak})
					if err != nil {
						t.Fatal(err)
					}
					if want := 2 * 72 * g * 72 * map[bool]int{true: g, false: 1}[f != kernels.FamilyGemmRSSM90]; res.Checked != want {
						t.Fatalf("checked %d values, want %d", res.Checked, want)
					}
				})
			}
		}
	}
}

// TestFusedSM90GemmsMore runs the default configuration (two consumer warpgroups, 128x128
// tiles), f16 in and out, a row slice smaller than the tile, more row tiles than a group of
// the tile order, one block per tile, and epochs across the u32 wrap and back to back
// (the weak-memory detector checks one launch against the next), strict and weak.
func TestFusedSM90GemmsMore(t *testing.T) {
	for _, f := range sm90Fused {
		for _, c := range []struct {
			name          string
			cfg           kernels.GemmSM90Config
			g             int
			m, n, k, grid int
			epoch         uint32
			b2b           bool
		}{
			{"default", kernels.DefaultGemmSM90Config(dsl.BF16), 2, 2 * 136, 136, 72, 3, 0, false},
			{"f16-f16", smallSM90(dsl.F16, dsl.F16), 3, 3 * 72, 56, 40, 2, 0, false},
			{"small-rows", smallSM90(dsl.BF16, dsl.BF16), 4, 4 * 5, 24, 8, 3, 0, false},
			{"grid-per-tile", smallSM90(dsl.BF16, dsl.F32), 3, 3 * 72, 72, 88, 0, 0, false},
			{"epoch-wrap", smallSM90(dsl.BF16, dsl.F32), 2, 2 * 72, 72, 88, 2, 0xffffffff, false},
			{"back-to-back", smallSM90(dsl.BF16, dsl.F32), 4, 4 * 72, 72, 24, 2, 0, true},
			// 10 row tiles per GPU (a full group of 8, then 2, the last partial).
			{"grouped", smallSM90(dsl.BF16, dsl.F32), 2, 2 * 600, 136, 24, 5, 0, true},
		} {
			for _, weak := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/weak=%v", f, c.name, weak), func(t *testing.T) {
					res, err := RunFusedSM90(FusedSM90Problem{Family: f, Config: c.cfg, GPUs: c.g, M: c.m, N: c.n, K: c.k, Blocks: c.grid,
						Seed: 5, Weak: weak, Epoch: c.epoch, Launches: 3, BackToBack: c.b2b})
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}

// TestFusedSM90CatchMissingRelease is a test of the tests: the sm_90a kernels whose tile
// signals are relaxed instead of release must fail in the weak-memory mode, while the
// correct kernels pass the same runs.
func TestFusedSM90CatchMissingRelease(t *testing.T) {
	for _, c := range []struct {
		f         kernels.Family
		good, bad func(*dsl.Kernel, kernels.GemmSM90Config)
	}{
		{kernels.FamilyGemmRSSM90, kernels.GemmRSSM90, kernels.GemmRSSM90Unordered},
		{kernels.FamilyAGGemmSM90, kernels.AGGemmSM90, kernels.AGGemmSM90Unordered},
		{kernels.FamilyGemmARSM90, kernels.GemmARSM90, kernels.GemmARSM90Unordered},
		{kernels.FamilyGemmARMCSM90, kernels.GemmARMCSM90, kernels.GemmARMCSM90Unordered},
	} {
		for seed := int64(1); seed <= 2; seed++ {
			p := FusedSM90Problem{Family: c.f, Config: smallSM90(dsl.F16, dsl.F16), GPUs: 4, M: 4 * 72, N: 72, K: 24, Blocks: 2, Seed: seed, Weak: true, Build: c.good}
			if _, err := RunFusedSM90(p); err != nil {
				t.Fatalf("%s seed %d: the correct kernel failed: %v", c.f, seed, err)
			}
			p.Build = c.bad
			_, err := RunFusedSM90(p)
			if err == nil {
				t.Fatalf("%s seed %d: the kernel without releases passed", c.f, seed)
			}
			// gemm_rs and gemm_ar: the owner's plain loads of the partials meet the detectors
			// (a data race or missing fence at the partial's store). ag_gemm and gemm_ar_mc:
			// TMA's and multimem.ld_reduce's reads are not checked (docs/emu.md), so the stale
			// rows or partials show in the output.
			msg := err.Error()
			var e *emu.Error
			switch {
			case errors.As(err, &e):
				if e.Kind != emu.KindMissingFence && e.Kind != emu.KindDataRace || !strings.Contains(msg, "kernels/fused_sm90.go") {
					t.Fatalf("%s seed %d: want a missing-fence or data-race report naming kernels/fused_sm90.go, got %v", c.f, seed, err)
				}
			case c.f != kernels.FamilyAGGemmSM90 && c.f != kernels.FamilyGemmARMCSM90 || !strings.Contains(msg, "values differ"):
				t.Fatalf("%s seed %d: want a detector report (ag_gemm, gemm_ar_mc: wrong values), got %v", c.f, seed, err)
			}
			t.Log(err)
		}
	}
}
