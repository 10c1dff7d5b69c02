package collectives

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbeOverlapHostileShapes runs MatmulAllReduce, AllGatherMatmul and
// MatmulReduceScatter with MatmulOverlap on shapes the copy-engine paths handle at their
// edges: M not divisible by OverlapRounds x GPUs, one row per GPU, N and K of 8, an odd N
// (split), and f16/bf16/f32 out, each against the exact reference.
func TestProbeOverlapHostileShapes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		g, rounds int
		s         MatmulShape
		out       dsl.Type
	}{
		{2, 4, MatmulShape{M: 6, N: 16, K: 8}, dsl.F32},   // 6 % 8 != 0: the rounds fall back
		{2, 3, MatmulShape{M: 2, N: 8, K: 8}, dsl.F16},    // one row per GPU
		{3, 2, MatmulShape{M: 9, N: 24, K: 16}, dsl.BF16}, // 9 % 6 != 0
		{2, 1, MatmulShape{M: 4, N: 12, K: 8}, dsl.F32},   // N not a multiple of 8: split
		{2, 1, MatmulShape{M: 4, N: 8, K: 12}, dsl.F16},   // K not a multiple of 8: split
		{4, 5, MatmulShape{M: 4, N: 8, K: 8}, dsl.F32},    // more rounds than rows
	} {
		t.Run(fmt.Sprintf("%dgpu/r%d/%dx%dx%d/%s", tc.g, tc.rounds, tc.s.M, tc.s.N, tc.s.K, tc.out), func(t *testing.T) {
			o := fusedOpts
			o.Target, o.Matmuls, o.OverlapRounds = ptx.SM90a, MatmulOverlap, tc.rounds
			runRanks(t, tc.g, false, false, 3, Options{}, func(e *rankEnv) error {
				return withStream(e, o, func(c *Comm, _ *jit.Stream) error {
					s := tc.s
					ar, err := e.allocAll(dsl.BF16, s.M*s.K, s.K*s.N, s.M*s.N, tc.out)
					if err != nil {
						return err
					}
					if err := e.checkRS(ctx, ar, s, tc.out, true); err != nil {
						return fmt.Errorf("MatmulAllReduce: %w (ran %s)", err, c.LastAlgorithm())
					}
					if e.c.Rank() == 0 {
						t.Logf("AR ran %s", c.LastAlgorithm())
					}
					if false {
						return fmt.Errorf("MatmulAllReduce: %w (ran %s)", err, c.LastAlgorithm())
					}
					ag, err := e.allocAll(dsl.F16, s.M/tc.g*s.K, s.K*s.N, s.M*s.N, tc.out)
					if err != nil {
						return err
					}
					if err := e.checkAG(ctx, ag, s, tc.out); err != nil {
						return fmt.Errorf("AllGatherMatmul: %w (ran %s)", err, c.LastAlgorithm())
					}
					rs, err := e.allocAll(dsl.BF16, s.M*s.K, s.K*s.N, s.M/tc.g*s.N, tc.out)
					if err != nil {
						return err
					}
					if err := e.checkRS(ctx, rs, s, tc.out, false); err != nil {
						return fmt.Errorf("MatmulReduceScatter: %w (ran %s)", err, c.LastAlgorithm())
					}
					return nil
				})
			})
		})
	}
}

