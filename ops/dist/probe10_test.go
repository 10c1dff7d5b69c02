package dist_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

// TestProbe10MoELayer: a MoELayer on a low-latency MoE computes what the normal-mode layer
// does on the same weights and inputs; a weight freed after NewMoELayer, a cancelled
// context between steps, a second Free and a step after Free are errors naming the cause.
func TestProbe10MoELayer(t *testing.T) {
	ctx := context.Background()
	const tokens, topK, hidden, experts, ffn = 5, 2, 16, 2, 8
	onOneRank(t, func(r *jit.Rank, c *collectives.Comm) error {
		rng := rand.New(rand.NewSource(10))
		local := func(shape ...int) (ops.Tensor[fp.BF16], *jit.Buffer[fp.BF16]) {
			n := 1
			for _, s := range shape {
				n *= s
			}
			v := make([]fp.BF16, n)
			for i := range v {
				v[i] = fp.BF16Of(float32(rng.Intn(9)-4) / 8)
			}
			b, _ := jit.Alloc[fp.BF16](r.Device, n)
			_ = b.CopyFromHost(v)
			x, _ := ops.New(b, shape...)
			return x, b
		}
		w13, _ := local(experts, hidden, 2*ffn)
		w2, _ := local(experts, ffn, hidden)
		x, xb, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		ids, ib, _ := dist.Alloc[int32](ctx, c, tokens, topK)
		w, wb, _ := dist.Alloc[float32](ctx, c, tokens, topK)
		xs := make([]float32, tokens*hidden)
		for i := range xs {
			xs[i] = float32(rng.Intn(9)-4) / 4
		}
		is, ws := make([]float32, tokens*topK), make([]float32, tokens*topK)
		for i := range is {
			is[i], ws[i] = float32(rng.Intn(experts+1)-1), float32(rng.Intn(4))/4
		}
		for _, err := range []error{xb.WriteF32(xs), ib.WriteF32(is), wb.WriteF32(ws)} {
			if err != nil {
				return err
			}
		}
		var outs [2][]float32
		for i, ll := range []bool{false, true} {
			cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts, LowLatency: ll}, FFN: ffn}
			l, err := dist.NewMoELayer(ctx, c, cfg, w13, w2)
			if err != nil {
				return fmt.Errorf("LowLatency %v: %w", ll, err)
			}
			out, ob, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
			if err := l.Forward(ctx, out, x, ids, w); err != nil {
				return fmt.Errorf("LowLatency %v: %w", ll, err)
			}
			if err := l.Check(ctx); err != nil {
				return fmt.Errorf("LowLatency %v: %w", ll, err)
			}
			if outs[i], err = ob.ReadF32(); err != nil {
				return err
			}
			if err := l.Free(ctx); err != nil {
				return err
			}
		}
		nonzero := 0
		for j := range outs[0] {
			if outs[0][j] != outs[1][j] {
				return fmt.Errorf("element %d: low-latency layer %v, normal layer %v", j, outs[1][j], outs[0][j])
			}
			if outs[0][j] != 0 {
				nonzero++
			}
		}
		if nonzero == 0 {
			return fmt.Errorf("every output is 0: the comparison proves nothing")
		}

		cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts}, FFN: ffn}
		fw13, fb := local(experts, hidden, 2*ffn)
		l, err := dist.NewMoELayer(ctx, c, cfg, fw13, w2)
		if err != nil {
			return err
		}
		out, _, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		if err := l.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := l.GateUp(cancelled); err == nil || !strings.Contains(err.Error(), "canceled") {
			return fmt.Errorf("GateUp with a cancelled context: %v", err)
		}
		if err := fb.Free(); err != nil {
			return err
		}
		if err := l.GateUp(ctx); err == nil || !strings.Contains(err.Error(), "free") {
			return fmt.Errorf("GateUp after w13 was freed: %v (want an error naming the freed buffer)", err)
		}
		if err := l.Free(ctx); err != nil {
			return err
		}
		for name, err := range map[string]error{"Free": l.Free(ctx), "Forward": l.Forward(ctx, out, x, ids, w), "Check": l.Check(ctx), "Combine": l.Combine(ctx, out, w)} {
			if err == nil || !strings.Contains(err.Error(), "freed MoELayer") {
				return fmt.Errorf("%s after Free: %v", name, err)
			}
		}
		return nil
	})
}
