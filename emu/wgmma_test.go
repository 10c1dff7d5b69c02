package emu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// The wgmma tests build A and B in shared memory with a model of CuTe's GMMA layout atoms
// written here (not the emulator's descriptor decoder): a K-major atom is 8 rows of W bytes
// (W the swizzle width; 16-byte core-matrix rows without swizzle), an MN-major atom W bytes
// of MN by 8 rows of K; atoms are tiled MN first; the swizzle XORs byte-offset bits 4..6 with
// bits 7..9 (as many bits as the mode has). The kernel copies the image into shared memory,
// issues the wgmmas (one per 32 bytes of K, the descriptor's start advancing by 32 bytes, as
// CUTLASS does), and every thread stores its accumulator registers; the test maps them back
// with the ISA's accumulator fragment (row 16*warp + lane/4 + 8*((i%4)/2), column 8*(i/4) +
// 2*(lane%4) + i%2) and compares with a Go model of the arithmetic.

type wgCase struct {
	n       int
	in, acc ptx.Type
	swz     int  // 0, 32, 64, 128
	mnMajor bool // A and B M/N-major (imm-trans = 1)
	aRegs   bool // A from registers
	negA    bool
	in2     ptx.Type // B's type when it differs from A's (mixed s8/u8)
	sat     bool     // .satfinite (integer forms)
	big     bool     // D starts at 2147483000 (scale-d true from the first wgmma): integer overflow
}

func (c wgCase) typeB() ptx.Type {
	if c.in2 != ptx.NoType {
		return c.in2
	}
	return c.in
}

func (c wgCase) String() string {
	s := fmt.Sprintf("m64n%d.%s.%s.swz%d", c.n, c.acc, c.in, c.swz)
	if c.mnMajor {
		s += ".mn"
	}
	if c.aRegs {
		s += ".areg"
	}
	if c.negA {
		s += ".nega"
	}
	if c.in2 != ptx.NoType {
		s += "." + c.in2.String()
	}
	if c.sat {
		s += ".sat"
	}
	if c.big {
		s += ".big"
	}
	return s
}

// swz applies the swizzle of width w to a byte offset.
func swzOff(off, w int) int {
	bits := map[int]int{0: 0, 32: 1, 64: 2, 128: 3}[w]
	return off ^ (off>>7&(1<<bits-1))<<4
}

// gmmaImage places a rows x kk matrix (row = M or N index) of es-byte elements in the layout
// of the case; it returns the byte offset of each element and the descriptor's LBO and SBO.
func gmmaImage(rows, kk, es int, c wgCase) (off func(r, k int) int, lbo, sbo int) {
	w := c.swz
	switch {
	case !c.mnMajor && w == 0:
		// Core matrices (8 rows x 16 bytes, 128 contiguous bytes); all row groups of one
		// 16-byte K chunk, then the next chunk.
		sbo, lbo = 128, 128*rows/8
		return func(r, k int) int {
			return (r/8)*sbo + (k*es/16)*lbo + (r%8)*16 + k*es%16
		}, lbo, sbo
	case !c.mnMajor:
		sbo = 8 * w // atoms of 8 rows x w bytes, stacked along the rows
		return func(r, k int) int {
			return swzOff((r/8)*sbo+(r%8)*w+k*es, w)
		}, 1, sbo
	case w == 0:
		// MN-major core matrices: 16 bytes of MN (T elements) x 8 k, 128 bytes; all of MN for
		// 8 k, then the next 8 k.
		t := 16 / es
		sbo, lbo = 128, 128*rows/t
		return func(r, k int) int {
			return (r/t)*sbo + (k/8)*lbo + (k%8)*16 + r%t*es
		}, lbo, sbo
	default:
		// MN-major atoms of w bytes of MN x 8 k, tiled along MN, then k.
		t := w / es
		atoms := (rows + t - 1) / t
		lbo, sbo = 8*w, 8*w*atoms
		return func(r, k int) int {
			return swzOff((r/t)*lbo+(k/8)*sbo+(k%8)*w+r%t*es, w)
		}, lbo, sbo
	}
}

func wgDesc(start, lbo, sbo, swz int) uint64 {
	mode := map[int]uint64{0: 0, 128: 1, 64: 2, 32: 3}[swz]
	return uint64(start>>4) | uint64(lbo>>4)<<16 | uint64(sbo>>4)<<32 | mode<<62
}

