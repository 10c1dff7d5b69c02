package emu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/internal/fp"
)

// opKernel runs one instruction per thread: sources %x0..%x2 (b64, loaded from the input),
// %p0 = (x3 != 0); the instruction writes %y0 and/or %p1; the kernel stores y0 and p1.
const opKernel = `
.visible .entry op(.param .u64 in, .param .u64 out)
{
	.reg .b64 %x<4>;
	.reg .b64 %y<2>;
	.reg .b32 %w<4>;
	.reg .b16 %h<4>;
	.reg .pred %p<2>;
	.reg .u64 %rd<6>;
	.reg .u32 %r<2>;
	ld.param.u64 %rd0, [in];
	ld.param.u64 %rd1, [out];
	mov.u32 %r0, %tid.x;
	mul.wide.u32 %rd2, %r0, 32;
	add.u64 %rd3, %rd0, %rd2;
	ld.global.b64 %x0, [%rd3];
	ld.global.b64 %x1, [%rd3+8];
	ld.global.b64 %x2, [%rd3+16];
	ld.global.b64 %x3, [%rd3+24];
	mov.b64 %y0, 0;
	setp.ne.u64 %p0, %x3, 0;
	setp.ne.u64 %p1, %x3, %x3;
	INSTR;
	selp.u64 %y1, 1, 0, %p1;
	mul.wide.u32 %rd2, %r0, 16;
	add.u64 %rd4, %rd1, %rd2;
	st.global.b64 [%rd4], %y0;
	st.global.b64 [%rd4+8], %y1;
	ret;
}`

type opCase struct {
	instr string
	in    [4]uint64
	y     uint64
	p     uint64 // expected p1 (0 unless the instruction writes it)
}

func f32b(f float32) uint64 { return uint64(math.Float32bits(f)) }
func f64b(f float64) uint64 { return math.Float64bits(f) }
func h16(f float32) uint64  { return uint64(fp.F32ToF16(f)) }
func bf16(f float32) uint64 { return uint64(fp.F32ToBF16(f)) }
func u(x int64) uint64      { return uint64(x) }
func m32(x int64) uint64    { return uint64(x) & 0xffffffff }

var (
	nanF  = float32(math.NaN())
	tenth = 0.1
	fifth = 0.2
)

