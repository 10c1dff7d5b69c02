package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/layout"
)

// TestFragmentOps: a fragment loaded from memory, mapped, zipped with another and
// converted, then stored, gives the element-wise results; FragmentOf and Values round-trip.
func TestFragmentOps(t *testing.T) {
	k := dsl.New("frag")
	a, b, out := k.PtrParam("a", dsl.F32), k.PtrParam("b", dsl.F32), k.PtrParam("out", dsl.F16)
	four := layout.Must(layout.MakeLayout(layout.Int(4)))
	ta, tb := k.MakeTensor(a, four), k.MakeTensor(b, four)
	fa, fb := k.Fragment(dsl.F32, ta), k.Fragment(dsl.F32, tb)
	k.Copy(ta, fa)
	k.Copy(tb, fb)
	sum := fa.Map(func(v dsl.Value) dsl.Value { return v.Mul(float32(2)) }).Zip(fb, func(x, y dsl.Value) dsl.Value { return x.Add(y) })
	vals := sum.Values()
	again := k.FragmentOf(vals[3], vals[2], vals[1], vals[0]) // reversed
	k.Copy(again.To(dsl.F16), k.MakeTensor(out, four))
	m, sys := onOneGPU(t, k)
	in := func(v ...float32) uint64 {
		p, err := sys.Malloc(0, 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := emu.WriteSlice(sys, p, v); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pa, pb := in(1, 2, 3, 4), in(10, 20, 30, 40)
	po, err := sys.Malloc(0, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "frag", GPUs: []int{0}, Grid: emu.D1(1), Block: emu.D1(1), Args: []any{pa, pb, po}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[uint16](sys, po, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint16{0x5200, 0x5080, 0x4e00, 0x4a00} // f16 of 48, 36, 24, 12
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("out = %#x, want %#x", got, want)
		}
	}
}

// TestFragmentOpsMisuse: misuse of the fragment operations is a Build error at the line.
func TestFragmentOpsMisuse(t *testing.T) {
	four := layout.Must(layout.MakeLayout(layout.Int(4)))
	cases := []misuse{
		{"FragmentOf of nothing", "FragmentOf: no values", func(k *dsl.Kernel) int {
			return at(func() { k.FragmentOf() })
		}},
		{"FragmentOf of two types", "value 1 is u32", func(k *dsl.Kernel) int {
			return at(func() { k.FragmentOf(k.Const(dsl.F32, 1), k.Const(dsl.U32, 1)) })
		}},
		{"Map of memory", "Map: not a register fragment", func(k *dsl.Kernel) int {
			tm := k.MakeTensor(k.PtrParam("p", dsl.F32), four)
			return at(func() { tm.Map(func(v dsl.Value) dsl.Value { return v }) })
		}},
		{"Zip of different sizes", "Zip: sizes differ: 4 and 2", func(k *dsl.Kernel) int {
			f := k.Fragment(dsl.F32, k.MakeTensor(k.PtrParam("p", dsl.F32), four))
			g := k.FragmentOf(k.Const(dsl.F32, 1), k.Const(dsl.F32, 2))
			return at(func() { f.Zip(g, func(a, b dsl.Value) dsl.Value { return a.Add(b) }) })
		}},
		{"Map to mixed types", "results differ in type", func(k *dsl.Kernel) int {
			f := k.FragmentOf(k.Const(dsl.F32, 1), k.Const(dsl.F32, 2))
			i := 0
			mixed := func(v dsl.Value) dsl.Value {
				if i++; i == 2 {
					return v.To(dsl.F16)
				}
				return v
			}
			return at(func() { f.Map(mixed) })
		}},
		{"Map with nil", "Map: nil function", func(k *dsl.Kernel) int {
			f := k.FragmentOf(k.Const(dsl.F32, 1))
			return at(func() { f.Map(nil) })
		}},
	}
	checkMisuses(t, "dsl/fragment_ops_test.go", cases)
}
