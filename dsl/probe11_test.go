package dsl_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// probe11Op is an operation folded when its operands are constants.
type probe11Op struct {
	name string
	f    func(a, b dsl.Value) dsl.Value
}

func probe11Select(c dsl.Value, t dsl.Type) dsl.Value {
	k := c.Kernel()
	return k.Select(c, k.Const(t, 1), k.Const(t, 0))
}

var probe11Ops = []probe11Op{
	{"Add", func(a, b dsl.Value) dsl.Value { return a.Add(b) }},
	{"Sub", func(a, b dsl.Value) dsl.Value { return a.Sub(b) }},
	{"Mul", func(a, b dsl.Value) dsl.Value { return a.Mul(b) }},
	{"Div", func(a, b dsl.Value) dsl.Value { return a.Div(b) }},
	{"Rem", func(a, b dsl.Value) dsl.Value { return a.Rem(b) }},
	{"Min", func(a, b dsl.Value) dsl.Value { return a.Min(b) }},
	{"Max", func(a, b dsl.Value) dsl.Value { return a.Max(b) }},
	{"Shl", func(a, b dsl.Value) dsl.Value { return a.Shl(b.To(dsl.U32)) }},
	{"Shr", func(a, b dsl.Value) dsl.Value { return a.Shr(b.To(dsl.U32)) }},
	{"And", func(a, b dsl.Value) dsl.Value { return a.And(b) }},
	{"Xor", func(a, b dsl.Value) dsl.Value { return a.Xor(b) }},
	{"Lt", func(a, b dsl.Value) dsl.Value { return probe11Select(a.Lt(b), a.Type()) }},
	{"Ge", func(a, b dsl.Value) dsl.Value { return probe11Select(a.Ge(b), a.Type()) }},
	{"Ne", func(a, b dsl.Value) dsl.Value { return probe11Select(a.Ne(b), a.Type()) }},
	{"Neg", func(a, b dsl.Value) dsl.Value { return a.Neg() }},
	{"Abs", func(a, b dsl.Value) dsl.Value { return a.Abs() }},
	{"Not", func(a, b dsl.Value) dsl.Value { return a.Not() }},
	{"To u16 and back", func(a, b dsl.Value) dsl.Value { return a.To(dsl.U16).To(a.Type()) }},
	{"To s8 and back", func(a, b dsl.Value) dsl.Value { return a.To(dsl.I8).To(a.Type()) }},
	{"FMA", func(a, b dsl.Value) dsl.Value { return a.Kernel().FMA(a, b, b) }},
}

