package ref

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
)

// TestAttentionDecode checks paged decode attention on the emulator against float64:
// contexts 0, 1, pageSize-1, pageSize+1 and long ones, several sequences of different
// lengths in one batch, qLen 1, 3 and 4 (causal within the last qLen keys; a context
// shorter than qLen leaves queries that see no key: O 0, LSE -Inf), GQA ratios 1, 4 and
// 8 (rows over 16 and 32: two row tiles), pages in shuffled order, page sizes 16, 32, 64
// and 128 (steps of one page and several pages), 1 to 7 splits (empty splits included),
// head dims 64, 128 and 256, bf16 and f16, peaky softmaxes, page ids loaded a tile ahead
// (PrefetchPages).
func TestAttentionDecode(t *testing.T) {
	type tc struct {
		dt       dsl.Type
		d, ps    int
		q, h, hk int
		ctx      []int
		splits   int
		scale    float64
		cfg      *kernels.AttentionDecodeConfig
	}
	bf, f16 := dsl.BF16, dsl.F16
	cases := []tc{
		{dt: bf, d: 64, ps: 16, q: 1, h: 1, hk: 1, ctx: []int{1}, splits: 1},
		{dt: bf, d: 64, ps: 16, q: 1, h: 2, hk: 2, ctx: []int{15, 17, 1, 200}, splits: 1, scale: 0.5},
		{dt: f16, d: 64, ps: 16, q: 4, h: 4, hk: 1, ctx: []int{15, 17, 3, 130}, splits: 3, scale: 0.5},
		{dt: bf, d: 64, ps: 32, q: 1, h: 8, hk: 1, ctx: []int{31, 33, 300}, splits: 4},
		{dt: bf, d: 128, ps: 16, q: 4, h: 8, hk: 1, ctx: []int{57, 0, 200}, splits: 2, scale: 0.3},
		{dt: f16, d: 128, ps: 64, q: 1, h: 4, hk: 4, ctx: []int{63, 65, 500}, splits: 5},
		{dt: bf, d: 128, ps: 128, q: 3, h: 8, hk: 2, ctx: []int{127, 129, 400}, splits: 7, scale: 0.4},
		{dt: bf, d: 256, ps: 16, q: 4, h: 4, hk: 1, ctx: []int{16, 81}, splits: 2},
		{dt: f16, d: 256, ps: 32, q: 1, h: 1, hk: 1, ctx: []int{1, 33, 95}, splits: 1, scale: 0.3},
		// 8 tokens x GQA 8 = 64 rows: two 32-row tiles.
		{dt: bf, d: 64, ps: 64, q: 8, h: 8, hk: 1, ctx: []int{70, 8}, splits: 2, scale: 0.5},
		// qLen longer than a context: its first queries see no key.
		{dt: f16, d: 64, ps: 16, q: 4, h: 2, hk: 1, ctx: []int{2, 40}, splits: 2},
		// Other tilings: 2 warps on 64-key pages, one warp on one 16-key page a step and 4 stages,
		// 128-key steps over 32-key pages on 8 warps.
		{dt: bf, d: 64, ps: 64, q: 2, h: 4, hk: 2, ctx: []int{100, 191}, splits: 2,
			cfg: &kernels.AttentionDecodeConfig{In: bf, HeadDim: 64, PageSize: 64, BM: 16, BN: 32, Warps: 2, Stages: 2}},
		{dt: bf, d: 128, ps: 16, q: 4, h: 4, hk: 1, ctx: []int{47, 16}, splits: 2, scale: 0.5,
			cfg: &kernels.AttentionDecodeConfig{In: bf, HeadDim: 128, PageSize: 16, BM: 16, BN: 16, Warps: 1, Stages: 4}},
		{dt: f16, d: 128, ps: 32, q: 1, h: 8, hk: 1, ctx: []int{300, 129}, splits: 3, scale: 0.5,
			cfg: &kernels.AttentionDecodeConfig{In: f16, HeadDim: 128, PageSize: 32, BM: 16, BN: 128, Warps: 8, Stages: 2}},
		// Page ids loaded a tile ahead: four pages a step (the default's), one page of two
		// steps, one 32-row step with 4 stages, and no split.
		{dt: bf, d: 128, ps: 16, q: 1, h: 8, hk: 2, ctx: []int{300, 1, 64, 65}, splits: 3,
			cfg: &kernels.AttentionDecodeConfig{In: bf, HeadDim: 128, PageSize: 16, BM: 16, BN: 64, Warps: 4, Stages: 3, PrefetchPages: true}},
		{dt: f16, d: 64, ps: 128, q: 2, h: 4, hk: 1, ctx: []int{500, 129, 0}, splits: 2, scale: 0.5,
			cfg: &kernels.AttentionDecodeConfig{In: f16, HeadDim: 64, PageSize: 128, BM: 16, BN: 64, Warps: 4, Stages: 2, PrefetchPages: true}},
		{dt: bf, d: 64, ps: 32, q: 4, h: 8, hk: 1, ctx: []int{3, 97, 160}, splits: 1,
			cfg: &kernels.AttentionDecodeConfig{In: bf, HeadDim: 64, PageSize: 32, BM: 32, BN: 32, Warps: 2, Stages: 4, PrefetchPages: true}},
	}
	for _, c := range cases {
		cfg := kernels.DefaultAttentionDecodeConfig(c.dt, c.d, c.ps, c.q*c.h/c.hk)
		if c.cfg != nil {
			cfg = *c.cfg
		}
		name := fmt.Sprintf("%s/q%dh%d-%dctx%vs%d", cfg.Name(), c.q, c.h, c.hk, c.ctx, c.splits)
		t.Run(name, func(t *testing.T) {
			res, err := RunAttentionDecode(DecodeProblem{Config: cfg, Batch: len(c.ctx), QLen: c.q, Heads: c.h, KVHeads: c.hk,
				SeqLens: c.ctx, Splits: c.splits, Scale: c.scale, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
		})
	}
}

// TestAttentionDecodeSplitsAgree runs one problem at every split count from 1 to 9 (more
// splits than key tiles included).
func TestAttentionDecodeSplitsAgree(t *testing.T) {
	cfg := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 64, 16, 4)
	for s := 1; s <= 9; s++ {
		if _, err := RunAttentionDecode(DecodeProblem{Config: cfg, Batch: 2, QLen: 2, Heads: 2, KVHeads: 1, SeqLens: []int{77, 5}, Splits: s, Scale: 0.5, Seed: int64(s)}); err != nil {
			t.Errorf("%d splits: %v", s, err)
		}
	}
}

// TestAttentionDecodeBadPage checks the emulator's debug check of page ids: an id past the
// cache is an out-of-bounds access the sanitizer reports (on a GPU it reads whatever lies
// there: page ids must be below numPages).
func TestAttentionDecodeBadPage(t *testing.T) {
	cfg := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 64, 16, 1)
	_, err := RunAttentionDecode(DecodeProblem{Config: cfg, Batch: 1, QLen: 1, Heads: 1, KVHeads: 1, SeqLens: []int{40}, NumPages: 3, BadPage: 1 << 20})
	var ee *emu.Error
	if !errors.As(err, &ee) || ee.Kind != emu.KindOutOfBounds {
		t.Fatalf("page id past the cache: error %v, want the emulator's %q", err, emu.KindOutOfBounds)
	}
}

