package dist_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

// A whole MoE layer on 2 emulated GPUs, one expert each, every token to both experts with
// weights 1/2. Every x is 1; an expert's gate weights are 1/4 (gate = 2), its up weights
// (e+1)/8 (up = e+1) and its down weights 1/8, so expert e's output is silu(2)*(e+1) =
// 1.76*(e+1) and out = (1.76 + 3.52)/2, in bf16 at each step.
func ExampleMoELayer() {
	ctx := context.Background()
	const tokens, hidden, ffn, experts, topK = 4, 8, 8, 2, 2
	ro := jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(ctx, r, collectives.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer c.Close()
		// This GPU's expert (e = rank): W13 [1, hidden, 2*ffn] (gate columns, then up), W2 [1, ffn, hidden].
		w13h := make([]float32, hidden*2*ffn)
		for i := range w13h {
			w13h[i] = 0.25
			if i%(2*ffn) >= ffn {
				w13h[i] = float32(r.Rank+1) / 8
			}
		}
		w2h := make([]float32, ffn*hidden)
		for i := range w2h {
			w2h[i] = 0.125
		}
		w13b, _ := jit.Alloc[fp.BF16](r.Device, len(w13h))
		w2b, _ := jit.Alloc[fp.BF16](r.Device, len(w2h))
		_ = w13b.CopyFromHost(fp.From[fp.BF16](w13h))
		_ = w2b.CopyFromHost(fp.From[fp.BF16](w2h))
		w13, _ := ops.New(w13b, 1, hidden, 2*ffn)
		w2, _ := ops.New(w2b, 1, ffn, hidden)
		cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts}, FFN: ffn}
		l, err := dist.NewMoELayer(ctx, c, cfg, w13, w2)
		if err != nil {
			return err
		}
		// The layer's inputs and output are Comm buffers.
		x, _, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		ids, _, _ := dist.Alloc[int32](ctx, c, tokens, topK)
		w, _, _ := dist.Alloc[float32](ctx, c, tokens, topK)
		out, _, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		ones := make([]float32, tokens*hidden)
		for i := range ones {
			ones[i] = 1
		}
		_ = x.Buffer().CopyFromHost(fp.From[fp.BF16](ones))
		_ = ids.Buffer().CopyFromHost([]int32{0, 1, 0, 1, 0, 1, 0, 1})
		_ = w.Buffer().CopyFromHost([]float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5})
		if err := l.Forward(ctx, out, x, ids, w); err != nil {
			return err
		}
		if err := l.Check(ctx); err != nil { // waits; reports bad ids, rows past Capacity
			return err
		}
		got := make([]fp.BF16, tokens*hidden)
		if err := out.Buffer().CopyToHost(got); err != nil {
			return err
		}
		if r.Rank == 0 {
			fmt.Println("out[0, 0:2] on GPU 0:", got[0].Float32(), got[1].Float32())
		}
		return l.Free(ctx)
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// out[0, 0:2] on GPU 0: 2.640625 2.640625
}