// TestProbeOverlapAliasing passes out as a or b, and buffers of another Comm, to the
// overlapped matmuls: each must be refused naming the rule.
func TestProbeOverlapAliasing(t *testing.T) {
	ctx := context.Background()
	o := fusedOpts
	o.Target, o.Matmuls = ptx.SM90a, MatmulOverlap
	runRanks(t, 2, false, false, 3, Options{}, func(e *rankEnv) error {
		other := e.c
		ob, err := other.Alloc(dsl.BF16, 64)
		if err != nil {
			return err
		}
		return withStream(e, o, func(c *Comm, _ *jit.Stream) error {
			s := MatmulShape{M: 8, N: 8, K: 8}
			x, err := c.Alloc(dsl.BF16, 64)
			if err != nil {
				return err
			}
			y, err := c.Alloc(dsl.BF16, 64)
			if err != nil {
				return err
			}
			for _, tc := range []struct {
				name string
				err  error
				want string
			}{
				{"out=a", c.MatmulAllReduce(ctx, x, y, x, s), "out must not be an input"},
				{"out=b", c.MatmulAllReduce(ctx, x, y, y, s), "out must not be an input"},
				{"other comm", c.MatmulAllReduce(ctx, x, ob, y, s), "another Comm"},
				{"ag out=b", c.AllGatherMatmul(ctx, x, y, y, MatmulShape{M: 8, N: 8, K: 8}), ""},
			} {
				if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
					return fmt.Errorf("%s: error %v; want one containing %q", tc.name, tc.err, tc.want)
				}
			}
			return nil
		})
	})
}

// TestProbeWaitsHonourContext: with rank 1 never joining a dispatch, rank 0's MoE.Check,
// Buffer.ReadContext and Buffer.FreeContext return at their context's deadline (before:
// MoE.Check waited in Device.Synchronize until the emulator found the deadlock, and forever
// on a GPU; Read and Free took no context).
func TestProbeWaitsHonourContext(t *testing.T) {
	done := make(chan struct{})
	var errs [3]error
	_ = jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}, func(r *jit.Rank) error {
		c, err := New(context.Background(), r, testOpts)
		if err != nil {
			return err
		}
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 4}
		m, err := c.NewMoE(context.Background(), cfg)
		if err != nil {
			return err
		}
		x, err := c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		if err != nil {
			return err
		}
		ids, err := c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
		if err != nil {
			return err
		}
		if r.Rank == 1 { // never dispatches
			<-done
			c.Close()
			return nil
		}
		var once sync.Once
		release := func() { once.Do(func() { close(done) }) }
		defer release()
		if err := m.Dispatch(context.Background(), x, ids); err != nil {
			return err
		}
		for i, wait := range []func(context.Context) error{
			m.Check,
			func(ctx context.Context) error { return x.ReadContext(ctx, make([]byte, 8)) },
			x.FreeContext,
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			errs[i] = wait(ctx)
			cancel()
		}
		release()
		c.Close()
		return nil
	})
	for i, what := range []string{"MoE.Check", "Buffer.ReadContext", "Buffer.FreeContext"} {
		if !errors.Is(errs[i], context.DeadlineExceeded) {
			t.Errorf("%s with a peer missing = %v; want the context's deadline", what, errs[i])
		}
	}
}

// TestProbeNilComm calls every method of a nil *Comm: an error (or a zero value for the
// accessors), never a panic (before: every one of them panicked).
func TestProbeNilComm(t *testing.T) {
	var c *Comm
	ctx := context.Background()
	s := MatmulShape{M: 8, N: 8, K: 8}
	for name, f := range map[string]func() error{
		"Alloc":               func() error { _, err := c.Alloc(dsl.F32, 4); return err },
		"AllocContext":        func() error { _, err := c.AllocContext(ctx, dsl.F32, 4); return err },
		"BufferOf":            func() error { _, err := c.BufferOf(nil); return err },
		"Close":               func() error { return c.Close() },
		"CloseContext":        func() error { return c.CloseContext(ctx) },
		"MatmulAllReduce":     func() error { return c.MatmulAllReduce(ctx, nil, nil, nil, s) },
		"AllGatherMatmul":     func() error { return c.AllGatherMatmul(ctx, nil, nil, nil, s) },
		"MatmulReduceScatter": func() error { return c.MatmulReduceScatter(ctx, nil, nil, nil, s) },
		"Capture":             func() error { _, err := c.Capture(ctx, func() error { return nil }); return err },
		"NewMoE":              func() error { _, err := c.NewMoE(ctx, MoEConfig{}); return err },
		"AllReduce":           func() error { return c.AllReduce(ctx, nil, Sum) },
		"AllReduceTo":         func() error { return c.AllReduceTo(ctx, nil, nil, Sum) },
		"ReduceScatter":       func() error { return c.ReduceScatter(ctx, nil, nil, Sum) },
		"AllGather":           func() error { return c.AllGather(ctx, nil, nil) },
		"Broadcast":           func() error { return c.Broadcast(ctx, nil, nil, 0) },
		"Barrier":             func() error { return c.Barrier(ctx) },
		"accessors": func() error {
			_, _ = c.Multicast()
			_, _ = c.NodeRank()
			_ = c.LastAlgorithm() + c.AllReduceAlgorithm(dsl.F32, Sum, 4) + c.ReduceScatterAlgorithm(dsl.F32, Sum, 4) + c.AllGatherAlgorithm(dsl.F32, 4)
			_ = c.NumGPUs() + c.Rank()
			_ = c.Topology()
			_, err := c.Multicast()
			return err
		},
	} {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = f()
		}()
		if err == nil || !strings.Contains(err.Error(), "nil *Comm") {
			t.Errorf("%s of a nil *Comm: %v; want an error naming the nil Comm", name, err)
		}
	}
}