// TestProbe11ConstantFolding: on sm_80 and sm_90, every operation on constants gives what the same operation
// computes at run time (on the emulator) on the same values, for each integer and float
// type at its edges (0, ±1, the extremes, 2^63, NaN, ±0, ±Inf, subnormals); NaNs compare
// equal whatever their sign and payload. Operations a type does not have, and integer
// division by a constant 0 (a Build error), are left out. Before: u64 Div, Rem, Min and Max
// of constants of 2^63 or more were folded as signed (2^63 / 7 gave 0xedb6db6db6db6db7,
// Min(1, 2^63) gave 2^63), and float Min and Max of a NaN and x gave NaN where PTX's
// min and max give x, silently.
func TestProbe11ConstantFolding(t *testing.T) {
	nan := math.NaN()
	negZero := math.Copysign(0, -1)
	for _, ty := range []struct {
		t    dsl.Type
		vals []any
	}{
		{dsl.U64, []any{uint64(0), uint64(1), uint64(7), uint64(1 << 63), uint64(math.MaxUint64), uint64(65)}},
		{dsl.I64, []any{int64(0), int64(1), int64(-1), int64(-7), int64(math.MinInt64), int64(math.MaxInt64), int64(65)}},
		{dsl.U32, []any{uint64(0), uint64(1), uint64(7), uint64(0x80000000), uint64(0xFFFFFFFF), uint64(33)}},
		{dsl.I32, []any{int64(0), int64(1), int64(-1), int64(-7), int64(math.MinInt32), int64(math.MaxInt32), int64(33)}},
		{dsl.U16, []any{uint64(0), uint64(1), uint64(0x8000), uint64(0xFFFF), uint64(17)}},
		{dsl.I16, []any{int64(0), int64(1), int64(-1), int64(math.MinInt16), int64(math.MaxInt16), int64(17)}},
		{dsl.U8, []any{uint64(0), uint64(1), uint64(128), uint64(255), uint64(9)}},
		{dsl.I8, []any{int64(0), int64(1), int64(-1), int64(-128), int64(127), int64(9)}},
		{dsl.F64, []any{0.0, negZero, 1.0, -1.5, nan, math.Inf(1), math.Inf(-1), 1e308, 5e-324}},
		{dsl.F32, []any{0.0, negZero, 1.0, -1.5, nan, math.Inf(1), math.Inf(-1), 3e38, 1e-45}},
		{dsl.F16, []any{0.0, negZero, 1.0, -1.5, nan, math.Inf(1), math.Inf(-1), 65504.0, 6e-8}},
		{dsl.BF16, []any{0.0, negZero, 1.0, -1.5, nan, math.Inf(1), math.Inf(-1), 3e38, 1e-40}},
	} {
		for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
			t.Run(string(target)+"/"+ty.t.String(), func(t *testing.T) {
				isFloat := ty.t.Kind() == ptx.KindFloat
				k := dsl.New("fold", dsl.WithTarget(target))
				in, run, fold := k.PtrParam("in", ty.t), k.PtrParam("run", ty.t), k.PtrParam("fold", ty.t)
				for i, v := range ty.vals { // the inputs, written by the kernel itself
					k.Store(in.At(i), k.Const(ty.t, v))
				}
				k.SyncThreads()
				var names []string
				for _, op := range probe11Ops {
					try := dsl.New("try", dsl.WithTarget(target))
					p := try.PtrParam("p", ty.t)
					try.Store(p, op.f(try.Load(p), try.Load(p.At(1))))
					if _, err := try.Build(); err != nil {
						continue // not an operation of this type
					}
					for i, a := range ty.vals {
						for j, b := range ty.vals {
							if !isFloat && j == 0 && (op.name == "Div" || op.name == "Rem") {
								continue
							}
							at := len(names)
							k.Store(run.At(at), op.f(k.Load(in.At(i), dsl.Volatile()), k.Load(in.At(j), dsl.Volatile())))
							k.Store(fold.At(at), op.f(k.Const(ty.t, a), k.Const(ty.t, b)))
							names = append(names, fmt.Sprintf("%s(%v, %v)", op.name, a, b))
						}
					}
				}
				m, err := k.Build()
				if err != nil {
					t.Fatal(err)
				}
				sys, err := emu.New(1)
				if err != nil {
					t.Fatal(err)
				}
				es := ty.t.Bits() / 8
				addr := func(n int) uint64 {
					a, err := sys.Malloc(0, n*es)
					if err != nil {
						t.Fatal(err)
					}
					return a
				}
				inA, runA, foldA := addr(len(ty.vals)), addr(len(names)), addr(len(names))
				if err := sys.Launch(emu.Launch{Module: m, Entry: "fold", Grid: emu.D1(1), Block: emu.D1(1), Args: []any{inA, runA, foldA}}); err != nil {
					t.Fatal(err)
				}
				rb, fb := make([]byte, len(names)*es), make([]byte, len(names)*es)
				if err := sys.Read(runA, rb); err != nil {
					t.Fatal(err)
				}
				if err := sys.Read(foldA, fb); err != nil {
					t.Fatal(err)
				}
				bad := 0
				for x, name := range names {
					r, f := rb[x*es:(x+1)*es], fb[x*es:(x+1)*es]
					if string(r) == string(f) || isFloat && isNaNBits(ty.t, r) && isNaNBits(ty.t, f) {
						continue
					}
					if bad++; bad <= 20 {
						t.Errorf("%s %s: at run time % x, folded % x", ty.t, name, r, f)
					}
				}
			})
		}
	}
}

