package emu

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// ldmatrixKernel: every lane copies 16 bytes of in into the 512-byte shared array, then the
// warp runs instr (ldmatrix into %r0..%r<n-1> or stmatrix from them) with lane l's row
// address sm + offs[l]; regs[i*32+l] (stmatrix) are the registers' inputs. Lane l stores
// its registers to out[i*32+l] (ldmatrix), or its 16 bytes of the shared array to
// out[4l..4l+3] (stmatrix).
func ldmatrixKernel(instr string, n int, store bool) string {
	var b strings.Builder
	b.WriteString(`.shared .align 16 .b8 sm[512];
.visible .entry k(.param .u64 in, .param .u64 offs, .param .u64 regs, .param .u64 out)
{
	.reg .u64 %rd<12>;
	.reg .u32 %t<4>;
	.reg .b32 %r<4>;
	.reg .b32 %v<4>;
	mov.u32 %t0, %tid.x;
	mul.wide.u32 %rd4, %t0, 16;
	mul.wide.u32 %rd7, %t0, 4;
	ld.param.u64 %rd0, [in];
	add.u64 %rd0, %rd0, %rd4;
	ld.global.v4.b32 {%v0, %v1, %v2, %v3}, [%rd0];
	mov.u64 %rd5, sm;
	add.u64 %rd6, %rd5, %rd4;
	st.shared.v4.b32 [%rd6], {%v0, %v1, %v2, %v3};
	ld.param.u64 %rd1, [offs];
	add.u64 %rd1, %rd1, %rd7;
	ld.global.u32 %t1, [%rd1];
	cvt.u64.u32 %rd8, %t1;
	add.u64 %rd9, %rd5, %rd8;
	ld.param.u64 %rd2, [regs];
	add.u64 %rd2, %rd2, %rd7;
	ld.param.u64 %rd3, [out];
`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "\tld.global.b32 %%r%d, [%%rd2+%d];\n", i, 128*i)
	}
	b.WriteString("\tbar.sync 0;\n\t" + instr + "\n")
	if store {
		b.WriteString("\tbar.sync 0;\n\tld.shared.v4.b32 {%v0, %v1, %v2, %v3}, [%rd6];\n\tadd.u64 %rd3, %rd3, %rd4;\n\tst.global.v4.b32 [%rd3], {%v0, %v1, %v2, %v3};\n")
	} else {
		b.WriteString("\tadd.u64 %rd3, %rd3, %rd7;\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "\tst.global.b32 [%%rd3+%d], %%r%d;\n", 128*i, i)
		}
	}
	b.WriteString("\tret;\n}\n")
	return b.String()
}

