package emu

import (
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe19CvtIntToFloatRounding: cvt of a 64-bit integer beyond 2^53 to a float with a
// directed rounding mode, or to a narrow float at a tie, rounded twice (to float64 nearest,
// then to the destination) and gave a wrong value silently. Probe 19.
func TestProbe19CvtIntToFloatRounding(t *testing.T) {
	runOpCases(t, []opCase{
		{"cvt.rz.f64.s64 %y0, %x0", [4]uint64{1<<54 + 3}, f64b(1 << 54), 0},
		{"cvt.rz.f64.s64 %y0, %x0", [4]uint64{u(-(1<<54 + 3))}, f64b(-(1 << 54)), 0},
		{"cvt.rm.f64.u64 %y0, %x0", [4]uint64{1<<63 + 1<<11 - 1}, f64b(1 << 63), 0},
		{"cvt.rp.f64.s64 %y0, %x0", [4]uint64{1<<54 + 1}, f64b(1<<54 + 4), 0},
		{"cvt.rm.f64.s64 %y0, %x0", [4]uint64{u(-(1<<54 + 1))}, f64b(-(1<<54 + 4)), 0},
		{"cvt.rz.f64.s64 %y0, %x0", [4]uint64{1 << 63}, f64b(-(1 << 63)), 0},
		{"cvt.rz.f64.u64 %y0, %x0", [4]uint64{1<<64 - 1}, f64b(1<<64 - 1<<11), 0},
		{"cvt.rz.f64.s64 %y0, %x0", [4]uint64{12345}, f64b(12345), 0},
		{"cvt.rz.f32.s64 %w0, %x0; cvt.u64.u32 %y0, %w0;", [4]uint64{1<<60 + 1<<37 - 1}, f32b(1 << 60), 0},
		{"cvt.rp.f32.u64 %w0, %x0; cvt.u64.u32 %y0, %w0;", [4]uint64{1<<60 + 1}, f32b(1<<60 + 1<<37), 0},
		{"cvt.rn.f32.u64 %w0, %x0; cvt.u64.u32 %y0, %w0;", [4]uint64{1<<60 + 1<<36 + 1}, f32b(1<<60 + 1<<37), 0},
		{"cvt.rn.bf16.s64 %h0, %x0; cvt.u64.u16 %y0, %h0;", [4]uint64{1<<60 + 1<<52 + 1}, bf16(1<<60 + 1<<53), 0},
		{"cvt.rz.bf16.u64 %h0, %x0; cvt.u64.u16 %y0, %h0;", [4]uint64{1<<60 + 1<<53 - 1}, bf16(1 << 60), 0},
	})
}

// TestProbe19FTZHalf: .ftz on f16 and f16x2 arithmetic (add, mul, fma, min), on neg and abs
// of f32 and f16, and on setp.f16 was taken as absent: a subnormal input or result went
// through instead of becoming the zero of its sign. Probe 19.
func TestProbe19FTZHalf(t *testing.T) {
	h := "cvt.u16.u64 %h0, %x0; cvt.u16.u64 %h1, %x1; "
	w := "cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; "
	runOpCases(t, []opCase{
		{h + "mul.rn.ftz.f16 %h2, %h0, %h1; cvt.u64.u16 %y0, %h2;", [4]uint64{3, h16(1)}, 0, 0},
		{h + "add.ftz.f16 %h2, %h0, %h1; cvt.u64.u16 %y0, %h2;", [4]uint64{0x8003, 0x8000}, 0x8000, 0},
		{h + "mul.ftz.f16 %h2, %h0, %h1; cvt.u64.u16 %y0, %h2;", [4]uint64{h16(0x1p-10), h16(-0x1p-10)}, 0x8000, 0},
		{h + "fma.rn.ftz.f16 %h2, %h0, %h1, %h1; cvt.u64.u16 %y0, %h2;", [4]uint64{h16(1), 3}, 0, 0},
		{h + "min.ftz.f16 %h2, %h0, %h1; cvt.u64.u16 %y0, %h2;", [4]uint64{3, h16(1)}, 0, 0},
		{h + "neg.ftz.f16 %h2, %h0; cvt.u64.u16 %y0, %h2;", [4]uint64{3}, 0x8000, 0},
		{h + "abs.ftz.f16 %h2, %h0; cvt.u64.u16 %y0, %h2;", [4]uint64{0x8003}, 0, 0},
		{h + "setp.gt.ftz.f16 %p1, %h0, %h1;", [4]uint64{3, 0}, 0, 0},
		{w + "mul.ftz.f16x2 %w2, %w0, %w1; cvt.u64.u32 %y0, %w2;", [4]uint64{3<<16 | h16(2), h16(1)<<16 | h16(1)}, h16(2), 0},
		{w + "neg.ftz.f32 %w2, %w0; cvt.u64.u32 %y0, %w2;", [4]uint64{1}, 0x80000000, 0},
		{w + "abs.ftz.f32 %w2, %w0; cvt.u64.u32 %y0, %w2;", [4]uint64{0x80000001}, 0, 0},
		// Without .ftz subnormals stay; with it normal values are untouched, and a NaN is
		// 0x7fff as without it (abs.ftz.f16 compiles to HADD2.FTZ R, |R0|, -RZ; abs.f16 of
		// 0xfe01, HADD2 without .FTZ, gave 0x7fff on an H200; this case expected 0x7e01, the
		// emulator's bit operation, before).
		{h + "mul.rn.f16 %h2, %h0, %h1; cvt.u64.u16 %y0, %h2;", [4]uint64{3, h16(1)}, 3, 0},
		{h + "setp.gt.f16 %p1, %h0, %h1;", [4]uint64{3, 0}, 0, 1},
		{h + "neg.ftz.f16 %h2, %h0; cvt.u64.u16 %y0, %h2;", [4]uint64{0x0400}, 0x8400, 0},
		{h + "abs.ftz.f16 %h2, %h0; cvt.u64.u16 %y0, %h2;", [4]uint64{0xfe01}, 0x7fff, 0},
		{w + "neg.f32 %w2, %w0; cvt.u64.u32 %y0, %w2;", [4]uint64{1}, 0x80000001, 0},
	})
}

// TestProbe19PrmtModes: prmt.b32.b4e picked its bytes as 8-s, 7-s, 6-s, 5-s, which is the
// ISA's backward extract (d.b0 = s, d.b1 = s-1, d.b2 = s-2, d.b3 = s-3, mod 8) for s = 0
// only: prmt.b4e with c = 1 of bytes 0..7 gave 0x04050607, not 0x06070001. The other modes,
// checked against the same table, stay. Probe 19.
func TestProbe19PrmtModes(t *testing.T) {
	const a, b = 0x03020100, 0x07060504 // byte i holds i
	want := map[string][4]uint64{       // by c & 3, d as bytes b3 b2 b1 b0
		"f4e":  {0x03020100, 0x04030201, 0x05040302, 0x06050403},
		"b4e":  {0x05060700, 0x06070001, 0x07000102, 0x00010203},
		"rc8":  {0x00000000, 0x01010101, 0x02020202, 0x03030303},
		"ecl":  {0x03020100, 0x03020101, 0x03020202, 0x03030303},
		"ecr":  {0x00000000, 0x01010100, 0x02020100, 0x03020100},
		"rc16": {0x01000100, 0x03020302, 0x01000100, 0x03020302},
	}
	s := newSys(t, 1)
	in := mustMalloc(t, s, 0, 32)
	out := mustMalloc(t, s, 0, 16)
	for _, mode := range []string{"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"} {
		m := asm(t, replace(opKernel, "INSTR", "cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; prmt.b32."+mode+" %w3, %w0, %w1, %w2; cvt.u64.u32 %y0, %w3;"))
		for c := uint64(0); c < 4; c++ {
			must(t, WriteSlice(s, in, []uint64{a, b, c | 0xfffc, 0}))
			if err := launch1(s, m, "op", 1, 1, in, out); err != nil {
				t.Fatalf("prmt.%s: %v", mode, err)
			}
			got, err := ReadSlice[uint64](s, out, 1)
			must(t, err)
			if got[0] != want[mode][c] {
				t.Errorf("prmt.b32.%s with c&3 = %d: got %#08x, want %#08x", mode, c, got[0], want[mode][c])
			}
		}
	}
}

// TestProbe19CvtSignedDestWiderRegister: a cvt whose signed integer result is narrower than
// its destination register sign-extends it to the register's width, as ld does (PTX's
// relaxed type-checking rules for destination operands: "if the instruction type is signed
// integer, the data is sign-extended; otherwise zero-extended"). It zero-extended:
// cvt.s8.s64 of 0x1ff into a .b32 register gave 0x000000ff, not 0xffffffff. Probe 19.
func TestProbe19CvtSignedDestWiderRegister(t *testing.T) {
	runOpCases(t, []opCase{
		{"cvt.s8.s64 %w0, %x0; cvt.u64.u32 %y0, %w0;", [4]uint64{0x1ff}, 0xffffffff, 0},
		{"cvt.u32.u64 %w0, %x0; cvt.rni.s8.f32 %h0, %w0; cvt.u64.u16 %y0, %h0;", [4]uint64{f32b(-1)}, 0xffff, 0},
		{"cvt.u32.u64 %w0, %x0; cvt.rzi.s16.f32 %w1, %w0; cvt.u64.u32 %y0, %w1;", [4]uint64{f32b(-40000)}, 0xffff8000, 0},
		{"cvt.u32.u64 %w0, %x0; cvt.sat.s8.s32 %w1, %w0; cvt.u64.u32 %y0, %w1;", [4]uint64{m32(-300)}, 0xffffff80, 0},
		{"cvt.u32.u64 %w0, %x0; cvt.rzi.s32.f32 %y0, %w0;", [4]uint64{f32b(-2)}, u(-2), 0},
		// Unsigned and bit results stay zero-extended; a register as wide as the type stays.
		{"cvt.u8.u64 %w0, %x0; cvt.u64.u32 %y0, %w0;", [4]uint64{0x1ff}, 0xff, 0},
		{"cvt.u32.u64 %w0, %x0; cvt.rzi.u16.f32 %w1, %w0; cvt.u64.u32 %y0, %w1;", [4]uint64{f32b(65535)}, 0xffff, 0},
		{"cvt.u16.u64 %h0, %x0; cvt.s16.s8 %h1, %h0; cvt.u64.u16 %y0, %h1;", [4]uint64{0x80}, 0xff80, 0},
		{"cvt.s8.s64 %w0, %x0; cvt.u64.u32 %y0, %w0;", [4]uint64{0x17f}, 0x7f, 0},
	})
}

// TestProbe19F64DirectedRcpSqrt: rcp and sqrt of .f64 with .rz, .rm or .rp rounded to
// nearest whatever the mode (sqrt.rz.f64 of 2 gave 0x3ff6a09e667f3bcd, above the root; the
// correct 0x...bcc is below it): they are refused now as the emulator refuses every other
// directed f64 rounding, naming the instruction; .rn stays. Probe 19.
func TestProbe19F64DirectedRcpSqrt(t *testing.T) {
	s := newSys(t, 1)
	in := mustMalloc(t, s, 0, 32)
	out := mustMalloc(t, s, 0, 16)
	must(t, WriteSlice(s, in, []uint64{f64b(2), 0, 0, 0}))
	for _, c := range []struct {
		instr string
		want  uint64 // for .rn; 0: refused
	}{
		{"sqrt.rz.f64 %y0, %x0", 0},
		{"sqrt.rm.f64 %y0, %x0", 0},
		{"sqrt.rp.f64 %y0, %x0", 0},
		{"rcp.rz.f64 %y0, %x0", 0},
		{"rcp.rp.f64 %y0, %x0", 0},
		{"sqrt.rn.f64 %y0, %x0", f64b(math.Sqrt(2))},
		{"rcp.rn.f64 %y0, %x0", f64b(0.5)},
	} {
		err := launch1(s, asm(t, replace(opKernel, "INSTR", c.instr)), "op", 1, 1, in, out)
		if c.want == 0 {
			if err == nil {
				got, _ := ReadSlice[uint64](s, out, 1)
				t.Errorf("%s ran (gave %#x); want it refused", c.instr, got[0])
				continue
			}
			wantErr(t, err, KindUnsupported, strings.Fields(c.instr)[0], "directed rounding of f64")
			continue
		}
		must(t, err)
		got, err := ReadSlice[uint64](s, out, 1)
		must(t, err)
		if got[0] != c.want {
			t.Errorf("%s: got %#x, want %#x", c.instr, got[0], c.want)
		}
	}
}

// TestProbe19ReduxSignedZero: redux.sync.min/max.f32 over +0 and -0 gave the zero of the
// first lane holding one (-0 in lane 0 made max -0; in lane 5, min +0), so the result hung
// on the lane order; -0 is below +0 now, as min.f32 and max.f32 have it. Probe 19.
func TestProbe19ReduxSignedZero(t *testing.T) {
	src := `.version 8.6
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 in, .param .u64 out)
{
	.reg .b64 %rd<4>;
	.reg .b32 %r<4>;
	.reg .f32 %f<4>;
	ld.param.u64 %rd0, [in];
	ld.param.u64 %rd1, [out];
	mov.u32 %r0, %tid.x;
	mul.wide.u32 %rd2, %r0, 4;
	add.u64 %rd3, %rd0, %rd2;
	ld.global.f32 %f0, [%rd3];
	redux.sync.min.f32 %f1, %f0, 0xffffffff;
	redux.sync.max.f32 %f2, %f0, 0xffffffff;
	.reg .pred %p<2>;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 bra DONE;
	st.global.f32 [%rd1], %f1;
	st.global.f32 [%rd1+4], %f2;
DONE:
	ret;
}`
	m, err := ptx.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, neg := range []int{0, 5, 31} {
		s := newSys(t, 1)
		in := mustMalloc(t, s, 0, 128)
		out := mustMalloc(t, s, 0, 8)
		v := make([]uint32, 32)
		v[neg] = 0x80000000
		must(t, WriteSlice(s, in, v))
		if err := launch1(s, m, "k", 1, 32, in, out); err != nil {
			t.Fatal(err)
		}
		if got := readU32(t, s, out, 2); got[0] != 0x80000000 || got[1] != 0 {
			t.Errorf("-0 in lane %d, +0 elsewhere: min %#x, max %#x; want 0x80000000, 0", neg, got[0], got[1])
		}
	}
}
