package emu

import (
	"strings"
	"testing"
)

// TestProbe21HugeModuleVariable: a .global variable of 2^62 bytes (or 2^61 .u64) was
// reported as "MallocSymmetric of 1099511627776 bytes", the decoder's saturated size, not
// what the module declares. The error names the declared size. Probe 21.
func TestProbe21HugeModuleVariable(t *testing.T) {
	for _, tc := range []struct{ decl, want string }{
		{".global .b8 g[4611686018427387904];", "g: 4611686018427387904 elements of 1 byte(s)"},
		{".global .u64 g[2305843009213693952];", "g: 2305843009213693952 elements of 8 byte(s)"},
	} {
		m := asm(t, tc.decl+`
.visible .entry k()
{
	.reg .u32 %r<2>;
	ld.global.u32 %r0, [g+16];
	ret;
}`)
		s := newSys(t, 1)
		err := launch1(s, m, "k", 1, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "MallocSymmetric of 1099511627776") {
			t.Errorf("%s: %v, want an error naming %q", tc.decl, err, tc.want)
		}
	}
}

// TestProbe21Lop3Tables: lop3 with tables other than 0x96 (Verify refused them before)
// computes F(0xF0, 0xCC, 0xAA) = table bit by bit, as the ISA defines it: 0xE8 is the
// majority, 0xF8 a | (b & c), 0x3C a ^ b, 0 and 255 constants.
func TestProbe21Lop3Tables(t *testing.T) {
	a, b, c := uint64(0xF0F0_1234), uint64(0xCCCC_5678), uint64(0xAAAA_9ABC)
	in := [4]uint64{a, b, c, 0}
	m32 := func(x uint64) uint64 { return x & 0xffffffff }
	runOpCases(t, []opCase{
		{"cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; lop3.b32 %w3, %w0, %w1, %w2, 0xE8; cvt.u64.u32 %y0, %w3", in, m32(a&b | a&c | b&c), 0},
		{"cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; lop3.b32 %w3, %w0, %w1, %w2, 0xF8; cvt.u64.u32 %y0, %w3", in, m32(a | b&c), 0},
		{"cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; lop3.b32 %w3, %w0, %w1, %w2, 0x3C; cvt.u64.u32 %y0, %w3", in, m32(a ^ b), 0},
		{"cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; lop3.b32 %w3, %w0, %w1, %w2, 0; cvt.u64.u32 %y0, %w3", in, 0, 0},
		{"cvt.u32.u64 %w0, %x0; cvt.u32.u64 %w1, %x1; cvt.u32.u64 %w2, %x2; lop3.b32 %w3, %w0, %w1, %w2, 255; cvt.u64.u32 %y0, %w3", in, 0xffffffff, 0},
	})
}
