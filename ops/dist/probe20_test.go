package dist_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

// TestProbe20MoELayerFreeContext: MoELayer.Free with a nil or ended context marked the
// layer freed and freed its local scratch, then failed to free its Comm buffer, so that a
// Free with a good context said "Free of a nil or freed MoELayer" and the buffer stayed
// allocated. Now such a Free leaves the layer as it was. Probe 20.
func TestProbe20MoELayerFreeContext(t *testing.T) {
	const tokens, topK, hidden, experts, ffn = 4, 2, 16, 2, 8
	onOneRank(t, func(r *jit.Rank, c *collectives.Comm) error {
		local := func(shape ...int) ops.Tensor[fp.BF16] { return uninitBF16(r, shape...) }
		cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts}, FFN: ffn}
		l, err := dist.NewMoELayer(context.Background(), c, cfg, local(experts, hidden, 2*ffn), local(experts, ffn, hidden))
		if err != nil {
			return err
		}
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		//lint:ignore SA1012 a nil context is the misuse under test
		if err := l.Free(nil); err == nil || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("Free(nil): %v; want an error naming the nil context", err)
		}
		if err := l.Free(ended); err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("Free(ended): %v; want the context's error", err)
		}
		if err := l.Free(context.Background()); err != nil {
			t.Errorf("Free after the refused ones: %v; want the layer freed now", err)
		}
		if err := l.Free(context.Background()); err == nil {
			t.Errorf("a second Free: nil; want an error")
		}
		return nil
	})
}