// wgKernel is one warpgroup: copy the image (words) into shared memory, then the wgmmas,
// then each thread stores accumulator register i at word i*128 + tid of D.
func wgKernel(c wgCase, steps, imgBytes int) string {
	nd := ptx.WgmmaAccRegs(c.n, c.acc)
	k := ptx.WgmmaK(c.in)
	accT := map[ptx.Type]string{ptx.F32: ".f32", ptx.F16: ".b32", ptx.S32: ".s32"}[c.acc]
	var b strings.Builder
	fmt.Fprintf(&b, `.visible .entry k(.param .u64 pimg, .param .u64 pd, .param .u64 pa, .param .u64 pb, .param .u64 par)
{
	.shared .align 1024 .b8 smem[%d];
	.reg %s %%d<%d>;
	.reg .b32 %%a<%d>;
	.reg .u64 %%rd<12>;
	.reg .u32 %%r<8>;
	.reg .pred %%p<2>;
	mov.u32 %%r0, %%tid.x;
	ld.param.u64 %%rd0, [pimg];
	mov.u64 %%rd1, smem;
	mul.wide.u32 %%rd2, %%r0, 4;
	mov.u32 %%r1, %%r0;
LCOPY:
	setp.ge.u32 %%p0, %%r1, %d;
	@%%p0 bra LDONE;
	mul.wide.u32 %%rd3, %%r1, 4;
	add.u64 %%rd4, %%rd0, %%rd3;
	ld.global.u32 %%r2, [%%rd4];
	add.u64 %%rd5, %%rd1, %%rd3;
	st.shared.u32 [%%rd5], %%r2;
	add.u32 %%r1, %%r1, 128;
	bra LCOPY;
LDONE:
	bar.sync 0;
	shr.u64 %%rd6, %%rd1, 4;
	ld.param.u64 %%rd7, [pa];
	add.u64 %%rd7, %%rd7, %%rd6;
	ld.param.u64 %%rd8, [pb];
	add.u64 %%rd8, %%rd8, %%rd6;
	ld.param.u64 %%rd9, [par];
	add.u64 %%rd9, %%rd9, %%rd2;
	setp.ne.u32 %%p1, %%r0, %%r0;
	wgmma.fence.sync.aligned;
`, imgBytes, accT, nd, 4*steps, imgBytes/4)
	d := make([]string, nd)
	for i := range d {
		d[i] = fmt.Sprintf("%%d%d", i)
	}
	imms := ", 1, 1"
	if c.negA {
		imms = ", -1, 1"
	}
	if c.acc == ptx.S32 {
		imms = ""
	}
	if c.big {
		for i := range d {
			fmt.Fprintf(&b, "\tmov.s32 %%d%d, 2147483000;\n", i)
		}
	}
	if c.in == ptx.F16 || c.in == ptx.BF16 {
		tr := map[bool]string{false: "0", true: "1"}[c.mnMajor]
		if c.aRegs {
			imms += ", " + tr
		} else {
			imms += ", " + tr + ", " + tr
		}
	}
	for s := 0; s < steps; s++ {
		a := "%rd7"
		if c.aRegs { // registers of their own: those of a wgmma in flight are not to be touched
			for i := 0; i < 4; i++ {
				fmt.Fprintf(&b, "\tld.global.b32 %%a%d, [%%rd9+%d];\n", 4*s+i, (s*4+i)*512)
			}
			a = fmt.Sprintf("{%%a%d, %%a%d, %%a%d, %%a%d}", 4*s, 4*s+1, 4*s+2, 4*s+3)
		}
		scale := "1"
		if s == 0 && !c.big {
			scale = "%p1" // false: D is not read
		}
		sat := ""
		if c.sat {
			sat = ".satfinite"
		}
		fmt.Fprintf(&b, "\twgmma.mma_async.sync.aligned.m64n%dk%d%s.%s.%s.%s {%s}, %s, %%rd8, %s%s;\n",
			c.n, k, sat, c.acc, c.in, c.typeB(), strings.Join(d, ", "), a, scale, imms)
		if !c.mnMajor {
			b.WriteString("\tadd.u64 %rd7, %rd7, 2;\n\tadd.u64 %rd8, %rd8, 2;\n") // 32 bytes of K
		}
	}
	b.WriteString("\twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;\n")
	b.WriteString("\tld.param.u64 %rd10, [pd];\n\tadd.u64 %rd10, %rd10, %rd2;\n")
	for i := 0; i < nd; i++ {
		fmt.Fprintf(&b, "\tst.global.b32 [%%rd10+%d], %%d%d;\n", i*512, i)
	}
	b.WriteString("\tret;\n}\n")
	return b.String()
}

