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
