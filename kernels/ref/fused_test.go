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

// smallFused is the fused kernels' test tile: 32x32x32 on 4 warps, 2 stages, aligned.
func smallFused(in, out dsl.Type) kernels.GemmConfig {
	return kernels.GemmConfig{In: in, Out: out, A: kernels.RowMajor, B: kernels.RowMajor, BM: 32, BN: 32, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 2, Aligned: true}
}

// TestFusedGemms runs ag_gemm, gemm_rs and gemm_ar at 1, 2, 3, 4 and 8 GPUs, strict and weak, with
// per-GPU rows not a multiple of the tile (36: a full and a partial row tile), N = 40 and
// K = 24 (odd multiples of 8), two launches in a row each.
func TestFusedGemms(t *testing.T) {
	for _, f := range []kernels.Family{kernels.FamilyAGGemm, kernels.FamilyGemmRS, kernels.FamilyGemmAR, kernels.FamilyAGGemmNVSHMEM, kernels.FamilyGemmARMC} {
		for _, g := range []int{1, 2, 3, 4, 8} {
			for _, weak := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dgpu/weak=%v", f, g, weak), func(t *testing.T) {
					res, err := RunFused(FusedProblem{Family: f, Config: smallFused(dsl.BF16, dsl.F32), GPUs: g, M: 36 * g, N: 40, K: 24, Seed: int64(g), Weak: weak})
					if err != nil {
						t.Fatal(err)
					}
					if want := 2 * 36 * g * 40 * map[bool]int{true: g, false: 1}[f != kernels.FamilyGemmRS]; res.Checked != want {
						t.Fatalf("checked %d values, want %d", res.Checked, want)
					}
				})
			}
		}
	}
}

// TestFusedGemmsMore runs other types, the unaligned kernels (any N and K), a single row
// tile per GPU smaller than the tile, more row tiles than a group of the tile order, and epochs across the u32 wrap (the signals' waits
// compare serial numbers: 0xffffffff, then 0), strict and weak.
func TestFusedGemmsMore(t *testing.T) {
	unaligned := smallFused(dsl.F16, dsl.BF16)
	unaligned.Aligned = false
	for _, f := range []kernels.Family{kernels.FamilyAGGemm, kernels.FamilyGemmRS, kernels.FamilyGemmAR} {
		for _, c := range []struct {
			name    string
			cfg     kernels.GemmConfig
			g       int
			m, n, k int
			epoch   uint32
			b2b     bool
		}{
			{"f16-f16", smallFused(dsl.F16, dsl.F16), 3, 3 * 36, 56, 40, 0, false},
			{"unaligned", unaligned, 3, 3 * 13, 37, 19, 0, false},
			{"small-rows", smallFused(dsl.BF16, dsl.BF16), 4, 4 * 5, 24, 8, 0, false},
			{"epoch-wrap", smallFused(dsl.BF16, dsl.F32), 2, 2 * 36, 40, 24, 0xffffffff, false},
			{"back-to-back", smallFused(dsl.BF16, dsl.F32), 4, 4 * 36, 40, 24, 0, true},
			{"back-to-back-unaligned", unaligned, 4, 4 * 36, 40, 24, 0, true},
			// 10 row tiles per GPU (a full group of 8 in the grouped tile order, then a
			// partial group of 2, the last tile partial) by 3 tile columns.
			{"grouped", smallFused(dsl.BF16, dsl.F32), 3, 3 * 293, 96, 24, 0, true},
			{"grouped-1gpu", smallFused(dsl.BF16, dsl.BF16), 1, 293, 96, 24, 0, false},
		} {
			for _, weak := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/weak=%v", f, c.name, weak), func(t *testing.T) {
					res, err := RunFused(FusedProblem{Family: f, Config: c.cfg, GPUs: c.g, M: c.m, N: c.n, K: c.k, Seed: 5, Weak: weak, Epoch: c.epoch, Launches: 3, BackToBack: c.b2b})
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

// TestFusedGemmsCatchMissingRelease is a test of the tests: gemm_rs, ag_gemm and gemm_ar
// whose tile signals are relaxed stores instead of releases must fail in the weak-memory
// mode (the partials or pushed rows can land after the signal), while the correct kernels
// pass the same runs.
func TestFusedGemmsCatchMissingRelease(t *testing.T) {
	for _, c := range []struct {
		f    kernels.Family
		good func(*dsl.Kernel, kernels.GemmConfig)
		bad  func(*dsl.Kernel, kernels.GemmConfig)
	}{
		{kernels.FamilyGemmRS, kernels.GemmRS, kernels.GemmRSUnordered},
		{kernels.FamilyAGGemm, kernels.AGGemm, kernels.AGGemmUnordered},
		{kernels.FamilyGemmAR, kernels.GemmAR, kernels.GemmARUnordered},
	} {
		for seed := int64(1); seed <= 2; seed++ {
			// Unaligned tiles load A and B with plain loads, which the detectors see (cp.async's
			// global reads are not checked: docs/emu.md).
			cfg := smallFused(dsl.F16, dsl.F16)
			cfg.Aligned = false
			p := FusedProblem{Family: c.f, Config: cfg, GPUs: 4, M: 4 * 36, N: 40, K: 24, Seed: seed, Weak: true, Build: c.good}
			if _, err := RunFused(p); err != nil {
				t.Fatalf("%s seed %d: the correct kernel failed: %v", c.f, seed, err)
			}
			p.Build = c.bad
			_, err := RunFused(p)
			var e *emu.Error
			if !errors.As(err, &e) || e.Kind != emu.KindMissingFence && e.Kind != emu.KindDataRace {
				t.Fatalf("%s seed %d: want a missing-fence or data-race report, got %v", c.f, seed, err)
			}
			// A missing-fence report names the relaxed signal (fused_sync.go); a data race
			// report (the race detector may meet the bug first) the unordered peer access.
			msg := err.Error()
			if e.Kind == emu.KindMissingFence && !(strings.Contains(msg, "st.relaxed.sys") || strings.Contains(msg, "red.relaxed.sys")) || !strings.Contains(msg, "kernels/fused_sync.go") {
				if e.Kind != emu.KindDataRace || !strings.Contains(msg, "no release at .sys scope") {
					t.Fatalf("%s seed %d: the report does not name the relaxed signal or the unordered access: %v", c.f, seed, err)
				}
			}
			t.Log(err)
		}
	}
}
