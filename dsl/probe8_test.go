package dsl_test

import (
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe8TypeMismatch: values of different types meet in arithmetic, comparisons,
// Select, FMA, stores, Set, atomics, pointer arithmetic and fragment arithmetic. Each is a
// Build error at the line that wrote it, naming both types (or the rule), never a panic and
// never a silent conversion. Go constants convert where they are representable (docs/dsl.md:
// "Go numbers are accepted where a value of a known type is expected").
func TestProbe8TypeMismatch(t *testing.T) {
	f16 := func(k *dsl.Kernel) dsl.Value { return k.Param("h", dsl.F16) }
	f32 := func(k *dsl.Kernel) dsl.Value { return k.Param("f", dsl.F32) }
	i32 := func(k *dsl.Kernel) dsl.Value { return k.Param("i", dsl.I32) }
	u32 := func(k *dsl.Kernel) dsl.Value { return k.Param("u", dsl.U32) }
	cases := []misuse{
		{"f16 into an f32 Add", "type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			a, b := f32(k), f16(k)
			return at(func() { a.Add(b) })
		}},
		{"f16 into an f32 Mul", "type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			a, b := f32(k), f16(k)
			return at(func() { a.Mul(b) })
		}},
		{"bf16 into an f16 Sub", "type mismatch: f16 and bf16", func(k *dsl.Kernel) int {
			a, b := f16(k), k.Param("b", dsl.BF16)
			return at(func() { a.Sub(b) })
		}},
		{"f16 into an f32 FMA", "FMA: type mismatch: f32, f16, f32", func(k *dsl.Kernel) int {
			a, b := f32(k), f16(k)
			return at(func() { k.FMA(a, b, a) })
		}},
		{"s32 plus u32", "type mismatch: s32 and u32", func(k *dsl.Kernel) int {
			a, b := i32(k), u32(k)
			return at(func() { a.Add(b) })
		}},
		{"u32 Min s32", "type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			a, b := u32(k), i32(k)
			return at(func() { a.Min(b) })
		}},
		{"u32 Div s32", "type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			a, b := u32(k), i32(k)
			return at(func() { a.Div(b) })
		}},
		{"u32 And s32", "type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			a, b := u32(k), i32(k)
			return at(func() { a.And(b) })
		}},
		{"u32 plus u64", "type mismatch: u32 and u64", func(k *dsl.Kernel) int {
			a, b := u32(k), k.Param("w", dsl.U64)
			return at(func() { a.Add(b) })
		}},
		{"s16 plus s32", "type mismatch: s16 and s32", func(k *dsl.Kernel) int {
			a, b := k.Param("s", dsl.I16), i32(k)
			return at(func() { a.Add(b) })
		}},
		{"u32 MulWide s32", "type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			a, b := u32(k), i32(k)
			return at(func() { a.MulWide(b) })
		}},
		{"shift by a signed amount", "Shl amount: type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			a, b := u32(k), i32(k)
			return at(func() { a.Shl(b) })
		}},
		{"shift by a float amount", "Shr amount: type mismatch: u32 and f32", func(k *dsl.Kernel) int {
			a, b := u32(k), f32(k)
			return at(func() { a.Shr(b) })
		}},
		{"Bool plus u32", "type mismatch: pred and u32", func(k *dsl.Kernel) int {
			a, b := u32(k), u32(k).Lt(3)
			return at(func() { b.Add(a) })
		}},
		{"Add of a Bool", "Add is not defined for pred", func(k *dsl.Kernel) int {
			b := u32(k).Lt(3)
			return at(func() { b.Add(b) })
		}},
		{"Lt of f32 and f16", "Lt: type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			a, b := f32(k), f16(k)
			return at(func() { a.Lt(b) })
		}},
		{"Ge of s32 and u32", "Ge: type mismatch: s32 and u32", func(k *dsl.Kernel) int {
			a, b := i32(k), u32(k)
			return at(func() { a.Ge(b) })
		}},
		{"Eq of u32 and a float constant", "float constant 1.5 used as u32", func(k *dsl.Kernel) int {
			a := u32(k)
			return at(func() { a.Eq(1.5) })
		}},
		{"Lt of two Bools", "Lt is not defined for pred", func(k *dsl.Kernel) int {
			b := u32(k).Lt(3)
			return at(func() { b.Lt(b) })
		}},
		{"Eq of u32 and a Go bool", "a bool constant cannot be of type u32", func(k *dsl.Kernel) int {
			a := u32(k)
			return at(func() { a.Eq(true) })
		}},
		{"Select of f32 and f16 arms", "Select: type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			c, a, b := u32(k).Lt(3), f32(k), f16(k)
			return at(func() { k.Select(c, a, b) })
		}},
		{"Select of u32 and s32 arms", "Select: type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			c, a, b := u32(k).Lt(3), u32(k), i32(k)
			return at(func() { k.Select(c, a, b) })
		}},
		{"Select of a float constant and a u32", "float constant 0.5 used as u32", func(k *dsl.Kernel) int {
			c, b := u32(k).Lt(3), u32(k)
			return at(func() { k.Select(c, 0.5, b) })
		}},
		{"Select of two Go constants", "give at least one Value", func(k *dsl.Kernel) int {
			c := u32(k).Lt(3)
			return at(func() { k.Select(c, 1, 2) })
		}},
		{"Select on a u32 condition", "condition is u32, not Bool", func(k *dsl.Kernel) int {
			a := u32(k)
			return at(func() { k.Select(a, a, a) })
		}},
		{"Store of f16 through an f32 pointer", "Store: type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			p, v := k.PtrParam("p", dsl.F32), f16(k)
			return at(func() { k.Store(p, v) })
		}},
		{"Store of u32 through an s32 pointer", "Store: type mismatch: s32 and u32", func(k *dsl.Kernel) int {
			p, v := k.PtrParam("p", dsl.I32), u32(k)
			return at(func() { k.Store(p, v) })
		}},
		{"Store of a float constant through a u32 pointer", "float constant 2.5 used as u32", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			return at(func() { k.Store(p, 2.5) })
		}},
		{"Store of a Go bool through an f32 pointer", "a bool constant cannot be of type f32", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.Store(p, true) })
		}},
		{"Store of a Ptr as a value", "cannot make a f32 constant from Go dsl.Ptr", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.Store(p, p) })
		}},
		{"Var of f32 initialised with f16", "Var: type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			v := f16(k)
			return at(func() { k.Var(dsl.F32, v) })
		}},
		{"Var of f32 Set with f16", "Set: type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			x, v := k.Var(dsl.F32, 0), f16(k)
			return at(func() { k.Set(x, v) })
		}},
		{"Var of u32 Set with s32", "Set: type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			x, v := k.Var(dsl.U32, 0), i32(k)
			return at(func() { k.Set(x, v) })
		}},
		{"Var of u32 Set with a negative constant", "negative constant -1 used as u32", func(k *dsl.Kernel) int {
			x := k.Var(dsl.U32, 0)
			return at(func() { k.Set(x, -1) })
		}},
		{"Var of s8 Set with 200", "constant 200 overflows s8", func(k *dsl.Kernel) int {
			x := k.Var(dsl.I8, 0)
			return at(func() { k.Set(x, 200) })
		}},
		{"Atomic add of u32 to an f32 pointer", "Atomic: type mismatch: f32 and u32", func(k *dsl.Kernel) int {
			p, v := k.PtrParam("p", dsl.F32), u32(k)
			return at(func() { k.Atomic(dsl.AtomAdd, p, v) })
		}},
		{"Reduce of s32 to a u32 pointer", "Reduce: type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			p, v := k.PtrParam("p", dsl.U32), i32(k)
			return at(func() { k.Reduce(dsl.AtomAdd, p, v) })
		}},
		{"AtomicCAS of mixed operands", "AtomicCAS: type mismatch: u32 and s32", func(k *dsl.Kernel) int {
			p, v := k.PtrParam("p", dsl.U32), i32(k)
			return at(func() { k.AtomicCAS(p, 0, v) })
		}},
		{"pointer arithmetic by a float index", "Ptr.At: index is f32, not an integer", func(k *dsl.Kernel) int {
			p, i := k.PtrParam("p", dsl.F32), f32(k)
			return at(func() { p.At(i) })
		}},
		{"pointer arithmetic by a Bool", "Ptr.At: index is pred, not an integer", func(k *dsl.Kernel) int {
			p, i := k.PtrParam("p", dsl.F32), u32(k).Lt(2)
			return at(func() { p.At(i) })
		}},
		{"pointer arithmetic by a Go float", "index must be an integer Value or Go integer, got float64", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { p.At(1.5) })
		}},
		{"a pointer from a u32 address", "PtrFrom: address is u32, not U64", func(k *dsl.Kernel) int {
			a := u32(k)
			return at(func() { k.PtrFrom(a, dsl.F32, ptx.SpaceGlobal) })
		}},
		{"a pointer from an f64 address", "PtrFrom: address is f64, not U64", func(k *dsl.Kernel) int {
			a := k.Param("d", dsl.F64)
			return at(func() { k.PtrFrom(a, dsl.F32, ptx.SpaceGlobal) })
		}},
		{"Bitcast across widths", "Bitcast: f32 (32 bits) to f16 (16 bits)", func(k *dsl.Kernel) int {
			a := f32(k)
			return at(func() { a.Bitcast(dsl.F16) })
		}},
		{"To a Bool", "To: cannot convert u32 to pred", func(k *dsl.Kernel) int {
			a := u32(k)
			return at(func() { a.To(dsl.Bool) })
		}},
		{"For over u32 and s32 bounds", "s32", func(k *dsl.Kernel) int {
			a, b := u32(k), i32(k)
			return at(func() { k.For(a, b, 1, func(dsl.Value) {}) })
		}},
		{"FragmentOf f32 and f16", "FragmentOf: value 1 is f16, value 0 f32", func(k *dsl.Kernel) int {
			a, b := f32(k), f16(k)
			return at(func() { k.FragmentOf(a, b) })
		}},
		{"fragment Add of f32 and f16 fragments", "type mismatch: f32 and f16", func(k *dsl.Kernel) int {
			a, b := k.FragmentOf(f32(k), f32(k)), k.FragmentOf(f16(k), f16(k))
			return at(func() { a.Add(b) })
		}},
		{"fragment Copy from f32 to f16", "Copy: element types differ: f32 and f16", func(k *dsl.Kernel) int {
			a := k.FragmentOf(f32(k), f32(k))
			b := k.Fragment(dsl.F16, a)
			return at(func() { k.Copy(a, b) })
		}},
	}
	checkMisuses(t, "dsl/probe8_test.go", cases, dsl.WithTarget(ptx.SM90a))
}

