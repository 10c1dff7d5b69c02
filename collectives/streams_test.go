package collectives

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand"
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

// backToBack calls run k times without synchronizing, each on buffers of its own filled
// before the first call, then checks every result: the ranks' streams run on their own, so
// a fast rank may be several calls ahead of a slow one.
func backToBack(e *rankEnv, k int, alloc func() ([]*Buffer, error), run func(bufs []*Buffer) error, check func(bufs []*Buffer, in [][][]float64) error) error {
	all := make([][]*Buffer, k)
	ins := make([][][][]float64, k)
	for call := range all {
		bufs, err := alloc()
		if err != nil {
			return err
		}
		all[call] = bufs
		in, err := e.fill(bufs[0])
		if err != nil {
			return err
		}
		ins[call] = [][][]float64{in}
	}
	for call := range all {
		if err := run(all[call]); err != nil {
			return fmt.Errorf("call %d: %w", call, err)
		}
	}
	for call := range all {
		if err := check(all[call], ins[call]); err != nil {
			return fmt.Errorf("call %d of %d back to back: %w", call, k, err)
		}
	}
	return nil
}

// TestLamportBackToBack is the regression test of the 4-GPU back-to-back Lamport hang
// (issue "COLLECTIVES ON GPUS", fixed by allocFilled's settle): 2, 3 and 4 ranks call
// AllReduce (Lamport: small f32, no multicast) back to back without synchronizing, under
// several seeds, and check every result against the Go reference. Without the settle, a
// fast rank's first kernel pushes into a slow rank's Lamport buffer before that rank's
// -0.0 fill, which wipes it, and the slow rank's kernel spins forever: the emulator reports
// the deadlock (or a wrong value) instead of passing.
func TestLamportBackToBack(t *testing.T) {
	ctx := context.Background()
	for _, gpus := range []int{2, 3, 4} {
		for _, seed := range []int64{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("g%d/seed%d", gpus, seed), func(t *testing.T) {
				err := runStreams(gpus, 1, false, emu.Options{Seed: seed, Weak: seed%2 == 0, StepBudget: 1 << 21}, testOpts, func(e *rankEnv) error {
					const n = 40 // 160 bytes: Lamport
					return backToBack(e, 4, func() ([]*Buffer, error) {
						a, err := e.c.Alloc(dsl.F32, n)
						if err != nil {
							return nil, err
						}
						b, err := e.c.Alloc(dsl.F32, n)
						return []*Buffer{a, b}, err
					}, func(bufs []*Buffer) error {
						if err := e.c.AllReduceTo(ctx, bufs[1], bufs[0], Sum); err != nil {
							return err
						}
						if alg := e.c.LastAlgorithm(); alg != "p2p_allreduce_lamport_sum" {
							return fmt.Errorf("algorithm %s, want the Lamport all-reduce", alg)
						}
						return nil
					}, func(bufs []*Buffer, in [][][]float64) error {
						return e.expect("lamport", bufs[1], func(_, i int) float64 { return reduce(Sum, dsl.F32, in[0], i) })
					})
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
