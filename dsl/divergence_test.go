package dsl_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestBarrierInDivergentIf: SyncThreads and ClusterSync inside a k.If (or its Else) whose
// condition derives from the thread index are Build errors at the barrier's line naming
// the If's; barriers under uniform conditions, after the If, and named barriers of a
// branch's threads still build. Before: all of them built, and only the emulator's
// deadlock report (or a hung GPU) said so.
func TestBarrierInDivergentIf(t *testing.T) {
	refused := map[string]func(k *dsl.Kernel) int{
		"tid.x < 32": func(k *dsl.Kernel) int {
			var line int
			k.If(k.ThreadIdx(dsl.X).Lt(32), func() { line = at(func() { k.SyncThreads() }) })
			return line
		},
		"lane id": func(k *dsl.Kernel) int {
			var line int
			k.If(k.LaneID().Eq(0), func() { line = at(func() { k.SyncThreads() }) })
			return line
		},
		"warp id, derived": func(k *dsl.Kernel) int {
			n := k.Param("n", dsl.U32)
			var line int
			k.If(k.WarpID().Mul(2).Add(1).Lt(n), func() { line = at(func() { k.SyncThreads() }) })
			return line
		},
		"tid.y": func(k *dsl.Kernel) int {
			var line int
			k.If(k.ThreadIdx(dsl.Y).Eq(0), func() { line = at(func() { k.SyncThreads() }) })
			return line
		},
		"else branch": func(k *dsl.Kernel) int {
			var line int
			k.If(k.ThreadIdx(dsl.X).Eq(0), func() {}).Else(func() { line = at(func() { k.SyncThreads() }) })
			return line
		},
		"nested under a uniform If": func(k *dsl.Kernel) int {
			n := k.Param("n", dsl.U32)
			var line int
			k.If(k.ThreadIdx(dsl.X).Lt(n), func() {
				k.If(n.Gt(3), func() { line = at(func() { k.SyncThreads() }) })
			})
			return line
		},
		"loaded at the thread's address": func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			var line int
			k.If(k.Load(p.At(k.ThreadIdx(dsl.X))).Eq(0), func() { line = at(func() { k.SyncThreads() }) })
			return line
		},
		"ClusterSync": func(k *dsl.Kernel) int {
			var line int
			k.If(k.ThreadIdx(dsl.X).Eq(0), func() { line = at(func() { k.ClusterSync() }) })
			return line
		},
	}
	for name, f := range refused {
		t.Run(name, func(t *testing.T) {
			k := dsl.New("k", dsl.WithTarget("sm_90a"))
			line := f(k)
			_, err := k.Build()
			if err == nil || !strings.Contains(err.Error(), "depends on the thread index") ||
				!strings.Contains(err.Error(), "divergence_test.go:"+strconv.Itoa(line)+":") {
				t.Fatalf("Build = %v; want the barrier at line %d refused inside the If on the thread index", err, line)
			}
		})
	}
	accepted := map[string]func(k *dsl.Kernel){
		"block index": func(k *dsl.Kernel) { k.If(k.BlockIdx(dsl.X).Eq(0), k.SyncThreads) },
		"parameter":   func(k *dsl.Kernel) { k.If(k.Param("n", dsl.U32).Gt(2), k.SyncThreads) },
		"barrier after the If": func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.U32)
			k.If(k.ThreadIdx(dsl.X).Eq(0), func() { k.Store(p, k.Const(dsl.U32, 1)) })
			k.SyncThreads()
			k.If(k.Load(p).Eq(1), k.SyncThreads) // a value read at a uniform address
		},
		"named barrier of the branch's warps": func(k *dsl.Kernel) {
			k.If(k.WarpID().Lt(4), k.NamedBarrierFor("consumers", 128).Sync)
		},
		"loop with a uniform bound": func(k *dsl.Kernel) {
			k.For(0, k.Param("n", dsl.U32), 1, func(dsl.Value) { k.SyncThreads() })
		},
	}
	for name, f := range accepted {
		k := dsl.New("k", dsl.WithTarget("sm_90a"))
		f(k)
		if _, err := k.Build(); err != nil {
			t.Errorf("%s: Build = %v; want it accepted", name, err)
		}
	}
}