// TestProbe8ConstOverflow: a finite Go constant that rounds to infinity in f16, bf16 or f32
// is a Build error at its line, as Go rejects float32(1e39) and as fp8 constants already
// were; infinities, NaN and values that round down to the largest finite one stay allowed.
// Before: x.Mul(70000.0) on an f16 x multiplied by +Inf, silently.
func TestProbe8ConstOverflow(t *testing.T) {
	checkMisuses(t, "dsl/probe8_test.go", []misuse{
		{"f16 Var of 70000.0", "constant 70000 overflows f16 (largest finite 65504)", func(k *dsl.Kernel) int {
			return at(func() { k.Var(dsl.F16, 70000.0) })
		}},
		{"f16 Mul by the Go integer 100000", "constant 100000 overflows f16", func(k *dsl.Kernel) int {
			x := k.Param("h", dsl.F16)
			return at(func() { x.Mul(100000) })
		}},
		{"bf16 Const of 1e39", "constant 1e+39 overflows bf16", func(k *dsl.Kernel) int {
			return at(func() { k.Const(dsl.BF16, 1e39) })
		}},
		{"f32 Store of -1e39", "constant -1e+39 overflows f32", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.Store(p, -1e39) })
		}},
		{"f16 Select arm of 1e5", "constant 100000 overflows f16", func(k *dsl.Kernel) int {
			x := k.Param("h", dsl.F16)
			return at(func() { k.Select(x.Lt(0), x, 1e5) })
		}},
	}, dsl.WithTarget(ptx.SM90a))

	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	p := k.PtrParam("p", dsl.F16)
	for _, c := range []any{math.Inf(1), math.Inf(-1), math.NaN(), 65519.0, -65504, 1e-30} {
		k.Store(p, c)
	}
	k.Store(k.PtrParam("q", dsl.F32), math.MaxFloat32)
	if _, err := k.Build(); err != nil {
		t.Fatalf("infinities, NaN, values rounding to the largest finite f16 and underflow: %v", err)
	}
}