// TestProbeNilBuffer calls every method of a nil *Buffer: an error or a zero value, never
// a panic (before: all but Free panicked).
func TestProbeNilBuffer(t *testing.T) {
	var b *Buffer
	ctx := context.Background()
	for name, f := range map[string]func() error{
		"Write":       func() error { return b.Write(nil) },
		"WriteF32":    func() error { return b.WriteF32([]float32{1}) },
		"Read":        func() error { return b.Read(nil) },
		"ReadContext": func() error { return b.ReadContext(ctx, nil) },
		"ReadF32":     func() error { _, err := b.ReadF32(); return err },
		"Free":        func() error { return b.Free() },
		"FreeContext": func() error { return b.FreeContext(ctx) },
		"accessors": func() error {
			if b.Len() != 0 || b.Bytes() != 0 || b.DType() != 0 || b.DevPtr() != 0 || b.Memory() != nil {
				return errors.New("nonzero")
			}
			return errors.New("nil")
		},
	} {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = f()
		}()
		if err == nil || !strings.Contains(err.Error(), "nil") || strings.Contains(err.Error(), "panic") {
			t.Errorf("%s of a nil *Buffer: %v; want an error naming the nil Buffer", name, err)
		}
	}
}

// TestProbeCollectiveOperands passes the Buffer collectives mismatched, aliased and
// out-of-range operands: each an error naming the rule, never a run.
func TestProbeCollectiveOperands(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		c := e.c
		f8, err1 := c.Alloc(dsl.F32, 8)
		f16, err2 := c.Alloc(dsl.F32, 16)
		h8, err3 := c.Alloc(dsl.BF16, 8)
		i8, err4 := c.Alloc(dsl.I32, 8)
		f4, err5 := c.Alloc(dsl.F32, 4)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		var errs []string
		for _, tc := range []struct {
			name string
			f    func() error
			want string
		}{
			{"AllReduceTo types", func() error { return c.AllReduceTo(ctx, f8, h8, Sum) }, "bf16"},
			{"AllReduceTo lengths", func() error { return c.AllReduceTo(ctx, f4, f8, Sum) }, "8"},
			{"AllReduce bad op", func() error { return c.AllReduce(ctx, f8, Op(99)) }, "not supported"},
			{"AllReduce s32 min", func() error { return c.AllReduce(ctx, i8, Min) }, ""},
			{"ReduceScatter same buffer", func() error { return c.ReduceScatter(ctx, f8, f8, Sum) }, ""},
			{"ReduceScatter lengths", func() error { return c.ReduceScatter(ctx, f8, f8, Sum) }, ""},
			{"ReduceScatter dst short", func() error { return c.ReduceScatter(ctx, f4, f16, Sum) }, ""},
			{"AllGather same buffer", func() error { return c.AllGather(ctx, f16, f16) }, ""},
			{"AllGather types", func() error { return c.AllGather(ctx, f16, h8) }, "bf16"},
			{"Broadcast root -1", func() error { return c.Broadcast(ctx, f8, f8, -1) }, "root"},
			{"Broadcast root 2", func() error { return c.Broadcast(ctx, f8, f8, 2) }, "root"},
			{"Broadcast types", func() error { return c.Broadcast(ctx, f8, h8, 0) }, "bf16"},
			{"Alloc fp8 without multicast", func() error { _, err := c.Alloc(dsl.E4M3, 16); return err }, ""},
			{"Alloc u8", func() error { _, err := c.Alloc(dsl.U8, 16); return err }, "not supported"},
			{"Alloc huge", func() error { _, err := c.Alloc(dsl.F32, 1<<40); return err }, "want 1 to"},
		} {
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return tc.f()
			}()
			if err != nil && strings.HasPrefix(err.Error(), "panic") || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				errs = append(errs, fmt.Sprintf("%s: %v; want an error containing %q", tc.name, err, tc.want))
			}
			if tc.want == "" && e.c.Rank() == 0 {
				t.Logf("%s: %v", tc.name, err)
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "\n"))
		}
		return nil
	})
}

