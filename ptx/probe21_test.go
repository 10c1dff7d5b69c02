package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe21BlockComments: ptxas takes /* */ comments anywhere a space may stand, over
// lines too (checked with ptxas 13 for sm_90); Parse refused them ("unexpected \"/* header\"
// at module scope"). They read as a space; a "/*" in a // comment or a quoted .file name
// opens none, and one not closed is an error naming its line. Probe 20 noticed.
func TestProbe21BlockComments(t *testing.T) {
	src := "/* header\n   comment */\n.version 8.0\n.target sm_90 /* hopper */\n.address_size 64\n" +
		".file 1 \"a/*b.cu\"\n" +
		".visible .entry k(/* params */ .param .u64 p /* ptr */)\n{\n" +
		"\t.reg .b32 %r<2>; /* regs */\n\t/* a\n\t   ret; */\n" +
		"\tmov.b32 %r0, 1 /* imm */; // a /* b\n" +
		"\t/* c */ /* d */ mov.b32 %r1, 2;\n\tret; /* e // f */\n}\n"
	m, err := ptx.Parse(src)
	if err != nil {
		t.Fatalf("block comments: %v", err)
	}
	plain, err := ptx.Parse(".version 8.0\n.target sm_90\n.address_size 64\n.file 1 \"a/*b.cu\"\n" +
		".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<2>;\n\tmov.b32 %r0, 1;\n\tmov.b32 %r1, 2;\n\tret;\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if m.String() != plain.String() {
		t.Errorf("with block comments:\n%s\nwithout:\n%s", m, plain)
	}
	bad := ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tret; /* open\n}\n"
	if _, err := ptx.Parse(bad); err == nil || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), "not closed") {
		t.Errorf("unclosed comment: %v, want an error naming line 6", err)
	}
	// An error after a multi-line comment names the line of the source.
	late := ".version 8.0\n.target sm_90\n/* 1\n2\n3 */\n.address_size 32\n"
	if _, err := ptx.Parse(late); err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Errorf("error after a comment: %v, want line 6", err)
	}
}

