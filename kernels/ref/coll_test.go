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

// collRuns are the multi-GPU configurations every collective kernel and dtype runs in:
// GPU counts from 1 to 8, sizes that are no multiple of the vector width or the GPU count,
// the strict memory model and the weak one under several random schedules.
var collRuns = []struct {
	gpus, n int
	seed    int64
	weak    bool
}{
	{1, 13, 0, false},
	{2, 1001, 0, false},
	{3, 37, 1, true},
	{4, 1031, 2, true},
	{5, 7, 3, false},
	{8, 130, 4, true},
	{8, 1, 5, true},
}

func isColl(name string) bool {
	return strings.HasPrefix(name, "p2p_") || strings.HasPrefix(name, "mm_") ||
		strings.HasPrefix(name, "nvshmem_reducescatter_ring_") || name == "nvshmem_allgather_ring"
}

// TestCollectivesOnTheEmulator runs every collective kernel and dtype on 1..8 simulated
// GPUs, each harness launching collLaunches times in a row without resets.
func TestCollectivesOnTheEmulator(t *testing.T) {
	for _, s := range kernels.All() {
		if !isColl(s.Name) {
			continue
		}
		target := ptx.SM90
		for _, dt := range s.DTypes {
			for ci, c := range collRuns {
				// min and max share the sum kernels' code: fewer configurations.
				if (strings.HasSuffix(s.Name, "_min") || strings.HasSuffix(s.Name, "_max")) && ci%3 != 2 {
					continue
				}
				mode := "strict"
				if c.weak {
					mode = fmt.Sprintf("weak%d", c.seed)
				}
				t.Run(fmt.Sprintf("%s/%s/g%d/n%d/%s", s.Name, dt, c.gpus, c.n, mode), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Target: target, Size: c.n, Ranks: c.gpus, Seed: c.seed, Weak: c.weak})
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

// TestWeakModeCatchesMissingRelease is a test of the tests: a reduce-scatter whose
// barriers signal with a relaxed store instead of a release must fail in the weak-memory
// mode (its peer stores can land after the signal, and the local reduction then reads stale
// scratch), while the correct kernel passes the same runs.
func TestWeakModeCatchesMissingRelease(t *testing.T) {
	const entry = "p2p_reducescatter_sum_f32"
	build := func(f func(*dsl.Kernel, dsl.Type, dsl.ReduceOp)) *ptx.Module {
		k := dsl.New(entry, dsl.WithTarget(ptx.SM90))
		f(k, dsl.F32, dsl.Sum)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	good, bad := build(kernels.P2PReduceScatter), build(kernels.P2PReduceScatterUnordered)
	failures := 0
	for seed := int64(1); seed <= 4; seed++ {
		for _, m := range []*ptx.Module{good, bad} {
			sys, err := emu.New(4)
			if err != nil {
				t.Fatal(err)
			}
			r := &run{p: Problem{DType: dsl.F32, Ranks: 4, Seed: seed, Weak: true}, sys: sys, rng: newRng(seed)}
			err = newColl(r).reduceScatter(301, dsl.Sum, m, entry)
			if m == good && err != nil {
				t.Fatalf("seed %d: the correct reduce-scatter failed: %v", seed, err)
			}
			if m == bad && err != nil {
				failures++
				t.Logf("seed %d: the release-less reduce-scatter failed, as it should: %.200s", seed, err)
			}
		}
	}
	if failures == 0 {
		t.Error("the reduce-scatter without release passed every weak-mode run: the weak mode does not catch a missing release")
	}
}

// TestWeakModeCatchesMissingMultimemRelease is the same test of the tests for multimem: a
// push all-reduce whose barriers use a relaxed multimem.red (and no fence.proxy.alias) must
// fail in the weak-memory mode, while the correct kernel passes the same runs.
func TestWeakModeCatchesMissingMultimemRelease(t *testing.T) {
	const entry = "mm_allreduce_push_sum_f32"
	build := func(f func(*dsl.Kernel, dsl.Type, dsl.ReduceOp)) *ptx.Module {
		k := dsl.New(entry, dsl.WithTarget(ptx.SM90))
		f(k, dsl.F32, dsl.Sum)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	good, bad := build(kernels.MMAllReducePush), build(kernels.MMAllReducePushUnordered)
	failures := 0
	for seed := int64(1); seed <= 4; seed++ {
		for _, m := range []*ptx.Module{good, bad} {
			sys, err := emu.New(4)
			if err != nil {
				t.Fatal(err)
			}
			r := &run{p: Problem{DType: dsl.F32, Ranks: 4, Seed: seed, Weak: true}, sys: sys, rng: newRng(seed)}
			err = newColl(r).mmPush(301, dsl.Sum, m, entry)
			if m == good && err != nil {
				t.Fatalf("seed %d: the correct push all-reduce failed: %v", seed, err)
			}
			if m == bad && err != nil {
				failures++
				t.Logf("seed %d: the release-less push all-reduce failed, as it should: %.200s", seed, err)
			}
		}
	}
	if failures == 0 {
		t.Error("the push all-reduce without release passed every weak-mode run: the weak mode does not catch a missing multimem release")
	}
}
