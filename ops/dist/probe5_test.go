package dist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

// TestProbeHostile passes the dist calls tensors of a second Comm of the same rank, of a
// closed Comm, aliases across the two, and freed or foreign buffers: each is an error naming
// the operand, never a panic or a run on the wrong memory (before: Alloc with a nil Comm
// panicked).
func TestProbeHostile(t *testing.T) {
	ro := jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		opts := collectives.Options{Logger: slog.New(slog.DiscardHandler), DisableMulticast: true}
		c, err := collectives.New(context.Background(), r, opts)
		if err != nil {
			return err
		}
		defer c.Close()
		c2, err := collectives.New(context.Background(), r, opts)
		if err != nil {
			return err
		}
		ctx := context.Background()
		x, _, err := Alloc[float32](ctx, c, 4, 8)
		if err != nil {
			return err
		}
		y2, _, err := Alloc[float32](ctx, c2, 4, 8)
		if err != nil {
			return err
		}
		a, _, err1 := Alloc[fp.BF16](ctx, c, 8, 8)
		b2, _, err2 := Alloc[fp.BF16](ctx, c2, 8, 8)
		o, ob, err3 := Alloc[float32](ctx, c, 8, 8)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		closedT, closedB, err := Alloc[float32](ctx, c2, 4, 8)
		if err != nil {
			return err
		}
		if err := c2.Close(); err != nil {
			return err
		}
		var nilComm *collectives.Comm
		var errs []string
		for _, tc := range []struct {
			name string
			f    func() error
			want string
		}{
			{"src of another Comm", func() error { return AllReduceTo(ctx, c, x, y2, collectives.Sum) }, "src"},
			{"of a closed Comm", func() error { return AllReduce(ctx, c, closedT, collectives.Sum) }, "dst"},
			{"on the closed Comm", func() error { return AllReduce(ctx, c2, x, collectives.Sum) }, "closed"},
			{"nil Comm", func() error { return AllReduce(ctx, nilComm, x, collectives.Sum) }, "nil Comm"},
			{"nil Comm gather", func() error { return AllGather(ctx, nilComm, x, x) }, "nil Comm"},
			{"nil Comm matmul", func() error { return MatmulAllReduce(ctx, nilComm, o, a, a) }, "nil Comm"},
			{"b of another Comm", func() error { return MatmulAllReduce(ctx, c, o, a, b2) }, "b"},
			{"out is a", func() error { return MatmulAllReduce(ctx, c, a, a, a) }, "out must not be an input"},
			{"Tensor of a closed Comm's buffer", func() error { _, err := Tensor[float32](closedB, 4, 8); return err }, "closed"},
			{"Tensor nil", func() error { _, err := Tensor[float32](nil); return err }, "nil buffer"},
			{"Alloc on a closed Comm", func() error { _, _, err := Alloc[float32](ctx, c2, 4); return err }, "closed"},
			{"Alloc nil Comm", func() error { _, _, err := Alloc[float32](ctx, nilComm, 4); return err }, "nil"},
			{"Alloc 0", func() error { _, _, err := Alloc[float32](ctx, c, 4, 0); return err }, "at least 1"},
			{"Alloc overflow", func() error { _, _, err := Alloc[float32](ctx, c, 1<<20, 1<<20, 1<<20); return err }, "2^31"},
			{"BufferOf nil", func() error { _, err := c.BufferOf(nil); return err }, "no live Buffer"},
			{"out freed later", func() error {
				if err := ob.Free(); err != nil {
					return err
				}
				return MatmulAllReduce(ctx, c, o, a, a)
			}, "freed"},
		} {
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return tc.f()
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.HasPrefix(err.Error(), "panic") {
				errs = append(errs, fmt.Sprintf("%s: %v; want an error containing %q", tc.name, err, tc.want))
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