// TestProbe21ImmediateKinds: an integer immediate for an .f32/.f64 operand, a float one for
// an integer operand or a .bN operand of another width, and any immediate for an .f16,
// .bf16 or packed operand are "Arguments mismatch" for ptxas 13 (sm_90); Verify passed them
// and the emulator ran "mov.f32 %f1, 1" as the bits 1 (a denormal, not 1.0) and
// "add.s32 %r1, %r2, 1.5" with 1.5's f32 bits. The legal forms stay legal.
func TestProbe21ImmediateKinds(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n" +
		"\t.reg .b32 %r<3>;\n\t.reg .f32 %f<3>;\n\t.reg .b64 %rd<3>;\n\t.reg .f64 %fd<3>;\n\t.reg .pred %p<3>;\n\t.reg .b16 %h<3>;\n\t"
	check := func(ins string) error {
		m, err := ptx.Parse(hdr + ins + "\n\tret;\n}\n")
		if err != nil {
			t.Fatalf("%s: %v", ins, err)
		}
		return ptx.Verify(m)
	}
	// Each is what ptxas 13 says of it.
	legal := []string{
		"mov.b32 %r1, 0f3F800000;", "mov.b32 %r1, 1;", "mov.u32 %r1, 1;", "mov.b64 %rd1, 0d3FF0000000000000;",
		"mov.b64 %rd1, 1.0;", "mov.b16 %h1, 1;", "mov.f32 %f1, 0f3F800000;", "mov.f32 %f1, 0d3FF0000000000000;",
		"mov.f32 %f1, 1.0;", "mov.f64 %fd1, 0f3F800000;", "and.b32 %r1, %r2, 0f3F800000;", "and.b64 %rd1, %rd2, 1.0;",
		"setp.eq.b32 %p1, %r1, 0f3F800000;", "add.f32 %f1, %f2, 1.0;", "add.f64 %fd1, %fd2, 0f3F800000;",
		"selp.f32 %f1, 1.0, %f2, %p1;", "mov.pred %p1, 1;", "cvt.rn.f32.s32 %f1, 1;", "cvt.rzi.s32.f32 %r1, 1.0;",
		"fma.rn.f32 %f1, %f2, 0d3FF0000000000000, %f1;", "cvt.rn.f16.f32 %h1, 1.0;",
	}
	for _, ins := range legal {
		if err := check(ins); err != nil {
			t.Errorf("%s (legal for ptxas): %v", ins, err)
		}
	}
	illegal := []string{
		"mov.b32 %r1, 0d3FF0000000000000;", "mov.b32 %r1, 1.5;", "mov.u32 %r1, 0f3F800000;", "mov.s32 %r1, 1.0;",
		"mov.b64 %rd1, 0f3F800000;", "mov.u64 %rd1, 0d3FF0000000000000;", "mov.b16 %h1, 1.0;", "mov.f32 %f1, 1;",
		"mov.f64 %fd1, 1;", "and.b32 %r1, %r2, 1.0;", "setp.eq.b32 %p1, %r1, 1.0;", "add.f32 %f1, %f2, 1;",
		"add.f64 %fd1, %fd2, 1;", "add.s32 %r1, %r2, 1.5;", "selp.b32 %r1, 1.0, %r2, %p1;", "selp.f32 %f1, 1, %f2, %p1;",
		"cvt.rn.f32.s32 %f1, 1.0;", "cvt.rzi.s32.f32 %r1, 1;", "fma.rn.f32 %f1, %f2, 1, %f1;", "mul.lo.u32 %r1, %r2, 0d3FF0000000000000;",
		"add.rn.f16 %h1, %h2, 1;", "add.rn.bf16 %h1, %h2, 1.0;", "add.rn.f16x2 %r1, %r2, 0f3F800000;",
		"max.f16 %h1, %h2, 1;", "setp.eq.f16 %p1, %h1, 1;", "cvt.f32.f16 %f1, 1;",
	}
	for _, ins := range illegal {
		if err := check(ins); err == nil || !strings.Contains(err.Error(), "immediate") {
			t.Errorf("%s (Arguments mismatch for ptxas): %v, want an error naming the immediate", ins, err)
		}
	}
}

// TestProbe21SpecialOperands: ptxas 13 takes a special register (%tid.x, %ntid.x,
// %clock64 ...) as an operand of mov and of a cvt between integer types only ("Special
// register argument not allowed" for add, mad, setp, selp, st, cvt to a float, cvta ...);
// Verify passed them all and the emulator ran them.
func TestProbe21SpecialOperands(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n" +
		"\t.reg .b32 %r<3>;\n\t.reg .f64 %fd<3>;\n\t.reg .b64 %rd<3>;\n\t.reg .pred %p<3>;\n\t.reg .b16 %h<3>;\n\t"
	check := func(ins string) error {
		m, err := ptx.Parse(hdr + ins + "\n\tret;\n}\n")
		if err != nil {
			t.Fatalf("%s: %v", ins, err)
		}
		return ptx.Verify(m)
	}
	for _, ins := range []string{"mov.u32 %r1, %tid.x;", "mov.b64 %rd1, %clock64;", "cvt.u64.u32 %rd1, %tid.x;",
		"cvt.u16.u32 %h1, %tid.x;", "cvt.u32.u64 %r1, %clock64;", "cvt.s64.s32 %rd1, %ctaid.x;"} {
		if err := check(ins); err != nil {
			t.Errorf("%s (legal for ptxas): %v", ins, err)
		}
	}
	for _, ins := range []string{"add.u32 %r1, %tid.x, 1;", "mad.lo.u32 %r1, %ctaid.x, %ntid.x, %r2;",
		"setp.lt.u32 %p1, %tid.x, 5;", "selp.u32 %r1, %tid.x, 0, %p1;", "st.global.u32 [%rd1], %tid.x;",
		"add.u64 %rd1, %clock64, 1;", "shl.b32 %r1, %laneid, 2;", "cvt.rn.f64.u32 %fd1, %tid.x;",
		"cvta.to.global.u64 %rd1, %clock64;", "mul.wide.u32 %rd1, %tid.x, 4;"} {
		if err := check(ins); err == nil || !strings.Contains(err.Error(), "special register") {
			t.Errorf("%s (refused by ptxas): %v, want an error naming the special register", ins, err)
		}
	}
}

