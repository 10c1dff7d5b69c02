package ref

import (
	"fmt"
	"math/rand"
	"strings"
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

// TestGemmSM90GroupedMaskedEmu runs the masked layout (Masked: group g's rows at g*Stride,
// Counts[g] of them read on the device) against float64: counts 0, 1, the stride, stride-1,
// not multiples of the tile, negative or past the stride (the kernel clamps them to [0,
// Stride]), 1 to 33 groups, the row-tile order and bands of 8 (and 2), the register and TMA
// stores, 16-bit and e4m3 with scales, rows after the last group's slots, on blocks fewer
// than the tiles and on the full grid. A's rows outside every group hold NaN and D starts
// as a sentinel: a slot past a count that was computed into, or written, fails the check.
func TestGemmSM90GroupedMaskedEmu(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	masked := func(c kernels.GemmSM90GroupedConfig, store bool, band int) kernels.GemmSM90GroupedConfig {
		c.Masked, c.TMAStore, c.BandM = true, store, band
		return c
	}
	small, f16 := groupedSmall, groupedSmall
	f16.In, f16.Out = dsl.F16, dsl.F16
	def := kernels.DefaultGemmSM90GroupedConfig(dsl.BF16)
	f8 := kernels.DefaultGemmSM90GroupedConfig(dsl.E4M3)
	f8small := kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.E4M3, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 2}, Scales: true}
	randCounts := func(g, lo, hi int) []int {
		c := make([]int, g)
		for i := range c {
			c[i] = lo + rng.Intn(hi-lo+1)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		p    GemmSM90GroupedProblem
	}{
		{"1 group, count = stride", GemmSM90GroupedProblem{Config: masked(small, false, 0), Stride: 70, Counts: []int{70}, Tail: 3, N: 64, K: 64}},
		{"1 group, count 1", GemmSM90GroupedProblem{Config: masked(small, true, 8), Stride: 64, Counts: []int{1}, N: 64, K: 64}},
		{"1 group, count 0", GemmSM90GroupedProblem{Config: masked(small, true, 0), Stride: 16, Counts: []int{0}, Tail: 1, N: 16, K: 8}},
		{"odd counts, register store", GemmSM90GroupedProblem{Config: masked(small, false, 0), Stride: 100, Counts: []int{0, 1, 100, 99, 37, 64, 65}, Tail: 5, N: 72, K: 40, Beta: -0.5}},
		{"odd counts, TMA store", GemmSM90GroupedProblem{Config: masked(small, true, 0), Stride: 100, Counts: []int{0, 1, 100, 99, 37, 64, 65}, Tail: 5, N: 72, K: 40, Beta: -0.5}},
		{"odd counts, TMA store, band 8", GemmSM90GroupedProblem{Config: masked(small, true, 8), Stride: 100, Counts: []int{0, 1, 100, 99, 37, 64, 65}, N: 136, K: 40}},
		{"odd counts, register store, band 8", GemmSM90GroupedProblem{Config: masked(small, false, 8), Stride: 129, Counts: []int{128, 129, 63, 0, 2}, N: 200, K: 24, Beta: 0.25}},
		{"clamped counts", GemmSM90GroupedProblem{Config: masked(small, true, 8), Stride: 40, Counts: []int{-5, 41, 1 << 30, 40, -1 << 31}, Tail: 64, N: 64, K: 16}},
		{"33 groups, band 8", GemmSM90GroupedProblem{Config: masked(small, true, 8), Stride: 9, Counts: randCounts(33, -2, 12), Tail: 2, N: 8, K: 16}},
		{"33 groups, row tiles", GemmSM90GroupedProblem{Config: masked(small, false, 0), Stride: 70, Counts: randCounts(33, 0, 70), N: 24, K: 24}},
		{"f16, band 8", GemmSM90GroupedProblem{Config: masked(f16, true, 8), Stride: 80, Counts: []int{80, 79, 0, 17}, N: 40, K: 56}},
		{"128x256, TMA store, band 8", GemmSM90GroupedProblem{Config: masked(def, true, 8), Stride: 200, Counts: []int{130, 0, 7, 200, 64, 199}, Tail: 3, N: 264, K: 72, Beta: 0.25}},
		{"128x256, register store", GemmSM90GroupedProblem{Config: masked(def, false, 0), Stride: 200, Counts: []int{130, 0, 7, 200, 64, 199}, N: 264, K: 72}},
		{"e4m3 scales 128x256, TMA store, band 2", GemmSM90GroupedProblem{Config: masked(f8, true, 2), Stride: 192, Counts: []int{130, 0, 7, 192, 191}, Tail: 2, N: 264, K: 144, Beta: 0.25}},
		{"e4m3 scales 64x64, band 8", GemmSM90GroupedProblem{Config: masked(f8small, false, 8), Stride: 66, Counts: []int{5, 0, 66, 13, 65, 1, 70}, N: 40, K: 48}},
	} {
		for _, blocks := range []int{3, 0} {
			t.Run(fmt.Sprintf("%s/%d blocks", tc.name, blocks), func(t *testing.T) {
				p := tc.p
				p.Alpha, p.Seed, p.Blocks = 0.75, 19, blocks
				res, err := RunGemmSM90Grouped(p)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s: %d checked, max error %.3g of tolerance", res.Kernel, res.Shape, res.Checked, res.MaxError)
			})
		}
	}
}

