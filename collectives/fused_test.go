package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// fusedOpts runs the fused matmuls (MatmulFused: the kernels, whatever the GPU count) with
// 32x32x32 tiles (4 warps, 2 stages), small enough for the emulator, on the sm_80 path.
var fusedOpts = Options{Target: "sm_80", MaxBlocks: 2, Matmuls: MatmulFused, Matmul: kernels.GemmConfig{BM: 32, BN: 32, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 2}}

// matrices returns every rank's n random values (multiples of 1/8 in [-1, 1]: exact in f16
// and bf16, their products' sums exact in f32), the same on every rank (same seed), and
// writes this rank's into b.
func (e *rankEnv) matrices(b *Buffer, n int) ([][]float64, error) {
	out := make([][]float64, e.c.NumGPUs())
	var mine []float32
	for g := range out {
		v := make([]float32, n)
		out[g] = make([]float64, n)
		for i := range v {
			x := float32(e.rng.Intn(17)-8) / 8
			v[i], out[g][i] = x, float64(x)
		}
		if g == e.c.Rank() {
			mine = v
		}
	}
	return out, b.WriteF32(mine)
}

// TestFusedMatmuls runs AllGatherMatmul, MatmulReduceScatter and MatmulAllReduce through Comm on 1, 2, 3 and
// 4 emulated GPUs, strict and weak, three calls in a row (fresh inputs each), with row
// slices not a multiple of the tile, N = 40 and K = 24 (odd multiples of 8) and an
// unaligned shape, against exact references.
func TestFusedMatmuls(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{1, 2, 3, 4} {
		for _, weak := range []bool{false, true} {
			for _, s := range []struct {
				rows, n, k int
				out        dsl.Type
			}{{36, 40, 24, dsl.F32}, {13, 37, 19, dsl.BF16}} {
				t.Run(fmt.Sprintf("%dgpu/weak=%v/%dx%dx%d", g, weak, s.rows, s.n, s.k), func(t *testing.T) {
					runRanks(t, g, false, weak, int64(g), fusedOpts, func(e *rankEnv) error {
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
						for call := 0; call < 3; call++ {
							if err := e.checkAG(ctx, ag, shape, s.out); err != nil {
								return fmt.Errorf("call %d: %w", call, err)
							}
							if err := e.checkRS(ctx, rs, shape, s.out, false); err != nil {
								return fmt.Errorf("call %d: %w", call, err)
							}
							if err := e.checkRS(ctx, ar, shape, s.out, true); err != nil {
								return fmt.Errorf("call %d: %w", call, err)
							}
						}
						return nil
					})
				})
			}
		}
	}
}

// allocAll allocates a, b (in) and out.
func (e *rankEnv) allocAll(in dsl.Type, na, nb, nout int, out dsl.Type) ([3]*Buffer, error) {
	var bs [3]*Buffer
	var err error
	for i, x := range []struct {
		dt dsl.Type
		n  int
	}{{in, na}, {in, nb}, {out, nout}} {
		if bs[i], err = e.c.Alloc(x.dt, x.n); err != nil {
			return bs, err
		}
	}
	return bs, nil
}

func (e *rankEnv) checkAG(ctx context.Context, bufs [3]*Buffer, s MatmulShape, out dsl.Type) error {
	c, err := e.prepAG(ctx, bufs, s, out)
	if err != nil {
		return err
	}
	if err := c.run(); err != nil {
		return err
	}
	return c.check()
}

// prepAG fills AllGatherMatmul's inputs and returns the call and its check.
func (e *rankEnv) prepAG(ctx context.Context, bufs [3]*Buffer, s MatmulShape, out dsl.Type) (b2bCall, error) {
	rows := s.M / e.c.NumGPUs()
	as, err := e.matrices(bufs[0], rows*s.K)
	if err != nil {
		return b2bCall{}, err
	}
	bs, err := e.matrices(bufs[1], s.K*s.N)
	if err != nil {
		return b2bCall{}, err
	}
	run := func() error { return e.c.AllGatherMatmul(ctx, bufs[0], bufs[1], bufs[2], s) }
	return b2bCall{run: run, check: func() error {
		return e.expect("AllGatherMatmul", bufs[2], func(r, i int) float64 {
			row, col := i/s.N, i%s.N
			sum := 0.0
			for l := 0; l < s.K; l++ {
				sum += as[row/rows][(row%rows)*s.K+l] * bs[r][l*s.N+col]
			}
			return round(out, sum)
		})
	}}, nil
}