// TestAttentionDecodeRefuses checks that bad configurations and shapes are errors naming
// the rule.
func TestAttentionDecodeRefuses(t *testing.T) {
	good := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 64, 16, 1)
	bad := func(f func(*kernels.AttentionDecodeConfig)) kernels.AttentionDecodeConfig {
		c := good
		f(&c)
		return c
	}
	for _, c := range []struct {
		cfg      kernels.AttentionDecodeConfig
		q, h, hk int
		splits   int
		want     string
	}{
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.In = dsl.F32 }), q: 1, h: 1, hk: 1, want: "input type"},
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.HeadDim = 96 }), q: 1, h: 1, hk: 1, want: "head dim"},
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.PageSize = 24 }), q: 1, h: 1, hk: 1, want: "page size"},
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.PageSize = 8 }), q: 1, h: 1, hk: 1, want: "page size"},
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.BM = 64 }), q: 1, h: 1, hk: 1, want: "BM"},
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.BN, c.Warps = 32, 4 }), q: 1, h: 1, hk: 1, want: "multiple of 16*Warps"},
		{cfg: bad(func(c *kernels.AttentionDecodeConfig) { c.Stages = 1 }), q: 1, h: 1, hk: 1, want: "stages"},
		{cfg: good, q: 1, h: 6, hk: 4, want: "not a multiple"},
		{cfg: good, q: 0, h: 1, hk: 1, want: "positive"},
		{cfg: good, q: 1, h: 1, hk: 1, splits: kernels.MaxDecodeSplits + 1, want: "splits"},
	} {
		_, err := RunAttentionDecode(DecodeProblem{Config: c.cfg, Batch: 1, QLen: c.q, Heads: c.h, KVHeads: c.hk, SeqLens: []int{20}, Splits: c.splits})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s q%d h%d/%d splits %d: error %v, want one containing %q", c.cfg.Name(), c.q, c.h, c.hk, c.splits, err, c.want)
		}
	}
}

