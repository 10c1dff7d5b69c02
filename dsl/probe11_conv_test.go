package dsl_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe11Conversions: To between every pair of numeric types builds on sm_80 and sm_90
// and, on constants, folds to what the conversion computes at run time on the emulator, at
// each type's edges; a few results are pinned to PTX's rules (float to integer saturates,
// NaN gives 0). Before: on sm_90, To between an 8-bit integer and BF16 failed Build (PTX
// has no such cvt, and the DSL emitted one), as did To between F16 and BF16 (ptx.Verify
// refused the cvt.rn the DSL emits, which ptxas assembles).
func TestProbe11Conversions(t *testing.T) {
	nan := math.NaN()
	negZero := math.Copysign(0, -1)
	src := []struct {
		t    dsl.Type
		vals []any
	}{
		{dsl.U64, []any{uint64(0), uint64(1), uint64(1 << 63), uint64(math.MaxUint64), uint64(1<<53 + 1), uint64(70000)}},
		{dsl.I64, []any{int64(0), int64(-1), int64(math.MinInt64), int64(math.MaxInt64), int64(-(1<<53 + 1)), int64(-70000)}},
		{dsl.U32, []any{uint64(0), uint64(0xFFFFFFFF), uint64(0x80000000), uint64(16777217), uint64(70000)}},
		{dsl.I32, []any{int64(0), int64(-1), int64(math.MinInt32), int64(math.MaxInt32), int64(-16777217)}},
		{dsl.U16, []any{uint64(0), uint64(0xFFFF), uint64(0x8000), uint64(2049)}},
		{dsl.I16, []any{int64(0), int64(-1), int64(math.MinInt16), int64(2049)}},
		{dsl.U8, []any{uint64(0), uint64(255), uint64(128)}},
		{dsl.I8, []any{int64(0), int64(-1), int64(-128), int64(127)}},
		{dsl.F64, []any{0.0, negZero, -1.5, nan, math.Inf(1), 1e308, 5e-324, 65520.0, 3.4028235677973366e38, 1 + 1.0/(1<<24), 1e10, -1e10, 4294967295.5}},
		{dsl.F32, []any{0.0, negZero, -1.5, nan, math.Inf(-1), 3e38, 1e-45, 65520.0, 1e10, -2.5}},
		{dsl.F16, []any{0.0, negZero, -1.5, nan, math.Inf(1), 65504.0, 6e-8}},
		{dsl.BF16, []any{0.0, negZero, -1.5, nan, math.Inf(1), 3e38, 1e-40}},
	}
	dsts := []dsl.Type{dsl.U64, dsl.I64, dsl.U32, dsl.I32, dsl.U16, dsl.I16, dsl.U8, dsl.I8, dsl.F64, dsl.F32, dsl.F16, dsl.BF16}
	for _, s := range src {
		for _, d := range dsts {
			for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
				if s.t != d {
					probe11Convert(t, target, s.t, d, s.vals)
				}
			}
		}
	}
	// Pinned results: float to integer saturates and takes NaN to 0; 8-bit integers and
	// BF16 convert exactly.
	k := dsl.New("pin", dsl.WithTarget(ptx.SM90))
	out := k.PtrParam("out", dsl.I32)
	pins := []struct {
		v    dsl.Value
		want int32
	}{
		{k.Param("big", dsl.BF16).To(dsl.I8).To(dsl.I32), 127},
		{k.Param("neg", dsl.BF16).To(dsl.U8).To(dsl.I32), 0},
		{k.Param("nan", dsl.F32).To(dsl.I16).To(dsl.I32), 0},
		{k.Param("m128", dsl.I8).To(dsl.BF16).To(dsl.F32).To(dsl.I32), -128},
		{k.Param("u255", dsl.U8).To(dsl.BF16).To(dsl.F32).To(dsl.I32), 255},
	}
	for i, p := range pins {
		k.Store(out.At(i), p.v)
	}
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	o, err := sys.Malloc(0, 4*len(pins))
	if err != nil {
		t.Fatal(err)
	}
	bf := func(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }
	args := []any{o, bf(3e38), bf(-1.5), float32(math.NaN()), int8(-128), uint8(255)}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "pin", Grid: emu.D1(1), Block: emu.D1(1), Args: args}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[int32](sys, o, len(pins))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pins {
		if got[i] != p.want {
			t.Errorf("pinned conversion %d: %d; want %d", i, got[i], p.want)
		}
	}
}

// probe11Convert checks To(d) of vals of type st, folded against run time, on target.
func probe11Convert(t *testing.T, target ptx.Target, st, d dsl.Type, vals []any) {
	t.Helper()
	s := struct {
		t    dsl.Type
		vals []any
	}{st, vals}
	{
		{
			k := dsl.New("to", dsl.WithTarget(target))
			in, run, fold := k.PtrParam("in", s.t), k.PtrParam("run", d), k.PtrParam("fold", d)
			for i, v := range s.vals {
				k.Store(in.At(i), k.Const(s.t, v))
			}
			for i, v := range s.vals {
				k.Store(run.At(i), k.Load(in.At(i), dsl.Volatile()).To(d))
				k.Store(fold.At(i), k.Const(s.t, v).To(d))
			}
			m, err := k.Build()
			if err != nil {
				t.Errorf("%s: %s.To(%s): %.300v", target, s.t, d, err)
				return
			}
			sys, err := emu.New(1)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := sys.Malloc(0, 8*len(s.vals))
			r, _ := sys.Malloc(0, 8*len(s.vals))
			f, _ := sys.Malloc(0, 8*len(s.vals))
			if err := sys.Launch(emu.Launch{Module: m, Entry: "to", Grid: emu.D1(1), Block: emu.D1(1), Args: []any{a, r, f}}); err != nil {
				t.Errorf("%s: %s.To(%s): %v", target, s.t, d, err)
				return
			}
			es := d.Bits() / 8
			rb, fb := make([]byte, len(s.vals)*es), make([]byte, len(s.vals)*es)
			if err := sys.Read(r, rb); err != nil {
				t.Fatal(err)
			}
			if err := sys.Read(f, fb); err != nil {
				t.Fatal(err)
			}
			for i, v := range s.vals {
				x, y := rb[i*es:(i+1)*es], fb[i*es:(i+1)*es]
				if string(x) != string(y) && !(d.Kind() == ptx.KindFloat && isNaNBits(d, x) && isNaNBits(d, y)) {
					t.Errorf("%s: %s(%v).To(%s): at run time % x, folded % x", target, s.t, fmt.Sprint(v), d, x, y)
				}
			}
		}
	}
}