// checkRS runs MatmulReduceScatter, or MatmulAllReduce when all.
func (e *rankEnv) checkRS(ctx context.Context, bufs [3]*Buffer, s MatmulShape, out dsl.Type, all bool) error {
	c, err := e.prepRS(ctx, bufs, s, out, all)
	if err != nil {
		return err
	}
	if err := c.run(); err != nil {
		return err
	}
	return c.check()
}

// prepRS fills MatmulReduceScatter's (MatmulAllReduce's when all) inputs and returns the
// call and its check.
func (e *rankEnv) prepRS(ctx context.Context, bufs [3]*Buffer, s MatmulShape, out dsl.Type, all bool) (b2bCall, error) {
	g, rows := e.c.NumGPUs(), s.M/e.c.NumGPUs()
	as, err := e.matrices(bufs[0], s.M*s.K)
	if err != nil {
		return b2bCall{}, err
	}
	bs, err := e.matrices(bufs[1], s.K*s.N)
	if err != nil {
		return b2bCall{}, err
	}
	what, run := "MatmulReduceScatter", e.c.MatmulReduceScatter
	if all {
		what, run = "MatmulAllReduce", e.c.MatmulAllReduce
	}
	return b2bCall{run: func() error { return run(ctx, bufs[0], bufs[1], bufs[2], s) }, check: func() error {
		return e.expect(what, bufs[2], func(r, i int) float64 {
			row, col := r*rows+i/s.N, i%s.N
			if all {
				row = i / s.N
			}
			sum := 0.0
			for src := 0; src < g; src++ {
				for l := 0; l < s.K; l++ {
					sum += as[src][row*s.K+l] * bs[src][l*s.N+col]
				}
			}
			// Split across nodes and the copy engines' rounds: each GPU's product is rounded
			// to out's type before the sum.
			if e.c.Topology().Nodes > 1 || strings.Contains(e.c.LastAlgorithm(), "+copy_engine_") {
				sum = 0
				for src := 0; src < g; src++ {
					p := 0.0
					for l := 0; l < s.K; l++ {
						p += as[src][row*s.K+l] * bs[src][l*s.N+col]
					}
					sum += round(out, p)
				}
			}
			return round(out, sum)
		})
	}}, nil
}

// TestSplitMatmuls runs the three matmuls in their default mode (MatmulAuto) on 1, 2 and 3
// emulated GPUs, targets sm_80 and sm_90a, two calls in a row: one GPU runs the fused
// kernel, several the collective and the GEMM in sequence (gemm_sm90 on sm_90a), each
// against the exact reference (f32 out: the split path rounds its products to out's type
// before the reduction). MatmulSplit forces the split on one GPU too.
func TestSplitMatmuls(t *testing.T) {
	ctx := context.Background()
	for _, target := range []string{"sm_80", "sm_90a"} {
		for _, g := range []int{1, 2, 3} {
			for _, mode := range []MatmulMode{MatmulAuto, MatmulSplit} {
				if mode == MatmulSplit && g > 1 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%dgpu/%v", target, g, mode), func(t *testing.T) {
					o := fusedOpts
					o.Target, o.Matmuls = ptx.Target(target), mode
					runRanks(t, g, false, g == 2, int64(g), o, func(e *rankEnv) error {
						shape := MatmulShape{M: g * 20, N: 40, K: 24}
						ag, err := e.allocAll(dsl.BF16, shape.M/g*shape.K, shape.K*shape.N, shape.M*shape.N, dsl.F32)
						if err != nil {
							return err
						}
						rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/g*shape.N, dsl.F32)
						if err != nil {
							return err
						}
						ar, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M*shape.N, dsl.F32)
						if err != nil {
							return err
						}
						split := g > 1 || mode == MatmulSplit
						gemm := "gemm_"
						if target == "sm_90a" {
							gemm = "gemm_sm90_"
						}
						ran := func(what, fused, coll string) error {
							got := e.c.LastAlgorithm()
							ok := strings.HasPrefix(got, fused)
							if split {
								ok = strings.Contains(got, coll) && strings.Contains(got, gemm) && strings.Contains(got, "+")
							}
							if !ok {
								return fmt.Errorf("%s ran %s (split %v)", what, got, split)
							}
							return nil
						}
						for call := 0; call < 2; call++ {
							if err := e.checkAG(ctx, ag, shape, dsl.F32); err != nil {
								return fmt.Errorf("call %d: %w", call, err)
							}
							if err := ran("AllGatherMatmul", "ag_gemm", "allgather"); err != nil {
								return err
							}
							if err := e.checkRS(ctx, rs, shape, dsl.F32, false); err != nil {
								return fmt.Errorf("call %d: %w", call, err)
							}
							if err := ran("MatmulReduceScatter", "gemm_rs", "reducescatter"); err != nil {
								return err
							}
							if err := e.checkRS(ctx, ar, shape, dsl.F32, true); err != nil {
								return fmt.Errorf("call %d: %w", call, err)
							}
							if err := ran("MatmulAllReduce", "gemm_ar", "allreduce"); err != nil {
								return err
							}
						}
						return nil
					})
				})
			}
		}
	}
}

