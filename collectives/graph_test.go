package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// graphOpts is testOpts on a capture-safe Comm (the stream is each rank's own), without
// Lamport (TestGraphReplay counts barrier epochs; TestGraphLamport replays Lamport).
var graphOpts = Options{OneShotMaxBytes: 1 << 10, MaxBlocks: 3, CaptureSafe: true, DisableLamport: true}

// withStream runs f with the Comm's Options.Stream set: runRanks makes the Comm, so the
// test makes a Comm of its own on a stream of the rank's device.
func withStream(e *rankEnv, o Options, f func(c *Comm, s *jit.Stream) error) error {
	s, err := e.r.Device.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	o.Stream, o.Logger = s, slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(context.Background(), e.r, o)
	if err != nil {
		return err
	}
	defer c.Close()
	e.c = c
	return f(c, s)
}

// graphCalls are the buffers of the calls TestGraphReplay captures.
type graphCalls struct {
	a1, b1, a2, b2, a3, a4, part, full *Buffer
}

func (e *rankEnv) graphBuffers(dt dsl.Type) (*graphCalls, error) {
	g := e.c.NumGPUs()
	var b graphCalls
	var err error
	for _, x := range []struct {
		p **Buffer
		n int
	}{{&b.a1, 61}, {&b.b1, 61}, {&b.a2, 300}, {&b.b2, 300}, {&b.a3, 77}, {&b.a4, 40 * g}, {&b.part, 40}, {&b.full, 40 * g}} {
		if *x.p, err = e.c.Alloc(dt, x.n); err != nil {
			return nil, err
		}
	}
	return &b, nil
}

