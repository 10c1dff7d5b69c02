package ops_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

// TestGroupedMatmulAfterMoEDispatch runs the experts' gemm the MoE way on 2 emulated GPUs:
// MoE.Dispatch routes random tokens (ids -1 included) to 4 experts, and each GPU runs
// GroupedMatmul straight on the dispatch's Recv buffer (Capacity rows) and Offsets (i32, on
// the device), with its 2 local experts' weights. Every received row's output is checked
// against float64 of the source token (found by Src) times its expert's weights; the rows
// past those received keep D's sentinel.
func TestGroupedMatmulAfterMoEDispatch(t *testing.T) {
	ctx := context.Background()
	const tokens, topK, hidden, experts, n, g = 6, 2, 16, 4, 24, 2
	const el = experts / g
	rng := rand.New(rand.NewSource(5))
	xs := make([][]float32, g)
	idss := make([][]int32, g)
	for r := range xs {
		xs[r] = make([]float32, tokens*hidden)
		for i := range xs[r] {
			xs[r][i] = float32(rng.Intn(33)-16) / 8
		}
		idss[r] = make([]int32, tokens*topK)
		for i := range idss[r] {
			idss[r][i] = int32(rng.Intn(experts+1) - 1)
		}
	}
	w := make([]float32, experts*hidden*n) // expert e's hidden x n weights
	for i := range w {
		w[i] = fp.BF16Of(2*rng.Float32() - 1).Float32()
	}
	const sentinel = 7
	ro := jit.RanksOptions{Backend: jit.Emulator, World: g, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(ctx, r, collectives.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer c.Close()
		m, err := c.NewMoE(ctx, collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts})
		if err != nil {
			return err
		}
		x, xb, err := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		if err != nil {
			return err
		}
		ids, ib, err := dist.Alloc[int32](ctx, c, tokens*topK)
		if err != nil {
			return err
		}
		if err := x.Buffer().CopyFromHost(fp.From[fp.BF16](xs[r.Rank])); err != nil {
			return err
		}
		if err := ids.Buffer().CopyFromHost(idss[r.Rank]); err != nil {
			return err
		}
		if err := m.Dispatch(ctx, xb, ib); err != nil {
			return err
		}
		if err := m.Check(ctx); err != nil {
			return err
		}
		capacity := m.Config().Capacity
		recv, err := dist.Tensor[fp.BF16](m.Recv(), capacity, hidden)
		if err != nil {
			return err
		}
		offsets, err := dist.Tensor[int32](m.Offsets(), el+1)
		if err != nil {
			return err
		}
		dev := r.Device
		alloc := func(h []float32, shape ...int) (ops.Tensor[fp.BF16], error) {
			b, err := jit.Alloc[fp.BF16](dev, len(h))
			if err != nil {
				return ops.Tensor[fp.BF16]{}, err
			}
			if err := b.CopyFromHost(fp.From[fp.BF16](h)); err != nil {
				return ops.Tensor[fp.BF16]{}, err
			}
			return ops.New(b, shape...)
		}
		local, err := alloc(w[r.Rank*el*hidden*n:(r.Rank+1)*el*hidden*n], el, hidden, n)
		if err != nil {
			return err
		}
		d0 := make([]float32, capacity*n)
		for i := range d0 {
			d0[i] = sentinel
		}
		y, err := alloc(d0, capacity, n)
		if err != nil {
			return err
		}
		if err := ops.GroupedMatmul(ctx, nil, y, recv, local, offsets, nil); err != nil {
			return err
		}
		got := make([]fp.BF16, capacity*n)
		if err := y.Buffer().CopyToHost(got); err != nil {
			return err
		}
		offs := make([]int32, el+1)
		if err := offsets.Buffer().CopyToHost(offs); err != nil {
			return err
		}
		src := make([]int32, capacity)
		srcT, err := dist.Tensor[int32](m.Src(), capacity)
		if err != nil {
			return err
		}
		if err := srcT.Buffer().CopyToHost(src); err != nil {
			return err
		}
		for row := 0; row < capacity; row++ {
			j := -1 // the local expert of row
			for e := 0; e < el; e++ {
				if row >= int(offs[e]) && row < int(offs[e+1]) {
					j = e
				}
			}
			for col := 0; col < n; col++ {
				v := float64(got[row*n+col].Float32())
				if j < 0 {
					if v != sentinel {
						return fmt.Errorf("GPU %d row %d (no expert's): D = %v, want the sentinel", r.Rank, row, v)
					}
					continue
				}
				s := int(src[row])
				sr, tok := s/(tokens*topK), s%(tokens*topK)/topK
				want, abs := 0.0, 0.0
				for l := 0; l < hidden; l++ {
					p := float64(xs[sr][tok*hidden+l]) * float64(w[((r.Rank*el+j)*hidden+l)*n+col])
					want += p
					abs += math.Abs(p)
				}
				if tol := ref.GemmTolerance(jit.ElemType[fp.BF16](), hidden, abs, want); !(math.Abs(v-want) <= tol) {
					return fmt.Errorf("GPU %d row %d (expert %d, token %d of GPU %d) col %d: %v, want %v", r.Rank, row, r.Rank*el+j, tok, sr, col, v, want)
				}
			}
		}
		if offs[el] == 0 {
			return fmt.Errorf("GPU %d received no rows: the test checks nothing", r.Rank)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