// TestFusedMatmulErrors checks that bad shapes and types are refused with errors naming the
// mismatch.
func TestFusedMatmulErrors(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 0, fusedOpts, func(e *rankEnv) error {
		s := MatmulShape{M: 8, N: 8, K: 8}
		a4, _ := e.c.Alloc(dsl.BF16, 4*8)
		a8, _ := e.c.Alloc(dsl.BF16, 8*8)
		b, _ := e.c.Alloc(dsl.BF16, 8*8)
		bK, _ := e.c.Alloc(dsl.BF16, 16*8)
		bF16, _ := e.c.Alloc(dsl.F16, 8*8)
		o8, _ := e.c.Alloc(dsl.F32, 8*8)
		o4, _ := e.c.Alloc(dsl.F32, 4*8)
		i32, _ := e.c.Alloc(dsl.I32, 8*8)
		for _, c := range []struct {
			name, want string
			err        error
		}{
			{"M not divisible", "M = 7 is not divisible by the 2 ranks", e.c.AllGatherMatmul(ctx, a4, b, o8, MatmulShape{M: 7, N: 8, K: 8})},
			{"K mismatch", "b holds 128 elements, want K x N = 8 x 8", e.c.AllGatherMatmul(ctx, a4, bK, o8, s)},
			{"a's K", "a holds 64 elements, want 4 x K", e.c.AllGatherMatmul(ctx, a8, b, o8, s)},
			{"dtype mismatch", "a is bf16 but b is f16", e.c.MatmulReduceScatter(ctx, a8, bF16, o4, s)},
			{"input type", "inputs of s32", e.c.MatmulReduceScatter(ctx, i32, i32, o4, s)},
			{"output size", "out holds 64 elements, want 4 x N", e.c.MatmulReduceScatter(ctx, a8, b, o8, s)},
			{"empty shape", "must be positive", e.c.MatmulReduceScatter(ctx, a8, b, o4, MatmulShape{M: 8, N: 0, K: 8})},
			{"all-reduce output", "out holds 32 elements, want 8 x N", e.c.MatmulAllReduce(ctx, a8, b, o4, s)},
		} {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
				return fmt.Errorf("%s: got %v, want an error containing %q", c.name, c.err, c.want)
			}
		}
		return nil
	})
}

