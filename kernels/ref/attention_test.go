package ref

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// small is a cheap attention configuration for the emulator: 32 query rows on 2 warps,
// 32 keys per step.
func smallAttention(dt dsl.Type, d int, causal bool) kernels.AttentionConfig {
	return kernels.AttentionConfig{In: dt, HeadDim: d, BM: 32, BN: 32, Warps: 2, Stages: 2, Causal: causal}
}

func TestAttentionSmoke(t *testing.T) {
	res, err := RunAttention(AttentionProblem{Config: smallAttention(dsl.BF16, 64, false), Batch: 1, Heads: 1, KVHeads: 1, SeqQ: 37, SeqK: 45, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
}