var opCases = []opCase{
	// f32
	{"add.f32 %y0, %x0, %x1", [4]uint64{f32b(1.5), f32b(2.25)}, f32b(3.75), 0},
	{"sub.f32 %y0, %x0, %x1", [4]uint64{f32b(1.5), f32b(2.25)}, f32b(-0.75), 0},
	{"mul.rn.f32 %y0, %x0, %x1", [4]uint64{f32b(3), f32b(-0.5)}, f32b(-1.5), 0},
	{"add.rz.f32 %y0, %x0, %x1", [4]uint64{f32b(1), f32b(0x1p-30)}, f32b(1), 0},
	{"add.rp.f32 %y0, %x0, %x1", [4]uint64{f32b(1), f32b(0x1p-30)}, f32b(math.Nextafter32(1, 2)), 0},
	{"add.rm.f32 %y0, %x0, %x1", [4]uint64{f32b(-1), f32b(-0x1p-30)}, f32b(math.Nextafter32(-1, -2)), 0},
	{"fma.rn.f32 %y0, %x0, %x1, %x2", [4]uint64{f32b(1 + 0x1p-12), f32b(1 + 0x1p-12), f32b(-1)}, f32b(0x1p-11 + 0x1p-24), 0},
	{"div.rn.f32 %y0, %x0, %x1", [4]uint64{f32b(1), f32b(3)}, f32b(1.0 / 3), 0},
	{"min.f32 %y0, %x0, %x1", [4]uint64{f32b(nanF), f32b(2)}, f32b(2), 0},
	{"max.NaN.f32 %y0, %x0, %x1", [4]uint64{f32b(nanF), f32b(2)}, 0x7fffffff, 0}, // the canonical NaN
	{"max.f32 %y0, %x0, %x1", [4]uint64{f32b(-1), f32b(2)}, f32b(2), 0},
	{"neg.f32 %y0, %x0", [4]uint64{f32b(2)}, f32b(-2), 0},
	{"abs.f32 %y0, %x0", [4]uint64{f32b(-2)}, f32b(2), 0},
	{"sqrt.rn.f32 %y0, %x0", [4]uint64{f32b(2)}, f32b(float32(math.Sqrt(2))), 0},
	{"rcp.rn.f32 %y0, %x0", [4]uint64{f32b(4)}, f32b(0.25), 0},
	{"add.sat.f32 %y0, %x0, %x1", [4]uint64{f32b(0.75), f32b(0.5)}, f32b(1), 0},
	{"mul.ftz.f32 %y0, %x0, %x1", [4]uint64{f32b(0x1p-100), f32b(0x1p-30)}, f32b(0), 0},
	{"copysign.f32 %y0, %x0, %x1", [4]uint64{f32b(-1), f32b(3)}, f32b(-3), 0},
	{"ex2.approx.f32 %y0, %x0", [4]uint64{f32b(3)}, f32b(8), 0},
	{"testp.notanumber.f32 %p1, %x0", [4]uint64{f32b(nanF)}, 0, 1},
	{"testp.finite.f32 %p1, %x0", [4]uint64{f32b(float32(math.Inf(1)))}, 0, 0},
	// f64
	{"add.f64 %y0, %x0, %x1", [4]uint64{f64b(0.1), f64b(0.2)}, f64b(tenth + fifth), 0},
	{"fma.rn.f64 %y0, %x0, %x1, %x2", [4]uint64{f64b(2), f64b(3), f64b(1)}, f64b(7), 0},
	{"div.rn.f64 %y0, %x0, %x1", [4]uint64{f64b(1), f64b(3)}, f64b(1.0 / 3), 0},
	// f16, bf16 and packed
	{"add.f16 %y0, %x0, %x1", [4]uint64{h16(1.5), h16(0.25)}, h16(1.75), 0},
	{"add.f16 %y0, %x0, %x1", [4]uint64{h16(2048), h16(1)}, h16(2048), 0},
	{"add.f16 %y0, %x0, %x1", [4]uint64{h16(2048), h16(3)}, h16(2052), 0},
	{"mul.f16 %y0, %x0, %x1", [4]uint64{h16(300), h16(300)}, h16(float32(math.Inf(1))), 0},
	{"fma.rn.f16 %y0, %x0, %x1, %x2", [4]uint64{h16(1.5), h16(2), h16(-0.5)}, h16(2.5), 0},
	{"add.f16x2 %y0, %x0, %x1", [4]uint64{h16(1)<<16 | h16(2), h16(3)<<16 | h16(4)}, h16(4)<<16 | h16(6), 0},
	{"fma.rn.bf16 %y0, %x0, %x1, %x2", [4]uint64{bf16(3), bf16(2), bf16(1)}, bf16(7), 0},
	{"add.rn.bf16x2 %y0, %x0, %x1", [4]uint64{bf16(1)<<16 | bf16(256), bf16(1)<<16 | bf16(1)}, bf16(2)<<16 | bf16(256), 0},
	{"max.f16x2 %y0, %x0, %x1", [4]uint64{h16(1)<<16 | h16(-2), h16(-1)<<16 | h16(5)}, h16(1)<<16 | h16(5), 0},
	{"neg.bf16 %y0, %x0", [4]uint64{bf16(1.5)}, bf16(-1.5), 0},
	{"fma.rn.relu.f16 %y0, %x0, %x1, %x2", [4]uint64{h16(1.5), h16(-2), h16(1)}, h16(0), 0},
	{"fma.rn.relu.bf16x2 %y0, %x0, %x1, %x2", [4]uint64{bf16(1)<<16 | bf16(2), bf16(-1)<<16 | bf16(3), 0}, bf16(0)<<16 | bf16(6), 0},
	{"max.relu.s32 %y0, %x0, %x1", [4]uint64{m32(-5), m32(-3)}, 0, 0},
	{"min.xorsign.abs.f16 %y0, %x0, %x1", [4]uint64{h16(-3), h16(2)}, h16(-2), 0},
	// integers
	{"add.s32 %y0, %x0, %x1", [4]uint64{m32(-5), 3}, m32(-2), 0},
	{"add.sat.s32 %y0, %x0, %x1", [4]uint64{0x7fffffff, 1}, 0x7fffffff, 0},
	{"sub.u16 %y0, %x0, %x1", [4]uint64{1, 2}, 0xffff, 0},
	{"mul.hi.s32 %y0, %x0, %x1", [4]uint64{m32(-3), 0x40000000}, m32(-1), 0},
	{"mul.wide.s32 %y0, %x0, %x1", [4]uint64{m32(-3), 7}, u(-21), 0},
	{"mul.wide.u32 %y0, %x0, %x1", [4]uint64{0xffffffff, 2}, 0x1fffffffe, 0},
	{"mul.hi.u64 %y0, %x0, %x1", [4]uint64{1 << 63, 4}, 2, 0},
	{"mul.hi.s64 %y0, %x0, %x1", [4]uint64{u(-1), 5}, u(-1), 0},
	{"mad.lo.u32 %y0, %x0, %x1, %x2", [4]uint64{7, 6, 100}, 142, 0},
	{"mad.wide.u32 %y0, %x0, %x1, %x2", [4]uint64{0x80000000, 4, 1}, 0x200000001, 0},
	{"div.s32 %y0, %x0, %x1", [4]uint64{m32(-7), 2}, m32(-3), 0},
	{"rem.s32 %y0, %x0, %x1", [4]uint64{m32(-7), 2}, m32(-1), 0},
	{"div.u32 %y0, %x0, %x1", [4]uint64{7, 0}, 0xffffffff, 0},
	{"shr.s32 %y0, %x0, %x1", [4]uint64{m32(-16), 2}, m32(-4), 0},
	{"shr.u32 %y0, %x0, %x1", [4]uint64{0x80000000, 40}, 0, 0},
	{"shl.b32 %y0, %x0, %x1", [4]uint64{3, 4}, 48, 0},
	{"min.s32 %y0, %x0, %x1", [4]uint64{m32(-1), 1}, m32(-1), 0},
	{"max.u32 %y0, %x0, %x1", [4]uint64{m32(-1), 1}, 0xffffffff, 0},
	{"abs.s32 %y0, %x0", [4]uint64{m32(-9)}, 9, 0},
	{"neg.s64 %y0, %x0", [4]uint64{5}, u(-5), 0},
	{"popc.b32 %y0, %x0", [4]uint64{0xf0f0}, 8, 0},
	{"clz.b32 %y0, %x0", [4]uint64{0x00ff0000}, 8, 0},
	{"clz.b64 %y0, %x0", [4]uint64{1}, 63, 0},
	{"brev.b32 %y0, %x0", [4]uint64{1}, 0x80000000, 0},
	{"bfind.u32 %y0, %x0", [4]uint64{0x100}, 8, 0},
	{"bfind.u32 %y0, %x0", [4]uint64{0}, 0xffffffff, 0},
	{"bfind.shiftamt.u32 %y0, %x0", [4]uint64{0x100}, 23, 0},
	{"bfe.u32 %y0, %x0, %x1, %x2", [4]uint64{0xabcd1234, 8, 8}, 0x12, 0},
	{"bfe.s32 %y0, %x0, %x1, %x2", [4]uint64{0x0000f000, 12, 4}, 0xffffffff, 0},
	{"bfi.b32 %y0, %x0, %x1, %x2, 8", [4]uint64{0xff, 0x12345678, 4}, 0x12345ff8, 0},
	{"prmt.b32 %y0, %x0, %x1, %x2", [4]uint64{0x33221100, 0x77665544, 0x7531}, 0x77553311, 0},
	{"prmt.b32 %y0, %x0, %x1, %x2", [4]uint64{0x33221180, 0x77665544, 0x8880}, 0xffffff80, 0},
	{"prmt.b32.f4e %y0, %x0, %x1, %x2", [4]uint64{0x33221100, 0x77665544, 1}, 0x44332211, 0},
	{"lop3.b32 %y0, %x0, %x1, %x2, 0x96", [4]uint64{0xf0, 0xcc, 0xaa}, 0xf0 ^ 0xcc ^ 0xaa, 0},
	{"lop3.b32 %y0, %x0, %x1, %x2, 0xe8", [4]uint64{0xf0, 0xcc, 0xaa}, (0xf0 & 0xcc) | (0xf0 & 0xaa) | (0xcc & 0xaa), 0},
	{"shf.l.wrap.b32 %y0, %x0, %x1, %x2", [4]uint64{0x80000000, 1, 1}, 3, 0},
	{"shf.r.clamp.b32 %y0, %x0, %x1, %x2", [4]uint64{0, 1, 40}, 1, 0},
	{"shf.r.wrap.b32 %y0, %x0, %x1, %x2", [4]uint64{0, 1, 4}, 0x10000000, 0},
	{"cnot.b32 %y0, %x0", [4]uint64{0}, 1, 0},
	{"not.b32 %y0, %x0", [4]uint64{0}, 0xffffffff, 0},
	{"mul24.lo.u32 %y0, %x0, %x1", [4]uint64{0x1000001, 2}, 2, 0},
	{"sad.u32 %y0, %x0, %x1, %x2", [4]uint64{3, 10, 100}, 107, 0},
	// comparisons and selection
	{"setp.lt.f32 %p1, %x0, %x1", [4]uint64{f32b(nanF), f32b(1)}, 0, 0},
	{"setp.ltu.f32 %p1, %x0, %x1", [4]uint64{f32b(nanF), f32b(1)}, 0, 1},
	{"setp.ne.f32 %p1, %x0, %x1", [4]uint64{f32b(nanF), f32b(1)}, 0, 0},
	{"setp.neu.f32 %p1, %x0, %x1", [4]uint64{f32b(nanF), f32b(1)}, 0, 1},
	{"setp.ge.s32 %p1, %x0, %x1", [4]uint64{m32(-1), 0}, 0, 0},
	{"setp.hi.u32 %p1, %x0, %x1", [4]uint64{m32(-1), 0}, 0, 1},
	{"setp.lt.s32.and %p1, %x0, %x1, %p0", [4]uint64{1, 2, 0, 0}, 0, 0},
	{"setp.lt.s32.or %p1, %x0, %x1, %p0", [4]uint64{3, 2, 0, 1}, 0, 1},
	{"setp.lt.f16 %p1, %h0, %h1", [4]uint64{}, 0, 0},
	{"selp.b32 %y0, %x0, %x1, %p0", [4]uint64{7, 9, 0, 1}, 7, 0},
	{"set.lt.u32.f32 %y0, %x0, %x1", [4]uint64{f32b(1), f32b(2)}, 0xffffffff, 0},
	// conversions
	{"cvt.rzi.s32.f32 %y0, %x0", [4]uint64{f32b(-2.7)}, u(-2), 0}, // sign-extended to the .b64 register
	{"cvt.rni.s32.f32 %y0, %x0", [4]uint64{f32b(2.5)}, 2, 0},
	{"cvt.rmi.s32.f32 %y0, %x0", [4]uint64{f32b(-2.5)}, u(-3), 0},
	{"cvt.rpi.s32.f32 %y0, %x0", [4]uint64{f32b(2.1)}, 3, 0},
	{"cvt.rzi.u32.f32 %y0, %x0", [4]uint64{f32b(-5)}, 0, 0},
	{"cvt.rzi.u32.f32 %y0, %x0", [4]uint64{f32b(1e10)}, 0xffffffff, 0},
	{"cvt.rzi.s32.f32 %y0, %x0", [4]uint64{f32b(nanF)}, 0, 0},
	{"cvt.sat.u8.s32 %y0, %x0", [4]uint64{300}, 255, 0},
	{"cvt.sat.u8.s32 %y0, %x0", [4]uint64{m32(-5)}, 0, 0},
	{"cvt.s32.s8 %y0, %x0", [4]uint64{0x80}, u(-128), 0},
	{"cvt.u32.u16 %y0, %x0", [4]uint64{0x12345}, 0x2345, 0},
	{"cvt.s64.s32 %y0, %x0", [4]uint64{m32(-2)}, u(-2), 0},
	{"cvt.rn.f16.f32 %y0, %x0", [4]uint64{f32b(1.0009766)}, h16(1.0009766), 0},
	{"cvt.f32.f16 %y0, %x0", [4]uint64{h16(-0.5)}, f32b(-0.5), 0},
	{"cvt.rn.bf16.f32 %y0, %x0", [4]uint64{f32b(3.14159)}, bf16(3.14159), 0},
	{"cvt.f32.bf16 %y0, %x0", [4]uint64{bf16(-2)}, f32b(-2), 0},
	{"cvt.rn.f32.s32 %y0, %x0", [4]uint64{m32(-7)}, f32b(-7), 0},
	{"cvt.rn.f32.u64 %y0, %x0", [4]uint64{1<<63 + 1}, f32b(0x1p63), 0},
	{"cvt.rz.f32.f64 %y0, %x0", [4]uint64{f64b(1 + 0x1p-30)}, f32b(1), 0},
	{"cvt.f64.f32 %y0, %x0", [4]uint64{f32b(0.1)}, f64b(float64(float32(0.1))), 0},
	{"cvt.rni.f32.f32 %y0, %x0", [4]uint64{f32b(2.5)}, f32b(2), 0},
	{"cvt.rn.f16x2.f32 %y0, %x0, %x1", [4]uint64{f32b(1), f32b(2)}, h16(1)<<16 | h16(2), 0},
	{"cvt.rn.bf16x2.f32 %y0, %x0, %x1", [4]uint64{f32b(-1), f32b(0.5)}, bf16(-1)<<16 | bf16(0.5), 0},
	{"cvt.rn.satfinite.e4m3x2.f32 %y0, %x0, %x1", [4]uint64{f32b(1), f32b(1000)}, 0x38<<8 | 0x7e, 0},
	{"cvt.rn.satfinite.e5m2x2.f32 %y0, %x0, %x1", [4]uint64{f32b(-1), f32b(1.25)}, 0xbc<<8 | 0x3d, 0},
	{"cvt.rn.e5m2x2.f32 %y0, %x0, %x1", [4]uint64{f32b(1e6), f32b(0)}, 0x7c00, 0},
	{"cvt.rn.f16x2.e4m3x2 %y0, %x0", [4]uint64{0x38<<8 | 0x7e}, h16(1)<<16 | h16(448), 0},
	{"cvt.rn.f16x2.e5m2x2 %y0, %x0", [4]uint64{0x3c<<8 | 0x01}, h16(1)<<16 | h16(0x1p-16), 0},
	{"cvt.rn.satfinite.e4m3x2.f16x2 %y0, %x0", [4]uint64{h16(0.5)<<16 | h16(-3)}, 0x30<<8 | 0xc4, 0},
	// newer integer forms
	{"bmsk.clamp.b32 %y0, %x0, %x1", [4]uint64{4, 8}, 0xff0, 0},
	{"bmsk.wrap.b32 %y0, %x0, %x1", [4]uint64{36, 2}, 0x30, 0},
	{"szext.wrap.s32 %y0, %x0, %x1", [4]uint64{0x80, 8}, 0xffffff80, 0},
	{"szext.clamp.u32 %y0, %x0, %x1", [4]uint64{0x1ff, 8}, 0xff, 0},
	{"dp4a.s32.s32 %y0, %x0, %x1, %x2", [4]uint64{0xff020304, 0x01010101, 10}, m32(10 + 4 + 3 + 2 - 1), 0},
	{"dp4a.u32.u32 %y0, %x0, %x1, %x2", [4]uint64{0xff020304, 0x01010101, 10}, 10 + 4 + 3 + 2 + 255, 0},
	{"slct.u32.s32 %y0, %x0, %x1, %x2", [4]uint64{1, 2, m32(-1)}, 2, 0},
	{"slct.u32.f32 %y0, %x0, %x1, %x2", [4]uint64{1, 2, f32b(0)}, 1, 0},
	// extended precision: 64-bit add/sub/mad from 32-bit halves through the carry flag
	{"add.cc.u32 %y1, %x0, %x1; addc.u32 %y0, %x2, 0; add.u64 %y0, %y0, 0", [4]uint64{0xffffffff, 1, 7}, 8, 0},
	{"sub.cc.u32 %y1, %x0, %x1; subc.u32 %y0, %x2, 0", [4]uint64{0, 1, 7}, 6, 0},
	{"add.cc.u64 %y1, %x0, %x1; addc.cc.u64 %y0, %x2, 0; addc.u64 %y0, %y0, 0", [4]uint64{1 << 63, 1 << 63, u(-1)}, 1, 0},
	{"mad.lo.cc.u32 %y1, %x0, %x1, %x2; madc.hi.u32 %y0, %x0, %x1, 0", [4]uint64{0xc0000000, 2, 0x80000000}, 2, 0},
	// moves
	{"mov.b64 %y0, {%x0, %x1}", [4]uint64{0x11111111, 0x22222222}, 0x2222222211111111, 0},
	{"mov.b32 %y0, 0f3F800000", [4]uint64{}, 0x3f800000, 0},
}