// TestFusedMatmulsAcrossNodes runs AllGatherMatmul, MatmulReduceScatter and MatmulAllReduce
// on 2x2 and 3x1 topologies, where they run split (the collective across nodes and the
// plain gemm), strict and weak, against the references.
func TestFusedMatmulsAcrossNodes(t *testing.T) {
	ctx := context.Background()
	for _, tp := range []struct {
		nodes, local int
		weak         bool
		rows, n, k   int
		out          dsl.Type
	}{{2, 2, true, 12, 40, 24, dsl.F32}, {3, 1, false, 5, 37, 19, dsl.BF16}} {
		t.Run(fmt.Sprintf("%dx%d/%dx%dx%d/%s", tp.nodes, tp.local, tp.rows, tp.n, tp.k, tp.out), func(t *testing.T) {
			t.Parallel()
			runAcross(t, tp.nodes, tp.local, tp.weak, 9, fusedOpts, func(e *rankEnv) error {
				g := e.c.NumGPUs()
				shape := MatmulShape{M: g * tp.rows, N: tp.n, K: tp.k}
				ag, err := e.allocAll(dsl.BF16, shape.M/g*shape.K, shape.K*shape.N, shape.M*shape.N, tp.out)
				if err != nil {
					return err
				}
				rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/g*shape.N, tp.out)
				if err != nil {
					return err
				}
				ar, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M*shape.N, tp.out)
				if err != nil {
					return err
				}
				for call := 0; call < 2; call++ {
					if err := e.checkAG(ctx, ag, shape, tp.out); err != nil {
						return fmt.Errorf("call %d: %w", call, err)
					}
					if got := e.c.LastAlgorithm(); !strings.HasPrefix(got, "hier_allgather+gemm_") {
						return fmt.Errorf("AllGatherMatmul ran %q, want hier_allgather+gemm_...", got)
					}
					if err := e.checkRS(ctx, rs, shape, tp.out, false); err != nil {
						return fmt.Errorf("call %d: %w", call, err)
					}
					if got := e.c.LastAlgorithm(); !strings.HasPrefix(got, "gemm_") || !strings.HasSuffix(got, "+hier_reducescatter_sum") {
						return fmt.Errorf("MatmulReduceScatter ran %q, want gemm_...+hier_reducescatter_sum", got)
					}
					if err := e.checkRS(ctx, ar, shape, tp.out, true); err != nil {
						return fmt.Errorf("call %d: %w", call, err)
					}
					if got := e.c.LastAlgorithm(); !strings.HasPrefix(got, "gemm_") || !strings.HasSuffix(got, "+hier_allreduce_sum") {
						return fmt.Errorf("MatmulAllReduce ran %q, want gemm_...+hier_allreduce_sum", got)
					}
				}
				return nil
			})
		})
	}
}

// TestOverlapAllReduce runs MatmulAllReduce on the copy engines (gemmAROverlap: the
// reduce-scatter overlap in rounds, each round's sums pushed by a second side stream) on 2,
// 3 and 4 emulated GPUs, strict and weak, in 1, 2 and 4 rounds (the receive sets
// alternate), f32 and bf16 out, three calls back to back with fresh inputs, against the
// reference; then a MatmulReduceScatter between two all-reduces (the two share the side
// stream, its events and the send buffers).
func TestOverlapAllReduce(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{2, 3, 4} {
		for _, weak := range []bool{false, true} {
			for _, rounds := range []int{1, 2, 4} {
				out := dsl.F32
				if rounds == 2 {
					out = dsl.BF16
				}
				t.Run(fmt.Sprintf("%dgpu/weak=%v/rounds=%d/%s", g, weak, rounds, out), func(t *testing.T) {
					o := fusedOpts
					o.Target, o.Matmuls, o.OverlapRounds = ptx.SM90a, MatmulOverlap, rounds
					runRanks(t, g, false, weak, int64(g+rounds), Options{}, func(e *rankEnv) error {
						return withStream(e, o, func(c *Comm, s *jit.Stream) error {
							shape := MatmulShape{M: g * 4 * 3, N: 40, K: 24}
							ar, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M*shape.N, out)
							if err != nil {
								return err
							}
							rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/g*shape.N, dsl.F32)
							if err != nil {
								return err
							}
							snap, err := c.Alloc(out, shape.M*shape.N)
							if err != nil {
								return err
							}
							want := fmt.Sprintf("+copy_engine_allreduce_%d", rounds)
							for call := 0; call < 3; call++ {
								if err := e.checkRS(ctx, ar, shape, out, true); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								// A consumer on the Comm's stream right after the call sees every
								// GPU's sums (the last barrier follows every peer's pushes).
								x, err := e.prepRS(ctx, ar, shape, out, true)
								if err != nil {
									return err
								}
								if err := x.run(); err != nil {
									return err
								}
								if err := s.CopyDtoD(snap.DevPtr(), ar[2].DevPtr(), int64(ar[2].Bytes())); err != nil {
									return err
								}
								seen := make([]byte, snap.Bytes())
								if err := snap.Read(seen); err != nil {
									return err
								}
								if err := ar[2].Write(seen); err != nil {
									return err
								}
								if err := x.check(); err != nil {
									return fmt.Errorf("call %d, read on the stream: %w", call, err)
								}
								if got := c.LastAlgorithm(); !strings.HasPrefix(got, "gemm_sm90_") || !strings.HasSuffix(got, want) {
									return fmt.Errorf("call %d: MatmulAllReduce ran %s, want gemm_sm90_...%s", call, got, want)
								}
								if call == 1 {
									if err := e.checkRS(ctx, rs, shape, dsl.F32, false); err != nil {
										return fmt.Errorf("MatmulReduceScatter between: %w", err)
									}
								}
							}
							return nil
						})
					})
				})
			}
		}
	}
}

