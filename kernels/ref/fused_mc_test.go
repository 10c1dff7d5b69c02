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

// TestGemmARMCMore runs gemm_ar_mc (the mma.sync gemm_ar over multimem) on f16 out, a row
// slice smaller than the tile, 10 row tiles per GPU, epochs across the u32 wrap and back to
// back, strict and weak (TestFusedGemms has it at 1-8 GPUs).
func TestGemmARMCMore(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     kernels.GemmConfig
		g       int
		m, n, k int
		epoch   uint32
		b2b     bool
	}{
		{"f16-f16", smallFused(dsl.F16, dsl.F16), 3, 3 * 36, 56, 40, 0, false},
		{"small-rows", smallFused(dsl.BF16, dsl.BF16), 4, 4 * 5, 24, 8, 0, false},
		{"epoch-wrap", smallFused(dsl.BF16, dsl.F32), 2, 2 * 36, 40, 24, 0xffffffff, false},
		{"back-to-back", smallFused(dsl.BF16, dsl.F32), 4, 4 * 36, 40, 24, 0, true},
		{"grouped", smallFused(dsl.BF16, dsl.F32), 3, 3 * 293, 96, 24, 0, true},
	} {
		for _, weak := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/weak=%v", c.name, weak), func(t *testing.T) {
				res, err := RunFused(FusedProblem{Family: kernels.FamilyGemmARMC, Config: c.cfg, GPUs: c.g, M: c.m, N: c.n, K: c.k, Seed: 5, Weak: weak, Epoch: c.epoch, Launches: 3, BackToBack: c.b2b})
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

// TestGemmARMCCatchMissingRelease: gemm_ar_mc with relaxed signals fails in weak mode (the
// owner's multimem.ld_reduce reads are not checked by the detectors, so as wrong values or a
// report), while the correct kernel passes the same runs; the unaligned configuration is a
// Build error naming the rule.
func TestGemmARMCCatchMissingRelease(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		p := FusedProblem{Family: kernels.FamilyGemmARMC, Config: smallFused(dsl.F16, dsl.F16), GPUs: 4, M: 4 * 36, N: 40, K: 24, Seed: seed, Weak: true, Build: kernels.GemmARMC}
		if _, err := RunFused(p); err != nil {
			t.Fatalf("seed %d: the correct kernel failed: %v", seed, err)
		}
		p.Build = kernels.GemmARMCUnordered
		_, err := RunFused(p)
		var e *emu.Error
		if err == nil || !errors.As(err, &e) && !strings.Contains(err.Error(), "values differ") {
			t.Fatalf("seed %d: want wrong values or a detector report, got %v", seed, err)
		}
		t.Log(err)
	}
	cfg := smallFused(dsl.BF16, dsl.BF16)
	cfg.Aligned = false
	_, err := RunFused(FusedProblem{Family: kernels.FamilyGemmARMC, Config: cfg, GPUs: 2, M: 2 * 13, N: 37, K: 19})
	if err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Fatalf("unaligned gemm_ar_mc: %v, want a Build error naming the aligned rule", err)
	}
}
