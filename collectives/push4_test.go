package collectives

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// TestPushVariantChoice checks which push all-reduce a Comm of 1 to 8 emulated GPUs runs:
// p2p_allreduce_push4 (and its graph variant on a CaptureSafe Comm) up to
// kernels.Push4MaxGPUs GPUs, p2p_allreduce_push from 5 on and wherever
// Options.DisablePush4 is set.
func TestPushVariantChoice(t *testing.T) {
	for g := 1; g <= kernels.CollMaxGPUs; g++ {
		for _, general := range []bool{false, true} {
			for _, graph := range []bool{false, true} {
				t.Run(fmt.Sprintf("g%d/general=%v/graph=%v", g, general, graph), func(t *testing.T) {
					t.Parallel()
					o := Options{DisableLamport: true, OneShotMaxBytes: 1, PushMinBytes: 1, DisablePush4: general, Push4MinBytes: -1, CaptureSafe: graph}
					want := string(kernels.FamilyP2PAllReducePush)
					if g <= kernels.Push4MaxGPUs && !general {
						want = string(kernels.FamilyP2PAllReducePush4)
					}
					if graph {
						want += "_graph"
					}
					runRanks(t, g, false, false, 0, o, func(e *rankEnv) error {
						for _, dt := range []dsl.Type{dsl.F32, dsl.BF16} {
							for _, op := range []Op{Sum, Max} {
								if got := e.c.AllReduceAlgorithm(dt, op, 1<<20); got != want+"_"+kernels.OpName(op) {
									return fmt.Errorf("%s %s: AllReduceAlgorithm %q, want %q", dt, op, got, want+"_"+kernels.OpName(op))
								}
							}
						}
						return nil
					})
				})
			}
		}
	}
}

// TestPushBlocks checks the push all-reduce's grid: the general kernel's is blocks' (up to
// MaxBlocks), p2p_allreduce_push4's up to twice MaxBlocks and at most CollMaxBlocks; both
// take one block per CollThreads vectors below that, and at most the blocks the device holds
// at once (108 on an A100 for the general kernel's one block an SM).
func TestPushBlocks(t *testing.T) {
	for _, tc := range []struct {
		maxBlocks, vectors, resident int
		fam                          kernels.Family
		want                         int
	}{
		{128, 1 << 20, 264, kernels.FamilyP2PAllReducePush, 128},
		{128, 1 << 20, 264, kernels.FamilyP2PAllReducePush4, 256},
		{200, 1 << 20, 528, kernels.FamilyP2PAllReducePush4, kernels.CollMaxBlocks},
		{3, 1 << 20, 264, kernels.FamilyP2PAllReducePush4, 6},
		{128, 300, 264, kernels.FamilyP2PAllReducePush, 2},
		{128, 300, 264, kernels.FamilyP2PAllReducePush4, 2},
		{128, 0, 264, kernels.FamilyP2PAllReducePush4, 1},
		{128, 200 * kernels.CollThreads, 264, kernels.FamilyP2PAllReducePush4, 200},
		{128, 1 << 20, 108, kernels.FamilyP2PAllReducePush, 108},
		{128, 1 << 20, 228, kernels.FamilyP2PAllReducePush4, 228},
		{128, 1 << 20, 0, kernels.FamilyP2PAllReducePush, 1},
	} {
		if got := pushGrid(tc.fam, tc.vectors, tc.maxBlocks, tc.resident); got != tc.want {
			t.Errorf("MaxBlocks %d, %d vectors, %d resident, %s: %d blocks, want %d", tc.maxBlocks, tc.vectors, tc.resident, tc.fam, got, tc.want)
		}
	}
}

