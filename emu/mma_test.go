package emu

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// The PTX ISA's fragment figures, written out case by case as the ISA states them
// ("Matrix Fragments for mma.m16n8k4 / k8 / k16 / k32"), independently of the emulator's
// generic formulas: isaA(l, i) is the (row, col) of element a_i of lane l, isaB of b_i, isaC of
// c_i. Element i lives in register i/per (per = elements per 32-bit register), at bits
// (i%per)*width.

type isaFrag func(shape string, t ptx.Type, l, i int) (row, col int)

func isaA(shape string, t ptx.Type, l, i int) (int, int) {
	g, tig := l>>2, l%4
	switch {
	case t == ptx.TF32 && shape == "m16n8k4":
		return g + 8*i, tig // a0: groupID, a1: groupID+8
	case t == ptx.TF32: // m16n8k8
		row := g
		if i == 1 || i == 3 {
			row = g + 8
		}
		col := tig
		if i >= 2 {
			col = tig + 4
		}
		return row, col
	case t.Bits() == 16 && shape == "m16n8k8":
		row := g
		if i >= 2 {
			row = g + 8
		}
		return row, tig*2 + i&1
	case t.Bits() == 16: // m16n8k16
		row := g + 8
		if i < 2 || 4 <= i && i < 6 {
			row = g
		}
		col := tig*2 + i&1
		if i >= 4 {
			col = tig*2 + 8 + i&1
		}
		return row, col
	case shape == "m16n8k16": // 8-bit
		row := g
		if i >= 4 {
			row = g + 8
		}
		return row, tig*4 + i&3
	default: // 8-bit m16n8k32
		row := g + 8
		if i < 4 || 8 <= i && i < 12 {
			row = g
		}
		col := tig*4 + i&3
		if i >= 8 {
			col = tig*4 + 16 + i&3
		}
		return row, col
	}
}

func isaB(shape string, t ptx.Type, l, i int) (int, int) {
	g, tig := l>>2, l%4
	switch {
	case t == ptx.TF32 && shape == "m16n8k4":
		return tig, g
	case t == ptx.TF32:
		return tig + 4*i, g // b0: tig, b1: tig+4
	case t.Bits() == 16 && shape == "m16n8k8":
		return tig*2 + i, g
	case t.Bits() == 16:
		if i < 2 {
			return tig*2 + i&1, g
		}
		return tig*2 + 8 + i&1, g
	case shape == "m16n8k16":
		return tig*4 + i, g
	default:
		if i < 4 {
			return tig*4 + i&3, g
		}
		return tig*4 + 16 + i&3, g
	}
}

func isaC(_ string, _ ptx.Type, l, i int) (int, int) {
	row := l >> 2
	if i >= 2 {
		row += 8
	}
	return row, (l%4)*2 + i&1
}

type mmaCase struct {
	shape   string
	in, acc ptx.Type
	in2     ptx.Type // B's type when it differs (mixed s8/u8, e4m3/e5m2)
	sat     bool
}

func (c mmaCase) name() string {
	b := c.in2
	if b == ptx.NoType {
		b = c.in
	}
	s := ""
	if c.sat {
		s = ".satfinite"
	}
	return fmt.Sprintf("mma.sync.aligned.%s.row.col%s.%s.%s.%s.%s", c.shape, s, c.acc, c.in, b, c.acc)
}

var mmaCases = []mmaCase{
	{shape: "m16n8k16", in: ptx.F16, acc: ptx.F32},
	{shape: "m16n8k16", in: ptx.F16, acc: ptx.F16},
	{shape: "m16n8k16", in: ptx.BF16, acc: ptx.F32},
	{shape: "m16n8k8", in: ptx.F16, acc: ptx.F16},
	{shape: "m16n8k8", in: ptx.F16, acc: ptx.F32},
	{shape: "m16n8k8", in: ptx.BF16, acc: ptx.F32},
	{shape: "m16n8k8", in: ptx.TF32, acc: ptx.F32},
	{shape: "m16n8k4", in: ptx.TF32, acc: ptx.F32},
	{shape: "m16n8k16", in: ptx.S8, acc: ptx.S32},
	{shape: "m16n8k16", in: ptx.U8, in2: ptx.S8, acc: ptx.S32, sat: true},
	{shape: "m16n8k32", in: ptx.S8, acc: ptx.S32, sat: true},
	{shape: "m16n8k32", in: ptx.U8, acc: ptx.S32},
	{shape: "m16n8k32", in: ptx.E4M3, acc: ptx.F32},
	{shape: "m16n8k32", in: ptx.E4M3, in2: ptx.E5M2, acc: ptx.F16},
	{shape: "m16n8k16", in: ptx.E5M2, acc: ptx.F32},
}

