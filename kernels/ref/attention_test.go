package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// smallAttention is a cheap configuration for the emulator: 32 query rows on 2 warps, 32
// keys per step (several key tiles, so the online rescaling runs, at small shapes).
func smallAttention(dt dsl.Type, d int, causal bool) kernels.AttentionConfig {
	return kernels.AttentionConfig{In: dt, HeadDim: d, BM: 32, BN: 32, Warps: 2, Stages: 2, Causal: causal}
}

// TestAttention checks forward attention on the emulator against float64 at odd shapes:
// sequence lengths off the tiles (1, 37, 45, 129), one token, GQA ratios 1, 4 and 8,
// causal with seqQ < seqK, seqQ > seqK (rows that see no key: O 0, LSE -Inf) and equal,
// head dims 64, 128 and 256, f16 and bf16, peaky softmaxes (scale 0.5: the running max
// changes between key tiles), the library's default tiles and a 3-stage pipeline.
func TestAttention(t *testing.T) {
	type tc struct {
		cfg              kernels.AttentionConfig
		b, h, hk, sq, sk int
		scale            float64
	}
	bf, f16 := dsl.BF16, dsl.F16
	cases := []tc{
		{cfg: smallAttention(bf, 64, false), b: 1, h: 1, hk: 1, sq: 1, sk: 1},
		{cfg: smallAttention(bf, 64, false), b: 2, h: 2, hk: 2, sq: 37, sk: 129, scale: 0.5},
		{cfg: smallAttention(f16, 64, false), b: 1, h: 4, hk: 1, sq: 33, sk: 45, scale: 0.5},
		{cfg: smallAttention(bf, 64, false), b: 1, h: 8, hk: 1, sq: 5, sk: 70},
		{cfg: smallAttention(bf, 64, true), b: 1, h: 2, hk: 1, sq: 37, sk: 129, scale: 0.5},
		{cfg: smallAttention(f16, 64, true), b: 1, h: 1, hk: 1, sq: 129, sk: 37, scale: 0.5},
		{cfg: smallAttention(bf, 64, true), b: 2, h: 1, hk: 1, sq: 70, sk: 70},
		{cfg: smallAttention(bf, 64, true), b: 1, h: 1, hk: 1, sq: 1, sk: 45},
		{cfg: smallAttention(f16, 128, false), b: 1, h: 2, hk: 2, sq: 40, sk: 77, scale: 0.3},
		{cfg: smallAttention(bf, 128, true), b: 1, h: 4, hk: 1, sq: 45, sk: 45},
		{cfg: kernels.DefaultAttentionConfig(bf, 128, false), b: 1, h: 1, hk: 1, sq: 130, sk: 141, scale: 0.3},
		{cfg: kernels.DefaultAttentionConfig(f16, 128, true), b: 1, h: 1, hk: 1, sq: 131, sk: 131},
		{cfg: kernels.DefaultAttentionConfig(bf, 64, true), b: 1, h: 2, hk: 1, sq: 77, sk: 200, scale: 0.5},
		{cfg: kernels.DefaultAttentionConfig(bf, 256, false), b: 1, h: 1, hk: 1, sq: 65, sk: 70},
		{cfg: kernels.AttentionConfig{In: f16, HeadDim: 64, BM: 64, BN: 16, Warps: 4, Stages: 3, Causal: true}, b: 1, h: 1, hk: 1, sq: 50, sk: 61, scale: 0.5},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/b%dh%d-%dsq%dsk%d", c.cfg.Name(), c.b, c.h, c.hk, c.sq, c.sk)
		t.Run(name, func(t *testing.T) {
			res, err := RunAttention(AttentionProblem{Config: c.cfg, Batch: c.b, Heads: c.h, KVHeads: c.hk, SeqQ: c.sq, SeqK: c.sk, Scale: c.scale, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
		})
	}
}

// TestAttentionRefuses checks that bad configurations and shapes are errors naming the rule.
func TestAttentionRefuses(t *testing.T) {
	good := smallAttention(dsl.BF16, 64, false)
	for _, c := range []struct {
		cfg              kernels.AttentionConfig
		b, h, hk, sq, sk int
		want             string
	}{
		{cfg: kernels.AttentionConfig{In: dsl.F32, HeadDim: 64, BM: 32, BN: 32, Warps: 2, Stages: 2}, b: 1, h: 1, hk: 1, sq: 1, sk: 1, want: "input type"},
		{cfg: kernels.AttentionConfig{In: dsl.BF16, HeadDim: 96, BM: 32, BN: 32, Warps: 2, Stages: 2}, b: 1, h: 1, hk: 1, sq: 1, sk: 1, want: "head dim"},
		{cfg: kernels.AttentionConfig{In: dsl.BF16, HeadDim: 64, BM: 16, BN: 32, Warps: 2, Stages: 2}, b: 1, h: 1, hk: 1, sq: 1, sk: 1, want: "multiple of 16*Warps"},
		{cfg: kernels.AttentionConfig{In: dsl.BF16, HeadDim: 64, BM: 32, BN: 32, Warps: 2, Stages: 1}, b: 1, h: 1, hk: 1, sq: 1, sk: 1, want: "stages"},
		{cfg: good, b: 1, h: 6, hk: 4, sq: 1, sk: 1, want: "not a multiple"},
		{cfg: good, b: 1, h: 1, hk: 1, sq: 0, sk: 1, want: "positive"},
	} {
		_, err := RunAttention(AttentionProblem{Config: c.cfg, Batch: c.b, Heads: c.h, KVHeads: c.hk, SeqQ: c.sq, SeqK: c.sk})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s b%d h%d/%d sq%d sk%d: error %v, want one containing %q", c.cfg.Name(), c.b, c.h, c.hk, c.sq, c.sk, err, c.want)
		}
	}
}

// TestAttentionBuilds builds the default configuration of every type, head dim and
// causality (the registry pins only head dim 128 in golden/).
func TestAttentionBuilds(t *testing.T) {
	for _, dt := range []dsl.Type{dsl.F16, dsl.BF16} {
		for _, d := range []int{64, 128, 256} {
			for _, causal := range []bool{false, true} {
				cfg := kernels.DefaultAttentionConfig(dt, d, causal)
				k := dsl.New(cfg.Name())
				kernels.Attention(k, cfg)
				if _, err := k.Build(); err != nil {
					t.Errorf("%s: %v", cfg.Name(), err)
				}
			}
		}
	}
}