// TestGraphReplay captures five collectives on a capture-safe Comm (a one-shot sized
// all-reduce, a two-shot sized one, an in-place max all-reduce, a reduce-scatter and an
// all-gather of its result) into one graph at 1, 2 and 4 ranks, with and without
// multicast, strict and weak, replays it (1000 times at 1 rank, 200 at 2, 50 at 4: the
// emulator runs every replay's kernels), and checks every result after replays 1, 2 and
// the last, with fresh inputs written before each of those. A direct call on the same Comm
// after the replays checks that the device epochs and direct calls agree.
func TestGraphReplay(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		gpus, replays int
		mc, weak      bool
		seed          int64
	}{{1, 1000, false, false, 0}, {2, 200, false, false, 1}, {2, 200, true, true, 2}, {4, 50, false, true, 3}, {4, 50, true, false, 4}} {
		t.Run(fmt.Sprintf("g%d/mc=%v/weak=%v", tc.gpus, tc.mc, tc.weak), func(t *testing.T) {
			t.Parallel()
			o := graphOpts
			o.DisableMulticast = !tc.mc
			runRanks(t, tc.gpus, true, tc.weak, tc.seed, Options{}, func(e *rankEnv) error {
				return withStream(e, o, func(c *Comm, s *jit.Stream) error {
					dt := dsl.F32
					b, err := e.graphBuffers(dt)
					if err != nil {
						return err
					}
					var algs []string
					x, err := c.Capture(ctx, func() error {
						steps := []func() error{
							func() error { return c.AllReduceTo(ctx, b.b1, b.a1, Sum) },
							func() error { return c.AllReduceTo(ctx, b.b2, b.a2, Sum) },
							func() error { return c.AllReduce(ctx, b.a3, Max) },
							func() error { return c.ReduceScatter(ctx, b.part, b.a4, Sum) },
							func() error { return c.AllGather(ctx, b.full, b.part) },
						}
						for _, f := range steps {
							if err := f(); err != nil {
								return err
							}
							algs = append(algs, c.LastAlgorithm())
						}
						return nil
					})
					if err != nil {
						return err
					}
					defer x.Close()
					if want := c.AllReduceAlgorithm(dt, Sum, b.a1.Len()); want != algs[0] {
						return fmt.Errorf("AllReduceAlgorithm says %s, the call ran %s", want, algs[0])
					}
					for _, a := range algs {
						if !strings.Contains(a, "_graph") {
							return fmt.Errorf("captured %v: %s is not a graph variant", algs, a)
						}
					}
					m := b.part.Len()
					for rep := 1; rep <= tc.replays; rep++ {
						check := rep <= 2 || rep == tc.replays
						var in [4][][]float64
						if check {
							// The ranks' streams run on their own: meet before refilling the
							// inputs, so that no rank is still busy with the last replay
							// (checked) while another starts the next.
							if err := e.r.NVSHMEM.BarrierAll(); err != nil {
								return err
							}
							for i, buf := range []*Buffer{b.a1, b.a2, b.a3, b.a4} {
								if in[i], err = e.fill(buf); err != nil {
									return err
								}
							}
						}
						if err := x.Launch(s); err != nil {
							return fmt.Errorf("replay %d: %w", rep, err)
						}
						if !check {
							continue
						}
						if err := s.Synchronize(); err != nil {
							return err
						}
						what := func(s string) string { return fmt.Sprintf("replay %d of %v: %s", rep, algs, s) }
						errs := []error{
							e.expect(what("all-reduce 1"), b.b1, func(_, i int) float64 { return reduce(Sum, dt, in[0], i) }),
							e.expect(what("all-reduce 2"), b.b2, func(_, i int) float64 { return reduce(Sum, dt, in[1], i) }),
							e.expect(what("in-place max"), b.a3, func(_, i int) float64 { return reduce(Max, dt, in[2], i) }),
							e.expect(what("reduce-scatter"), b.part, func(g, i int) float64 { return reduce(Sum, dt, in[3], g*m+i) }),
							e.expect(what("all-gather"), b.full, func(_, i int) float64 { return reduce(Sum, dt, in[3], i) }),
						}
						for _, err := range errs {
							if err != nil {
								return err
							}
						}
					}
					// Block 0 took part in every launch: 5 per replay, 2 barriers each.
					if err := deviceEpochs(c, uint32(10*tc.replays)); err != nil {
						return err
					}
					// A direct call after the replays, on the epochs they left. Every rank
					// checks its epochs and pads first: a fast rank's direct call would
					// bump the flags (multimem.red on every copy) and pads of the others
					// before they read them (seen on the emulator once ranks stopped running
					// in lockstep: 4 ranks, multicast).
					if err := e.r.NVSHMEM.BarrierAll(); err != nil {
						return err
					}
					in, err := e.fill(b.a2)
					if err != nil {
						return err
					}
					if err := c.AllReduceTo(ctx, b.b2, b.a2, Sum); err != nil {
						return err
					}
					if err := s.Synchronize(); err != nil {
						return err
					}
					if err := e.expect("direct call after the replays", b.b2, func(_, i int) float64 { return reduce(Sum, dt, in, i) }); err != nil {
						return err
					}
					return deviceEpochs(c, uint32(10*tc.replays+2))
				})
			})
		})
	}
}

// deviceEpochs checks block 0's device epoch and barrier slots on this GPU after want
// barriers: the epoch word holds want, and so does every peer's slot of block 0 in the pads
// (p2p), or the flag of block 0 holds want times the GPU count (multimem).
func deviceEpochs(c *Comm, want uint32) error {
	set, word := c.pads, kernels.EpochWordP2P
	if c.mc {
		set, word = c.flags, kernels.EpochWordMM
	}
	buf := make([]byte, 4*(word+1))
	if err := c.r.Device.CopyDtoH(buf, set.own); err != nil {
		return err
	}
	at := func(i int) uint32 { return binary.LittleEndian.Uint32(buf[4*i:]) }
	if got := at(word); got != want {
		return fmt.Errorf("GPU %d: block 0's device epoch is %d, want %d", c.rank, got, want)
	}
	if c.mc {
		if got := at(0); got != want*uint32(c.g) {
			return fmt.Errorf("GPU %d: block 0's flag is %d, want %d", c.rank, got, want*uint32(c.g))
		}
		return nil
	}
	for src := 0; src < c.g; src++ {
		if got := at(src); got != want {
			return fmt.Errorf("GPU %d: block 0's pad from GPU %d is %d, want %d", c.rank, src, got, want)
		}
	}
	return nil
}

