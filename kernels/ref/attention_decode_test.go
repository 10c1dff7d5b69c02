package ref

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestAttentionDecodeSmoke is one small decode problem: one sequence, one query, one head.
func TestAttentionDecodeSmoke(t *testing.T) {
	for _, c := range []struct {
		ctx, q, h, hk, splits int
	}{{40, 1, 1, 1, 1}, {40, 1, 1, 1, 2}, {70, 4, 4, 1, 1}} {
		cfg := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 64, 16, c.q*c.h/c.hk)
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			res, err := RunAttentionDecode(DecodeProblem{Config: cfg, Batch: 1, QLen: c.q, Heads: c.h, KVHeads: c.hk, SeqLens: []int{c.ctx}, Splits: c.splits, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
		})
	}
}