// TestAttentionDecodeSplits checks the host's choice of splits (kernels' Splits, its
// SplitCost model) at Llama-3-8B-like heads (32 query heads over 8 kv heads, qLen 1: one
// 16-row block a kv head, 8 blocks a sequence) and head dim 128 (2 blocks an SM on sm_90:
// 98 KiB of shared memory each), on 132 SMs (H200, H100 SXM), 114 (H100 PCIe) and 78 (H20).
// Tiles are 64 keys; a block costs its tiles plus 3, the combine 2.
func TestAttentionDecodeSplits(t *testing.T) {
	cfg := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 4) // BN 64, BM 16
	if n := cfg.BlocksPerSM(kernels.SMLimitsOf(90)); n != 2 {
		t.Fatalf("BlocksPerSM(sm_90) = %d, want 2 (shared memory: 2 x (96 + 1) KiB of 228)", n)
	}
	for _, c := range []struct {
		batch, ctx, sms, want int
		why                   string
	}{
		// 132 SMs x 2 = 264 slots.
		{1, 1024, 132, 8, "16 tiles: 2 a split (the fewest), 64 blocks"},
		{1, 4096, 132, 32, "256 blocks: one wave of 2 tiles each (33 would add an empty split)"},
		{1, 8192, 132, 32, "one wave of 4 tiles each"},
		{1, 32768, 132, 32, "one wave of 16 tiles each; 64 (2 waves of 8) costs 24 to 21"},
		{16, 1024, 132, 2, "256 blocks, 0.97 of a wave, 8 tiles each"},
		{16, 4096, 132, 2, "0.97 of a wave; 3 (the old choice) makes 1.45 waves, 4 makes 1.94 of half the tiles: no better"},
		{16, 8192, 132, 2, "as at 4096"},
		{16, 32768, 132, 2, "as at 4096: 261 against 3's 350"},
		{64, 1024, 132, 1, "512 blocks: 1.94 waves already"},
		{64, 4096, 132, 1, "1.94 waves"},
		{64, 8192, 132, 1, "1.94 waves"},
		{64, 32768, 132, 1, "1.94 waves"},
		// 114 SMs x 2 = 228 slots.
		{1, 1024, 114, 8, "2 tiles a split"},
		{1, 4096, 114, 22, "3 tiles a split in one wave: 22 splits take as long as 28 (29 spills into a second wave)"},
		{1, 8192, 114, 26, "one wave of 5 tiles each"},
		{1, 32768, 114, 27, "one wave of 19 tiles each (24); 57 (2 waves of 9) costs 26"},
		{16, 1024, 114, 1, "128 blocks, 0.56 of a wave, 16 tiles: 2 splits make 1.12 waves"},
		{16, 4096, 114, 5, "2.81 waves of 13 tiles: 50 against 1 split's 67 and 2's 72"},
		{16, 8192, 114, 5, "2.81 waves of 26 tiles"},
		{16, 32768, 114, 7, "3.93 waves of 74 tiles: 310 against 1 split's 515"},
		{64, 1024, 114, 1, "2.25 waves of 16 tiles; more splits only add waves"},
		{64, 4096, 114, 2, "4.49 waves of 32 tiles (177) against 2.25 of 64 (201)"},
		{64, 8192, 114, 3, "6.74 waves of 43 tiles"},
		{64, 32768, 114, 4, "8.98 waves of 128 tiles: 1181 against 1 split's 3 waves of 512 (1545)"},
		// 78 SMs x 2 = 156 slots.
		{1, 1024, 78, 8, "2 tiles a split"},
		{1, 4096, 78, 16, "4 tiles a split, one wave"},
		{1, 8192, 78, 19, "one wave (152 blocks) of 7 tiles"},
		{1, 32768, 78, 19, "one wave of 27 tiles"},
		{16, 1024, 78, 1, "0.82 of a wave of 16 tiles; 2 splits make 1.64 waves"},
		{16, 4096, 78, 1, "0.82 of a wave (67); 6 splits make 4.92 waves of 11 tiles (72)"},
		{16, 8192, 78, 6, "4.92 waves of 22 tiles (127) against one of 128 (131)"},
		{16, 32768, 78, 6, "4.92 waves of 86 tiles (447) against one of 512 (515)"},
		{64, 1024, 78, 1, "3.28 waves already"},
		{64, 4096, 78, 2, "6.56 waves of 32 tiles (247) against 4 of 64 (268)"},
		{64, 8192, 78, 2, "6.56 waves of 64 tiles"},
		{64, 32768, 78, 3, "9.85 waves of 171 tiles (1742) against 4 of 512 (2060)"},
	} {
		if got := cfg.Splits(c.batch, 1, 32, 8, c.ctx, c.sms, 2); got != c.want {
			t.Errorf("Splits(batch %d, ctx %d, %d SMs x 2) = %d, want %d (%s)", c.batch, c.ctx, c.sms, got, c.want, c.why)
		}
	}
	// The edges: a context of at most 3 tiles is not split; MaxDecodeSplits bounds a lone
	// long sequence; the 32-row tile of qLen 4 x GQA 8 counts its row tiles.
	for _, c := range []struct {
		batch, q, h, hk, ctx, want int
	}{
		{1, 1, 8, 8, 192, 1},
		{1, 1, 8, 8, 64, 1},
		{1, 1, 8, 1, 1 << 20, 256},
		{4, 4, 32, 4, 32768, 16}, // 4 x 4 kv heads x one 32-row tile: 16 blocks; x 16 = 256 (0.97 of a wave)
	} {
		cfg := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, c.q*c.h/c.hk)
		if got := cfg.Splits(c.batch, c.q, c.h, c.hk, c.ctx, 132, cfg.BlocksPerSM(kernels.SMLimitsOf(90))); got != c.want {
			t.Errorf("%s: Splits(batch %d, q %d, h %d/%d, ctx %d, 132 SMs) = %d, want %d", cfg.Name(), c.batch, c.q, c.h, c.hk, c.ctx, got, c.want)
		}
	}
}

