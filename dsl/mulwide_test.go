package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestMulWide: the 64-bit product of 32-bit integers (mul.wide.u32 / .s32), folded for
// constants past 2^32, keeping what Assume said of the factors (so rows of a matrix
// addressed through it still take 128-bit accesses); other operand types are an error.
func TestMulWide(t *testing.T) {
	s := build(t, ptx.SM80, func(k *dsl.Kernel) {
		p := k.PtrParam("p", dsl.F32)
		row, ld := k.Param("row", dsl.U32), k.Assume(k.Param("ld", dsl.U32), 4)
		if w := row.MulWide(ld); w.Type() != dsl.U64 {
			t.Errorf("u32 MulWide: type %s, want u64", w.Type())
		}
		v := k.Load(p.At(row.MulWide(ld)).As(dsl.F32))
		k.Copy(k.FragmentOf(v, v, v, v), k.MakeTensorDyn(p.At(row.MulWide(ld)), []any{4}, []any{1}).LocalTile([]int{4}, 0))
		c := k.Const(dsl.U32, uint32(1<<20)).MulWide(uint32(1 << 13)) // 2^33: no wrap
		k.Store(p.As(dsl.U64), c)
		if w := k.Param("i", dsl.I32).MulWide(int32(-3)); w.Type() != dsl.I64 {
			t.Errorf("s32 MulWide: type %s, want s64", w.Type())
		}
	})
	for _, want := range []string{"mul.wide.u32", "8589934592", "st.global.v4.f32"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	k := dsl.New("k", dsl.WithTarget(ptx.SM80))
	k.Param("x", dsl.U64).MulWide(uint64(2))
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "MulWide: operand type u64 (want u32 or s32)") {
		t.Errorf("u64 MulWide: err %v", err)
	}
}