// TestGraphLamport captures three Lamport all-reduces of different sizes (so each launch
// clears a slot its predecessor filled with another count), one of them in place, replays
// the graph and checks every result after replays 1, 2, 3 and the last, then a direct call
// on the epochs the replays left. A graph variant that took its epoch or clear count from
// the frozen arguments reads stale slots or clears the wrong elements, and fails.
func TestGraphLamport(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		gpus, replays int
		weak          bool
		seed          int64
	}{{1, 100, false, 0}, {2, 60, true, 1}, {3, 30, false, 2}, {4, 30, true, 3}} {
		t.Run(fmt.Sprintf("g%d/weak=%v", tc.gpus, tc.weak), func(t *testing.T) {
			t.Parallel()
			o := Options{MaxBlocks: 3, CaptureSafe: true, DisableMulticast: true, LamportMaxBytes: 4 << 10}
			runRanks(t, tc.gpus, false, tc.weak, tc.seed, Options{}, func(e *rankEnv) error {
				return withStream(e, o, func(c *Comm, s *jit.Stream) error {
					var bufs [4]*Buffer
					for i, n := range []int{1000, 1000, 37, 600} {
						var err error
						if bufs[i], err = c.Alloc(dsl.F32, n); err != nil {
							return err
						}
					}
					a, b, small, inPlace := bufs[0], bufs[1], bufs[2], bufs[3]
					var algs []string
					x, err := c.Capture(ctx, func() error {
						for _, f := range []func() error{
							func() error { return c.AllReduceTo(ctx, b, a, Sum) },
							func() error { return c.AllReduce(ctx, small, Max) },
							func() error { return c.AllReduce(ctx, inPlace, Sum) },
						} {
							if err := f(); err != nil {
								return err
							}
							algs = append(algs, c.LastAlgorithm())
						}
						return nil
					})
					if err != nil {
						return err
					}
					defer x.Close()
					for _, alg := range algs {
						if !strings.HasPrefix(alg, "p2p_allreduce_lamport_graph_") {
							return fmt.Errorf("captured %v: want the Lamport graph variant", algs)
						}
					}
					check := func(what string, run func() error) error {
						var in [3][][]float64
						for i, buf := range []*Buffer{a, small, inPlace} {
							var err error
							if in[i], err = e.fill(buf); err != nil {
								return err
							}
						}
						if err := run(); err != nil {
							return err
						}
						if err := s.Synchronize(); err != nil {
							return err
						}
						return errors.Join(
							e.expect(what+": out of place", b, func(_, i int) float64 { return reduce(Sum, dsl.F32, in[0], i) }),
							e.expect(what+": max", small, func(_, i int) float64 { return reduce(Max, dsl.F32, in[1], i) }),
							e.expect(what+": in place", inPlace, func(_, i int) float64 { return reduce(Sum, dsl.F32, in[2], i) }))
					}
					for rep := 1; rep <= tc.replays; rep++ {
						if rep <= 3 || rep == tc.replays {
							if err := check(fmt.Sprintf("replay %d", rep), func() error { return x.Launch(s) }); err != nil {
								return err
							}
						} else if err := x.Launch(s); err != nil {
							return err
						}
					}
					return check("direct calls after the replays", func() error {
						return errors.Join(c.AllReduceTo(ctx, b, a, Sum), c.AllReduce(ctx, small, Max), c.AllReduce(ctx, inPlace, Sum))
					})
				})
			})
		})
	}
}

// TestGraphMisuse checks the errors of Capture and of calls a capture-safe Comm cannot make.
func TestGraphMisuse(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 0, Options{}, func(e *rankEnv) error {
		if _, err := e.c.Capture(ctx, func() error { return nil }); err == nil || !strings.Contains(err.Error(), "CaptureSafe") {
			return fmt.Errorf("Capture on a default Comm: %v", err)
		}
		o := graphOpts
		o.DisableMulticast = true
		return withStream(e, o, func(c *Comm, s *jit.Stream) error {
			buf, err := c.Alloc(dsl.F32, 64)
			if err != nil {
				return err
			}
			if err := c.Broadcast(ctx, buf, buf, 0); err == nil || !strings.Contains(err.Error(), "no graph variant") {
				return fmt.Errorf("Broadcast on a capture-safe Comm: %v", err)
			}
			if _, err := c.Capture(ctx, nil); err == nil {
				return fmt.Errorf("Capture(nil) accepted")
			}
			_, err = c.Capture(ctx, func() error { return c.Barrier(ctx) })
			if err == nil || !strings.Contains(err.Error(), "p2p_barrier has no graph variant") {
				return fmt.Errorf("Capture of a Barrier: %v", err)
			}
			// The stream is usable again after the failed capture.
			x, err := c.Capture(ctx, func() error { return c.AllReduce(ctx, buf, Sum) })
			if err != nil {
				return err
			}
			return x.Close()
		})
	})
	runRanks(t, 1, false, false, 0, Options{}, func(e *rankEnv) error {
		o := graphOpts
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		c, err := New(ctx, e.r, o)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Capture(ctx, func() error { return nil }); err == nil || !strings.Contains(err.Error(), "Options.Stream") {
			return fmt.Errorf("Capture without a stream: %v", err)
		}
		return nil
	})
}

