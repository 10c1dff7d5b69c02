package ref

import (
	"math/rand"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// groupedSmall is a grouped configuration of small tiles (64x64, one consumer) for
// emulator speed.
var groupedSmall = kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 2}}

// TestGemmSM90GroupedEmu runs the grouped sm_90a gemm on the emulator against the float64
// reference: empty groups, all rows in one group, counts not multiples of BM, rows outside
// every group (kept), K and N multiples of 8 but not of 64, 1 to 32 groups.
func TestGemmSM90GroupedEmu(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	randCounts := func(g, maxRows int) []int {
		c := make([]int, g)
		for i := range c {
			if rng.Intn(4) > 0 {
				c[i] = rng.Intn(maxRows + 1)
			}
		}
		return c
	}
	for _, tc := range []struct {
		name string
		p    GemmSM90GroupedProblem
	}{
		{"one group", GemmSM90GroupedProblem{Counts: []int{70}, N: 64, K: 64}},
		{"all rows in one of 4", GemmSM90GroupedProblem{Counts: []int{0, 0, 97, 0}, N: 72, K: 40}},
		{"4 groups, empty, lead and tail", GemmSM90GroupedProblem{Counts: []int{5, 0, 66, 13}, Lead: 3, Tail: 4, N: 64, K: 128, Beta: -0.5}},
		{"8 random", GemmSM90GroupedProblem{Counts: randCounts(8, 40), N: 24, K: 24}},
		{"32 random", GemmSM90GroupedProblem{Counts: randCounts(32, 9), N: 8, K: 16}},
		{"all empty", GemmSM90GroupedProblem{Counts: []int{0, 0, 0}, Tail: 5, N: 16, K: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Config, p.Alpha, p.Seed, p.Blocks = groupedSmall, 1.5, 7, 3
			res, err := RunGemmSM90Grouped(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %d checked, max error %.3g of tolerance", res.Kernel, res.Shape, res.Checked, res.MaxError)
		})
	}
}

// TestGemmSM90GroupedDefaultEmu runs the library's default grouped configuration (128x256
// tiles, two consumer warpgroups) for bf16 and f16: groups straddling row tiles, the K tail
// of B reading into the next group's rows (K = 72), on blocks fewer than the tiles.
func TestGemmSM90GroupedDefaultEmu(t *testing.T) {
	for _, dt := range []dsl.Type{dsl.BF16, dsl.F16} {
		res, err := RunGemmSM90Grouped(GemmSM90GroupedProblem{Config: kernels.DefaultGemmSM90GroupedConfig(dt),
			Counts: []int{130, 0, 7, 129}, Lead: 1, N: 264, K: 72, Alpha: 0.75, Beta: 0.25, Seed: 11, Blocks: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s: max error %.3g of tolerance", res.Kernel, res.Shape, res.MaxError)
	}
}

// TestGemmSM90GroupedRefuses: a problem the kernel cannot run is an error naming the rule.
func TestGemmSM90GroupedRefuses(t *testing.T) {
	for _, p := range []GemmSM90GroupedProblem{
		{Config: groupedSmall, Counts: []int{4, -1}, N: 8, K: 8},
		{Config: groupedSmall, Counts: []int{4}, N: 12, K: 8},
		{Config: groupedSmall, N: 8, K: 8},
	} {
		if _, err := RunGemmSM90Grouped(p); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}

// TestGemmSM90GroupedFP8Emu runs e4m3 inputs (B groups x N x K, K-major) with the per-row
// and per-group, per-column scales against float64: the default 128x256x128 tiles and small
// 64x64 ones, N not a multiple of the tile (the next group's B rows load into columns past
// N, never stored), empty groups, rows of no group, beta != 0.
func TestGemmSM90GroupedFP8Emu(t *testing.T) {
	small := kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.E4M3, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 2}, Scales: true}
	for _, p := range []GemmSM90GroupedProblem{
		{Config: kernels.DefaultGemmSM90GroupedConfig(dsl.E4M3), Counts: []int{130, 0, 7, 61}, Lead: 1, Tail: 2, N: 264, K: 144, Alpha: 0.75, Beta: 0.25},
		{Config: small, Counts: []int{5, 0, 66, 13, 0, 9, 1, 20}, N: 40, K: 48, Alpha: 1.5},
		{Config: kernels.GemmSM90GroupedConfig{GemmSM90Config: small.GemmSM90Config}, Counts: []int{33, 12}, N: 24, K: 32, Alpha: 0.5},
	} {
		p.Seed, p.Blocks = 13, 3
		res, err := RunGemmSM90Grouped(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s: max error %.3g of tolerance", res.Kernel, res.Shape, res.MaxError)
	}
}

// TestGemmSM90GroupedTMAStoreEmu runs the TMA-store epilogue (TMAStore: warpgroups inside
// their group store through shared memory and TMA, those crossing its end from registers)
// and the banded tile orders against float64: counts not multiples of BM (a tile's first
// warpgroup inside, its second crossing or empty), empty groups, all rows in one group, rows
// of no group after the last one (the sentinel must stay: a TMA store of a crossing tile
// would overwrite them), beta != 0, e4m3 with scales, on blocks fewer than the tiles.
func TestGemmSM90GroupedTMAStoreEmu(t *testing.T) {
	small := groupedSmall
	small.TMAStore = true
	def := kernels.DefaultGemmSM90GroupedConfig(dsl.BF16)
	def.TMAStore, def.BandM = true, 8
	f8 := kernels.DefaultGemmSM90GroupedConfig(dsl.E4M3)
	f8.TMAStore, f8.BandM = true, 2
	band := func(c kernels.GemmSM90GroupedConfig, b int) kernels.GemmSM90GroupedConfig { c.BandM = b; return c }
	for _, tc := range []struct {
		name string
		p    GemmSM90GroupedProblem
	}{
		{"one group, all rows", GemmSM90GroupedProblem{Config: small, Counts: []int{150}, Tail: 5, N: 72, K: 64}},
		{"all rows in one of 4", GemmSM90GroupedProblem{Config: small, Counts: []int{0, 0, 97, 0}, Tail: 3, N: 64, K: 40}},
		{"crossing tiles", GemmSM90GroupedProblem{Config: small, Counts: []int{64, 70, 0, 13, 128, 1}, Lead: 3, Tail: 7, N: 136, K: 72, Beta: -0.5}},
		{"all empty", GemmSM90GroupedProblem{Config: small, Counts: []int{0, 0, 0}, Tail: 5, N: 16, K: 8}},
		{"band 1", GemmSM90GroupedProblem{Config: band(small, 1), Counts: []int{64, 70, 0, 13, 128, 1}, Lead: 2, Tail: 66, N: 200, K: 24}},
		{"band 3", GemmSM90GroupedProblem{Config: band(small, 3), Counts: []int{5, 0, 66, 13, 200, 9, 1}, Tail: 9, N: 200, K: 24, Beta: 0.25}},
		{"band 3, register store", GemmSM90GroupedProblem{Config: band(groupedSmall, 3), Counts: []int{5, 0, 66, 13, 200, 9, 1}, Tail: 9, N: 200, K: 24}},
		{"128x256, band 8", GemmSM90GroupedProblem{Config: def, Counts: []int{130, 0, 7, 200, 64}, Lead: 1, Tail: 70, N: 264, K: 72, Beta: 0.25}},
		{"e4m3 scales 128x256, band 2", GemmSM90GroupedProblem{Config: f8, Counts: []int{130, 0, 7, 192}, Lead: 1, Tail: 2, N: 264, K: 144, Beta: 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Alpha, p.Seed, p.Blocks = 0.75, 17, 3
			res, err := RunGemmSM90Grouped(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %d checked, max error %.3g of tolerance", res.Kernel, res.Shape, res.Checked, res.MaxError)
		})
	}
}