func regList(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%%r%d", i)
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// ldmatrixSetup returns the shared array's initial 16-bit words (word w holds w+1000) and
// each lane's row offset: a random permutation of the 32 rows of 16 bytes; lanes past the
// ones that give addresses get a misaligned offset (their addresses must be ignored).
func ldmatrixSetup(seed int64, num int) (words []uint16, offs []uint32) {
	rng := rand.New(rand.NewSource(seed))
	words = make([]uint16, 256)
	for i := range words {
		words[i] = uint16(1000 + i)
	}
	perm := rng.Perm(32)
	offs = make([]uint32, 32)
	for l := range offs {
		offs[l] = uint32(perm[l] * 16)
		if l >= 8*num {
			offs[l] = 3
		}
	}
	return words, offs
}

// The PTX ISA's ldmatrix fragment (m8n8, 16-bit elements): lane l receives, of each matrix,
// row l/4, elements 2(l%4) and 2(l%4)+1; with .trans the same positions of the transposed
// matrix, that is column l/4, rows 2(l%4) and 2(l%4)+1. Matrix i's row r is the 16 bytes at
// the address lane 8i+r gave.
func isaLdmatrixElem(l, j int, trans bool) (row, col int) {
	if trans {
		return 2*(l%4) + j, l / 4
	}
	return l / 4, 2*(l%4) + j
}

func TestLdmatrix(t *testing.T) {
	for _, num := range []int{1, 2, 4} {
		for _, trans := range []bool{false, true} {
			tr := ""
			if trans {
				tr = ".trans"
			}
			instr := fmt.Sprintf("ldmatrix.sync.aligned.m8n8.x%d%s.shared.b16 %s, [%%rd9];", num, tr, regList(num))
			t.Run(instr, func(t *testing.T) {
				words, offs := ldmatrixSetup(int64(num*2+len(tr)), num)
				s := newSys(t, 1)
				in, po := mustMalloc(t, s, 0, 512), mustMalloc(t, s, 0, 128)
				regs, out := mustMalloc(t, s, 0, 512), mustMalloc(t, s, 0, 512)
				must(t, WriteSlice(s, in, words))
				must(t, WriteSlice(s, po, offs))
				must(t, launch1(s, asm(t, ldmatrixKernel(instr, num, false)), "k", 1, 32, in, po, regs, out))
				got := readU32(t, s, out, 32*num)
				for i := 0; i < num; i++ {
					for l := 0; l < 32; l++ {
						var want uint32
						for j := 0; j < 2; j++ {
							row, col := isaLdmatrixElem(l, j, trans)
							want |= uint32(words[int(offs[8*i+row])/2+col]) << (16 * j)
						}
						if g := got[i*32+l]; g != want {
							t.Fatalf("lane %d register %d = %#08x, want %#08x", l, i, g, want)
						}
					}
				}
			})
		}
	}
}

// TestStmatrix stores registers with stmatrix and checks every shared word against the
// ISA's fragment (the inverse of ldmatrix's).
func TestStmatrix(t *testing.T) {
	for _, num := range []int{1, 2, 4} {
		for _, trans := range []bool{false, true} {
			tr := ""
			if trans {
				tr = ".trans"
			}
			instr := fmt.Sprintf("stmatrix.sync.aligned.m8n8.x%d%s.shared.b16 [%%rd9], %s;", num, tr, regList(num))
			t.Run(instr, func(t *testing.T) {
				words, offs := ldmatrixSetup(int64(num*3+len(tr)), num)
				regVals := make([]uint32, 4*32)
				for i := range regVals {
					regVals[i] = uint32(2*i) | uint32(2*i+1)<<16
				}
				s := newSys(t, 1)
				in, po := mustMalloc(t, s, 0, 512), mustMalloc(t, s, 0, 128)
				regs, out := mustMalloc(t, s, 0, 512), mustMalloc(t, s, 0, 512)
				must(t, WriteSlice(s, in, words))
				must(t, WriteSlice(s, po, offs))
				must(t, WriteSlice(s, regs, regVals))
				must(t, launch1(s, asm(t, ldmatrixKernel(instr, num, true)), "k", 1, 32, in, po, regs, out))
				got, err := ReadSlice[uint16](s, out, 256)
				must(t, err)
				want := append([]uint16(nil), words...)
				for i := 0; i < num; i++ {
					for l := 0; l < 32; l++ {
						for j := 0; j < 2; j++ {
							row, col := isaLdmatrixElem(l, j, trans)
							want[int(offs[8*i+row])/2+col] = uint16(regVals[i*32+l] >> (16 * j))
						}
					}
				}
				for w := range want {
					if got[w] != want[w] {
						t.Fatalf("shared word %d = %d, want %d", w, got[w], want[w])
					}
				}
			})
		}
	}
}

func TestLdmatrixMisalignedRow(t *testing.T) {
	words, offs := ldmatrixSetup(5, 4)
	offs[11] += 8 // lane 11 gives row 3 of matrix 1, 8 bytes off
	s := newSys(t, 1)
	in, po := mustMalloc(t, s, 0, 512), mustMalloc(t, s, 0, 128)
	regs, out := mustMalloc(t, s, 0, 512), mustMalloc(t, s, 0, 512)
	must(t, WriteSlice(s, in, words))
	must(t, WriteSlice(s, po, offs))
	instr := "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r0, %r1, %r2, %r3}, [%rd9];"
	err := launch1(s, asm(t, ldmatrixKernel(instr, 4, false)), "k", 1, 32, in, po, regs, out)
	e := wantErr(t, err, KindMisaligned, "row 3 of matrix 1, given by lane 11", "not 16-byte aligned", "ldmatrix.sync.aligned.m8n8.x4.shared.b16")
	if e.Thread != [3]int{11, 0, 0} || e.Pos.File == "" {
		t.Errorf("report names thread %v at %v, want thread 11 and a Go line", e.Thread, e.Pos)
	}
}

// warpCollectiveKernel runs an ldmatrix and an mma under the condition cond (PTX setting
// %p0 from the lane %t0), to test the sanitizer's reports on partial and diverged warps.
const collectiveKernel = `.shared .align 16 .b8 sm[512];
.visible .entry k()
{
	.reg .u64 %rd<4>;
	.reg .u32 %t<2>;
	.reg .b32 %r<4>;
	.reg .f32 %f<4>;
	.reg .pred %p<2>;
	mov.u32 %t0, %tid.x;
	mul.wide.u32 %rd0, %t0, 16;
	mov.u64 %rd1, sm;
	add.u64 %rd1, %rd1, %rd0;
	and.b64 %rd1, %rd1, 255;
	setp.lt.u32 %p0, %t0, 16;
	@%p0 bra ALT;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r0, %r1, %r2, %r3}, [%rd1];
	bra END;
ALT:
	ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r0, %r1, %r2, %r3}, [%rd1];
END:
	ret;
}
.visible .entry partial()
{
	.reg .b32 %r<4>;
	.reg .f32 %f<4>;
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r0, %r1}, {%f0, %f1, %f2, %f3};
	ret;
}
.visible .entry guarded()
{
	.reg .b32 %r<4>;
	.reg .f32 %f<4>;
	.reg .u32 %t<2>;
	.reg .pred %p<2>;
	mov.u32 %t0, %tid.x;
	setp.lt.u32 %p0, %t0, 8;
	@%p0 mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r0, %r1}, {%f0, %f1, %f2, %f3};
	ret;
}
`

func TestWarpCollectiveSanitizer(t *testing.T) {
	m := asm(t, collectiveKernel)
	s := newSys(t, 1)
	e := wantErr(t, launch1(s, m, "k", 1, 32), KindWarpSync, "warp-collective", "diverged", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16")
	if e.Pos.File == "" {
		t.Errorf("no Go line in %v", e)
	}
	e = wantErr(t, launch1(s, m, "partial", 1, 16), KindWarpSync, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "lane(s) 0xffff0000 do not exist", "16 threads")
	if e.Pos.File == "" {
		t.Errorf("no Go line in %v", e)
	}
	wantErr(t, launch1(s, m, "guarded", 1, 32), KindWarpSync, "guard predicate is false in lane(s) 0xffffff00")
	// A whole warp runs them without complaint (the partial entry with 64 threads: two full warps).
	must(t, launch1(s, m, "partial", 1, 64))
}