// TestOverlapMatmul runs AllGatherMatmul and MatmulReduceScatter with MatmulOverlap (the
// copy engines' pulls or pushes beside chunked gemm_sm90 calls, overlap.go) on 2, 3 and 4
// emulated GPUs, strict and weak, f32 and bf16 out (the all-gather), three calls of each in
// a row with fresh inputs (their barriers share the pads), against the exact reference; on
// a shape the sm_90a GEMM cannot take, it runs split.
func TestOverlapMatmul(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{2, 3, 4} {
		for _, weak := range []bool{false, true} {
			for _, out := range []dsl.Type{dsl.F32, dsl.BF16} {
				t.Run(fmt.Sprintf("%dgpu/weak=%v/%s", g, weak, out), func(t *testing.T) {
					o := fusedOpts
					o.Target, o.Matmuls = ptx.SM90a, MatmulOverlap
					runRanks(t, g, false, weak, int64(g), Options{}, func(e *rankEnv) error {
						return withStream(e, o, func(c *Comm, _ *jit.Stream) error {
							shape := MatmulShape{M: g * 20, N: 40, K: 24}
							ag, err := e.allocAll(dsl.BF16, shape.M/g*shape.K, shape.K*shape.N, shape.M*shape.N, out)
							if err != nil {
								return err
							}
							rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/g*shape.N, dsl.F32)
							if err != nil {
								return err
							}
							for call := 0; call < 3; call++ {
								if err := e.checkAG(ctx, ag, shape, out); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								if got := c.LastAlgorithm(); !strings.HasPrefix(got, "copy_engine_allgather+gemm_sm90_") {
									return fmt.Errorf("call %d ran %s", call, got)
								}
								if err := e.checkRS(ctx, rs, shape, dsl.F32, false); err != nil {
									return fmt.Errorf("call %d: %w", call, err)
								}
								if got := c.LastAlgorithm(); !strings.HasSuffix(got, "+copy_engine_reducescatter") || !strings.HasPrefix(got, "gemm_sm90_") {
									return fmt.Errorf("call %d: MatmulReduceScatter ran %s", call, got)
								}
							}
							// N = 37: no TMA (16-byte rows), so it runs split.
							odd := MatmulShape{M: g * 4, N: 37, K: 24}
							bufs, err := e.allocAll(dsl.BF16, odd.M/g*odd.K, odd.K*odd.N, odd.M*odd.N, dsl.F32)
							if err != nil {
								return err
							}
							if err := e.checkAG(ctx, bufs, odd, dsl.F32); err != nil {
								return err
							}
							if got := c.LastAlgorithm(); strings.HasPrefix(got, "copy_engine") {
								return fmt.Errorf("N = 37 ran %s", got)
							}
							return nil
						})
					})
				})
			}
		}
	}
}
