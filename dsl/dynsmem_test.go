package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TestDynamicSharedAssembles: one .extern .shared declaration however many views, a swizzled
// tensor over it with 128-bit copies, and ptxas accepts it.
func TestDynamicSharedAssembles(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		t.Run(string(target), func(t *testing.T) {
			s := build(t, target, func(k *dsl.Kernel) {
				in := k.PtrParam("in", dsl.F32)
				tid := k.ThreadIdx(dsl.X)
				thr := layout.MustParse("(8,32):(32,1)")
				g := k.MakeTensor(in, layout.MustParse("(8,128):(128,1)"))
				sm := k.MakeSwizzledTensor(k.DynamicShared(dsl.F32, 128), layout.Swizzle{B: 3, M: 2, S: 3},
					layout.MustParse("(8,128):(128,1)"))
				k.Copy(g.LocalPartition(thr, tid, 1, 4), sm.LocalPartition(thr, tid, 1, 4))
				k.SyncThreads()
				flags := k.DynamicShared(dsl.U32, 128).At(8 * 128) // a second region after the tile
				k.Store(flags.At(tid), k.DynamicSharedSize())
			})
			if n := strings.Count(s, ".extern .shared .align 128 .b8 kgen_dynamic_smem[];"); n != 1 {
				t.Errorf("%d declarations of dynamic shared memory, want 1:\n%s", n, s)
			}
			if !strings.Contains(s, "st.shared.v4.f32") || !strings.Contains(s, "%dynamic_smem_size") {
				t.Errorf("no st.shared.v4.f32 or no %%dynamic_smem_size:\n%s", s)
			}
		})
	}
}

// TestDynamicSharedOnEmulator reverses a block's values through dynamic shared memory next
// to a static array, which must not overlap it.
func TestDynamicSharedOnEmulator(t *testing.T) {
	const n = 64
	k := dsl.New("rev")
	in, out := k.PtrParam("in", dsl.F32), k.PtrParam("out", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	static := k.SharedArray(dsl.U32, n)
	dyn := k.DynamicShared(dsl.F32, 0)
	k.Store(static.At(tid), tid)
	k.Store(dyn.At(tid), k.Load(in.At(tid)))
	k.SyncThreads()
	r := k.Const(dsl.U32, n-1).Sub(tid)
	k.Store(out.At(tid), k.Load(dyn.At(r)).To(dsl.U32).Add(k.Load(static.At(r)).Mul(1000)))
	k.Store(out.At(tid.Add(n)), k.DynamicSharedSize())
	m, sys := onOneGPU(t, k)
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i + 1)
	}
	pi, _ := sys.Malloc(0, 4*n)
	po, _ := sys.Malloc(0, 8*n)
	if err := emu.WriteSlice(sys, pi, vals); err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "rev", Grid: emu.D1(1), Block: emu.D1(n), SharedBytes: 4 * n, Args: []any{pi, po}}); err != nil {
		t.Fatal(err)
	}
	got, _ := emu.ReadSlice[uint32](sys, po, 2*n)
	for i := 0; i < n; i++ {
		r := n - 1 - i
		if want := uint32(r+1) + 1000*uint32(r); got[i] != want || got[n+i] != 4*n {
			t.Fatalf("thread %d: got %d and size %d, want %d and %d", i, got[i], got[n+i], want, 4*n)
		}
	}
}

// TestDynamicSharedMisuse checks each misuse is a Build error at the caller's line.
func TestDynamicSharedMisuse(t *testing.T) {
	cases := []misuse{
		{"alignment not a power of two", "DynamicShared: alignment 24 is not a power of two", func(k *dsl.Kernel) int {
			return at(func() { k.DynamicShared(dsl.F32, 24) })
		}},
		{"negative alignment", "alignment -16 is not a power of two", func(k *dsl.Kernel) int {
			return at(func() { k.DynamicShared(dsl.F32, -16) })
		}},
		{"alignment below the element", "alignment 4 is below the 8-byte f64 element", func(k *dsl.Kernel) int {
			return at(func() { k.DynamicShared(dsl.F64, 4) })
		}},
		{"conflicting alignments", "already requested with alignment 16, now 128", func(k *dsl.Kernel) int {
			k.DynamicShared(dsl.F32, 0)
			return at(func() { k.DynamicShared(dsl.U8, 128) })
		}},
		{"no memory type", "no memory type pred", func(k *dsl.Kernel) int {
			return at(func() { k.DynamicShared(dsl.Bool, 16) })
		}},
	}
	checkMisuses(t, "dsl/dynsmem_test.go", cases)
}
