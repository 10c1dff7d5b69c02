package kernels

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestChooseGemm: gemm_sm90 on sm_90a when N and K are multiples of 8, the mma.sync gemm
// otherwise and on every other target; bad input is an error naming it.
func TestChooseGemm(t *testing.T) {
	for _, c := range []struct {
		t       ptx.Target
		n, k    int
		want    Family
		whyWord string
	}{
		{ptx.SM90a, 136, 304, FamilyGemmSM90, "wgmma"},
		{ptx.SM90a, 132, 304, FamilyGemm, "multiples of 8"},
		{ptx.SM90a, 136, 300, FamilyGemm, "multiples of 8"},
		{ptx.SM90, 136, 304, FamilyGemm, "no wgmma"},
		{ptx.SM80, 136, 304, FamilyGemm, "no wgmma"},
		{ptx.SM100a, 136, 304, FamilyGemm, "no wgmma"},
	} {
		g, err := ChooseGemm(c.t, dsl.BF16, 257, c.n, c.k, 132)
		if err != nil {
			t.Fatal(err)
		}
		if g.Family != c.want || !strings.Contains(g.Why, c.whyWord) {
			t.Errorf("%s N=%d K=%d: %s (%s), want %s (%q)", c.t, c.n, c.k, g.Family, g.Why, c.want, c.whyWord)
		}
		pick, _ := GemmSM90For(dsl.BF16, dsl.BF16, 257, c.n, c.k, 132)
		def := DefaultGemmConfig(dsl.BF16)
		def.Aligned = false // 257 rows: the aligned kernel needs multiples of 8
		if g.Family == FamilyGemmSM90 && g.SM90 != pick || g.Family == FamilyGemm && g.Config != def {
			t.Errorf("%s: configuration %+v / %+v is not the shape's pick", g.Family, g.SM90, g.Config)
		}
	}
	for _, c := range []struct {
		t       ptx.Target
		dt      dsl.Type
		m, n, k int
		want    string
	}{
		{"sm_91", dsl.BF16, 8, 8, 8, "unknown target"},
		{ptx.SM90a, dsl.F32, 8, 8, 8, "element type f32"},
		{ptx.SM90a, dsl.BF16, 0, 8, 8, "must be positive"},
	} {
		if _, err := ChooseGemm(c.t, c.dt, c.m, c.n, c.k, 132); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c, err, c.want)
		}
	}
	if _, err := ChooseGemm(ptx.SM90a, dsl.BF16, 8, 8, 8, 0); err == nil || !strings.Contains(err.Error(), "0 multiprocessors") {
		t.Errorf("0 SMs: err %v, want one naming the count", err)
	}
	// A large problem gets the 128x256 tile with the TMA-store epilogue, a skinny one a small
	// tile (GemmSM90For's picks, measured in docs/bench.md).
	big, err := ChooseGemm(ptx.SM90a, dsl.BF16, 8192, 8192, 8192, 132)
	if err != nil || big.SM90.BN != 256 || !big.SM90.TMAStore {
		t.Errorf("8192^3: %+v, %v; want 128x256 with the TMA store", big.SM90, err)
	}
	small, err := ChooseGemm(ptx.SM90a, dsl.BF16, 128, 4096, 4096, 132)
	if err != nil || small.SM90.BM() != 64 {
		t.Errorf("128x4096x4096: %+v, %v; want a 64-row tile", small.SM90, err)
	}
}
