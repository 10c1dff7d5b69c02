package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// fusedSM90Opts runs the fused matmuls on target sm_90a: the sm_90a kernels with 64x64x64
// tiles on one consumer warpgroup and 2 stages, the sm_80 fallback with fusedOpts' tiles.
var fusedSM90Opts = func() Options {
	o := fusedOpts
	o.Target = "sm_90a"
	o.MatmulSM90 = kernels.GemmSM90Config{BN: 64, Consumers: 1, Stages: 2}
	return o
}()

// TestFusedMatmulsSM90 runs AllGatherMatmul, MatmulReduceScatter and MatmulAllReduce on
// target sm_90a over 1, 2, 3 and 4 emulated GPUs, strict and weak, with multicast on and
// off, three calls in a row: N = 40 and K = 24 (odd multiples of 8) take the sm_90a kernels
// (gemm_ar_mc_sm90 with multicast), N = 37 and K = 19 fall back to the sm_80 kernels with a
// debug log; both against exact references.
func TestFusedMatmulsSM90(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{1, 2, 3, 4} {
		for _, mc := range []bool{false, true} {
			for _, weak := range []bool{false, true} {
				for _, s := range []struct {
					rows, n, k int
					out        dsl.Type
					sm90       bool
				}{{72, 40, 24, dsl.F32, true}, {13, 37, 19, dsl.BF16, false}} {
					t.Run(fmt.Sprintf("%dgpu/mc=%v/weak=%v/%dx%dx%d", g, mc, weak, s.rows, s.n, s.k), func(t *testing.T) {
						runRanks(t, g, mc, weak, int64(g), fusedSM90Opts, func(e *rankEnv) error {
							shape := MatmulShape{M: g * s.rows, N: s.n, K: s.k}
							ag, err := e.allocAll(dsl.BF16, shape.M/g*shape.K, shape.K*shape.N, shape.M*shape.N, s.out)
							if err != nil {
								return err
							}
							rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/g*shape.N, s.out)
							if err != nil {
								return err
							}
							ar, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M*shape.N, s.out)
							if err != nil {
								return err
							}
							want := func(what, sm90 string) error {
								got := e.c.LastAlgorithm()
								if s.sm90 && !strings.HasPrefix(got, sm90) || !s.sm90 && strings.Contains(got, "sm90") {
									return fmt.Errorf("%s ran %s (sm_90a kernel expected: %v)", what, got, s.sm90)
								}
								return nil
							}
							arKernel := "gemm_ar_sm90_"
							if mc {
								arKernel = "gemm_ar_mc_sm90_"
							}
							maps := 0
							for call := 0; call < 3; call++ {
								// Repeated calls reuse the Comm's tensor maps (the results are
								// still checked on every call).
								if call == 1 {
									maps = len(e.c.tmaps)
								} else if call == 2 && len(e.c.tmaps) != maps {
									return fmt.Errorf("the tensor-map cache grew from %d to %d entries on a repeated call", maps, len(e.c.tmaps))
								}
								if err := e.checkAG(ctx, ag, shape, s.out); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								if err := want("AllGatherMatmul", "ag_gemm_sm90_"); err != nil {
									return err
								}
								if err := e.checkRS(ctx, rs, shape, s.out, false); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								if err := want("MatmulReduceScatter", "gemm_rs_sm90_"); err != nil {
									return err
								}
								if err := e.checkRS(ctx, ar, shape, s.out, true); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								if err := want("MatmulAllReduce", arKernel); err != nil {
									return err
								}
							}
							if s.sm90 && maps == 0 {
								return fmt.Errorf("the sm_90a matmuls cached no tensor maps")
							}
							if logged := strings.Contains(e.log.String(), "TMA needs multiples of 8"); logged == s.sm90 {
								return fmt.Errorf("fallback logged %v, want %v:\n%s", logged, !s.sm90, e.log.String())
							}
							return nil
						})
					})
				}
			}
		}
	}
}

// TestMatmulAllReduceMulticast runs MatmulAllReduce on target sm_90 (the mma.sync kernels)
// over 1-4 emulated GPUs, strict and weak, multicast on and off, 3 calls in a row: with
// multicast and N, K multiples of 8 it runs gemm_ar_mc (multimem), otherwise gemm_ar.
func TestMatmulAllReduceMulticast(t *testing.T) {
	ctx := context.Background()
	o := fusedOpts
	o.Target = "sm_90"
	for _, g := range []int{1, 2, 3, 4} {
		for _, mc := range []bool{false, true} {
			for _, weak := range []bool{false, true} {
				for _, s := range []struct {
					rows, n, k int
					out        dsl.Type
				}{{36, 40, 24, dsl.F32}, {13, 37, 19, dsl.BF16}} {
					t.Run(fmt.Sprintf("%dgpu/mc=%v/weak=%v/%dx%dx%d", g, mc, weak, s.rows, s.n, s.k), func(t *testing.T) {
						runRanks(t, g, mc, weak, int64(g), o, func(e *rankEnv) error {
							shape := MatmulShape{M: g * s.rows, N: s.n, K: s.k}
							ar, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M*shape.N, s.out)
							if err != nil {
								return err
							}
							want := "gemm_ar_"
							if mc && s.n%8 == 0 && s.k%8 == 0 {
								want = "gemm_ar_mc_"
							}
							for call := 0; call < 3; call++ {
								if err := e.checkRS(ctx, ar, shape, s.out, true); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								if got := e.c.LastAlgorithm(); !strings.HasPrefix(got, want) || want == "gemm_ar_" && strings.HasPrefix(got, "gemm_ar_mc") {
									return fmt.Errorf("MatmulAllReduce ran %s, want %s...", got, want)
								}
							}
							return nil
						})
					})
				}
			}
		}
	}
}
