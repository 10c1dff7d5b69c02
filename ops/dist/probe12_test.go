package dist_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

// TestProbe12LayerConfigPartial: a MoELayerConfig.GateUp or Down set in part, its BN left
// zero, is refused by NewMoELayer naming the field (before: BN 0 meant "the pick", so the
// stages or band order set were dropped silently; in the low-latency layout the partial
// configuration reached the grouped GEMM at the first Forward).
func TestProbe12LayerConfigPartial(t *testing.T) {
	ctx := context.Background()
	const tokens, topK, hidden, experts, ffn = 4, 2, 16, 2, 8
	onOneRank(t, func(r *jit.Rank, c *collectives.Comm) error {
		local := func(shape ...int) ops.Tensor[fp.BF16] { return uninitBF16(r, shape...) }
		w13, w2 := local(experts, hidden, 2*ffn), local(experts, ffn, hidden)
		for _, ll := range []bool{false, true} {
			cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts, LowLatency: ll}, FFN: ffn}
			gu := cfg
			gu.GateUp = kernels.GemmSM90GroupedConfig{BandM: 4}
			down := cfg
			down.Down.Stages = 3
			for _, tc := range []struct {
				cfg  dist.MoELayerConfig
				want string
			}{{gu, "MoELayerConfig.GateUp"}, {down, "MoELayerConfig.Down"}} {
				l, err := dist.NewMoELayer(ctx, c, tc.cfg, w13, w2)
				if err == nil {
					l.Free(ctx)
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "BN 0") {
					return fmt.Errorf("low latency %v: NewMoELayer = %v; want an error naming %s and BN 0", ll, err, tc.want)
				}
			}
		}
		return nil
	})
}
