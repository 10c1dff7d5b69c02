package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// TestGMMALayoutAtoms checks the shared-memory layout atoms against CuTe's printed ones
// (print(GMMA::Layout_K_SW128_Atom<half_t>{}) etc.), the swizzle converted from CuTe's
// byte-address Sw<B,4,3> to element offsets (Sw<B,3,3> for 16-bit elements).
func TestGMMALayoutAtoms(t *testing.T) {
	cases := []struct {
		elem  dsl.Type
		major dsl.GMMAMajor
		swz   int
		want  string
	}{
		{dsl.BF16, dsl.KMajor, 0, "Sw<0,3,3> o 0 o (8,8):(8,1)"},
		{dsl.BF16, dsl.KMajor, 32, "Sw<1,3,3> o 0 o (8,16):(16,1)"},
		{dsl.BF16, dsl.KMajor, 64, "Sw<2,3,3> o 0 o (8,32):(32,1)"},
		{dsl.BF16, dsl.KMajor, 128, "Sw<3,3,3> o 0 o (8,64):(64,1)"},
		{dsl.F16, dsl.MNMajor, 128, "Sw<3,3,3> o 0 o (64,8):(1,64)"},
		{dsl.F16, dsl.MNMajor, 0, "Sw<0,3,3> o 0 o (8,8):(1,8)"},
		{dsl.E4M3, dsl.KMajor, 128, "Sw<3,4,3> o 0 o (8,128):(128,1)"},
		{dsl.F32, dsl.KMajor, 64, "Sw<2,2,3> o 0 o (8,16):(16,1)"},
	}
	for _, c := range cases {
		l, err := dsl.GMMALayoutAtom(c.elem, c.major, c.swz)
		if err != nil {
			t.Fatal(err)
		}
		if l.String() != c.want {
			t.Errorf("%s %s-major %d: %v, want %s", c.elem, c.major, c.swz, l, c.want)
		}
	}
	if _, err := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 16); err == nil || !strings.Contains(err.Error(), "swizzle 16") {
		t.Errorf("swizzle 16: %v", err)
	}
}

// TestGMMAAtomCLayout: the accumulator layout is CuTe's CLayout_64xN, and thread t's value
// v sits where the PTX ISA's wgmma D fragment figure puts it: row 16*warp + lane/4 +
// 8*((v%4)/2), column 8*(v/4) + 2*(lane%4) + v%2.
func TestGMMAAtomCLayout(t *testing.T) {
	a, err := dsl.MakeGMMAAtom(dsl.BF16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.CLayout.String(); got != "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))" {
		t.Errorf("CLayout %s", got)
	}
	if a.String() != "SM90_64x64x16_F32BF16BF16_SS" || a.AccRegs() != 32 {
		t.Errorf("%v: %d accumulators", a, a.AccRegs())
	}
	for tid := 0; tid < 128; tid++ {
		l, w := tid%32, tid/32
		for v := 0; v < 32; v++ {
			m, n := a.Coord(tid, v)
			if wm, wn := 16*w+l/4+8*((v%4)/2), 8*(v/4)+2*(l%4)+v%2; m != wm || n != wn {
				t.Fatalf("thread %d value %d at (%d,%d), want (%d,%d)", tid, v, m, n, wm, wn)
			}
		}
	}
	for _, c := range []struct {
		ab dsl.Type
		n  int
		k  int
	}{{dsl.F16, 8, 16}, {dsl.E4M3, 256, 32}, {dsl.E5M2, 128, 32}, {dsl.F32, 16, 8}} {
		a, err := dsl.MakeGMMAAtom(c.ab, c.n)
		if err != nil || a.K != c.k {
			t.Errorf("%s N=%d: K %d, %v", c.ab, c.n, a.K, err)
		}
	}
	for _, c := range []struct {
		ab  dsl.Type
		n   int
		msg string
	}{{dsl.BF16, 12, "N = 12"}, {dsl.BF16, 264, "N = 264"}, {dsl.I8, 64, "no f32-accumulating"}, {dsl.F64, 64, "no f32"}} {
		if _, err := dsl.MakeGMMAAtom(c.ab, c.n); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s N=%d: %v, want %q", c.ab, c.n, err, c.msg)
		}
	}
}

