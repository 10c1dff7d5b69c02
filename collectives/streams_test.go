package collectives

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/jit"
)

// runStreams is runNodesErr with emu options of its own (a step budget, so that a hang is
// reported quickly).
func runStreams(gpus, nodes int, mc bool, eo emu.Options, o Options, f func(e *rankEnv) error) error {
	ro := jit.RanksOptions{Backend: jit.Emulator, World: gpus, Nodes: nodes, NVSHMEM: true, Open: []jit.Option{jit.WithEmuOptions(eo)}}
	return jit.RunRanks(ro, func(r *jit.Rank) error {
		var logs bytes.Buffer
		o := o
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.DisableMulticast = o.DisableMulticast || !mc
		c, err := New(context.Background(), r, o)
		if err != nil {
			return err
		}
		ferr := f(&rankEnv{r: r, c: c, log: &logs, rng: rand.New(rand.NewSource(eo.Seed + 7))})
		if err := c.Close(); ferr == nil {
			ferr = err
		}
		return ferr
	})
}

// b2bCall is one collective call of a back-to-back test: its inputs are filled when it is
// made; run makes the call; check compares its result with the Go reference.
type b2bCall struct{ run, check func() error }

// runB2B makes k calls with mk (every input filled first), runs them back to back without
// synchronizing, then checks every result: the ranks' streams run on their own, so a fast
// rank may be several calls ahead of a slow one. seen collects the kernels that ran.
func runB2B(e *rankEnv, what string, k int, seen map[string]bool, mk func() (b2bCall, error)) error {
	calls := make([]b2bCall, k)
	for i := range calls {
		c, err := mk()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		calls[i] = c
	}
	for i, c := range calls {
		if err := c.run(); err != nil {
			return fmt.Errorf("%s call %d: %w", what, i, err)
		}
		if seen != nil {
			seen[e.c.LastAlgorithm()] = true
		}
	}
	for i, c := range calls {
		if err := c.check(); err != nil {
			return fmt.Errorf("%s call %d of %d back to back: %w", what, i, k, err)
		}
	}
	return nil
}

// b2bAllReduce makes AllReduceTo calls of n elements of dt by op.
func b2bAllReduce(ctx context.Context, e *rankEnv, dt dsl.Type, n int, op Op) func() (b2bCall, error) {
	return func() (b2bCall, error) {
		a, err := e.c.Alloc(dt, n)
		if err != nil {
			return b2bCall{}, err
		}
		b, err := e.c.Alloc(dt, n)
		if err != nil {
			return b2bCall{}, err
		}
		in, err := e.fill(a)
		if err != nil {
			return b2bCall{}, err
		}
		return b2bCall{run: func() error { return e.c.AllReduceTo(ctx, b, a, op) }, check: func() error {
			return e.expect(fmt.Sprintf("AllReduce of %d %s", n, dt), b, func(_, i int) float64 { return reduce(op, dt, in, i) })
		}}, nil
	}
}

// b2bReduceScatter makes ReduceScatter calls (m elements per GPU).
func b2bReduceScatter(ctx context.Context, e *rankEnv, dt dsl.Type, m int, op Op) func() (b2bCall, error) {
	return func() (b2bCall, error) {
		src, err := e.c.Alloc(dt, m*e.c.NumGPUs())
		if err != nil {
			return b2bCall{}, err
		}
		dst, err := e.c.Alloc(dt, m)
		if err != nil {
			return b2bCall{}, err
		}
		in, err := e.fill(src)
		if err != nil {
			return b2bCall{}, err
		}
		return b2bCall{run: func() error { return e.c.ReduceScatter(ctx, dst, src, op) }, check: func() error {
			return e.expect("ReduceScatter", dst, func(g, i int) float64 { return reduce(op, dt, in, g*m+i) })
		}}, nil
	}
}

// b2bAllGather makes AllGather calls (n elements per GPU).
func b2bAllGather(ctx context.Context, e *rankEnv, dt dsl.Type, n int) func() (b2bCall, error) {
	return func() (b2bCall, error) {
		src, err := e.c.Alloc(dt, n)
		if err != nil {
			return b2bCall{}, err
		}
		dst, err := e.c.Alloc(dt, n*e.c.NumGPUs())
		if err != nil {
			return b2bCall{}, err
		}
		in, err := e.fill(src)
		if err != nil {
			return b2bCall{}, err
		}
		return b2bCall{run: func() error { return e.c.AllGather(ctx, dst, src) }, check: func() error {
			return e.expect("AllGather", dst, func(_, i int) float64 { return round(dt, in[i/n][i%n]) })
		}}, nil
	}
}