func TestInstructions(t *testing.T) {
	groups := map[string][]opCase{}
	var order []string
	for _, c := range opCases {
		if _, ok := groups[c.instr]; !ok {
			order = append(order, c.instr)
		}
		groups[c.instr] = append(groups[c.instr], c)
	}
	s := newSys(t, 1)
	in := mustMalloc(t, s, 0, 32*32)
	out := mustMalloc(t, s, 0, 16*32)
	for _, instr := range order {
		cases := groups[instr]
		m := asmUnverified(t, replace(opKernel, "INSTR", instr))
		var buf []uint64
		for _, c := range cases {
			buf = append(buf, c.in[:]...)
		}
		must(t, WriteSlice(s, in, buf))
		if err := launch1(s, m, "op", 1, len(cases), in, out); err != nil {
			t.Errorf("%s: %v", instr, err)
			continue
		}
		got, err := ReadSlice[uint64](s, out, 2*len(cases))
		must(t, err)
		for i, c := range cases {
			if got[2*i] != c.y || got[2*i+1] != c.p {
				t.Errorf("%s %s: got %#x p=%d, want %#x p=%d", instr, fmtIn(c.in), got[2*i], got[2*i+1], c.y, c.p)
			}
		}
	}
}

// runOpCases runs each case's instruction in opKernel on one thread of its own system (the
// module verified) and checks y and p.
func runOpCases(t *testing.T, cases []opCase) {
	t.Helper()
	for _, c := range cases {
		s := newSys(t, 1)
		in := mustMalloc(t, s, 0, 32)
		out := mustMalloc(t, s, 0, 16)
		m := asmFrom(t, 2, replace(opKernel, "INSTR", c.instr))
		must(t, WriteSlice(s, in, c.in[:]))
		if err := launch1(s, m, "op", 1, 1, in, out); err != nil {
			t.Errorf("%s: %v", c.instr, err)
			continue
		}
		got, err := ReadSlice[uint64](s, out, 2)
		must(t, err)
		if got[0] != c.y || got[1] != c.p {
			t.Errorf("%s %s: got %#x p=%d, want %#x p=%d", c.instr, fmtIn(c.in), got[0], got[1], c.y, c.p)
		}
	}
}

func fmtIn(in [4]uint64) string { return fmt.Sprintf("[%#x %#x %#x %#x]", in[0], in[1], in[2], in[3]) }