// TestPush4Grid runs p2p_allreduce_push4 on 4 emulated GPUs at a size whose slices need
// more than twice MaxBlocks blocks, so that its grid is twice the general kernel's (6
// blocks against 3), out of place then in place, and checks the grids launched and the
// sums; the general kernel (Options.DisablePush4) runs the same calls on 3 blocks.
func TestPush4Grid(t *testing.T) {
	ctx := context.Background()
	for _, general := range []bool{false, true} {
		t.Run(fmt.Sprintf("general=%v", general), func(t *testing.T) {
			t.Parallel()
			const gpus = 4
			o := Options{MaxBlocks: 3, DisableLamport: true, OneShotMaxBytes: 1, PushMinBytes: 1, DisablePush4: general, Push4MinBytes: -1}
			wantGrid := 6
			if general {
				wantGrid = 3
			}
			runRanks(t, gpus, false, true, 5, o, func(e *rankEnv) error {
				var grids []int
				launchFn := e.c.launchFn
				e.c.launchFn = func(f *jit.Function, cfg jit.LaunchConfig, args any) error {
					grids = append(grids, cfg.Grid.X)
					return launchFn(f, cfg, args)
				}
				dt := dsl.BF16
				vec := 16 / dt.Bytes()
				n := gpus*vec*(6*kernels.CollThreads+3) + 5
				a, err := e.c.Alloc(dt, n)
				if err != nil {
					return err
				}
				b, err := e.c.Alloc(dt, n)
				if err != nil {
					return err
				}
				for call, dst := range []*Buffer{b, a} {
					in, err := e.fill(a)
					if err != nil {
						return err
					}
					if err := e.c.AllReduceTo(ctx, dst, a, Sum); err != nil {
						return err
					}
					if err := e.expect(fmt.Sprintf("call %d", call), dst, func(_, i int) float64 { return reduce(Sum, dt, in, i) }); err != nil {
						return err
					}
				}
				if len(grids) != 2 {
					return fmt.Errorf("%d launches (grids %v), want 2", len(grids), grids)
				}
				for _, g := range grids {
					if g != wantGrid {
						return fmt.Errorf("%s: grids %v, want %d blocks each", e.c.LastAlgorithm(), grids, wantGrid)
					}
				}
				return errors.Join(a.Free(), b.Free())
			})
		})
	}
}

// TestPush4Default: with Options.Push4MinBytes left zero a 4-GPU Comm runs
// p2p_allreduce_push4 for 16-bit types from DefaultPush4MinBytes and the general kernel for
// smaller sizes and for 32-bit types (the measurements in DefaultPush4MinBytes' comment).
func TestPush4Default(t *testing.T) {
	o := Options{DisableLamport: true, OneShotMaxBytes: 1, PushMinBytes: 1}
	runRanks(t, 4, false, false, 0, o, func(e *rankEnv) error {
		for _, c := range []struct {
			dt    dsl.Type
			bytes int
			want  kernels.Family
		}{
			{dsl.BF16, DefaultPush4MinBytes, kernels.FamilyP2PAllReducePush4},
			{dsl.F16, 256 << 20, kernels.FamilyP2PAllReducePush4},
			{dsl.BF16, DefaultPush4MinBytes - 2, kernels.FamilyP2PAllReducePush},
			{dsl.F32, 256 << 20, kernels.FamilyP2PAllReducePush},
		} {
			n := c.bytes / c.dt.Bytes()
			if got, want := e.c.AllReduceAlgorithm(c.dt, Sum, n), string(c.want)+"_"+kernels.OpName(Sum); got != want {
				return fmt.Errorf("%d bytes of %s: %s, want %s", c.bytes, c.dt, got, want)
			}
		}
		return nil
	})
}

// TestPushGridResident: the push all-reduce's grid is capped at the blocks its device holds
// at once (its blocks wait on each other, so a larger grid is refused by the co-resident
// launch): on the emulator's 16 SMs of 8 such blocks, p2p_allreduce_push4's twice MaxBlocks
// (200 here) becomes 128, while the general kernel keeps MaxBlocks' 100. The launches are
// recorded, not run (TestPush4Grid checks the sums).
func TestPushGridResident(t *testing.T) {
	ctx := context.Background()
	for _, general := range []bool{false, true} {
		t.Run(fmt.Sprintf("general=%v", general), func(t *testing.T) {
			t.Parallel()
			o := Options{MaxBlocks: 100, DisableLamport: true, OneShotMaxBytes: 1, PushMinBytes: 1, DisablePush4: general, Push4MinBytes: -1}
			runRanks(t, 2, false, false, 0, o, func(e *rankEnv) error {
				var grids []int
				var resident int
				e.c.launchFn = func(f *jit.Function, cfg jit.LaunchConfig, args any) error {
					n, err := f.ResidentBlocks(cfg.Block, cfg.SharedMem)
					if err != nil {
						return err
					}
					resident = n
					grids = append(grids, cfg.Grid.X)
					return nil
				}
				dt := dsl.BF16
				n := 2 * 300 * kernels.CollThreads * (16 / dt.Bytes())
				a, err := e.c.Alloc(dt, n)
				if err != nil {
					return err
				}
				if err := e.c.AllReduce(ctx, a, Sum); err != nil {
					return err
				}
				want := 100
				if !general {
					want = min(200, resident)
				}
				if resident != 128 || len(grids) != 1 || grids[0] != want {
					return fmt.Errorf("%s: grids %v on a device holding %d blocks, want one of %d on 128", e.c.LastAlgorithm(), grids, resident, want)
				}
				return a.Free()
			})
		})
	}
}
