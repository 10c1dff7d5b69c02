package emu

import (
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// The special values of f16/bf16 arithmetic, conversions and atomics, as an H200 gave them
// (jit TestGPUSemantics, 2026-11-29; docs/facts.md). Every case failed before the emulator
// followed the GPU: it gave the host's NaNs (a quiet NaN with the input's sign and payload),
// 0 for every NaN converted to an integer, and refused cvt.rn/.rz.tf32.f32.

// h2 reads %x0, %x1, %x2 into %h0, %h1, %h2; y16 writes %h3 to %y0.
const (
	h2  = "cvt.u16.u64 %h0, %x0; cvt.u16.u64 %h1, %x1; cvt.u16.u64 %h2, %x2; "
	y16 = "; cvt.u64.u16 %y0, %h3;"
	w2  = "cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; "
	y32 = "; cvt.u64.u32 %y0, %w3;"
)

// TestCanonicalNaN16: an f16 or bf16 arithmetic result that is NaN is 0x7fff, in each half
// of a packed pair, neg and abs (HADD2/HFMA2 on the GPU) and min/max of two NaNs included.
func TestCanonicalNaN16(t *testing.T) {
	const c = 0x7fff
	runOpCases(t, []opCase{
		{h2 + "add.f16 %h3, %h0, %h1" + y16, [4]uint64{0x7c00, 0xfc00}, c, 0},
		{h2 + "add.f16 %h3, %h0, %h1" + y16, [4]uint64{0x7e01, 0x3c00}, c, 0},
		{h2 + "add.f16 %h3, %h0, %h1" + y16, [4]uint64{0x7c01, 0}, c, 0},
		{h2 + "sub.f16 %h3, %h0, %h1" + y16, [4]uint64{0x3c00, 0xfe01}, c, 0},
		{h2 + "mul.f16 %h3, %h0, %h1" + y16, [4]uint64{0, 0xfc00}, c, 0},
		{h2 + "fma.rn.f16 %h3, %h0, %h1, %h0" + y16, [4]uint64{0xfc00, 0}, c, 0},
		{h2 + "add.bf16 %h3, %h0, %h1" + y16, [4]uint64{0x7f80, 0xff80}, c, 0},
		{h2 + "add.bf16 %h3, %h0, %h1" + y16, [4]uint64{0x7fc1, 0x3f80}, c, 0},
		{h2 + "mul.bf16 %h3, %h0, %h1" + y16, [4]uint64{0xffc1, 0x3f80}, c, 0},
		{h2 + "fma.rn.bf16 %h3, %h0, %h1, %h0" + y16, [4]uint64{0x7fc1, 0x3f80}, c, 0},
		{h2 + "neg.f16 %h3, %h0" + y16, [4]uint64{0x7e01}, c, 0},
		{h2 + "neg.f16 %h3, %h0" + y16, [4]uint64{0xfc01}, c, 0},
		{h2 + "abs.f16 %h3, %h0" + y16, [4]uint64{0xfe01}, c, 0},
		{h2 + "neg.bf16 %h3, %h0" + y16, [4]uint64{0x7fc1}, c, 0},
		{h2 + "abs.bf16 %h3, %h0" + y16, [4]uint64{0xffc1}, c, 0},
		{h2 + "min.f16 %h3, %h0, %h1" + y16, [4]uint64{0x7e01, 0xfe02}, c, 0},
		{h2 + "min.f16 %h3, %h0, %h1" + y16, [4]uint64{0xfc01, 0x7c01}, c, 0},
		{h2 + "max.bf16 %h3, %h0, %h1" + y16, [4]uint64{0x7fc1, 0xffc2}, c, 0},
		{h2 + "min.NaN.f16 %h3, %h0, %h1" + y16, [4]uint64{0x3c00, 0xfe01}, c, 0},
		{h2 + "ex2.approx.f16 %h3, %h0" + y16, [4]uint64{0xfe01}, c, 0},
		{h2 + "tanh.approx.f16 %h3, %h0" + y16, [4]uint64{0x7e01}, c, 0},
		{h2 + "ex2.approx.ftz.bf16 %h3, %h0" + y16, [4]uint64{0xffc1}, c, 0},
		{w2 + "add.f16x2 %w3, %w0, %w1" + y32, [4]uint64{0x7c007e01, 0xfc003c00}, 0x7fff7fff, 0},
		{w2 + "add.bf16x2 %w3, %w0, %w1" + y32, [4]uint64{0x7f807fc1, 0xff803f80}, 0x7fff7fff, 0},
		{w2 + "neg.f16x2 %w3, %w0" + y32, [4]uint64{0x7e013c00}, 0x7fffbc00, 0},
		{w2 + "abs.bf16x2 %w3, %w0" + y32, [4]uint64{0xffc1bf80}, 0x7fff3f80, 0},
		{w2 + "max.f16x2 %w3, %w0, %w1" + y32, [4]uint64{0x7e01fe01, 0xfe023c00}, 0x7fff3c00, 0},
		// Not NaN: unchanged; a NaN operand of min/max gives the other.
		{h2 + "neg.f16 %h3, %h0" + y16, [4]uint64{0x3c00}, 0xbc00, 0},
		{h2 + "abs.f16 %h3, %h0" + y16, [4]uint64{0xbc00}, 0x3c00, 0},
		{h2 + "neg.bf16 %h3, %h0" + y16, [4]uint64{0x3f80}, 0xbf80, 0},
		{h2 + "min.f16 %h3, %h0, %h1" + y16, [4]uint64{0x7e01, 0x3c00}, 0x3c00, 0},
		{h2 + "max.bf16 %h3, %h0, %h1" + y16, [4]uint64{0x3f80, 0xffc1}, 0x3f80, 0},
	})
}

// TestCvtNaN: cvt.f16.f32 and cvt.bf16.f32 (F2FP) give a NaN as 0x7fff, cvt.f32.f16
// (HADD2.F32) as 0x7fffffff; the other float conversions keep the sign and payload; a NaN
// converted to an integer is 0 (F2I .NTZ: from f16/bf16/f32 to at most 32 bits) or the
// destination's sign bit (from f64, or to 64 bits).
func TestCvtNaN(t *testing.T) {
	runOpCases(t, []opCase{
		{w2 + "cvt.rn.f16.f32 %h3, %w0" + y16, [4]uint64{0x7fc00001}, 0x7fff, 0},
		{w2 + "cvt.rn.f16.f32 %h3, %w0" + y16, [4]uint64{0xffc12345}, 0x7fff, 0},
		{w2 + "cvt.rz.f16.f32 %h3, %w0" + y16, [4]uint64{0xffc12345}, 0x7fff, 0},
		{w2 + "cvt.rn.bf16.f32 %h3, %w0" + y16, [4]uint64{0xffc00000}, 0x7fff, 0},
		{w2 + "cvt.rz.bf16.f32 %h3, %w0" + y16, [4]uint64{0xffc12345}, 0x7fff, 0},
		{w2 + "cvt.rn.f16x2.f32 %w3, %w0, %w1" + y32, [4]uint64{0xffc12345, 0x7fc00001}, 0x7fff7fff, 0},
		{w2 + "cvt.rn.bf16x2.f32 %w3, %w0, %w1" + y32, [4]uint64{0xffc12345, 0x7fc00001}, 0x7fff7fff, 0},
		{h2 + "cvt.f32.f16 %w3, %h0" + y32, [4]uint64{0x7e01}, 0x7fffffff, 0},
		{h2 + "cvt.f32.f16 %w3, %h0" + y32, [4]uint64{0xfc01}, 0x7fffffff, 0},
		// Kept: not canonicalized on the GPU either.
		{w2 + "cvt.rn.f16.f32 %h3, %w0" + y16, [4]uint64{0x477fff00}, 0x7c00, 0},
		{h2 + "cvt.f32.bf16 %w3, %h0" + y32, [4]uint64{0x7fc1}, 0x7fc10000, 0},
		{h2 + "cvt.f64.f16 %y0, %h0", [4]uint64{0xfe01}, 0xfff8040000000000, 0},
		{"cvt.rn.f16.f64 %h3, %x0" + y16, [4]uint64{0xfff8000000000001}, 0xfe00, 0},
		// NaN to integer.
		{w2 + "cvt.rzi.s32.f32 %w3, %w0" + y32, [4]uint64{0x7fc00001}, 0, 0},
		{w2 + "cvt.rzi.u32.f32 %w3, %w0" + y32, [4]uint64{0x7fc00001}, 0, 0},
		{w2 + "cvt.rni.s32.f32 %w3, %w0" + y32, [4]uint64{0x7fc00001}, 0, 0},
		{w2 + "cvt.rzi.s16.f32 %h3, %w0" + y16, [4]uint64{0x7fc00001}, 0, 0},
		{h2 + "cvt.rzi.s32.f16 %w3, %h0" + y32, [4]uint64{0x7e01}, 0, 0},
		{"cvt.rzi.s64.f64 %y0, %x0", [4]uint64{0x7ff8000000000001}, 0x8000000000000000, 0},
		{"cvt.rni.s64.f64 %y0, %x0", [4]uint64{0xfff8000000000001}, 0x8000000000000000, 0},
		{"cvt.rmi.s64.f64 %y0, %x0", [4]uint64{0x7ff8000000000001}, 0x8000000000000000, 0},
		{"cvt.rzi.u64.f64 %y0, %x0", [4]uint64{0x7ff8000000000001}, 0x8000000000000000, 0},
		{w2 + "cvt.rzi.s64.f32 %y0, %w0", [4]uint64{0xffc00000}, 0x8000000000000000, 0},
		{w2 + "cvt.rzi.u64.f32 %y0, %w0", [4]uint64{0x7fc00001}, 0x8000000000000000, 0},
		{h2 + "cvt.rzi.s64.f16 %y0, %h0", [4]uint64{0x7e01}, 0x8000000000000000, 0},
		{"cvt.rzi.s32.f64 %w3, %x0" + y32, [4]uint64{0x7ff8000000000001}, 0x80000000, 0},
		{"cvt.rzi.u32.f64 %w3, %x0" + y32, [4]uint64{0x7ff8000000000001}, 0x80000000, 0},
		// Out of range: unchanged.
		{"cvt.rzi.u64.f64 %y0, %x0", [4]uint64{0xbff0000000000000}, 0, 0},
		{"cvt.rzi.u64.f64 %y0, %x0", [4]uint64{0x43f0000000000000}, 0xffffffffffffffff, 0},
	})
}

// TestCvtTF32RnRz: cvt.rn/.rz{.relu}.tf32.f32 (sm_90), refused before.
func TestCvtTF32RnRz(t *testing.T) {
	var cases []opCase
	add := func(form string, ios ...uint64) {
		for i := 0; i < len(ios); i += 2 {
			cases = append(cases, opCase{w2 + "cvt." + form + ".tf32.f32 %w3, %w0" + y32, [4]uint64{ios[i]}, ios[i+1], 0})
		}
	}
	add("rn", 0x3f800fff, 0x3f800000, 0x3f801000, 0x3f800000, 0x3f803000, 0x3f804000, 0x3f801001, 0x3f802000,
		0x7f7fffff, 0x7f800000, 0xff7fffff, 0xff800000, 0x00001fff, 0x2000, 0x7f800001, 0x7fffe000, 0xffc00001, 0x7fffe000,
		0x7f800000, 0x7f800000, 0xff800000, 0xff800000)
	add("rz", 0x3f803fff, 0x3f802000, 0x7f7fffff, 0x7f7fe000, 0xff7fffff, 0xff7fe000, 0x7fc00001, 0x7fffe000,
		0x7f800000, 0x7f800000, 0xff800000, 0xff800000)
	add("rn.relu", 0xbf800000, 0, 0x3f803000, 0x3f804000, 0x7fc00001, 0x7fffe000, 0xffc00001, 0x7fffe000,
		0xff800000, 0, 0x7f800000, 0x7f800000, 0x80000000, 0)
	add("rz.relu", 0xbf803fff, 0, 0x3f803fff, 0x3f802000, 0x7fc00001, 0x7fffe000, 0xff800000, 0)
	runOpCases(t, cases)
}

// TestAtomNaN: atom and red add on f32 and the halves store the canonical NaN (0x7fffffff,
// 0x7fff per half); f64 keeps the host's NaN as the GPU does.
func TestAtomNaN(t *testing.T) {
	st32 := w2 + "st.global.b32 [%rd3], %w0; "
	ld32 := "; ld.global.b32 %w3, [%rd3]" + y32
	st16 := h2 + "st.global.b16 [%rd3], %h0; "
	ld16 := "; ld.global.b16 %h3, [%rd3]" + y16
	runOpCases(t, []opCase{
		{st32 + "atom.global.add.f32 %w3, [%rd3], %w1" + ld32, [4]uint64{0x7f800000, 0xff800000}, 0x7fffffff, 0},
		{st32 + "atom.global.add.f32 %w3, [%rd3], %w1" + ld32, [4]uint64{0x7fc00001, 0x3f800000}, 0x7fffffff, 0},
		{st32 + "red.global.add.f32 [%rd3], %w1" + ld32, [4]uint64{0x7f800000, 0xff800000}, 0x7fffffff, 0},
		{st32 + "red.global.add.f32 [%rd3], %w1" + ld32, [4]uint64{0x7fc00001, 0x3f800000}, 0x7fffffff, 0},
		{st16 + "atom.global.add.noftz.f16 %h3, [%rd3], %h1" + ld16, [4]uint64{0x7c00, 0xfc00}, 0x7fff, 0},
		{st16 + "atom.global.add.noftz.f16 %h3, [%rd3], %h1" + ld16, [4]uint64{0x7e01, 0x3c00}, 0x7fff, 0},
		{st16 + "atom.global.add.noftz.bf16 %h3, [%rd3], %h1" + ld16, [4]uint64{0xffc1, 0x3f80}, 0x7fff, 0},
		{st32 + "atom.global.add.noftz.f16x2 %w3, [%rd3], %w1" + ld32, [4]uint64{0x7c007e01, 0xfc003c00}, 0x7fff7fff, 0},
		{st32 + "atom.global.add.noftz.bf16x2 %w3, [%rd3], %w1" + ld32, [4]uint64{0x7f807fc1, 0xff803f80}, 0x7fff7fff, 0},
		{st32 + "red.global.add.noftz.f16x2 [%rd3], %w1" + ld32, [4]uint64{0x7c007e01, 0xfc003c00}, 0x7fff7fff, 0},
		{"st.global.b64 [%rd3], %x0; atom.global.add.f64 %y0, [%rd3], %x1; ld.global.b64 %y0, [%rd3]",
			[4]uint64{0x7ff0000000000000, 0xfff0000000000000}, 0xfff8000000000000, 0},
	})
}

// TestAtomMinMaxNaN: the atomics' min and max on f32 and the halves (vector atom min/max on
// f16/bf16, bulk reductions) follow min.f32/min.f16: a NaN operand gives the other operand,
// two NaNs the canonical NaN (by analogy: not measured on an atomic); they gave the host's
// math.Min/Max, a NaN with its payload.
func TestAtomMinMaxNaN(t *testing.T) {
	for _, c := range []struct {
		op           uint8
		t            ptx.Type
		old, v, want uint64
	}{
		{aMin, ptx.F32, 0x7fc00001, 0x3f800000, 0x3f800000},
		{aMax, ptx.F32, 0x3f800000, 0xffc00001, 0x3f800000},
		{aMin, ptx.F32, 0x7fc00001, 0xffc00002, 0x7fffffff},
		{aMin, ptx.F32, 0x00000000, 0x80000000, 0x80000000},
		{aMax, ptx.F32, 0x80000000, 0x00000000, 0x00000000},
		{aMin, ptx.F16, 0x7e01, 0x3c00, 0x3c00},
		{aMax, ptx.BF16, 0xffc1, 0x7fc2, 0x7fff},
		{aMax, ptx.F16x2, 0x7e01fe01, 0xfe023c00, 0x7fff3c00},
		{aAdd, ptx.BF16x2, 0x7f807fc1, 0xff803f80, 0x7fff7fff},
	} {
		if got := atomApply(c.op, c.t, c.old, c.v, 0); got != c.want {
			t.Errorf("atom op %d .%s of %#x, %#x: %#x, want %#x", c.op, c.t, c.old, c.v, got, c.want)
		}
	}
}