// TestAttentionDecodeManySplits runs the decode kernel and the combine at split counts the
// host chooses on large GPUs (33, 64) and at MaxDecodeSplits: 69 key tiles of 16 keys over
// 33 splits (3 tiles each, the last 10 splits empty), 64 (2 tiles each) and 256 (one tile
// each, 187 empty); a sequence with no key (every split empty: O 0, LSE -Inf) and queries
// that see no key (qLen 4 over a 2-key context).
func TestAttentionDecodeManySplits(t *testing.T) {
	cfg := kernels.AttentionDecodeConfig{In: dsl.BF16, HeadDim: 64, PageSize: 16, BM: 16, BN: 16, Warps: 1, Stages: 3}
	for _, s := range []int{33, 64, kernels.MaxDecodeSplits} {
		res, err := RunAttentionDecode(DecodeProblem{Config: cfg, Batch: 4, QLen: 4, Heads: 2, KVHeads: 1, SeqLens: []int{1100, 0, 2, 37}, Splits: s, Scale: 0.5, Seed: int64(s)})
		if err != nil {
			t.Errorf("%d splits: %v", s, err)
			continue
		}
		t.Log(res)
	}
}

// TestAttentionDecodeCombine runs the combine kernel alone on synthetic partials against a
// float64 merge: head dims 64, 128 and 256, f16 and bf16, splits 1, 2, 33, 64, 256 and 300
// (past MaxDecodeSplits: the kernel's loops over further 256-split chunks), a fifth of the
// splits empty (LSE -Inf, O 0), every split of the first row empty (O 0, LSE -Inf), LSEs
// spread over [-30, 30] (weights from 1 down to e^-60).
func TestAttentionDecodeCombine(t *testing.T) {
	const batch, qLen, heads = 2, 2, 3
	rows := batch * qLen * heads
	for _, d := range []int{64, 128, 256} {
		for _, dt := range []dsl.Type{dsl.BF16, dsl.F16} {
			for _, ns := range []int{1, 2, 33, 64, kernels.MaxDecodeSplits, 300} {
				if (dt == dsl.F16) != (ns == 2 || ns == 64) && d != 128 {
					continue // every count at d 128; the rest in one type
				}
				t.Run(fmt.Sprintf("%s_d%d_s%d", dt, d, ns), func(t *testing.T) { checkCombine(t, dt, d, ns, batch, qLen, heads, rows) })
			}
		}
	}
}

