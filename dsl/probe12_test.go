package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe12DynamicSharedTileTooLarge: a DynamicSharedTile whose end (the 1024-byte pad,
// the offset and its stages) passes the shared memory any GPU gives a block is a Build
// error at the caller's line (before: 2^40 stages, or an offset of 2^40 bytes, built a
// kernel no launch can run, its stage addresses past the 32-bit shared window); so are a
// SharedTile and Mbarriers whose byte count overflowed (2^51 stages of 8 KiB and 2^61
// barriers wrapped to 0 bytes and built), and a DynamicShared alignment past ptxas's 2^31
// (it failed in Build's PTX check, at no line of the caller). Errors about the zero Type
// name it (they read "no memory type " and "cannot make a constant of type ").
func TestProbe12DynamicSharedTileTooLarge(t *testing.T) {
	tile := func() layout.ComposedLayout {
		c, err := layout.ParseComposed("Sw<3,4,3> o 0 o (64,64):(64,1)")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	checkMisuses(t, "dsl/probe12_test.go", []misuse{
		{"2^40 stages", "more than the 232448 bytes", func(k *dsl.Kernel) int {
			l := tile()
			return at(func() { k.DynamicSharedTile(dsl.F16, l, 1<<40, 0) })
		}},
		{"stages overflowing int", "more than the 232448 bytes", func(k *dsl.Kernel) int {
			l := tile()
			return at(func() { k.DynamicSharedTile(dsl.F16, l, 1<<62, 0) })
		}},
		{"offset 2^40", "more than the 232448 bytes", func(k *dsl.Kernel) int {
			l := tile()
			return at(func() { k.DynamicSharedTile(dsl.F16, l, 1, 1<<40) })
		}},
		{"29 stages of 8 KiB", "more than the 232448 bytes", func(k *dsl.Kernel) int {
			l := tile()
			return at(func() { k.DynamicSharedTile(dsl.F16, l, 29, 0) })
		}},
		{"static stages wrapping to 0 bytes", "static shared memory", func(k *dsl.Kernel) int {
			l := tile()
			return at(func() { k.SharedTile(dsl.F16, l, 1<<51) })
		}},
		{"2^61 mbarriers wrapping to 0 bytes", "static shared memory", func(k *dsl.Kernel) int {
			return at(func() { k.Mbarriers(1 << 61) })
		}},
		{"dynamic shared aligned to 2^40", "DynamicShared: alignment 1099511627776 is more than ptxas takes", func(k *dsl.Kernel) int {
			return at(func() { k.DynamicShared(dsl.F32, 1<<40) })
		}},
		{"shared array of the zero Type", "SharedArray: no memory type (the zero Type)", func(k *dsl.Kernel) int {
			return at(func() { k.SharedArray(0, 4) })
		}},
		{"parameter of the zero Type", "type (the zero Type) cannot be a kernel parameter", func(k *dsl.Kernel) int {
			return at(func() { k.Param("x", 0) })
		}},
		{"constant of the zero Type", "cannot make a constant of type (the zero Type)", func(k *dsl.Kernel) int {
			return at(func() { k.Const(0, 1) })
		}},
	}, dsl.WithTarget(ptx.SM90a))
	// 28 stages of 8 KiB and the pad fit (227 KiB).
	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	k.DynamicSharedTile(dsl.F16, tile(), 28, 0)
	if _, err := k.Build(); err != nil {
		t.Fatal(err)
	}
}