// TestProbe21StoreToInputParam: a store to a function's input parameter is "Illegal to
// write to function input parameter" for ptxas 13; Verify passed st.param [a] in a kernel.
// A .func's return parameter and a call's argument .param stay writable.
func TestProbe21StoreToInputParam(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n"
	for _, src := range []string{
		".visible .entry k(.param .u32 a)\n{\n\t.reg .b32 %r<2>;\n\tst.param.u32 [a], %r1;\n\tret;\n}\n",
		".visible .entry k(.param .u64 q)\n{\n\t.reg .b64 %rd<2>;\n\tst.param.u64 [q+0], %rd1;\n\tret;\n}\n",
		".visible .func f(.param .b32 x)\n{\n\t.reg .b32 %r<2>;\n\tst.param.b32 [x], %r1;\n\tret;\n}\n",
	} {
		m, err := ptx.Parse(hdr + src)
		if err != nil {
			t.Fatal(err)
		}
		if err := ptx.Verify(m); err == nil || !strings.Contains(err.Error(), "input parameter") {
			t.Errorf("%s: %v, want an error naming the input parameter", src, err)
		}
	}
	legal := ".visible .func (.param .b32 r) f(.param .b32 x)\n{\n\t.reg .b32 %r<2>;\n\tld.param.b32 %r1, [x];\n\tst.param.b32 [r], %r1;\n\tret;\n}\n" +
		".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\t{\n\t.param .b32 a0;\n\t.param .b32 r0;\n\tst.param.b32 [a0], %r1;\n\tcall.uni (r0), f, (a0);\n\t}\n\tret;\n}\n"
	m, err := ptx.Parse(hdr + legal)
	if err != nil {
		t.Fatal(err)
	}
	if err := ptx.Verify(m); err != nil {
		t.Errorf("stores to a return parameter and a call argument: %v", err)
	}
}

// TestProbe21StateSpaceMismatch: ld, st, atom, red and cp.async naming a variable of
// another state space ("ld.shared.u32 %r1, [gv]" of a .global gv, "ld.global [a]" of a
// kernel parameter, a cp.async source in .shared) are "State space mismatch between
// instruction and address" for ptxas 13; Verify passed them, so the emulator launched them.
// A generic address, and .shared::cluster or .shared::cta of a .shared variable, stay legal.
func TestProbe21StateSpaceMismatch(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n.global .align 4 .u32 gv[4];\n" +
		".shared .align 4 .u32 sv[4];\n.const .align 4 .u32 cv[4];\n.visible .entry k(.param .u32 a)\n{\n" +
		"\t.reg .b32 %r<3>;\n\t.local .align 4 .u32 lv[4];\n\t"
	check := func(ins string) error {
		m, err := ptx.Parse(hdr + ins + "\n\tret;\n}\n")
		if err != nil {
			t.Fatalf("%s: %v", ins, err)
		}
		return ptx.Verify(m)
	}
	for _, ins := range []string{"ld.global.u32 %r1, [gv];", "ld.u32 %r1, [gv];", "ld.u32 %r1, [sv];", "ld.param.u32 %r1, [a];",
		"ld.shared::cluster.u32 %r1, [sv];", "st.shared::cta.u32 [sv], %r1;", "ld.const.u32 %r1, [cv+4];", "st.local.u32 [lv], %r1;",
		"cp.async.ca.shared.global [sv], [gv], 4;"} {
		if err := check(ins); err != nil {
			t.Errorf("%s (legal for ptxas): %v", ins, err)
		}
	}
	for _, ins := range []string{"ld.global.u32 %r1, [a];", "ld.shared.u32 %r1, [gv];", "ld.global.u32 %r1, [sv];",
		"st.shared.u32 [gv], %r1;", "ld.const.u32 %r1, [gv];", "ld.global.u32 %r1, [cv];", "ld.local.u32 %r1, [sv];",
		"ld.global.u32 %r1, [lv+4];", "ld.param.u32 %r1, [gv];", "atom.shared.add.u32 %r1, [gv], 1;",
		"atom.global.add.u32 %r1, [sv], 1;", "red.shared.add.u32 [gv], 1;", "cp.async.ca.shared.global [gv], [gv], 4;",
		"cp.async.ca.shared.global [sv], [sv], 4;"} {
		if err := check(ins); err == nil || !strings.Contains(err.Error(), "addressed as") {
			t.Errorf("%s (State space mismatch for ptxas): %v, want an error naming both spaces", ins, err)
		}
	}
}