func checkCombine(t *testing.T, dt dsl.Type, d, ns, batch, qLen, heads, rows int) {
	rng := rand.New(rand.NewSource(int64(d*1000 + ns)))
	lse := make([]float64, rows*ns)
	o := make([]float64, rows*ns*d)
	for r := range rows {
		for s := range ns {
			i := r*ns + s
			if r == 0 || rng.Intn(5) == 0 {
				lse[i] = math.Inf(-1)
				continue
			}
			lse[i] = float64(float32(60*rng.Float64() - 30))
			for c := range d {
				o[i*d+c] = float64(float32(2*rng.Float64() - 1))
			}
		}
	}
	sys, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	var ptrs [4]uint64 // opart, lsepart, o, lse
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{dsl.F32, o}, {dsl.F32, lse}, {dt, make([]float64, rows*d)}, {dsl.F32, make([]float64, rows)}} {
		if ptrs[i], err = sys.Malloc(0, len(x.v)*x.dt.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := write(sys, ptrs[i], x.dt, x.v); err != nil {
			t.Fatal(err)
		}
	}
	name := kernels.AttentionDecodeCombineName(dt, d)
	k := dsl.New(name)
	kernels.AttentionDecodeCombine(k, dt, d)
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: name, Grid: emu.D1(kernels.AttentionDecodeCombineGrid(rows, d)),
		Block: emu.D1(kernels.AttentionDecodeCombineThreads),
		Args:  []any{ptrs[0], ptrs[1], ptrs[2], ptrs[3], uint32(batch), uint32(qLen), uint32(heads), uint32(ns)}})
	if err != nil {
		t.Fatal(err)
	}
	gotO, err := read(sys, ptrs[2], dt, rows*d)
	if err != nil {
		t.Fatal(err)
	}
	gotL, err := read(sys, ptrs[3], dsl.F32, rows)
	if err != nil {
		t.Fatal(err)
	}
	for r := range rows {
		m := math.Inf(-1)
		for s := range ns {
			m = math.Max(m, lse[r*ns+s])
		}
		l := 0.0
		want, abs := make([]float64, d), make([]float64, d)
		for s := range ns {
			if math.IsInf(lse[r*ns+s], -1) {
				continue
			}
			w := math.Exp(lse[r*ns+s] - m)
			l += w
			for c := range d {
				want[c] += w * o[(r*ns+s)*d+c]
				abs[c] += w * math.Abs(o[(r*ns+s)*d+c])
			}
		}
		h, bq := r%heads, r/heads
		qi, b := bq%qLen, bq/qLen
		g := gotL[(b*heads+h)*qLen+qi]
		if l == 0 {
			if !math.IsInf(g, -1) {
				t.Fatalf("row %d (every split empty): LSE %v, want -Inf", r, g)
			}
		} else if wl := m + math.Log(l); math.Abs(g-wl) > 1e-5*(1+math.Abs(wl)) {
			t.Fatalf("row %d: LSE %v, want %v", r, g, wl)
		}
		for c := range d {
			w, a := 0.0, 0.0
			if l > 0 {
				w, a = want[c]/l, abs[c]/l
			}
			if tol := AttentionTolerance(dt, a, w); math.Abs(gotO[r*d+c]-w) > tol {
				t.Fatalf("row %d column %d: O %v, want %v (tolerance %.3g)", r, c, gotO[r*d+c], w, tol)
			}
		}
	}
}
