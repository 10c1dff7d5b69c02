package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TestMisuseHostile checks wrong programs a hostile or careless user writes: each is a Build
// error naming the line.
func TestMisuseHostile(t *testing.T) {
	cases := []misuse{
		{"value from an If used after it", "used after it ended", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			var inner dsl.Value
			k.If(a.Lt(3), func() { inner = a.Mul(a) })
			return at(func() { a.Add(inner) })
		}},
		{"value from a For used after it", "used after it ended", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			var last dsl.Value
			k.For(0, 4, 1, func(i dsl.Value) { last = i.Add(7) })
			return at(func() { k.Store(p, last) })
		}},
		{"value from the then branch used in Else", "used after it ended", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			p := k.PtrParam("p", dsl.U32)
			var inner dsl.Value
			var line int
			k.If(a.Lt(3), func() { inner = a.Mul(a) }).Else(func() { line = at(func() { k.Store(p, inner) }) })
			return line
		}},
		{"Var made in a While used after it", "used after it ended", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			n := k.Var(dsl.U32, 0)
			var v dsl.Value
			k.While(func() dsl.Value { return n.Lt(a) }, func() { v = k.Var(dsl.U32, 1); k.Set(n, n.Add(1)) })
			return at(func() { k.Set(n, v) })
		}},
		{"pointer from a For used after it", "used after it ended", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			var q dsl.Ptr
			k.For(0, 4, 1, func(i dsl.Value) { q = p.At(i) })
			return at(func() { k.Load(q) })
		}},
		{"second Else", "Else called twice", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			s := k.If(a.Lt(3), func() {})
			s.Else(func() {})
			return at(func() { s.Else(func() {}) })
		}},
		{"nil then", "then function is nil", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { k.If(a.Lt(3), nil) })
		}},
		{"nil Else", "Else: the function is nil", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			s := k.If(a.Lt(3), func() {})
			return at(func() { s.Else(nil) })
		}},
		{"nil For body", "For: the body function is nil", func(k *dsl.Kernel) int {
			return at(func() { k.For(0, 4, 1, nil) })
		}},
		{"nil While condition", "While: the condition or body function is nil", func(k *dsl.Kernel) int {
			return at(func() { k.While(nil, func() {}) })
		}},
		{"huge SharedArray", "static shared memory", func(k *dsl.Kernel) int {
			return at(func() { k.SharedArray(dsl.F32, 1<<40) })
		}},
		{"SharedArray size that overflows", "static shared memory", func(k *dsl.Kernel) int {
			return at(func() { k.SharedArray(dsl.F64, 1<<62) })
		}},
		{"SharedArrays over 48 KiB together", "static shared memory", func(k *dsl.Kernel) int {
			k.SharedArray(dsl.F32, 8<<10)
			return at(func() { k.SharedArray(dsl.F32, 5<<10) })
		}},
		{"1 GiB LocalArray", "per thread", func(k *dsl.Kernel) int {
			return at(func() { k.LocalArray(dsl.U8, 1<<30) })
		}},
		{"Ptr.At wrapping", "MaxOffset", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.Store(p.At(1<<62), 1.0) })
		}},
		{"Ptr.At constant Value wrapping", "MaxOffset", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			i := k.Const(dsl.I64, int64(-1<<62))
			return at(func() { p.At(i) })
		}},
		{"Ptr.At offsets adding up", "MaxOffset", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U8).At(1 << 47)
			return at(func() { p.At(1 << 47).At(1 << 47) })
		}},
		{"NamedBarrier of 2048 threads", "32..1024", func(k *dsl.Kernel) int {
			return at(func() { k.NamedBarrier(1, 2048) })
		}},
		{"NamedBarrierArrive of 2048 threads", "32..1024", func(k *dsl.Kernel) int {
			return at(func() { k.NamedBarrierArrive(1, 2048) })
		}},
		{"parameter named _", "not a valid PTX identifier", func(k *dsl.Kernel) int {
			return at(func() { k.Param("_", dsl.U32) })
		}},
		{"pointer parameter named $", "not a valid PTX identifier", func(k *dsl.Kernel) int {
			return at(func() { k.PtrParam("$", dsl.U32) })
		}},
		{"division by the constant 0", "division by the constant 0", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { a.Div(0) })
		}},
		{"remainder by a constant 0 Value", "division by the constant 0", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.I64)
			return at(func() { a.Rem(k.Const(dsl.I64, 0)) })
		}},
		{"Fragment of a 2^20 x 2^20 tensor", "MaxFragment", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			l, err := layout.Parse("(1048576,1048576):(1,1048576)")
			if err != nil {
				panic(err)
			}
			tn := k.MakeTensor(p, l)
			return at(func() { k.Fragment(dsl.F32, tn) })
		}},
	}
	checkMisuses(t, "dsl/harden_test.go", cases)
}

// TestNilOption checks that a nil option to New is an error, not a panic.
func TestNilOption(t *testing.T) {
	k := dsl.New("k", dsl.WithTarget(ptx.SM90), nil)
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "option 2 is nil") {
		t.Fatalf("Build: %v; want the nil option named", err)
	}
}

// TestAfterBuild checks that builder calls after Build are errors and leave the returned
// module unchanged.
func TestAfterBuild(t *testing.T) {
	k := dsl.New("k")
	p := k.PtrParam("p", dsl.U32)
	a := k.Param("a", dsl.U32)
	k.Store(p, a)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := m.String()
	line := at(func() {
		k.Store(p, a.Add(1))
		k.Param("late", dsl.U32)
		k.SharedArray(dsl.U32, 4)
		k.If(a.Lt(1), func() { k.Store(p, 3) }).Else(func() {})
		k.For(0, 2, 1, func(dsl.Value) {})
	})
	if got := m.String(); got != want {
		t.Errorf("the built module changed after Build:\n%s\nwas:\n%s", got, want)
	}
	err = k.Err()
	if err == nil || !strings.Contains(err.Error(), "after Build") || !strings.Contains(err.Error(), "dsl/harden_test.go:") {
		t.Fatalf("Err() = %v; want errors after Build with this file's line %d", err, line)
	}
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "after Build") {
		t.Fatalf("second Build: %v; want the errors after Build", err)
	}
}

// TestScopedValuesStillWork checks the forms that stay legal: a Var set inside runtime control
// flow and read after it, values made before an If used inside and after it, and values made
// and used inside a branch.
func TestScopedValuesStillWork(t *testing.T) {
	k := dsl.New("k")
	p := k.PtrParam("p", dsl.U32)
	a := k.Param("a", dsl.U32)
	sq := a.Mul(a)
	acc := k.Var(dsl.U32, 0)
	k.If(a.Lt(3), func() {
		x := sq.Add(1)
		k.If(x.Gt(2), func() { k.Set(acc, x.Add(sq)) })
	}).Else(func() { k.Set(acc, sq) })
	k.For(0, a, 1, func(i dsl.Value) { k.Set(acc, acc.Add(i)) })
	k.Store(p, acc.Add(sq))
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	assemble(t, m)
}
