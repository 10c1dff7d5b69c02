package dsl_test

import (
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe19ConstRounding: float constants of 64-bit integers and f64 values narrowed to
// f16/bf16 rounded twice (float64 then float32, or float32 then the narrow type), so a
// folded constant differed from what cvt computes at run time, and from Go's float32: an
// int64 2^60+2^36+1 as F32 was 2^60 (want 2^60+2^37), f64 1+2^-11+2^-40 as F16 was 1.0
// (want 1+2^-10). Each case stores the folded constant and the same conversion done at run
// time (the operand loaded from memory) on the emulator; both must be the correctly rounded
// bits. Probe 19.
func TestProbe19ConstRounding(t *testing.T) {
	type conv struct {
		name string
		from dsl.Type // the runtime operand's type
		bits uint64   // its bits
		to   dsl.Type
		fold func(k *dsl.Kernel) dsl.Value
		want uint64 // the result's bits
	}
	const (
		i60  = int64(1<<60 + 1<<36 + 1)
		b60  = int64(1<<60 + 1<<52 + 1)
		near = 1 + 0x1p-11 + 0x1p-40
		bnr  = 1 + 0x1p-8 + 0x1p-40
		u63  = uint64(1<<63 + 1<<60 + 1<<39 + 1)
	)
	var (
		neg60 = -i60
	)
	cases := []conv{
		{"Const(F32, int64)", dsl.I64, uint64(i60), dsl.F32, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.F32, i60) }, uint64(math.Float32bits(0x1p60 + 0x1p37))},
		{"Const(F32, -int64)", dsl.I64, uint64(neg60), dsl.F32, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.F32, -i60) }, uint64(math.Float32bits(-0x1p60 - 0x1p37))},
		{"I64.To(F32)", dsl.I64, uint64(i60), dsl.F32, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.I64, i60).To(dsl.F32) }, uint64(math.Float32bits(0x1p60 + 0x1p37))},
		{"U64.To(F32)", dsl.U64, u63, dsl.F32, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.U64, u63).To(dsl.F32) }, uint64(math.Float32bits(0x1p63 + 0x1p60 + 0x1p40))},
		{"I64.To(BF16)", dsl.I64, uint64(b60), dsl.BF16, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.I64, b60).To(dsl.BF16) }, 0x5d81},
		{"Const(F16, f64)", dsl.F64, math.Float64bits(near), dsl.F16, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.F16, near) }, 0x3c01},
		{"F64.To(F16)", dsl.F64, math.Float64bits(near), dsl.F16, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.F64, near).To(dsl.F16) }, 0x3c01},
		{"Const(BF16, f64)", dsl.F64, math.Float64bits(bnr), dsl.BF16, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.BF16, bnr) }, 0x3f81},
		{"F64.To(BF16) tiny", dsl.F64, math.Float64bits(-1e-50), dsl.BF16, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.F64, -1e-50).To(dsl.BF16) }, 0x8000},
		// Exact values stay exact.
		{"Const(F16, 0.5)", dsl.F64, math.Float64bits(0.5), dsl.F16, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.F16, 0.5) }, 0x3800},
		{"I64.To(F64)", dsl.I64, uint64(i60), dsl.F64, func(k *dsl.Kernel) dsl.Value { return k.Const(dsl.I64, i60).To(dsl.F64) }, math.Float64bits(float64(i60))},
	}
	for _, c := range cases {
		k := dsl.New("conv", dsl.WithTarget(ptx.SM90))
		in := k.PtrParam("in", c.from)
		out := k.PtrParam("out", c.to)
		folded := c.fold(k)
		if !folded.IsConst() {
			t.Fatalf("%s: not folded", c.name)
		}
		k.Store(out.At(0), folded)
		k.Store(out.At(1), k.Load(in.At(0)).To(c.to))
		m, err := k.Build()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sys, err := emu.New(1)
		if err != nil {
			t.Fatal(err)
		}
		pin, _ := sys.Malloc(0, 8)
		pout, _ := sys.Malloc(0, 16)
		if err := emu.WriteSlice(sys, pin, []uint64{c.bits}); err != nil {
			t.Fatal(err)
		}
		if err := sys.Launch(emu.Launch{Module: m, Entry: "conv", Grid: emu.D1(1), Block: emu.D1(1), Args: []any{pin, pout}}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got [2]uint64
		switch c.to.Bits() {
		case 16:
			v, _ := emu.ReadSlice[uint16](sys, pout, 2)
			got = [2]uint64{uint64(v[0]), uint64(v[1])}
		case 32:
			v, _ := emu.ReadSlice[uint32](sys, pout, 2)
			got = [2]uint64{uint64(v[0]), uint64(v[1])}
		default:
			v, _ := emu.ReadSlice[uint64](sys, pout, 2)
			got = [2]uint64{v[0], v[1]}
		}
		if got[0] != c.want || got[1] != c.want {
			t.Errorf("%s: folded %#x, at run time %#x; want %#x", c.name, got[0], got[1], c.want)
		}
	}
}
