package collectives

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// TestJITRanks runs the collectives the way a multi-GPU program does: one rank per GPU,
// each with its own Comm (here the emulator's goroutine ranks), the same calls on every
// rank. With NVSHMEM_DISABLE_NVLS=1 the Comm falls back to peer-to-peer.
func TestJITRanks(t *testing.T) {
	for _, nvls := range []string{"0", "1"} {
		t.Run("NVSHMEM_DISABLE_NVLS="+nvls, func(t *testing.T) {
			t.Setenv("NVSHMEM_DISABLE_NVLS", nvls)
			const world, n = 3, 301
			err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: world, NVSHMEM: true}, func(r *jit.Rank) error {
				o := Options{MaxBlocks: 2, OneShotMaxBytes: 512, LamportMaxBytes: 128, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
				if nvls == "1" {
					// Kernels and staging copies on a stream of their own.
					var err error
					if o.Stream, err = r.Device.NewStream(); err != nil {
						return err
					}
					defer o.Stream.Close()
				}
				ctx := context.Background()
				c, err := New(ctx, r, o)
				if err != nil {
					return err
				}
				defer c.Close()
				if mc, _ := c.Multicast(); mc != (nvls == "0") {
					return fmt.Errorf("rank %d: multicast %v with NVSHMEM_DISABLE_NVLS=%s", r.Rank, mc, nvls)
				}
				for _, m := range []int{n, 20, 100} { // two-shot, Lamport or one-shot, one-shot
					buf, err := c.Alloc(dsl.F32, m)
					if err != nil {
						return err
					}
					for call := 0; call < 3; call++ {
						in := make([]float32, m)
						for i := range in {
							in[i] = float32((r.Rank+1)*(i%17) + call)
						}
						if err := buf.WriteF32(in); err != nil {
							return err
						}
						if err := c.AllReduce(ctx, buf, Sum); err != nil {
							return err
						}
						got, err := buf.ReadF32()
						if err != nil {
							return err
						}
						for i, x := range got {
							want := float32(world*(world+1)/2*(i%17) + world*call)
							if x != want {
								return fmt.Errorf("rank %d, %s, n=%d call %d: element %d = %v, want %v", r.Rank, c.LastAlgorithm(), m, call, i, x, want)
							}
						}
					}
				}
				return c.Barrier(ctx)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
