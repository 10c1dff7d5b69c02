package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// hierRuns are the topologies (nodes x GPUs per node) and sizes the hierarchical kernels
// run at: sizes that are no multiple of the vector width or the GPU count, one node and
// one GPU per node as the edge cases, strict and weak memory, pad epochs across the u32 wrap. The min and max variants
// share the sum kernels' code and run where minMax is set.
var hierRuns = []struct {
	nodes, local, n int
	seed            int64
	weak, minMax    bool
	epoch           uint32 // the pads' first epoch: 0xfffffffe crosses the u32 wrap
}{
	{2, 2, 37, 1, true, true, 0xfffffffe},
	{2, 4, 1001, 0, false, false, 0},
	{3, 2, 29, 2, true, true, 0},
	{4, 2, 13, 3, false, true, 0},
	{4, 2, 130, 4, true, false, 0},
	{1, 4, 45, 5, true, false, 0},
	{3, 1, 7, 6, false, false, 0},
}

// TestHierOnTheEmulator runs every hierarchical kernel and dtype over hierRuns, each
// harness launching collLaunches times in a row (out of place, then in place for the
// all-reduce) without resets.
func TestHierOnTheEmulator(t *testing.T) {
	for _, s := range kernels.All() {
		if !strings.HasPrefix(s.Name, "hier_") {
			continue
		}
		for _, dt := range s.DTypes {
			for _, c := range hierRuns {
				if (strings.HasSuffix(s.Name, "_min") || strings.HasSuffix(s.Name, "_max")) && !c.minMax {
					continue
				}
				mode := "strict"
				if c.weak {
					mode = fmt.Sprintf("weak%d", c.seed)
				}
				t.Run(fmt.Sprintf("%s/%s/%dx%d/n%d/%s", s.Name, dt, c.nodes, c.local, c.n, mode), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Size: c.n, Ranks: c.nodes * c.local, Nodes: c.nodes, Seed: c.seed, Weak: c.weak, Epoch: c.epoch})
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}

// TestNetworkCatchesMissingRailWait is a test of the tests: an all-gather that reads the
// other nodes' parts without waiting for their signals must fail on 2 emulated nodes (their
// puts arrive late), while the correct kernel passes the same runs.
func TestNetworkCatchesMissingRailWait(t *testing.T) {
	const entry = "hier_allgather_f32"
	build := func(f func(*dsl.Kernel, dsl.Type)) *ptx.Module {
		k := dsl.New(entry, dsl.WithTarget(ptx.SM90))
		f(k, dsl.F32)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	good, bad := build(kernels.HierAllGather), build(kernels.HierAllGatherUnwaited)
	for seed := int64(0); seed <= 2; seed++ {
		for _, m := range []*ptx.Module{good, bad} {
			sys, err := emu.New(4)
			if err != nil {
				t.Fatal(err)
			}
			if err := sys.SetNodes(2); err != nil {
				t.Fatal(err)
			}
			r := &run{p: Problem{DType: dsl.F32, Ranks: 4, Nodes: 2, Size: 301, Seed: seed, Weak: seed != 0}, sys: sys, rng: newRng(seed)}
			err = hierAllGatherMod(r, m, entry)
			switch {
			case m == good && err != nil:
				t.Fatalf("seed %d: the correct all-gather failed: %v", seed, err)
			case m == bad && (err == nil || !strings.Contains(err.Error(), "out")):
				t.Fatalf("seed %d: the all-gather without its rail wait: error %v, want wrong values in out", seed, err)
			}
			if m == bad {
				t.Logf("seed %d: %v", seed, err)
			}
		}
	}
}
