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

// A row-parallel linear layer's tail on 2 emulated GPUs: each GPU multiplies its K slice
// (ops.Matmul into a tensor of the Comm's symmetric memory), then AllReduce sums the
// partial products over the GPUs, on the same tensor. GPU g's x is all g+1 and w all ones,
// so every element of y is 8*1 + 8*2 = 24.
func ExampleAllReduce() {
	ctx := context.Background()
	ro := jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(ctx, r, collectives.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer c.Close()
		x, _, err := dist.Alloc[fp.BF16](ctx, c, 4, 8) // this GPU's 4 x 8 slice of x
		if err != nil {
			return err
		}
		w, _, err := dist.Alloc[fp.BF16](ctx, c, 8, 8)
		if err != nil {
			return err
		}
		y, _, err := dist.Alloc[float32](ctx, c, 4, 8)
		if err != nil {
			return err
		}
		fill := func(t ops.Tensor[fp.BF16], v float32) error {
			h := make([]fp.BF16, t.Len())
			for i := range h {
				h[i] = fp.BF16Of(v)
			}
			return t.Buffer().CopyFromHost(h)
		}
		if err := fill(x, float32(r.Rank+1)); err != nil {
			return err
		}
		if err := fill(w, 1); err != nil {
			return err
		}
		if err := ops.Matmul(ctx, nil, y, x, w, nil); err != nil {
			return err
		}
		if err := dist.AllReduce(ctx, c, y, collectives.Sum); err != nil {
			return err
		}
		got := make([]float32, y.Len())
		if err := y.Buffer().CopyToHost(got); err != nil {
			return err
		}
		if r.Rank == 0 {
			fmt.Println("y[0, 0:4] on GPU 0:", got[:4])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// y[0, 0:4] on GPU 0: [24 24 24 24]
}