// mmaKernel is a one-warp kernel: lane l loads register r of A, B, C from word r*32+l of
// each array, runs the mma and stores D the same way.
func mmaKernel(c mmaCase, na, nb, nc int) string {
	accReg, accLd := ".b32", "b32"
	switch c.acc {
	case ptx.F32:
		accReg, accLd = ".f32", "f32"
	case ptx.S32:
		accReg, accLd = ".s32", "s32"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{
	.reg .b32 %%a<4>;
	.reg .b32 %%b<2>;
	.reg %s %%c<4>;
	.reg %s %%d<4>;
	.reg .u64 %%rd<8>;
	.reg .u32 %%t<2>;
	mov.u32 %%t0, %%tid.x;
	mul.wide.u32 %%rd4, %%t0, 4;
	ld.param.u64 %%rd0, [pa];
	ld.param.u64 %%rd1, [pb];
	ld.param.u64 %%rd2, [pc];
	ld.param.u64 %%rd3, [pd];
	add.u64 %%rd0, %%rd0, %%rd4;
	add.u64 %%rd1, %%rd1, %%rd4;
	add.u64 %%rd2, %%rd2, %%rd4;
	add.u64 %%rd3, %%rd3, %%rd4;
`, accReg, accReg)
	regs := func(p string, n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("%%%s%d", p, i)
		}
		return "{" + strings.Join(s, ", ") + "}"
	}
	for i := 0; i < na; i++ {
		fmt.Fprintf(&b, "\tld.global.b32 %%a%d, [%%rd0+%d];\n", i, i*128)
	}
	for i := 0; i < nb; i++ {
		fmt.Fprintf(&b, "\tld.global.b32 %%b%d, [%%rd1+%d];\n", i, i*128)
	}
	for i := 0; i < nc; i++ {
		fmt.Fprintf(&b, "\tld.global.%s %%c%d, [%%rd2+%d];\n", accLd, i, i*128)
	}
	fmt.Fprintf(&b, "\t%s %s, %s, %s, %s;\n", c.name(), regs("d", nc), regs("a", na), regs("b", nb), regs("c", nc))
	for i := 0; i < nc; i++ {
		fmt.Fprintf(&b, "\tst.global.%s [%%rd3+%d], %%d%d;\n", accLd, i*128, i)
	}
	b.WriteString("\tret;\n}\n")
	return b.String()
}

// randElem returns a random value of type t and its encoding (bits of the element).
func randElem(rng *rand.Rand, t ptx.Type) (float64, uint32) {
	for {
		switch t {
		case ptx.F16:
			h := fp.F32ToF16(float32(rng.NormFloat64()))
			return float64(fp.F16ToF32(h)), uint32(h)
		case ptx.BF16:
			h := fp.F32ToBF16(float32(rng.NormFloat64()))
			return float64(fp.BF16ToF32(h)), uint32(h)
		case ptx.TF32:
			// A full f32: the tf32 multiplicand ignores the low 13 bits.
			bits := math.Float32bits(float32(rng.NormFloat64()))
			return float64(math.Float32frombits(bits &^ 0x1fff)), bits
		case ptx.E4M3, ptx.E5M2:
			b := uint32(rng.Intn(256))
			f := &fmtE4M3
			if t == ptx.E5M2 {
				f = &fmtE5M2
			}
			v := f.decode(uint64(b))
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 8 { // f16 sums must not overflow
				continue
			}
			return v, b
		case ptx.S8:
			v := int8(rng.Intn(256))
			return float64(v), uint32(uint8(v))
		case ptx.U8:
			v := uint8(rng.Intn(256))
			return float64(v), uint32(v)
		}
		panic("randElem: " + t.String())
	}
}

// packFrag fills per-lane registers ([reg][lane] words) from matrix x with the ISA's map.
func packFrag(x [][]uint32, shape string, t ptx.Type, nregs int, frag isaFrag) []uint32 {
	per := 32 / t.Bits()
	out := make([]uint32, nregs*32)
	for l := 0; l < 32; l++ {
		for i := 0; i < nregs*per; i++ {
			row, col := frag(shape, t, l, i)
			out[(i/per)*32+l] |= x[row][col] << ((i % per) * t.Bits())
		}
	}
	return out
}

func matrix(rows, cols int) [][]uint32 {
	m := make([][]uint32, rows)
	for i := range m {
		m[i] = make([]uint32, cols)
	}
	return m
}

func fmatrix(rows, cols int) [][]float64 {
	m := make([][]float64, rows)
	for i := range m {
		m[i] = make([]float64, cols)
	}
	return m
}

// runMMA runs one mma case on random inputs; it returns the D each lane's registers hold,
// decoded with the C map cmap, and the exact reference A*B+C and the per-element bound on
// |A|*|B|+|C| (for the tolerance).
func runMMA(t *testing.T, c mmaCase, seed int64, cmap isaFrag) (got, want, mag [][]float64) {
	t.Helper()
	in2 := c.in2
	if in2 == ptx.NoType {
		in2 = c.in
	}
	m, n, k, _ := ptx.MMAShape(c.shape)
	na, nb, nc := ptx.MMARegs(m, n, k, c.in, c.acc)
	rng := rand.New(rand.NewSource(seed))
	ab, bb, cb := matrix(m, k), matrix(k, n), matrix(m, n)
	av, bv, cv := fmatrix(m, k), fmatrix(k, n), fmatrix(m, n)
	for i := 0; i < m; i++ {
		for j := 0; j < k; j++ {
			av[i][j], ab[i][j] = randElem(rng, c.in)
		}
	}
	for i := 0; i < k; i++ {
		for j := 0; j < n; j++ {
			bv[i][j], bb[i][j] = randElem(rng, in2)
		}
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			switch c.acc {
			case ptx.F32:
				f := float32(rng.NormFloat64() * 4)
				cv[i][j], cb[i][j] = float64(f), math.Float32bits(f)
			case ptx.F16:
				h := fp.F32ToF16(float32(rng.NormFloat64() * 4))
				cv[i][j], cb[i][j] = float64(fp.F16ToF32(h)), uint32(h)
			default:
				v := int32(rng.Intn(1 << 20))
				if c.sat && i == 0 { // row 0 overflows: .satfinite clamps it
					v = math.MaxInt32 - int32(j)
				}
				cv[i][j], cb[i][j] = float64(v), uint32(v)
			}
		}
	}
	cRegs := packFrag(cb, c.shape, ptx.F32, 4, isaC) // one element per register...
	if c.acc == ptx.F16 {
		cRegs = packFrag(cb, c.shape, ptx.F16, 2, isaC) // ... or two f16 per register
	}
	s := newSys(t, 1)
	put := func(words []uint32) uint64 {
		a := mustMalloc(t, s, 0, 4*len(words))
		must(t, WriteSlice(s, a, words))
		return a
	}
	pa := put(packFrag(ab, c.shape, c.in, na, isaA))
	pb := put(packFrag(bb, c.shape, in2, nb, isaB))
	pc := put(cRegs)
	pd := mustMalloc(t, s, 0, 4*32*nc)
	mod := asm(t, mmaKernel(c, na, nb, nc))
	must(t, launch1(s, mod, "k", 1, 32, pa, pb, pc, pd))
	words := readU32(t, s, pd, 32*nc)
	got, want, mag = fmatrix(m, n), fmatrix(m, n), fmatrix(m, n)
	per := 1
	if c.acc == ptx.F16 {
		per = 2
	}
	for l := 0; l < 32; l++ {
		for i := 0; i < nc*per; i++ {
			row, col := cmap(c.shape, c.acc, l, i)
			w := words[(i/per)*32+l]
			switch c.acc {
			case ptx.F32:
				got[row][col] = float64(math.Float32frombits(w))
			case ptx.F16:
				got[row][col] = float64(fp.F16ToF32(uint16(w >> (16 * (i % 2)))))
			default:
				got[row][col] = float64(int32(w))
			}
		}
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			sum, abs := cv[i][j], math.Abs(cv[i][j])
			for kk := 0; kk < k; kk++ {
				sum += av[i][kk] * bv[kk][j]
				abs += math.Abs(av[i][kk] * bv[kk][j])
			}
			if c.acc == ptx.S32 {
				if c.sat {
					sum = max(math.MinInt32, min(math.MaxInt32, sum))
				} else {
					sum = float64(int32(int64(sum)))
				}
			}
			want[i][j], mag[i][j] = sum, abs
		}
	}
	return got, want, mag
}

// mmaTolerance: the hardware adds the K products and C in an unspecified order with the
// accumulator's precision, so each D element may differ from the exact value by up to
// (K+1) rounding errors of the accumulator type, relative to the sum of the magnitudes:
// (K+1) * u * (|C| + sum |a*b|), u = 2^-24 for f32 and 2^-11 for f16; integers are exact.
func mmaTolerance(c mmaCase, mag float64) float64 {
	_, _, k, _ := ptx.MMAShape(c.shape)
	switch c.acc {
	case ptx.F32:
		return float64(k+1) * 0x1p-24 * mag
	case ptx.F16:
		return float64(k+1) * 0x1p-11 * mag
	}
	return 0
}

func mismatches(c mmaCase, got, want, mag [][]float64) (int, string) {
	bad, first := 0, ""
	for i := range got {
		for j := range got[i] {
			if d := math.Abs(got[i][j] - want[i][j]); !(d <= mmaTolerance(c, mag[i][j])) {
				if bad == 0 {
					first = fmt.Sprintf("D[%d][%d] = %v, want %v (tolerance %.3g)", i, j, got[i][j], want[i][j], mmaTolerance(c, mag[i][j]))
				}
				bad++
			}
		}
	}
	return bad, first
}

// TestMMAFragments runs each mma form on random data laid out by the ISA's fragment maps and
// checks every element of D (so every lane's every register) against A*B+C.
func TestMMAFragments(t *testing.T) {
	for _, c := range mmaCases {
		t.Run(c.name(), func(t *testing.T) {
			for seed := int64(1); seed <= 3; seed++ {
				got, want, mag := runMMA(t, c, seed, isaC)
				if bad, first := mismatches(c, got, want, mag); bad > 0 {
					t.Fatalf("seed %d: %d of 128 elements wrong; first: %s", seed, bad, first)
				}
			}
		})
	}
}

// TestMMAWrongLaneMapFails: reading D with a wrong lane map (rows g and g+8 swapped, the
// mistake a fragment layout is most likely to have) must fail the same check.
func TestMMAWrongLaneMapFails(t *testing.T) {
	wrong := func(shape string, tp ptx.Type, l, i int) (int, int) {
		row, col := isaC(shape, tp, l, i)
		return (row + 8) % 16, col
	}
	for _, c := range []mmaCase{mmaCases[0], mmaCases[1], mmaCases[8]} {
		got, want, mag := runMMA(t, c, 1, wrong)
		if bad, _ := mismatches(c, got, want, mag); bad < 64 {
			t.Errorf("%s: a wrong C map still matched (%d of 128 elements wrong)", c.name(), bad)
		}
	}
}

// BenchmarkMMA: one block of 4 warps, each running n mma.sync m16n8k16 f32 <- bf16 in a loop
// (the inner step of a GEMM); reports emulated mma per second on one core.
func BenchmarkMMA(b *testing.B) {
	m := asm(b, `
.visible .entry loop(.param .u64 out, .param .u32 n)
{
	.reg .b32 %a<4>;
	.reg .b32 %b<2>;
	.reg .f32 %c<4>;
	.reg .u32 %i<2>;
	.reg .u64 %rd<4>;
	.reg .pred %p<2>;
	mov.b32 %a0, 0x3f803f80;
	mov.b32 %a1, 0x3f803f80;
	mov.b32 %a2, 0x3f803f80;
	mov.b32 %a3, 0x3f803f80;
	mov.b32 %b0, 0x3f803f80;
	mov.b32 %b1, 0x3f803f80;
	mov.f32 %c0, 0f00000000;
	mov.f32 %c1, 0f00000000;
	mov.f32 %c2, 0f00000000;
	mov.f32 %c3, 0f00000000;
	ld.param.u32 %i1, [n];
	mov.u32 %i0, 0;
LOOP:
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};
	add.u32 %i0, %i0, 1;
	setp.lt.u32 %p0, %i0, %i1;
	@%p0 bra LOOP;
	ld.param.u64 %rd0, [out];
	st.global.f32 [%rd0], %c0;
	ret;
}`)
	s := newSys(b, 1)
	out := mustMalloc(b, s, 0, 4)
	const n = 1000
	must(b, s.Load(m))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		must(b, s.Launch(Launch{Module: m, Entry: "loop", Grid: D1(1), Block: D1(128), Args: []any{out, uint32(n)}}))
	}
	b.ReportMetric(float64(4*n*b.N)/b.Elapsed().Seconds(), "mma/s")
	if got := readF32(b, s, out, 1); got[0] != 16*n {
		b.Fatalf("D[0][0] = %v after %d mma of ones, want %d", got[0], n, 16*n)
	}
}