// TestProbeCapturePanic: a record function that panics leaves the Comm's stream out of
// capture (before: the stream stayed capturing, so a later AllReduce on it returned nil
// having only been recorded, and the next Synchronize failed).
func TestProbeCapturePanic(t *testing.T) {
	ctx := context.Background()
	o := graphOpts
	o.DisableMulticast = true
	runRanks(t, 1, false, false, 0, Options{}, func(e *rankEnv) error {
		return withStream(e, o, func(c *Comm, s *jit.Stream) error {
			b, err := c.Alloc(dsl.F32, 64)
			if err != nil {
				return err
			}
			func() {
				defer func() { _ = recover() }()
				_, _ = c.Capture(ctx, func() error {
					if err := c.AllReduce(ctx, b, Sum); err != nil {
						return err
					}
					panic("record's own bug")
				})
			}()
			if err := c.AllReduce(ctx, b, Sum); err != nil {
				return fmt.Errorf("AllReduce after a panicking Capture: %w", err)
			}
			if err := s.Synchronize(); err != nil {
				return fmt.Errorf("Synchronize after a panicking Capture: %w", err)
			}
			return nil
		})
	})
}

// TestProbeMatmulSameInput passes one buffer as both a and b (M = N = K) to the three
// matmuls, overlapped on the copy engines and fused, against the exact reference: the
// inputs are only read, so it must compute A * A.
func TestProbeMatmulSameInput(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []MatmulMode{MatmulOverlap, MatmulFused} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			o := fusedOpts
			o.Matmuls = mode
			if mode == MatmulOverlap {
				o.Target = ptx.SM90a
			}
			const g, n = 2, 16
			runRanks(t, g, false, false, 5, Options{}, func(e *rankEnv) error {
				return withStream(e, o, func(c *Comm, _ *jit.Stream) error {
					s := MatmulShape{M: n, N: n, K: n}
					a, err := c.Alloc(dsl.BF16, n*n)
					if err != nil {
						return err
					}
					as, err := e.matrices(a, n*n)
					if err != nil {
						return err
					}
					dot := func(src, row, col int) float64 {
						sum := 0.0
						for l := 0; l < n; l++ {
							sum += as[src][row*n+l] * as[src][l*n+col]
						}
						return sum
					}
					out, err := c.Alloc(dsl.F32, n*n)
					if err != nil {
						return err
					}
					if err := c.MatmulAllReduce(ctx, a, a, out, s); err != nil {
						return err
					}
					if err := e.expect("MatmulAllReduce(a, a)", out, func(_, i int) float64 {
						return float64(float32(dot(0, i/n, i%n) + dot(1, i/n, i%n)))
					}); err != nil {
						return err
					}
					part, err := c.Alloc(dsl.F32, n*n/g)
					if err != nil {
						return err
					}
					if err := c.MatmulReduceScatter(ctx, a, a, part, s); err != nil {
						return err
					}
					return e.expect("MatmulReduceScatter(a, a)", part, func(r, i int) float64 {
						row := r*n/g + i/n
						return float64(float32(dot(0, row, i%n) + dot(1, row, i%n)))
					})
				})
			})
		})
	}
}