// TestWarpCollectiveInLaneDependentIf: shuffles, votes, WarpReduce, SyncWarp and ElectOne
// (full member masks) inside a k.If whose condition differs between the lanes of a warp are
// Build errors at the collective's line naming the If's; under warp-uniform conditions (a
// warp or warpgroup role, the warp index, a block index, a broadcast) they still build.
// Before: all of them built, and only the emulator (or a GPU's undefined result) said so.
func TestWarpCollectiveInLaneDependentIf(t *testing.T) {
	shfl := func(k *dsl.Kernel) int { return at(func() { k.ShuffleXor(k.Const(dsl.F32, 1), 1) }) }
	refused := map[string]struct {
		cond func(k *dsl.Kernel) dsl.Value
		coll func(k *dsl.Kernel) int
	}{
		"shuffle under lane < 16": {func(k *dsl.Kernel) dsl.Value { return k.LaneID().Lt(16) }, shfl},
		"shuffle under tid == 0":  {func(k *dsl.Kernel) dsl.Value { return k.ThreadIdx(dsl.X).Eq(0) }, shfl},
		"vote under odd tid": {func(k *dsl.Kernel) dsl.Value { return k.ThreadIdx(dsl.X).And(1).Eq(1) },
			func(k *dsl.Kernel) int { return at(func() { k.VoteAny(k.Const(dsl.Bool, true)) }) }},
		"ballot under a thread's load": {func(k *dsl.Kernel) dsl.Value {
			p := k.PtrParam("p", dsl.U32)
			return k.Load(p.At(k.ThreadIdx(dsl.X))).Gt(3)
		}, func(k *dsl.Kernel) int { return at(func() { k.Ballot(k.Const(dsl.Bool, true)) }) }},
		"WarpReduce under tid < 40": {func(k *dsl.Kernel) dsl.Value { return k.ThreadIdx(dsl.X).Lt(40) },
			func(k *dsl.Kernel) int { return at(func() { k.WarpReduce(k.Const(dsl.U32, 1), dsl.Sum) }) }},
		"SyncWarp under lane % 4": {func(k *dsl.Kernel) dsl.Value { return k.LaneID().Rem(4).Eq(0) },
			func(k *dsl.Kernel) int { return at(func() { k.SyncWarp() }) }},
		"ElectOne under ElectOne": {func(k *dsl.Kernel) dsl.Value { return k.ElectOne() },
			func(k *dsl.Kernel) int { return at(func() { k.ElectOne() }) }},
		"shuffle under elected lane": {func(k *dsl.Kernel) dsl.Value { return k.ElectOne() }, shfl},
	}
	for name, c := range refused {
		t.Run(name, func(t *testing.T) {
			k := dsl.New("k", dsl.WithTarget("sm_90a"))
			var line int
			ifLine := at(func() { k.If(c.cond(k), func() { line = c.coll(k) }) })
			_, err := k.Build()
			if err == nil || !strings.Contains(err.Error(), "divergence_test.go:"+strconv.Itoa(line)+": ") ||
				!strings.Contains(err.Error(), "inside k.If at dsl/divergence_test.go:"+strconv.Itoa(ifLine)+", whose condition differs between the lanes of a warp") {
				t.Fatalf("Build = %v; want the collective at line %d refused inside the lane-dependent If of line %d", err, line, ifLine)
			}
		})
	}
	accepted := map[string]func(k *dsl.Kernel) dsl.Value{
		"warp index":          func(k *dsl.Kernel) dsl.Value { return k.WarpID().Eq(2) },
		"warpgroup role":      func(k *dsl.Kernel) dsl.Value { return k.ThreadIdx(dsl.X).Lt(128) },
		"second warpgroup":    func(k *dsl.Kernel) dsl.Value { return k.ThreadIdx(dsl.X).Ge(128) },
		"tid / 32":            func(k *dsl.Kernel) dsl.Value { return k.ThreadIdx(dsl.X).Div(32).Lt(3) },
		"block index":         func(k *dsl.Kernel) dsl.Value { return k.BlockIdx(dsl.X).Eq(0) },
		"a warp's broadcast":  func(k *dsl.Kernel) dsl.Value { return k.ShuffleIdx(k.LaneID(), 0).Eq(0) },
		"a vote of the lanes": func(k *dsl.Kernel) dsl.Value { return k.VoteAll(k.LaneID().Lt(40)) },
	}
	for name, cond := range accepted {
		k := dsl.New("k", dsl.WithTarget("sm_90a"))
		k.If(cond(k), func() {
			shfl(k)
			k.VoteAny(k.Const(dsl.Bool, true))
			k.WarpReduce(k.Const(dsl.U32, 1), dsl.Sum)
			k.SyncWarp()
			k.ElectOne()
		})
		if _, err := k.Build(); err != nil {
			t.Errorf("%s: Build = %v; want it accepted", name, err)
		}
	}
}
