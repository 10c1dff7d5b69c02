package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// TestOverlapSignals runs MatmulReduceScatter with MatmulOverlap and OverlapSignals (one
// persistent gemm_sm90 with piece signals, the side stream waiting on the counters and
// pushing each piece with the copy engines, overlap_signal.go) on 2, 3 and 4 emulated GPUs,
// strict and weak, f32 and bf16 out, three calls in a row (the counters grow, never reset;
// the barriers share the pads) with a shape change between, against the exact reference;
// where a GPU's rows are not a multiple of 64 it runs the piece launches.
func TestOverlapSignals(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{2, 3, 4} {
		for _, weak := range []bool{false, true} {
			out := dsl.F32
			if weak {
				out = dsl.BF16
			}
			t.Run(fmt.Sprintf("%dgpu/weak=%v/%s", g, weak, out), func(t *testing.T) {
				o := fusedOpts
				o.Target, o.Matmuls, o.OverlapSignals = ptx.SM90a, MatmulOverlap, true
				runRanks(t, g, false, weak, int64(g+7), Options{}, func(e *rankEnv) error {
					return withStream(e, o, func(c *Comm, _ *jit.Stream) error {
						for call, shape := range []MatmulShape{{M: g * 64, N: 40, K: 24}, {M: g * 64, N: 40, K: 24}, {M: g * 128, N: 24, K: 40}, {M: g * 64, N: 40, K: 24}} {
							rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/g*shape.N, out)
							if err != nil {
								return err
							}
							if err := e.checkRS(ctx, rs, shape, out, false); err != nil {
								return fmt.Errorf("call %d %v: %w", call, shape, err)
							}
							if got := c.LastAlgorithm(); !strings.HasPrefix(got, "gemm_sm90_") || !strings.HasSuffix(got, "_pieces+copy_engine_reducescatter_signal") {
								return fmt.Errorf("call %d: MatmulReduceScatter ran %s", call, got)
							}
						}
						// 20 rows a GPU: no piece of whole tiles, so the piece launches.
						odd := MatmulShape{M: g * 20, N: 40, K: 24}
						rs, err := e.allocAll(dsl.BF16, odd.M*odd.K, odd.K*odd.N, odd.M/g*odd.N, dsl.F32)
						if err != nil {
							return err
						}
						if err := e.checkRS(ctx, rs, odd, dsl.F32, false); err != nil {
							return err
						}
						if got := c.LastAlgorithm(); !strings.HasSuffix(got, "+copy_engine_reducescatter") {
							return fmt.Errorf("20 rows a GPU ran %s", got)
						}
						return nil
					})
				})
			})
		}
	}
}