func runWgmma(t *testing.T, c wgCase, seed int64) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	es := c.in.Bits() / 8
	k := ptx.WgmmaK(c.in)
	kt := k // K of the tile
	steps := 1
	if !c.mnMajor && c.swz > 0 {
		kt = c.swz / es
		steps = kt / k
	}
	av, bv := fmatrix(64, kt), fmatrix(c.n, kt) // bv[n][k]
	ab, bb := matrix(64, kt), matrix(c.n, kt)
	for i := range av {
		for j := range av[i] {
			av[i][j], ab[i][j] = randElem(rng, c.in)
		}
	}
	for i := range bv {
		for j := range bv[i] {
			bv[i][j], bb[i][j] = randElem(rng, c.typeB())
		}
	}
	aOff, aL, aS := gmmaImage(64, kt, es, c)
	bOff, bL, bS := gmmaImage(c.n, kt, es, c)
	aBytes := (64*kt*es + 1023) &^ 1023
	img := make([]byte, aBytes+(c.n*kt*es+1023)&^1023)
	put := func(o int, v uint32) {
		for i := 0; i < es; i++ {
			img[o+i] = byte(v >> (8 * i))
		}
	}
	for r := range ab {
		for j := range ab[r] {
			put(aOff(r, j), ab[r][j])
		}
	}
	for r := range bb {
		for j := range bb[r] {
			put(aBytes+bOff(r, j), bb[r][j])
		}
	}
	// A in registers: the ISA's A fragment, register ri of thread tid at word (s*4+ri)*128+tid.
	areg := make([]uint32, steps*4*128)
	e := 4 / es
	for s := 0; s < steps; s++ {
		for tid := 0; tid < 128; tid++ {
			l, wi := tid%32, tid/32
			for ri := 0; ri < 4; ri++ {
				var v uint32
				for j := 0; j < e; j++ {
					row := 16*wi + l/4 + 8*(ri%2)
					col := s*k + (ri/2)*(k/2) + (l%4)*e + j
					v |= ab[row][col] << (8 * es * j)
				}
				areg[(s*4+ri)*128+tid] = v
			}
		}
	}
	sys := newSys(t, 1)
	pimg := mustMalloc(t, sys, 0, len(img))
	must(t, sys.Write(pimg, img))
	nd := ptx.WgmmaAccRegs(c.n, c.acc)
	pd := mustMalloc(t, sys, 0, nd*512)
	par := mustMalloc(t, sys, 0, len(areg)*4+4)
	must(t, WriteSlice(sys, par, areg))
	m := asmUnverified(t, wgKernel(c, steps, len(img)))
	err := launch1(sys, m, "k", 1, 128, pimg, pd, wgDesc(0, aL, aS, c.swz), wgDesc(aBytes, bL, bS, c.swz), par)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	out := readU32(t, sys, pd, nd*128)
	got := fmatrix(64, c.n)
	for tid := 0; tid < 128; tid++ {
		l, wi := tid%32, tid/32
		for i := 0; i < nd; i++ {
			v := out[i*128+tid]
			if c.acc == ptx.F16 {
				for j := 0; j < 2; j++ {
					row, col := 16*wi+l/4+8*(i%2), 8*(i/2)+2*(l%4)+j
					got[row][col] = h2f(uint64(v >> (16 * j) & 0xffff))
				}
				continue
			}
			row, col := 16*wi+l/4+8*((i%4)/2), 8*(i/4)+2*(l%4)+i%2
			if c.acc == ptx.S32 {
				got[row][col] = float64(int32(v))
			} else {
				got[row][col] = float64(math.Float32frombits(v))
			}
		}
	}
	sign := 1.0
	if c.negA {
		sign = -1
	}
	bad, first := 0, ""
	for i := 0; i < 64; i++ {
		for j := 0; j < c.n; j++ {
			acc, mag := 0.0, 0.0
			if c.big {
				acc = 2147483000
			}
			for s := 0; s < steps; s++ {
				sum := acc
				for kk := s * k; kk < (s+1)*k; kk++ {
					sum += sign * av[i][kk] * bv[j][kk]
					mag += math.Abs(av[i][kk] * bv[j][kk])
				}
				switch {
				case c.acc == ptx.F16:
					acc = h2f(f2h(sum))
				case c.acc == ptx.S32 && c.sat:
					acc = math.Min(math.MaxInt32, math.Max(math.MinInt32, sum))
				case c.acc == ptx.S32:
					acc = float64(int32(int64(sum))) // wraps
				default:
					acc = float64(float32(sum))
				}
			}
			if math.Abs(got[i][j]-acc) > 1e-6*(mag+1) {
				if bad == 0 {
					first = fmt.Sprintf("D[%d][%d] = %g, want %g", i, j, got[i][j], acc)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ; first %s", c, bad, 64*c.n, first)
	}
}

// TestWgmma checks wgmma against the Go model for every swizzle mode, K- and MN-major
// operands, A from registers, the fp8, tf32 and 8-bit integer types (mixed s8/u8, wrapping
// and .satfinite overflow) and f16 accumulators, at several N.
func TestWgmma(t *testing.T) {
	cases := []wgCase{
		{n: 8, in: ptx.BF16, acc: ptx.F32, swz: 0},
		{n: 64, in: ptx.BF16, acc: ptx.F32, swz: 32},
		{n: 136, in: ptx.BF16, acc: ptx.F32, swz: 64},
		{n: 256, in: ptx.BF16, acc: ptx.F32, swz: 128},
		{n: 64, in: ptx.F16, acc: ptx.F16, swz: 128},
		{n: 24, in: ptx.F16, acc: ptx.F32, swz: 128, aRegs: true},
		{n: 64, in: ptx.BF16, acc: ptx.F32, swz: 128, negA: true},
		{n: 128, in: ptx.BF16, acc: ptx.F32, swz: 128, mnMajor: true},
		{n: 64, in: ptx.BF16, acc: ptx.F32, swz: 64, mnMajor: true},
		{n: 32, in: ptx.F16, acc: ptx.F32, swz: 32, mnMajor: true},
		{n: 16, in: ptx.F16, acc: ptx.F32, swz: 0, mnMajor: true},
		{n: 64, in: ptx.TF32, acc: ptx.F32, swz: 128},
		{n: 48, in: ptx.TF32, acc: ptx.F32, swz: 0},
		{n: 128, in: ptx.E4M3, acc: ptx.F32, swz: 128},
		{n: 40, in: ptx.E5M2, acc: ptx.F16, swz: 64},
		{n: 64, in: ptx.E4M3, acc: ptx.F32, swz: 32, aRegs: true},
		{n: 48, in: ptx.S8, acc: ptx.S32, swz: 128},
		{n: 24, in: ptx.U8, in2: ptx.S8, acc: ptx.S32, swz: 0, aRegs: true},
		{n: 32, in: ptx.U8, acc: ptx.S32, swz: 64, big: true},            // wraps
		{n: 32, in: ptx.U8, acc: ptx.S32, swz: 64, big: true, sat: true}, // clamps
	}
	for i, c := range cases {
		runWgmma(t, c, int64(i+1))
	}
}

// TestWgmmaLayoutMatters: a descriptor with the wrong swizzle mode gives wrong results (the
// check above can fail).
func TestWgmmaLayoutMatters(t *testing.T) {
	ft := &fakeT{T: t}
	c := wgCase{n: 64, in: ptx.BF16, acc: ptx.F32, swz: 128}
	func() {
		defer func() { recover() }()
		runWgmmaWrongSwizzle(ft, c)
	}()
	if !ft.failed {
		t.Error("a 128-byte swizzled image read as 64-byte swizzled gave the right D")
	}
}

// fakeT records failures instead of failing the test.
type fakeT struct {
	*testing.T
	failed bool
}

func (f *fakeT) Errorf(format string, args ...any) { f.failed = true }

func runWgmmaWrongSwizzle(t *fakeT, c wgCase) {
	// The image is laid out for c.swz, the descriptors say 64 bytes.
	rng := rand.New(rand.NewSource(7))
	es, kt := 2, c.swz/2
	ab, bb := matrix(64, kt), matrix(c.n, kt)
	av, bv := fmatrix(64, kt), fmatrix(c.n, kt)
	for i := range ab {
		for j := range ab[i] {
			av[i][j], ab[i][j] = randElem(rng, c.in)
		}
	}
	for i := range bb {
		for j := range bb[i] {
			bv[i][j], bb[i][j] = randElem(rng, c.in)
		}
	}
	aOff, _, aS := gmmaImage(64, kt, es, c)
	bOff, _, bS := gmmaImage(c.n, kt, es, c)
	img := make([]byte, 64*kt*es+c.n*kt*es)
	for r := range ab {
		for j := range ab[r] {
			binary.LittleEndian.PutUint16(img[aOff(r, j):], uint16(ab[r][j]))
		}
	}
	for r := range bb {
		for j := range bb[r] {
			binary.LittleEndian.PutUint16(img[64*kt*es+bOff(r, j):], uint16(bb[r][j]))
		}
	}
	sys := newSys(t.T, 1)
	pimg := mustMalloc(t.T, sys, 0, len(img))
	must(t.T, sys.Write(pimg, img))
	pd := mustMalloc(t.T, sys, 0, 32*512)
	m := asm(t.T, wgKernel(c, kt/16, len(img)))
	must(t.T, launch1(sys, m, "k", 1, 128, pimg, pd, wgDesc(0, 1, aS, 64), wgDesc(64*kt*es, 1, bS, 64), pd))
	out := readU32(t.T, sys, pd, 32*128)
	for tid := 0; tid < 128; tid++ {
		l, wi := tid%32, tid/32
		for i := 0; i < 32; i++ {
			row, col := 16*wi+l/4+8*((i%4)/2), 8*(i/4)+2*(l%4)+i%2
			want := float32(0)
			acc := 0.0
			for s := 0; s < kt/16; s++ {
				for kk := s * 16; kk < (s+1)*16; kk++ {
					acc += av[row][kk] * bv[col][kk]
				}
				acc = float64(float32(acc))
			}
			want = float32(acc)
			if math.Float32frombits(out[i*128+tid]) != want {
				t.Errorf("differs")
				return
			}
		}
	}
}

const wgInFlightSrc = `
.visible .entry k(.param .u64 pd)
{
	.shared .align 1024 .b8 smem[4096];
	.reg .f32 %d<4>;
	.reg .f32 %e<4>;
	.reg .u64 %rd<4>;
	.reg .pred %p<1>;
	.reg .u32 %r<1>;
	ld.param.u64 %rd0, [pd];
	mov.u64 %rd1, 0;
	mov.u32 %r0, %tid.x;
	setp.eq.u32 %p0, %r0, 0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, %rd1, %rd1, 0, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%e0, %e1, %e2, %e3}, %rd1, %rd1, 0, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 1;
	@%p0 st.global.f32 [%rd0], %d0;
	@%p0 st.global.f32 [%rd0+4], %e1;
	ret;
}
`

// TestWgmmaInFlight: after wait_group 1 the older group's accumulators are readable and the
// newer group's are not; the report names the register and both lines.
func TestWgmmaInFlight(t *testing.T) {
	sys := newSys(t, 1)
	pd := mustMalloc(t, sys, 0, 64)
	err := launch1(sys, asm(t, wgInFlightSrc), "k", 1, 128, pd)
	e := wantErr(t, err, KindWgmma, "accumulator %f", "st.global.f32", "+4]", "before the wgmma.wait_group that retires it")
	if !strings.Contains(e.Msg, fmt.Sprintf("wgmma_test.go:%d", e.Pos.Line-4)) {
		t.Errorf("the report names the wgmma's line %d? %v", e.Pos.Line-4, err)
	}
}

// BenchmarkWgmma times a one-warpgroup launch of four m64n256k16 bf16 -> f32 wgmmas (128-byte
// swizzle; the kernel also copies the 40 KiB shared image in and stores D).
func BenchmarkWgmma(b *testing.B) {
	c := wgCase{n: 256, in: ptx.BF16, acc: ptx.F32, swz: 128}
	sys := newSys(b, 1)
	img := make([]byte, 64*128+256*128)
	pimg := mustMalloc(b, sys, 0, len(img))
	pd := mustMalloc(b, sys, 0, 128*512)
	_, aL, aS := gmmaImage(64, 64, 2, c)
	_, bL, bS := gmmaImage(256, 64, 2, c)
	m := asm(b, wgKernel(c, 4, len(img)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		must(b, launch1(sys, m, "k", 1, 128, pimg, pd, wgDesc(0, aL, aS, 128), wgDesc(8192, bL, bS, 128), pd))
	}
}