// TestProbe21AddressOperands: a variable's name as an address source is refused by ptxas 13
// in "cvta.to.shared.u64 %rd1, gv" (must be register), in cvta.SPACE of a variable of
// another space ("cvta.global.u64 %rd1, sv": State space mismatch) and as a .global
// variable's address in 32 bits ("mov.u32 %r1, gv": a 32-bit address sm_90 has not); Verify
// passed them. The legal forms stay legal.
func TestProbe21AddressOperands(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n.global .align 4 .u32 gv[4];\n" +
		".shared .align 4 .u32 sv[4];\n.const .align 4 .u32 cv[4];\n.visible .entry k(.param .u32 a)\n{\n" +
		"\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<3>;\n\t.local .align 4 .u32 lv[4];\n\t"
	check := func(ins string) error {
		m, err := ptx.Parse(hdr + ins + "\n\tret;\n}\n")
		if err != nil {
			t.Fatalf("%s: %v", ins, err)
		}
		return ptx.Verify(m)
	}
	for _, ins := range []string{"mov.u64 %rd1, gv;", "mov.u32 %r1, sv;", "mov.u32 %r1, cv;", "mov.u32 %r1, lv;",
		"mov.u32 %r1, a;", "cvta.global.u64 %rd1, gv;", "cvta.shared.u64 %rd1, sv;", "cvta.local.u64 %rd1, lv;",
		"cvta.param.u64 %rd1, a;", "cvta.to.global.u64 %rd1, %rd2;"} {
		if err := check(ins); err != nil {
			t.Errorf("%s (legal for ptxas): %v", ins, err)
		}
	}
	for _, ins := range []string{"mov.u32 %r1, gv;", "cvta.global.u64 %rd1, sv;", "cvta.shared.u64 %rd1, gv;",
		"cvta.const.u64 %rd1, gv;", "cvta.local.u64 %rd1, sv;", "cvta.to.shared.u64 %rd1, sv;", "cvta.to.global.u64 %rd1, gv;"} {
		if err := check(ins); err == nil {
			t.Errorf("%s (refused by ptxas): passed", ins)
		}
	}
}

// TestProbe21AbsoluteAddresses: ptxas 13 takes an absolute address ([4], [0x100]) in .local
// only ("Immediate addresses allowed only for .local state space", for ld, st, atom, red and
// prefetch in .global, .shared, .const, .param and generic alike); Verify passed them all
// (and TestLegalFormsAccepted held "ld.global.u32 %r1, [0x100]" legal).
func TestProbe21AbsoluteAddresses(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %r<3>;\n\t"
	check := func(ins string) error {
		m, err := ptx.Parse(hdr + ins + "\n\tret;\n}\n")
		if err != nil {
			t.Fatalf("%s: %v", ins, err)
		}
		return ptx.Verify(m)
	}
	for _, ins := range []string{"ld.local.u32 %r1, [4];", "st.local.u32 [0x100], %r1;"} {
		if err := check(ins); err != nil {
			t.Errorf("%s (legal for ptxas): %v", ins, err)
		}
	}
	for _, ins := range []string{"ld.global.u32 %r1, [0x100];", "ld.shared.u32 %r1, [4];", "ld.u32 %r1, [4];",
		"ld.const.u32 %r1, [4];", "st.global.u32 [8], %r1;", "atom.global.add.u32 %r1, [4], 1;",
		"red.global.add.u32 [4], 1;", "prefetch.global.L2 [4];", "ld.global.u32 %r1, [-4];"} {
		if err := check(ins); err == nil || !strings.Contains(err.Error(), "absolute address") {
			t.Errorf("%s (refused by ptxas): %v, want an error naming the absolute address", ins, err)
		}
	}
}