// b2bBroadcast makes Broadcast calls from root.
func b2bBroadcast(ctx context.Context, e *rankEnv, dt dsl.Type, n, root int) func() (b2bCall, error) {
	return func() (b2bCall, error) {
		src, err := e.c.Alloc(dt, n)
		if err != nil {
			return b2bCall{}, err
		}
		dst, err := e.c.Alloc(dt, n)
		if err != nil {
			return b2bCall{}, err
		}
		in, err := e.fill(src)
		if err != nil {
			return b2bCall{}, err
		}
		return b2bCall{run: func() error { return e.c.Broadcast(ctx, dst, src, root) }, check: func() error {
			return e.expect("Broadcast", dst, func(_, i int) float64 { return round(dt, in[root][i]) })
		}}, nil
	}
}

// TestLamportBackToBack is the regression test of the 4-GPU back-to-back Lamport hang
// (issue "COLLECTIVES ON GPUS", fixed by allocFilled's settle): 2, 3 and 4 ranks call
// AllReduce (Lamport: small f32, no multicast) back to back without synchronizing, under
// several seeds, and check every result against the Go reference. Without the settle, a
// fast rank's first kernel pushes into a slow rank's Lamport buffer before that rank's
// -0.0 fill, which wipes it, and the slow rank's kernel spins forever: the emulator reports
// the deadlock (or a wrong value) instead of passing. Checked on 2026-11-27 with
// collectives/comm.go and ops.go of febd36c^ put back for the run: 10 of the 12 subtests
// failed ("rank 3 waits for kernels that can never finish (deadlock): ... no progress in
// kernel p2p_allreduce_lamport_sum_f32 ... 4 kernel(s) in flight"); with the fix all pass.
// Making allocFilled skip settle alone does not fail it: the fill now happens before the
// peer table's NVSHMEM Malloc, itself a rendezvous of every rank.
func TestLamportBackToBack(t *testing.T) {
	ctx := context.Background()
	for _, gpus := range []int{2, 3, 4} {
		for _, seed := range []int64{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("g%d/seed%d", gpus, seed), func(t *testing.T) {
				err := runStreams(gpus, 1, false, emu.Options{Seed: seed, Weak: seed%2 == 0, StepBudget: 1 << 21}, testOpts, func(e *rankEnv) error {
					const n = 40 // 160 bytes: Lamport
					seen := map[string]bool{}
					if err := runB2B(e, "Lamport AllReduce", 4, seen, b2bAllReduce(ctx, e, dsl.F32, n, Sum)); err != nil {
						return err
					}
					if !seen["p2p_allreduce_lamport_sum"] || len(seen) != 1 {
						return fmt.Errorf("ran %v, want the Lamport all-reduce", seen)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestCollectivesBackToBack calls every library collective three times back to back
// without a host synchronize, each call on buffers of its own, at 2 to 8 emulated ranks,
// with and without multicast, under two seeds, and checks every result: all-reduce
// (Lamport, one-shot, two-shot, push; multimem one-shot and two-shot), reduce-scatter,
// all-gather, broadcast, the hierarchical kernels on 2 nodes of 2, and the fused matmuls
// (AllGatherMatmul, MatmulReduceScatter, MatmulAllReduce) for sm_80 and sm_90a.
func TestCollectivesBackToBack(t *testing.T) {
	ctx := context.Background()
	const k = 3
	flat := func(e *rankEnv, seen map[string]bool) error {
		dt := dsl.F32
		for _, c := range []struct {
			what string
			mk   func() (b2bCall, error)
		}{
			{"AllReduce small", b2bAllReduce(ctx, e, dt, 40, Sum)},   // Lamport without multicast
			{"AllReduce mid", b2bAllReduce(ctx, e, dt, 200, Sum)},    // one-shot
			{"AllReduce large", b2bAllReduce(ctx, e, dt, 1001, Sum)}, // two-shot
			{"AllReduce max", b2bAllReduce(ctx, e, dt, 200, Max)},    // push with multicast (no ld_reduce max.f32)
			{"AllReduce bf16", b2bAllReduce(ctx, e, dsl.BF16, 301, Sum)},
			{"ReduceScatter", b2bReduceScatter(ctx, e, dt, 37, Sum)},
			{"AllGather", b2bAllGather(ctx, e, dt, 37)},
			{"Broadcast", b2bBroadcast(ctx, e, dt, 53, e.c.NumGPUs()-1)},
		} {
			if err := runB2B(e, c.what, k, seen, c.mk); err != nil {
				return err
			}
		}
		return nil
	}
	type tc struct {
		gpus, nodes int
		mc          bool
		o           Options
		body        func(e *rankEnv, seen map[string]bool) error
		want        []string // kernels that must have run (prefixes)
	}
	fused := func(rows, n, kk int, out dsl.Type) func(e *rankEnv, seen map[string]bool) error {
		return func(e *rankEnv, seen map[string]bool) error {
			g := e.c.NumGPUs()
			shape := MatmulShape{M: g * rows, N: n, K: kk}
			for _, c := range []struct {
				what     string
				na, nout int
				prep     func(bufs [3]*Buffer) (b2bCall, error)
			}{
				{"AllGatherMatmul", shape.M / g * shape.K, shape.M * shape.N, func(b [3]*Buffer) (b2bCall, error) { return e.prepAG(ctx, b, shape, out) }},
				{"MatmulReduceScatter", shape.M * shape.K, shape.M / g * shape.N, func(b [3]*Buffer) (b2bCall, error) { return e.prepRS(ctx, b, shape, out, false) }},
				{"MatmulAllReduce", shape.M * shape.K, shape.M * shape.N, func(b [3]*Buffer) (b2bCall, error) { return e.prepRS(ctx, b, shape, out, true) }},
			} {
				err := runB2B(e, c.what, k, seen, func() (b2bCall, error) {
					bufs, err := e.allocAll(dsl.BF16, c.na, shape.K*shape.N, c.nout, out)
					if err != nil {
						return b2bCall{}, err
					}
					return c.prep(bufs)
				})
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	hier := func(e *rankEnv, seen map[string]bool) error {
		for _, c := range []struct {
			what string
			mk   func() (b2bCall, error)
		}{
			{"AllReduce", b2bAllReduce(ctx, e, dsl.F32, 301, Sum)},
			{"ReduceScatter", b2bReduceScatter(ctx, e, dsl.F32, 37, Sum)},
			{"AllGather", b2bAllGather(ctx, e, dsl.F32, 37)},
		} {
			if err := runB2B(e, c.what, k, seen, c.mk); err != nil {
				return err
			}
		}
		return nil
	}
	cases := []tc{
		{2, 1, false, testOpts, flat, []string{"p2p_allreduce_lamport", "p2p_allreduce_1shot", "p2p_allreduce_2shot", "p2p_reducescatter", "p2p_allgather", "p2p_broadcast"}},
		{3, 1, true, testOpts, flat, []string{"mm_allreduce_1shot", "mm_allreduce_2shot", "mm_allreduce_push", "mm_reducescatter", "mm_allgather", "mm_broadcast"}},
		{4, 1, false, testOpts, flat, []string{"p2p_allreduce_lamport", "p2p_allreduce_2shot"}},
		{8, 1, true, testOpts, flat, []string{"mm_allreduce_1shot", "mm_allreduce_2shot"}},
		{4, 2, false, testOpts, hier, []string{"hier_allreduce", "hier_reducescatter", "hier_allgather"}},
		{2, 1, false, fusedOpts, fused(36, 40, 24, dsl.F32), []string{"ag_gemm", "gemm_rs", "gemm_ar"}},
		{4, 1, false, fusedOpts, fused(13, 37, 19, dsl.BF16), []string{"ag_gemm", "gemm_rs", "gemm_ar"}},
		{2, 1, true, fusedSM90Opts, fused(72, 40, 24, dsl.F32), []string{"ag_gemm_sm90", "gemm_rs_sm90", "gemm_ar_mc_sm90"}},
		{3, 1, false, fusedSM90Opts, fused(72, 40, 24, dsl.F32), []string{"ag_gemm_sm90", "gemm_rs_sm90", "gemm_ar_sm90"}},
	}
	for i, c := range cases {
		for _, seed := range []int64{int64(2*i + 1), int64(2*i + 2)} {
			t.Run(fmt.Sprintf("case%d/g%dx%d/mc=%v/seed%d", i, c.nodes, c.gpus/c.nodes, c.mc, seed), func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				seen := map[string]bool{}
				err := runStreams(c.gpus, c.nodes, c.mc, emu.Options{Seed: seed, Weak: seed%2 == 0}, c.o, func(e *rankEnv) error {
					mine := map[string]bool{}
					if err := c.body(e, mine); err != nil {
						return err
					}
					mu.Lock()
					for a := range mine {
						seen[a] = true
					}
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range c.want {
					found := false
					for a := range seen {
						found = found || strings.HasPrefix(a, w)
					}
					if !found {
						t.Errorf("no %s* kernel ran (ran %v)", w, seen)
					}
				}
			})
		}
	}
}
