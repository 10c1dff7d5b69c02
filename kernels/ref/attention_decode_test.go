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

// TestAttentionDecode checks paged decode attention on the emulator against float64:
// contexts 0, 1, pageSize-1, pageSize+1 and long ones, several sequences of different
// lengths in one batch, qLen 1, 3 and 4 (causal within the last qLen keys; a context
// shorter than qLen leaves queries that see no key: O 0, LSE -Inf), GQA ratios 1, 4 and
// 8 (rows over 16 and 32: two row tiles), pages in shuffled order, page sizes 16, 32, 64
// and 128 (steps of one page and several pages), 1 to 7 splits (empty splits included),
// head dims 64, 128 and 256, bf16 and f16, peaky softmaxes.
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

// TestAttentionDecodeSplits checks the host's choice of splits: 1 for short contexts and
// for batches that fill the SMs, more for long contexts of few sequences, never more than
// half the key tiles or MaxDecodeSplits.
func TestAttentionDecodeSplits(t *testing.T) {
	cfg := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 8) // BN 64
	for _, c := range []struct {
		batch, q, h, hk, ctx, sms, want int
	}{
		{1, 1, 8, 8, 64, 132, 1},        // 4 key tiles: no split
		{64, 1, 32, 8, 8192, 132, 1},    // 512 blocks fill 132 SMs
		{1, 1, 32, 8, 8192, 132, 33},    // 8 blocks -> 33 splits
		{1, 1, 32, 8, 640, 132, 5},      // 10 tiles: at least 2 a split
		{1, 1, 8, 1, 1 << 20, 132, 256}, // 1 block -> 264 wanted, capped
	} {
		if got := cfg.Splits(c.batch, c.q, c.h, c.hk, c.ctx, c.sms); got != c.want {
			t.Errorf("Splits(batch %d, q %d, h %d/%d, ctx %d, %d SMs) = %d, want %d", c.batch, c.q, c.h, c.hk, c.ctx, c.sms, got, c.want)
		}
	}
}