// TestProbeOverlapRoundsHuge: Options.OverlapRounds so large that rounds x GPUs overflows
// is refused by New naming the field (before: 2^62 on 4 GPUs divided by zero in
// MatmulAllReduce, a panic; MaxInt ran 0-row rounds, "gemm_sm90: shape 0x8x8").
func TestProbeOverlapRoundsHuge(t *testing.T) {
	ctx := context.Background()
	for _, rounds := range []int{1 << 62, 1<<63 - 1, 1 << 40} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) {
			o := fusedOpts
			o.Target, o.Matmuls, o.OverlapRounds = ptx.SM90a, MatmulOverlap, rounds
			runRanks(t, 4, false, false, 3, Options{}, func(e *rankEnv) error {
				err := func() (err error) {
					defer func() {
						if p := recover(); p != nil {
							err = fmt.Errorf("panic: %v", p)
						}
					}()
					return withStream(e, o, func(c *Comm, _ *jit.Stream) error {
						s := MatmulShape{M: 16, N: 8, K: 8}
						ar, err := e.allocAll(dsl.BF16, s.M*s.K, s.K*s.N, s.M*s.N, dsl.F32)
						if err != nil {
							return err
						}
						return e.checkRS(ctx, ar, s, dsl.F32, true)
					})
				}()
				if err == nil || !strings.Contains(err.Error(), "Options.OverlapRounds") {
					return fmt.Errorf("OverlapRounds %d: %v; want New to refuse it", rounds, err)
				}
				return nil
			})
		})
	}
}

// TestProbeThresholdsHuge: size thresholds in Options so large that the scratch they size
// overflows are refused by New naming the field (before: LamportMaxBytes 2^62 wrapped the
// Lamport buffers' size and AllReduce returned nil with wrong sums; 2^40 failed the first
// AllReduce asking whether the ranks' calls differ); thresholds that size nothing run.
func TestProbeThresholdsHuge(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"lamport 2^62", Options{LamportMaxBytes: 1 << 62}, "Options.LamportMaxBytes"},
		{"lamport 2^40", Options{LamportMaxBytes: 1 << 40}, "Options.LamportMaxBytes"},
		{"lamport -1", Options{LamportMaxBytes: -1}, "Options.LamportMaxBytes"},
		{"lamport max", Options{LamportMaxBytes: MaxLamportBytes}, ""},
		{"one-shot 2^62", Options{OneShotMaxBytes: 1 << 62}, ""},
		{"push 2^62", Options{PushMinBytes: 1 << 62}, ""},
		{"pull 2^62", Options{ReduceScatterPullMinBytes: 1 << 62}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runRanks(t, 2, false, false, 1, Options{}, func(e *rankEnv) error {
				o := tc.o
				o.Logger, o.DisableMulticast = e.c.o.Logger, true
				c, err := New(ctx, e.r, o)
				if tc.want != "" {
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						if err == nil {
							c.Close()
						}
						return fmt.Errorf("New = %v; want an error naming %s", err, tc.want)
					}
					return nil
				}
				if err != nil {
					return err
				}
				defer c.Close()
				b, err := c.Alloc(dsl.F32, 64)
				if err != nil {
					return err
				}
				in, err := (&rankEnv{r: e.r, c: c, rng: e.rng}).fill(b)
				if err != nil {
					return err
				}
				if err := c.AllReduce(ctx, b, Sum); err != nil {
					return fmt.Errorf("AllReduce (%s): %w", c.LastAlgorithm(), err)
				}
				return (&rankEnv{r: e.r, c: c}).expect("AllReduce", b, func(_, i int) float64 { return reduce(Sum, dsl.F32, in, i) })
			})
		})
	}
}
