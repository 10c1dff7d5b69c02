package jit

// The special values of floating-point instructions (NaN payloads, infinities, rounding to
// tf32, conversions out of range), as the GPU computes them: each case runs on the emulator
// here and, in a binary built with -tags cuda, on GPU 0 (semantics_gpu_test.go); both must
// give the bits measured on an H200 (docs/facts.md).

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// semCase is one instruction sequence over inputs a, b, c (64-bit words: %ra, %rb, %rc are
// their low 32 bits, %ha, %hb their low 16, %da, %db, %dc the words) that leaves its result
// in %rd (32 bits, zero-extended) or, with wide, %dd. %po is the thread's output address,
// which the body may use as scratch (atomics); the result is stored there after it.
type semCase struct {
	name   string
	target ptx.Target
	wide   bool
	body   string
	in     [][3]uint64
	want   []uint64 // measured on an H200
}

const (
	f32Inf, f32NegInf, f32One = 0x7f800000, 0xff800000, 0x3f800000
	f32QNaN1, f32NegQNaN      = 0x7fc00001, 0xffc00000
	f32SNaN1                  = 0x7f800001
	f64Inf, f64NegInf, f64One = 0x7ff0000000000000, 0xfff0000000000000, 0x3ff0000000000000
)

var semCases = []semCase{
	{name: "add.f32", body: "add.f32 %f3, %f1, %f2;",
		in:   [][3]uint64{{f32Inf, f32NegInf}, {f32QNaN1, f32One}, {f32NegQNaN, 0}, {f32SNaN1, 0}, {f32One, f32QNaN1}},
		want: []uint64{0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff}},
	{name: "mul.f32", body: "mul.f32 %f3, %f1, %f2;",
		in:   [][3]uint64{{0, f32Inf}, {f32QNaN1, f32One}},
		want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "fma.rn.f32", body: "fma.rn.f32 %f3, %f1, %f2, %f4;",
		in:   [][3]uint64{{f32One, f32One, f32QNaN1}, {f32Inf, 0, f32One}},
		want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "neg.f32", body: "neg.f32 %f3, %f1;", in: [][3]uint64{{f32QNaN1}, {f32NegQNaN}}, want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "abs.f32", body: "abs.f32 %f3, %f1;", in: [][3]uint64{{0xffc00001}}, want: []uint64{0x7fffffff}},
	{name: "max.f32", body: "max.f32 %f3, %f1, %f2;", in: [][3]uint64{{f32QNaN1, f32One}, {f32QNaN1, f32NegQNaN}}, want: []uint64{0x3f800000, 0x7fffffff}},
	{name: "max.NaN.f32", body: "max.NaN.f32 %f3, %f1, %f2;", in: [][3]uint64{{f32QNaN1, f32One}}, want: []uint64{0x7fffffff}},
	{name: "min.f32", body: "min.f32 %f3, %f1, %f2;", in: [][3]uint64{{f32One, f32QNaN1}}, want: []uint64{0x3f800000}},
	{name: "div.rn.f32", body: "div.rn.f32 %f3, %f1, %f2;", in: [][3]uint64{{0, 0}, {f32QNaN1, f32One}}, want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "sqrt.rn.f32", body: "sqrt.rn.f32 %f3, %f1;", in: [][3]uint64{{0xbf800000}, {f32QNaN1}}, want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "rcp.rn.f32", body: "rcp.rn.f32 %f3, %f1;", in: [][3]uint64{{f32QNaN1}}, want: []uint64{0x7fffffff}},
	{name: "ex2.approx.f32", body: "ex2.approx.f32 %f3, %f1;", in: [][3]uint64{{f32QNaN1}}, want: []uint64{0x7fffffff}},
	{name: "add.f16", body: "add.f16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;",
		in:   [][3]uint64{{0x7c00, 0xfc00}, {0x7e01, 0x3c00}, {0x7c01, 0}},
		want: []uint64{0x7fff, 0x7fff, 0x7fff}},
	{name: "add.bf16", body: "add.bf16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;",
		in:   [][3]uint64{{0x7f80, 0xff80}, {0x7fc1, 0x3f80}},
		want: []uint64{0x7fff, 0x7fff}},
	{name: "add.f16x2", body: "add.f16x2 %rd, %ra, %rb;", in: [][3]uint64{{0x7c007e01, 0xfc003c00}}, want: []uint64{0x7fff7fff}},
	{name: "add.f64", wide: true, body: "add.f64 %fd3, %fd1, %fd2;",
		in:   [][3]uint64{{f64Inf, f64NegInf}, {0x7ff8000000000001, f64One}},
		want: []uint64{0xfff8000000000000, 0x7ff8000000000001}},
	{name: "cvt.rn.f16.f32", body: "cvt.rn.f16.f32 %h3, %f1; cvt.u32.u16 %rd, %h3;",
		in:   [][3]uint64{{f32QNaN1}, {0xffc12345}, {0x477fff00}},
		want: []uint64{0x7fff, 0x7fff, 0x7c00}},
	{name: "cvt.rn.bf16.f32", body: "cvt.rn.bf16.f32 %h3, %f1; cvt.u32.u16 %rd, %h3;",
		in:   [][3]uint64{{0x7fc12345}, {0xffc00000}, {0x3f808000}, {0x3f818000}},
		want: []uint64{0x7fff, 0x7fff, 0x3f80, 0x3f82}},
	{name: "cvt.f32.f16", body: "cvt.f32.f16 %f3, %ha;", in: [][3]uint64{{0x7e01}, {0xfc01}}, want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "cvt.f32.bf16", body: "cvt.f32.bf16 %f3, %ha;", in: [][3]uint64{{0x7fc1}}, want: []uint64{0x7fc10000}},
	{name: "cvt.f64.f32", wide: true, body: "cvt.f64.f32 %fd3, %f1;", in: [][3]uint64{{f32QNaN1}}, want: []uint64{0x7ff8000020000000}},
	{name: "cvt.rn.f32.f64", body: "cvt.rn.f32.f64 %f3, %fd1;", in: [][3]uint64{{0x7ff8000000000001}}, want: []uint64{0x7fc00000}},
	{name: "cvt.rzi.s32.f32", body: "cvt.rzi.s32.f32 %rd, %f1;",
		in:   [][3]uint64{{f32QNaN1}, {0x501502f9}, {0xd01502f9}},
		want: []uint64{0x0, 0x7fffffff, 0x80000000}},
	{name: "cvt.rzi.u32.f32", body: "cvt.rzi.u32.f32 %rd, %f1;", in: [][3]uint64{{0xbf800000}, {0x501502f9}, {f32QNaN1}}, want: []uint64{0x0, 0xffffffff, 0x0}},
	{name: "cvt.rzi.s64.f64", wide: true, body: "cvt.rzi.s64.f64 %dd, %fd1;", in: [][3]uint64{{0x7ff8000000000001}}, want: []uint64{0x8000000000000000}},
	{name: "cvt.rna.tf32.f32", body: "cvt.rna.tf32.f32 %rd, %f1;",
		in:   [][3]uint64{{0x3f800fff}, {0x3f801000}, {0x3f803000}, {0x7f7fffff}, {f32SNaN1}, {0xffc00001}},
		want: []uint64{0x3f800000, 0x3f802000, 0x3f804000, 0x7f800000, 0x7f800000, 0xffc00000}},
	{name: "cvt.rn.tf32.f32", body: "cvt.rn.tf32.f32 %rd, %f1;",
		in:   [][3]uint64{{0x3f800fff}, {0x3f801000}, {0x3f803000}, {0x3f801001}, {0x7f7fffff}, {f32SNaN1}, {0xffc00001}},
		want: []uint64{0x3f800000, 0x3f800000, 0x3f804000, 0x3f802000, 0x7f800000, 0x7fffe000, 0x7fffe000}},
	{name: "cvt.rz.tf32.f32", body: "cvt.rz.tf32.f32 %rd, %f1;",
		in:   [][3]uint64{{0x3f803fff}, {0x7f7fffff}, {f32QNaN1}},
		want: []uint64{0x3f802000, 0x7f7fe000, 0x7fffe000}},
	{name: "atom.add.f32", body: "st.global.b32 [%po], %ra; atom.global.add.f32 %f3, [%po], %f2; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{f32Inf, f32NegInf}, {f32QNaN1, f32One}},
		want: []uint64{0x7fffffff, 0x7fffffff}},
	// The PTX ISA: atom.add.f32 flushes subnormal inputs and results to sign-preserving zero.
	{name: "atom.add.f32.subnormal", body: "st.global.b32 [%po], %ra; atom.global.add.f32 %f3, [%po], %f2; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{0x00000001, 0}, {0x00800000, 0x80000001}, {0x00800001, 0x80800000}, {0x80000001, 0x80000000}},
		want: []uint64{0, 0x00800000, 0, 0x80000000}},
	{name: "red.add.f32.subnormal", body: "st.global.b32 [%po], %ra; red.global.add.f32 [%po], %f2; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{0x00000001, 0}, {0x00800001, 0x80800000}},
		want: []uint64{0, 0}},
	{name: "atom.add.f64", wide: true, body: "st.global.b64 [%po], %da; atom.global.add.f64 %fd3, [%po], %fd2; ld.global.b64 %dd, [%po];",
		in:   [][3]uint64{{f64Inf, f64NegInf}},
		want: []uint64{0xfff8000000000000}},
	// Measured on an H200 on 2026-11-29 after the first 30: the rest of the f16/bf16 class,
	// NaN to integer, tf32 .relu and infinities, the half atomics. These kernels (semPTX of
	// each case) ran through the CUDA driver from a Python ctypes script, not yet through
	// TestGPUSemantics (which runs them all in a -tags cuda build).
	{name: "neg.f16", body: "neg.f16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7e01}, {0xfc01}, {0x3c00}}, want: []uint64{0x7fff, 0x7fff, 0xbc00}},
	{name: "abs.f16", body: "abs.f16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0xfe01}, {0xbc00}}, want: []uint64{0x7fff, 0x3c00}},
	{name: "neg.bf16", body: "neg.bf16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7fc1}, {0x3f80}}, want: []uint64{0x7fff, 0xbf80}},
	{name: "abs.bf16", body: "abs.bf16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0xffc1}}, want: []uint64{0x7fff}},
	{name: "neg.f16x2", body: "neg.f16x2 %rd, %ra;", in: [][3]uint64{{0x7e013c00}}, want: []uint64{0x7fffbc00}},
	{name: "abs.bf16x2", body: "abs.bf16x2 %rd, %ra;", in: [][3]uint64{{0xffc1bf80}}, want: []uint64{0x7fff3f80}},
	{name: "sub.f16", body: "sub.f16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7c00, 0x7c00}, {0x3c00, 0xfe01}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "mul.f16", body: "mul.f16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0, 0xfc00}, {0x7e01, 0x3c00}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "fma.rn.f16", body: "fma.rn.f16 %h3, %ha, %hb, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7e01, 0x3c00}, {0xfc00, 0}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "mul.bf16", body: "mul.bf16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0, 0xff80}, {0xffc1, 0x3f80}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "fma.rn.bf16", body: "fma.rn.bf16 %h3, %ha, %hb, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7fc1, 0x3f80}}, want: []uint64{0x7fff}},
	{name: "add.bf16x2", body: "add.bf16x2 %rd, %ra, %rb;", in: [][3]uint64{{0x7f807fc1, 0xff803f80}}, want: []uint64{0x7fff7fff}},
	{name: "min.f16", body: "min.f16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7e01, 0x3c00}, {0x7e01, 0xfe02}, {0xfc01, 0x7c01}}, want: []uint64{0x3c00, 0x7fff, 0x7fff}},
	{name: "max.bf16", body: "max.bf16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x3f80, 0xffc1}, {0x7fc1, 0xffc2}}, want: []uint64{0x3f80, 0x7fff}},
	{name: "min.NaN.f16", body: "min.NaN.f16 %h3, %ha, %hb; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7e01, 0x3c00}, {0x3c00, 0xfe01}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "max.f16x2", body: "max.f16x2 %rd, %ra, %rb;", in: [][3]uint64{{0x7e01fe01, 0xfe023c00}}, want: []uint64{0x7fff3c00}},
	{name: "ex2.approx.f16", body: "ex2.approx.f16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7e01}, {0xfe01}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "tanh.approx.f16", body: "tanh.approx.f16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7e01}, {0xfe01}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "ex2.approx.ftz.bf16", body: "ex2.approx.ftz.bf16 %h3, %ha; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0x7fc1}, {0xffc1}}, want: []uint64{0x7fff, 0x7fff}},
	{name: "cvt.rz.f16.f32", body: "cvt.rz.f16.f32 %h3, %f1; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0xffc12345}}, want: []uint64{0x7fff}},
	{name: "cvt.rz.bf16.f32", body: "cvt.rz.bf16.f32 %h3, %f1; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0xffc12345}}, want: []uint64{0x7fff}},
	{name: "cvt.rn.f16x2.f32", body: "cvt.rn.f16x2.f32 %rd, %f1, %f2;", in: [][3]uint64{{0xffc12345, 0x7fc00001}}, want: []uint64{0x7fff7fff}},
	{name: "cvt.rn.bf16x2.f32", body: "cvt.rn.bf16x2.f32 %rd, %f1, %f2;", in: [][3]uint64{{0xffc12345, 0x7fc00001}}, want: []uint64{0x7fff7fff}},
	{name: "cvt.rn.f16.f64", body: "cvt.rn.f16.f64 %h3, %fd1; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{0xfff8000000000001}}, want: []uint64{0xfe00}},
	{name: "cvt.f64.f16", wide: true, body: "cvt.f64.f16 %fd3, %ha;", in: [][3]uint64{{0xfe01}}, want: []uint64{0xfff8040000000000}},
	{name: "cvt.rni.s64.f64", wide: true, body: "cvt.rni.s64.f64 %dd, %fd1;", in: [][3]uint64{{0xfff8000000000001}}, want: []uint64{0x8000000000000000}},
	{name: "cvt.rmi.s64.f64", wide: true, body: "cvt.rmi.s64.f64 %dd, %fd1;", in: [][3]uint64{{0x7ff8000000000001}}, want: []uint64{0x8000000000000000}},
	{name: "cvt.rzi.u64.f64", wide: true, body: "cvt.rzi.u64.f64 %dd, %fd1;", in: [][3]uint64{{0x7ff8000000000001}, {0xbff0000000000000}, {0x43f0000000000000}}, want: []uint64{0x8000000000000000, 0x0, 0xffffffffffffffff}},
	{name: "cvt.rzi.s64.f32", wide: true, body: "cvt.rzi.s64.f32 %dd, %f1;", in: [][3]uint64{{f32QNaN1}, {0xffc00000}}, want: []uint64{0x8000000000000000, 0x8000000000000000}},
	{name: "cvt.rzi.u64.f32", wide: true, body: "cvt.rzi.u64.f32 %dd, %f1;", in: [][3]uint64{{f32QNaN1}}, want: []uint64{0x8000000000000000}},
	{name: "cvt.rzi.s32.f64", body: "cvt.rzi.s32.f64 %rd, %fd1;", in: [][3]uint64{{0x7ff8000000000001}}, want: []uint64{0x80000000}},
	{name: "cvt.rzi.u32.f64", body: "cvt.rzi.u32.f64 %rd, %fd1;", in: [][3]uint64{{0x7ff8000000000001}}, want: []uint64{0x80000000}},
	{name: "cvt.rni.s32.f32", body: "cvt.rni.s32.f32 %rd, %f1;", in: [][3]uint64{{f32QNaN1}}, want: []uint64{0x0}},
	{name: "cvt.rzi.s16.f32", body: "cvt.rzi.s16.f32 %h3, %f1; cvt.u32.u16 %rd, %h3;", in: [][3]uint64{{f32QNaN1}}, want: []uint64{0x0}},
	{name: "cvt.rzi.s32.f16", body: "cvt.rzi.s32.f16 %rd, %ha;", in: [][3]uint64{{0x7e01}}, want: []uint64{0x0}},
	{name: "cvt.rzi.s64.f16", wide: true, body: "cvt.rzi.s64.f16 %dd, %ha;", in: [][3]uint64{{0x7e01}}, want: []uint64{0x8000000000000000}},
	{name: "cvt.rn.relu.tf32.f32", body: "cvt.rn.relu.tf32.f32 %rd, %f1;",
		in:   [][3]uint64{{0xbf800000}, {0x3f803000}, {f32QNaN1}, {0xffc00001}, {f32NegInf}, {f32Inf}, {0x80000000}},
		want: []uint64{0x0, 0x3f804000, 0x7fffe000, 0x7fffe000, 0x0, 0x7f800000, 0x0}},
	{name: "cvt.rz.relu.tf32.f32", body: "cvt.rz.relu.tf32.f32 %rd, %f1;",
		in:   [][3]uint64{{0xbf803fff}, {0x3f803fff}, {f32QNaN1}, {f32NegInf}},
		want: []uint64{0x0, 0x3f802000, 0x7fffe000, 0x0}},
	{name: "cvt.rn.tf32.f32.inf", body: "cvt.rn.tf32.f32 %rd, %f1;", in: [][3]uint64{{f32Inf}, {f32NegInf}, {0xff7fffff}, {0x00001fff}}, want: []uint64{0x7f800000, 0xff800000, 0xff800000, 0x2000}},
	{name: "cvt.rz.tf32.f32.inf", body: "cvt.rz.tf32.f32 %rd, %f1;", in: [][3]uint64{{f32Inf}, {f32NegInf}, {0xff7fffff}}, want: []uint64{0x7f800000, 0xff800000, 0xff7fe000}},
	{name: "red.add.f32", body: "st.global.b32 [%po], %ra; red.global.add.f32 [%po], %f2; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{f32Inf, f32NegInf}, {f32QNaN1, f32One}},
		want: []uint64{0x7fffffff, 0x7fffffff}},
	{name: "atom.add.f16", body: "st.global.b16 [%po], %ha; atom.global.add.noftz.f16 %h3, [%po], %hb; ld.global.b16 %h3, [%po]; cvt.u32.u16 %rd, %h3;",
		in:   [][3]uint64{{0x7c00, 0xfc00}, {0x7e01, 0x3c00}},
		want: []uint64{0x7fff, 0x7fff}},
	{name: "atom.add.bf16", body: "st.global.b16 [%po], %ha; atom.global.add.noftz.bf16 %h3, [%po], %hb; ld.global.b16 %h3, [%po]; cvt.u32.u16 %rd, %h3;",
		in:   [][3]uint64{{0x7f80, 0xff80}, {0xffc1, 0x3f80}},
		want: []uint64{0x7fff, 0x7fff}},
	{name: "atom.add.f16x2", body: "st.global.b32 [%po], %ra; atom.global.add.noftz.f16x2 %r7, [%po], %rb; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{0x7c007e01, 0xfc003c00}},
		want: []uint64{0x7fff7fff}},
	{name: "atom.add.bf16x2", body: "st.global.b32 [%po], %ra; atom.global.add.noftz.bf16x2 %r7, [%po], %rb; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{0x7f807fc1, 0xff803f80}},
		want: []uint64{0x7fff7fff}},
	{name: "red.add.f16x2", body: "st.global.b32 [%po], %ra; red.global.add.noftz.f16x2 [%po], %rb; ld.global.b32 %rd, [%po];",
		in:   [][3]uint64{{0x7c007e01, 0xfc003c00}},
		want: []uint64{0x7fff7fff}},
}

// semRegs maps the cases' register names to the kernel's.
var semRegs = map[string]string{"%ra": "%r1", "%rb": "%r2", "%rc": "%r3", "%rd": "%r4",
	"%da": "%rd1", "%db": "%rd2", "%dc": "%rd3", "%dd": "%rd4", "%ha": "%h1", "%hb": "%h2", "%po": "%rd6"}

var semName = regexp.MustCompile(`%(ra|rb|rc|rd|da|db|dc|dd|ha|hb|po)\b`)

// semPTX is the kernel of case c: thread i computes input row i into out[i].
func semPTX(c semCase) string {
	t := c.target
	if t == "" {
		t = ptx.SM90
	}
	body := c.body
	// A result left in %f3 or %fd3 moves into the result register.
	switch {
	case c.wide && strings.Contains(body, "%fd3,") && !strings.Contains(body, "%dd"):
		body += " mov.b64 %dd, %fd3;"
	case !c.wide && strings.Contains(body, "%f3,") && !strings.Contains(body, "%rd"):
		body += " mov.b32 %rd, %f3;"
	}
	if !c.wide {
		body += " cvt.u64.u32 %dd, %rd;"
	}
	body = semName.ReplaceAllStringFunc(body, func(s string) string { return semRegs[s] })
	body = strings.ReplaceAll(strings.TrimSpace(body), "; ", ";\n\t")
	return fmt.Sprintf(`.version 8.0
.target %s
.address_size 64

.visible .entry sem(.param .u64 pin, .param .u64 pout, .param .u32 pn)
{
	.reg .b32 %%r<8>;
	.reg .b64 %%rd<8>;
	.reg .b16 %%h<4>;
	.reg .f32 %%f<5>;
	.reg .f64 %%fd<4>;
	.reg .pred %%p<2>;
	mov.u32 %%r5, %%tid.x;
	ld.param.u32 %%r6, [pn];
	setp.ge.u32 %%p1, %%r5, %%r6;
	@%%p1 bra DONE;
	ld.param.u64 %%rd5, [pin];
	ld.param.u64 %%rd6, [pout];
	cvta.to.global.u64 %%rd5, %%rd5;
	cvta.to.global.u64 %%rd6, %%rd6;
	mul.wide.u32 %%rd7, %%r5, 24;
	add.u64 %%rd5, %%rd5, %%rd7;
	mul.wide.u32 %%rd7, %%r5, 8;
	add.u64 %%rd6, %%rd6, %%rd7;
	ld.global.b64 %%rd1, [%%rd5];
	ld.global.b64 %%rd2, [%%rd5+8];
	ld.global.b64 %%rd3, [%%rd5+16];
	cvt.u32.u64 %%r1, %%rd1;
	cvt.u32.u64 %%r2, %%rd2;
	cvt.u32.u64 %%r3, %%rd3;
	cvt.u16.u32 %%h1, %%r1;
	cvt.u16.u32 %%h2, %%r2;
	mov.b32 %%f1, %%r1;
	mov.b32 %%f2, %%r2;
	mov.b32 %%f4, %%r3;
	mov.b64 %%fd1, %%rd1;
	mov.b64 %%fd2, %%rd2;
	mov.b32 %%r4, 0;
	mov.u64 %%rd4, 0;
	%s
	st.global.b64 [%%rd6], %%rd4;
DONE:
	ret;
}
`, t, body)
}

// runSem runs case c on d and returns its results.
func runSem(d *Device, c semCase) ([]uint64, error) {
	src := semPTX(c)
	m, err := ptx.Parse(src)
	if err != nil {
		return nil, err
	}
	mod, err := d.Load(Source{Module: m, PTX: []byte(src)})
	if err != nil {
		return nil, err
	}
	defer mod.Close()
	f, err := mod.Function("sem")
	if err != nil {
		return nil, err
	}
	n := len(c.in)
	in := make([]uint64, 0, 3*n)
	for _, r := range c.in {
		in = append(in, r[:]...)
	}
	bi, err := Alloc[uint64](d, 3*n)
	if err != nil {
		return nil, err
	}
	defer bi.Free()
	bo, err := Alloc[uint64](d, n)
	if err != nil {
		return nil, err
	}
	defer bo.Free()
	if err := bi.CopyFromHost(in); err != nil {
		return nil, err
	}
	if err := f.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, bi, bo, uint32(n)); err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	return out, bo.CopyToHost(out)
}

// checkSem runs every case on d (nil: each on a new emulated device) and reports each result
// that differs from the H200's.
func checkSem(t *testing.T, d *Device) {
	for _, c := range semCases {
		t.Run(c.name, func(t *testing.T) {
			dev := d
			if dev == nil {
				e, err := OpenBackend(Emulator, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				dev = e
			}
			got, err := runSem(dev, c)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				if g != c.want[i] {
					t.Errorf("%s of %#x: %#x, the H200 gives %#x", c.name, c.in[i], g, c.want[i])
				}
			}
		})
	}
}

// TestSemanticsEmulator checks the emulator's special values against the H200's.
func TestSemanticsEmulator(t *testing.T) {
	checkSem(t, nil)
}

// TestEmulatorFaultIsSticky checks that a fault leaves the emulated device unusable, as a
// GPU's context, and that the later calls say the fault was an earlier one's (they
// repeated its text as if the present call had faulted).
func TestEmulatorFaultIsSticky(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, first := runSem(d, semCase{name: "fault", body: "ld.global.b32 %rd, [%da];", in: [][3]uint64{{8}}})
	if first == nil || !strings.Contains(first.Error(), "invalid address") {
		t.Fatalf("a load from address 8: %v; want an invalid address", first)
	}
	_, err = runSem(d, semCases[0])
	if err == nil || !strings.Contains(err.Error(), "unusable after an earlier fault") || !strings.Contains(err.Error(), "invalid address") {
		t.Fatalf("the next call: %v; want the earlier fault, named as such", err)
	}
}