// isNaNBits reports whether b (little-endian) is a NaN of float type t.
func isNaNBits(t dsl.Type, b []byte) bool {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	switch t {
	case dsl.F64:
		return math.IsNaN(math.Float64frombits(u))
	case dsl.F32:
		return math.IsNaN(float64(math.Float32frombits(uint32(u))))
	case dsl.F16:
		return math.IsNaN(float64(fp.F16(u).Float32()))
	case dsl.BF16:
		return math.IsNaN(float64(fp.BF16(u).Float32()))
	}
	return false
}

// TestProbe11NarrowIndex: Ptr.At with a run-time 8- or 16-bit index moves the pointer as the
// same index given as a constant does: a signed -1 is one element back. Before: an s8 index
// was widened as unsigned (-1 moved the pointer 2^32-1 elements on, a silent wild access),
// and a 16-bit index failed Build with ptx.Verify's complaint about a register the DSL had
// declared itself ("mul.wide.s16 %sd0 ...: register %sd0 is .s64, not compatible with
// .s32"). A u64 constant step of 2^63 is positive: For takes it (it was refused as "step
// must be positive").
func TestProbe11NarrowIndex(t *testing.T) {
	types := []dsl.Type{dsl.I8, dsl.U8, dsl.I16, dsl.U16, dsl.I32, dsl.U32, dsl.I64, dsl.U64}
	k := dsl.New("at", dsl.WithTarget(ptx.SM90))
	base := k.PtrParam("base", dsl.F32)
	out := k.PtrParam("out", dsl.I64)
	for n, ty := range types {
		in := k.PtrParam(fmt.Sprintf("in%d", n), ty)
		i := k.Load(in)
		k.Store(out.At(n), k.PtrValue(base.At(i)).Sub(k.PtrValue(base)).Bitcast(dsl.I64))
	}
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	o, err := sys.Malloc(0, 8*len(types))
	if err != nil {
		t.Fatal(err)
	}
	args := []any{uint64(1 << 40), o}
	for range types {
		a, err := sys.Malloc(0, 8)
		if err != nil {
			t.Fatal(err)
		}
		if err := emu.WriteSlice(sys, a, []uint64{^uint64(0)}); err != nil { // all ones: -1 or the largest
			t.Fatal(err)
		}
		args = append(args, a)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "at", Grid: emu.D1(1), Block: emu.D1(1), Args: args}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[int64](sys, o, len(types))
	if err != nil {
		t.Fatal(err)
	}
	for n, ty := range types {
		want := int64(-4)
		if ty.Kind() == ptx.KindUnsigned && ty.Bits() < 64 {
			want = 4 * (1<<ty.Bits() - 1)
		}
		if got[n] != want {
			t.Errorf("base.At(a run-time %s of all ones) moved %d bytes; want %d", ty, got[n], want)
		}
	}

	f := dsl.New("step", dsl.WithTarget(ptx.SM90))
	p := f.PtrParam("p", dsl.U64)
	f.For(f.Const(dsl.U64, 0), f.Param("n", dsl.U64), f.Const(dsl.U64, uint64(1<<63)), func(i dsl.Value) { f.Store(p, i) })
	if _, err := f.Build(); err != nil {
		t.Errorf("For with a u64 step of 2^63: %v", err)
	}
}