// TestGraphPush captures the push all-reduce (p2p_allreduce_push4's graph variant, and
// p2p_allreduce_push's with Options.DisablePush4), out of place and in place, on 2 to 4
// emulated GPUs, replays it and checks replays 1, 2 and the last, then direct calls on the
// epochs the replays left.
func TestGraphPush(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		gpus, replays int
		weak          bool
		general       bool // Options.DisablePush4
	}{{2, 20, false, false}, {3, 10, true, false}, {4, 10, false, false}, {3, 10, true, true}} {
		t.Run(fmt.Sprintf("g%d/weak=%v/general=%v", tc.gpus, tc.weak, tc.general), func(t *testing.T) {
			t.Parallel()
			o := Options{MaxBlocks: 3, CaptureSafe: true, DisableMulticast: true, DisableLamport: true, PushMinBytes: 64, DisablePush4: tc.general, Push4MinBytes: -1}
			want := "p2p_allreduce_push4_graph_sum"
			if tc.general {
				want = "p2p_allreduce_push_graph_sum"
			}
			runRanks(t, tc.gpus, false, tc.weak, int64(tc.gpus), Options{}, func(e *rankEnv) error {
				return withStream(e, o, func(c *Comm, s *jit.Stream) error {
					n := 24 * tc.gpus
					if got := c.AllReduceAlgorithm(dsl.F32, Sum, n); got != want {
						return fmt.Errorf("AllReduceAlgorithm: %s, want %s", got, want)
					}
					var bufs [3]*Buffer
					for i := range bufs {
						var err error
						if bufs[i], err = c.Alloc(dsl.F32, n); err != nil {
							return err
						}
					}
					a, b, inPlace := bufs[0], bufs[1], bufs[2]
					// A warm-up call of each kind keeps the part buffer's allocation and the
					// kernels' loads out of the capture.
					if err := errors.Join(c.AllReduceTo(ctx, b, a, Sum), c.AllReduce(ctx, inPlace, Sum)); err != nil {
						return err
					}
					x, err := c.Capture(ctx, func() error {
						return errors.Join(c.AllReduceTo(ctx, b, a, Sum), c.AllReduce(ctx, inPlace, Sum))
					})
					if err != nil {
						return err
					}
					defer x.Close()
					check := func(what string, run func() error) error {
						ina, err := e.fill(a)
						if err != nil {
							return err
						}
						inp, err := e.fill(inPlace)
						if err != nil {
							return err
						}
						if err := run(); err != nil {
							return err
						}
						if err := s.Synchronize(); err != nil {
							return err
						}
						return errors.Join(
							e.expect(what+": out of place", b, func(_, i int) float64 { return reduce(Sum, dsl.F32, ina, i) }),
							e.expect(what+": in place", inPlace, func(_, i int) float64 { return reduce(Sum, dsl.F32, inp, i) }))
					}
					for rep := 1; rep <= tc.replays; rep++ {
						if rep <= 2 || rep == tc.replays {
							if err := check(fmt.Sprintf("replay %d", rep), func() error { return x.Launch(s) }); err != nil {
								return err
							}
						} else if err := x.Launch(s); err != nil {
							return err
						}
					}
					return check("direct calls after the replays", func() error {
						return errors.Join(c.AllReduceTo(ctx, b, a, Sum), c.AllReduce(ctx, inPlace, Sum))
					})
				})
			})
		})
	}
}