// TestGemmSM90GroupedMaskedRefuses: a masked problem the kernel cannot run is an error
// naming the rule.
func TestGemmSM90GroupedMaskedRefuses(t *testing.T) {
	m := groupedSmall
	m.Masked = true
	for _, tc := range []struct {
		cfg                kernels.GemmSM90GroupedConfig
		m, n, k, g, stride int
		want               string
	}{
		{groupedSmall, 64, 8, 8, 2, 32, "not Masked"},
		{m, 64, 8, 8, 2, 0, "stride 0: want a positive row stride"},
		{m, 64, 8, 8, 3, 32, "stride 32 x 3 groups = 96 rows: the groups' slots must lie inside A's and D's 64 rows"},
		{m, 64, 12, 8, 2, 32, "multiples of 8"},
		{m, 64, 8, 8, 0, 32, "0 groups"},
	} {
		err := tc.cfg.CheckMasked(tc.m, tc.n, tc.k, tc.g, tc.stride)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckMasked(%d, %d, %d, %d, %d) of %s: %v; want an error containing %q", tc.m, tc.n, tc.k, tc.g, tc.stride, tc.cfg.Name(), err, tc.want)
		}
	}
	if _, err := RunGemmSM90Grouped(GemmSM90GroupedProblem{Config: m, Stride: 8, Lead: 1, Counts: []int{4}, N: 8, K: 8}); err == nil {
		t.Error("a masked problem with Lead rows: no error")
	}
}

// TestGemmSM90GroupedMaskedWork: the masked kernel's work follows the counts, not the
// slots. The same 8 groups of 256 slots (BM 64) run as the low-latency layer ran them before
// the masked mode (offsets g*256: every slot computed) and masked with a quarter of each
// group's slots counted (64 rows: one row tile of four); the masked run executes at most 40%
// of the warp instructions (about a quarter, plus the per-block setup), and masked with
// every slot counted about as many as the offsets run.
func TestGemmSM90GroupedMaskedWork(t *testing.T) {
	const groups, stride = 8, 256
	full, quarter := make([]int, groups), make([]int, groups)
	for g := range full {
		full[g], quarter[g] = stride, stride/4
	}
	cfg := groupedSmall
	cfg.TMAStore, cfg.BandM = true, 8
	mcfg := cfg
	mcfg.Masked = true
	run := func(p GemmSM90GroupedProblem) int64 {
		t.Helper()
		p.N, p.K, p.Alpha, p.Seed, p.Blocks = 64, 64, 1, 3, 4
		res, err := RunGemmSM90Grouped(p)
		if err != nil {
			t.Fatal(err)
		}
		if res.WarpInstructions == 0 {
			t.Fatalf("%s: no instruction count", res.Kernel)
		}
		return res.WarpInstructions
	}
	offsets := run(GemmSM90GroupedProblem{Config: cfg, Counts: full})
	all := run(GemmSM90GroupedProblem{Config: mcfg, Stride: stride, Counts: full})
	used := run(GemmSM90GroupedProblem{Config: mcfg, Stride: stride, Counts: quarter})
	t.Logf("warp instructions: offsets (every slot) %d, masked every slot %d, masked a quarter %d (%.3f of the offsets run)", offsets, all, used, float64(used)/float64(offsets))
	if float64(used) > 0.4*float64(offsets) {
		t.Errorf("masked with a quarter of the slots counted: %d warp instructions, over 40%% of the %d of every slot", used, offsets)
	}
	if r := float64(all) / float64(offsets); r < 0.9 || r > 1.1 {
		t.Errorf("masked with every slot counted: %d warp instructions, %.3f of the offsets run's %d (want about the same)", all, r, offsets)
	}
}