// TestProbe11Tensor64: a 64-bit run-time Value given to a tensor as an extent, stride,
// coordinate or thread index is a Build error at its line naming the role and the 32-bit
// offsets; 32-bit Values and 64-bit constants that fit are taken. Before: each was cut to its
// low 32 bits by a silent To(I32), so a u64 row stride of 2^32+1 indexed as a stride of 1,
// and a u64 coordinate of 2^32 read element 0.
func TestProbe11Tensor64(t *testing.T) {
	checkMisuses(t, "dsl/probe11_test.go", []misuse{
		{"u64 stride", "MakeTensorDyn: the stride is a u64 Value, but tensor offsets are 32-bit signed", func(k *dsl.Kernel) int {
			p, n := k.PtrParam("p", dsl.F32), k.Param("n", dsl.U64)
			return at(func() { k.MakeTensorDyn(p, []any{4, 4}, []any{n, 1}) })
		}},
		{"s64 extent", "MakeTensorDyn: the extent is a s64 Value", func(k *dsl.Kernel) int {
			p, n := k.PtrParam("p", dsl.F32), k.Param("n", dsl.I64)
			return at(func() { k.MakeTensorDyn(p, []any{n, 4}, []any{4, 1}) })
		}},
		{"u64 coordinate", "At: the coordinate is a u64 Value", func(k *dsl.Kernel) int {
			p, i := k.PtrParam("p", dsl.F32), k.Param("i", dsl.U64)
			x := k.MakeTensor(p, layout.MustParse("(4,4):(4,1)"))
			return at(func() { x.At(i, 0) })
		}},
		{"u64 tile coordinate", "LocalTile", func(k *dsl.Kernel) int {
			p, i := k.PtrParam("p", dsl.F32), k.Param("i", dsl.U64)
			x := k.MakeTensor(p, layout.MustParse("(64,64):(64,1)"))
			return at(func() { x.LocalTile([]int{16, 16}, i, 0) })
		}},
		{"u64 thread index", "LocalPartition: the thread index is a u64 Value", func(k *dsl.Kernel) int {
			p, i := k.PtrParam("p", dsl.F32), k.Param("i", dsl.U64)
			x := k.MakeTensor(p, layout.MustParse("(16,16):(16,1)"))
			return at(func() { x.LocalPartition(layout.MustParse("(4,8):(8,1)"), i) })
		}},
		{"u64 ElemLess extent", "ElemLess: the extent is a u64 Value", func(k *dsl.Kernel) int {
			m := k.Param("m", dsl.U64)
			c := k.IdentityTensor(16, 16)
			return at(func() { c.ElemLess(0, m, 16) })
		}},
	}, dsl.WithTarget(ptx.SM90))

	k := dsl.New("ok", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.F32)
	n, i := k.Param("n", dsl.U32), k.Param("i", dsl.I32)
	x := k.MakeTensorDyn(p, []any{k.Const(dsl.U64, 64), n}, []any{n, k.Const(dsl.I64, 1)})
	k.Store(x.LocalTile([]int{16, 16}, i, k.Const(dsl.U64, 1)).At(0, 0), 1.0)
	if _, err := k.Build(); err != nil {
		t.Fatalf("32-bit Values and 64-bit constants: %v", err)
	}
}

// TestProbe11LaunchBoundsTwice: LaunchBounds declared again with other bounds is a Build
// error at the second call naming the first; the same bounds again are taken. Before: the
// last call won silently, so a helper's LaunchBounds(128, 1), which its code relied on, was
// replaced by a later (256, 1) and the launch checked only that.
func TestProbe11LaunchBoundsTwice(t *testing.T) {
	checkMisuses(t, "dsl/probe11_test.go", []misuse{
		{"other threads", "LaunchBounds(256, 1): the kernel's bounds were already declared as (128, 1) at dsl/probe11_test.go:", func(k *dsl.Kernel) int {
			k.LaunchBounds(128, 1)
			return at(func() { k.LaunchBounds(256, 1) })
		}},
		{"other blocks", "already declared as (128, 1)", func(k *dsl.Kernel) int {
			k.LaunchBounds(128, 1)
			return at(func() { k.LaunchBounds(128, 2) })
		}},
	}, dsl.WithTarget(ptx.SM90))
	k := dsl.New("k", dsl.WithTarget(ptx.SM90))
	k.LaunchBounds(128, 1)
	k.LaunchBounds(128, 1)
	m, err := k.Build()
	if err != nil {
		t.Fatalf("the same bounds twice: %v", err)
	}
	if f := m.Funcs[len(m.Funcs)-1]; f.MaxNTID[0] != 128 || f.MinNCTA != 1 {
		t.Errorf("bounds %v, %d; want 128, 1", f.MaxNTID, f.MinNCTA)
	}
}