// TestProbe21Lop3Tables: lop3.b32 takes any 8-bit lookup table (ptxas 13 assembles 0xE8,
// 0xF8, 0, 255 ...); Verify took 0x96 (three-way xor) only, and said "immediate 232 is not
// one of 150". A table past 8 bits is refused naming the range.
func TestProbe21Lop3Tables(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %r<5>;\n\t"
	for _, lut := range []string{"0x96", "0xE8", "0xF8", "0", "255", "0x3c"} {
		m, err := ptx.Parse(hdr + "lop3.b32 %r1, %r2, %r3, %r4, " + lut + ";\n\tret;\n}\n")
		if err != nil {
			t.Fatal(err)
		}
		if err := ptx.Verify(m); err != nil {
			t.Errorf("lop3 table %s: %v", lut, err)
		}
	}
	m, err := ptx.Parse(hdr + "lop3.b32 %r1, %r2, %r3, %r4, 256;\n\tret;\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := ptx.Verify(m); err == nil || !strings.Contains(err.Error(), "[0, 255]") {
		t.Errorf("lop3 table 256: %v, want an error naming [0, 255]", err)
	}
}

// TestProbe21CallParams: ptxas 13 matches a call's .param operands with the callee's
// parameters ("Type of argument does not match formal parameter" for a .b64 argument of a
// .b32 parameter, a .b64 return of a .b32 one, a .b8[4] for a .b32) and refuses the caller's
// own parameter as an argument; Verify checked neither. The same size with another type
// (.f32 or .u32 for .b32) stays legal, as there.
func TestProbe21CallParams(t *testing.T) {
	const hdr = ".version 8.0\n.target sm_90\n.address_size 64\n" +
		".visible .func (.param .b32 r) f(.param .b32 x)\n{\n\t.reg .b32 %q<2>;\n\tld.param.b32 %q1, [x];\n\tst.param.b32 [r], %q1;\n\tret;\n}\n" +
		".visible .entry k(.param .u32 a)\n{\n\t.reg .b32 %r<3>;\n\t{\n"
	check := func(decls, call string) error {
		m, err := ptx.Parse(hdr + decls + "\t" + call + "\n\t}\n\tret;\n}\n")
		if err != nil {
			t.Fatalf("%s %s: %v", decls, call, err)
		}
		return ptx.Verify(m)
	}
	for _, d := range []string{"\t.param .b32 a0;\n\t.param .b32 r0;\n", "\t.param .f32 a0;\n\t.param .b32 r0;\n", "\t.param .u32 a0;\n\t.param .s32 r0;\n"} {
		if err := check(d, "call.uni (r0), f, (a0);"); err != nil {
			t.Errorf("%q (legal for ptxas): %v", d, err)
		}
	}
	for _, c := range []struct{ decls, call, want string }{
		{"\t.param .b64 a0;\n\t.param .b32 r0;\n", "call.uni (r0), f, (a0);", "a0 is .b64, f's parameter x is .b32"},
		{"\t.param .b32 a0;\n\t.param .b64 r0;\n", "call.uni (r0), f, (a0);", "r0 is .b64, f's parameter r is .b32"},
		{"\t.param .align 4 .b8 a0[4];\n\t.param .b32 r0;\n", "call.uni (r0), f, (a0);", "a0 is .b8[4]"},
		{"\t.param .b32 r0;\n", "call.uni (r0), f, (a);", "a is a parameter of the calling function"},
	} {
		if err := check(c.decls, c.call); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %s (refused by ptxas): %v, want an error containing %q", c.decls, c.call, err, c.want)
		}
	}
}