// TestGMMADescriptors: descriptors made from tiled layout atoms carry the LBO/SBO CuTe's
// make_gmma_desc computes (K-major swizzled: SBO = 8 rows of the atom, LBO unused (16);
// K-major unswizzled: LBO = the next core matrix along K, SBO along MN; MN-major swizzled:
// LBO = the next atom along MN, SBO = 8 rows of K), and the per-K-block start offsets.
func TestGMMADescriptors(t *testing.T) {
	bf, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
	f8, _ := dsl.MakeGMMAAtom(dsl.E4M3, 128)
	cases := []struct {
		atom       dsl.GMMAAtom
		o          dsl.Operand
		major      dsl.GMMAMajor
		swz, mn, k int
		lbo, sbo   int
		kblocks    []int
		bits       uint64 // the descriptor at start 0x400
	}{
		{bf, dsl.OperandA, dsl.KMajor, 128, 64, 64, 16, 1024, []int{0, 32, 64, 96}, 0x4000004000010040},
		{bf, dsl.OperandB, dsl.KMajor, 64, 64, 32, 16, 512, []int{0, 32}, 0x8000002000010040},
		{bf, dsl.OperandA, dsl.KMajor, 32, 128, 16, 16, 256, []int{0}, 0xc000001000010040},
		{bf, dsl.OperandA, dsl.KMajor, 0, 64, 32, 1024, 128, []int{0, 2048}, 0x0000000800400040},
		{bf, dsl.OperandB, dsl.MNMajor, 128, 64, 32, 0, 1024, []int{0, 2048}, 0x4000004000000040},
		{bf, dsl.OperandA, dsl.MNMajor, 0, 64, 16, 1024, 128, []int{0}, 0x0000000800400040},
		{f8, dsl.OperandB, dsl.KMajor, 128, 128, 128, 16, 1024, []int{0, 32, 64, 96}, 0x4000004000010040},
	}
	for i, c := range cases {
		atom, _ := dsl.GMMALayoutAtom(c.atom.A, c.major, c.swz)
		l, err := dsl.TileToShape(atom, c.mn, c.k)
		if err != nil {
			t.Fatal(err)
		}
		op, err := dsl.MakeGMMAOperand(c.atom, c.o, l)
		if err != nil {
			t.Errorf("case %d (%v): %v", i, l, err)
			continue
		}
		if op.Desc.Major != c.major || op.Desc.Swizzle != c.swz || op.Desc.LBO != c.lbo || op.Desc.SBO != c.sbo {
			t.Errorf("case %d (%v): %+v, want LBO %d SBO %d", i, l, op.Desc, c.lbo, c.sbo)
		}
		if len(op.KBlocks) != len(c.kblocks) {
			t.Errorf("case %d: K blocks %v, want %v", i, op.KBlocks, c.kblocks)
		} else {
			for j := range c.kblocks {
				if op.KBlocks[j] != c.kblocks[j] {
					t.Errorf("case %d: K blocks %v, want %v", i, op.KBlocks, c.kblocks)
					break
				}
			}
		}
		if got := op.Desc.Bits(0x400); got != c.bits {
			t.Errorf("case %d: bits %#x, want %#x", i, got, c.bits)
		}
	}
}

// TestGMMADescriptorErrors: layouts no descriptor can express are refused with the reason.
func TestGMMADescriptorErrors(t *testing.T) {
	bf, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
	f8, _ := dsl.MakeGMMAAtom(dsl.E4M3, 128)
	mn8, _ := dsl.GMMALayoutAtom(dsl.E4M3, dsl.MNMajor, 128)
	mnF8, _ := dsl.TileToShape(mn8, 128, 64)
	cases := []struct {
		atom dsl.GMMAAtom
		o    dsl.Operand
		l    layout.ComposedLayout
		msg  string
	}{
		// row-major 64x64 without swizzle: rows are 128 bytes apart, no core-matrix layout.
		{bf, dsl.OperandA, layout.ComposedLayout{Inner: layout.MustParse("(64,64):(64,1)")}, "no wgmma descriptor reads"},
		// a 128-byte swizzle written for 8-byte units.
		{bf, dsl.OperandA, layout.ComposedLayout{Outer: layout.Swizzle{B: 3, M: 2, S: 3}, Inner: layout.MustParse("((8,8),64):((64,512),1)")}, "no wgmma swizzle mode"},
		// B must have N rows.
		{bf, dsl.OperandB, layout.ComposedLayout{Inner: layout.MustParse("(128,16):(16,1)")}, "wants 64 rows"},
		// MN-major e4m3 has no descriptor.
		{f8, dsl.OperandB, mnF8, "MN-major"},
	}
	for i, c := range cases {
		_, err := dsl.MakeGMMAOperand(c.atom, c.o, c.l)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("case %d: %v, want %q", i, err, c.msg)
		}
	}
}
