package emu

import (
	"errors"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/ptx"
)

// mma.sync.aligned.m16n8kK.row.col: a warp-collective matrix multiply-accumulate. Each lane
// holds a fragment of A (M x K, row-major), B (K x N, column-major) and C/D (M x N) as the
// PTX ISA's "Matrix Fragments for mma.m16n8k*" figures define them (see execMMA and
// fragC). The instruction runs once for the whole warp, after all 32 lanes reached it.
//
// Arithmetic: products of the multiplicands are exact in float64; each D element is C
// plus the products added in k order in float64 (exact unless the terms span more than about
// 29 binades; otherwise rounded to nearest at that addition), then rounded once to the
// accumulator type with round-to-nearest-even. tf32 multiplicands ignore the low 13 bits of
// their .b32 registers. Integer forms are exact in int64, then wrap to 32 bits, or clamp
// with .satfinite. docs/emu.md says the same.

// mmaSpec is the decoded shape and types of an mma.
type mmaSpec struct {
	m, n, k    int
	in1, in2   ptx.Type // A and B element types
	acc        ptx.Type // C and D type
	na, nb, nc int      // registers per lane of A, B, C (= D)
	sat        bool
}

// elemsPerReg is how many elements of t one 32-bit register holds.
func elemsPerReg(t ptx.Type) int { return 32 / t.Bits() }

// fragC returns the (row, col) of element j of register r of C/D held by lane l: f32 and
// s32 hold one element per register (c0..c3), f16 two (c0,c1 | c2,c3).
func fragC(acc ptx.Type, l, r, j int) (row, col int) {
	if acc == ptx.F16 {
		return l>>2 + 8*r, (l&3)*2 + j
	}
	return l>>2 + 8*(r>>1), (l&3)*2 + r&1
}

func (d *decoder) decodeMMA(di *dinst, in *ptx.Instr, toks tokens) error {
	if !toks.has("sync") || !toks.has("aligned") || !toks.has("row") || !toks.has("col") || len(in.Types) != 4 {
		return errUnsupported
	}
	var sp mmaSpec
	ok := false
	for _, q := range toks {
		if m, n, k, found := ptx.MMAShape(q); found {
			sp.m, sp.n, sp.k, ok = m, n, k, true
		}
	}
	if !ok {
		return errUnsupported
	}
	sp.acc, sp.in1, sp.in2, sp.sat = in.Types[0], in.Types[1], in.Types[2], toks.has("satfinite")
	if in.Types[3] != sp.acc {
		return errors.New("mma with different C and D types")
	}
	sp.na, sp.nb, sp.nc = ptx.MMARegs(sp.m, sp.n, sp.k, sp.in1, sp.acc)
	if _, nb2, _ := ptx.MMARegs(sp.m, sp.n, sp.k, sp.in2, sp.acc); nb2 != sp.nb {
		return errors.New("mma multiplicands of different widths")
	}
	if len(in.Args) != 4 {
		return errors.New("mma takes d, a, b, c")
	}
	vec := func(o ptx.Operand, n int, what string) (ptx.Vec, error) {
		v, isVec := o.(ptx.Vec)
		if !isVec || len(v) != n {
			return nil, fmt.Errorf("mma operand %s wants a vector of %d registers", what, n)
		}
		return v, nil
	}
	dv, err := vec(in.Args[0], sp.nc, "D")
	if err != nil {
		return err
	}
	for _, o := range dv {
		s, _, err := d.dst(o)
		if err != nil {
			return err
		}
		di.dv = append(di.dv, s)
	}
	srcT := ptx.B32
	if sp.acc == ptx.F32 {
		srcT = ptx.F32
	}
	for i, part := range []struct {
		n    int
		name string
		t    ptx.Type
	}{{sp.na, "A", ptx.B32}, {sp.nb, "B", ptx.B32}, {sp.nc, "C", srcT}} {
		v, err := vec(in.Args[i+1], part.n, part.name)
		if err != nil {
			return err
		}
		for _, o := range v {
			s, err := d.src(o, part.t)
			if err != nil {
				return err
			}
			di.av = append(di.av, s)
		}
	}
	di.kind, di.aligned = ctlWarpSync, true
	di.exec = func(w *warp, in *dinst, part uint32) { execMMA(w, in, part, &sp) }
	return nil
}

// mmaIn decodes one multiplicand element (the low bits of v) of type t: a float64 for float
// types, an integer (as float64, exact) for s8/u8.
func mmaIn(t ptx.Type, v uint32) float64 {
	switch t {
	case ptx.F16:
		return h2f(uint64(v & 0xffff))
	case ptx.BF16:
		return bh2f(uint64(v & 0xffff))
	case ptx.TF32:
		return float64(math.Float32frombits(v &^ 0x1fff))
	case ptx.E4M3:
		return fmtE4M3.decode(uint64(v & 0xff))
	case ptx.E5M2:
		return fmtE5M2.decode(uint64(v & 0xff))
	case ptx.S8:
		return float64(int8(v))
	case ptx.U8:
		return float64(uint8(v))
	}
	return math.NaN()
}

func execMMA(w *warp, in *dinst, part uint32, sp *mmaSpec) {
	r := w.r
	var a [16][32]float64
	var b [32][8]float64
	var c [16][8]float64
	var ci [16][8]int64
	// The fragment maps (TestMMAFragments checks them against the ISA's figures), with e
	// elements per 32-bit register, groupID = l>>2 and threadID_in_group = l&3:
	// A: register r, element j of lane l is row groupID + 8(r&1), column
	// (r>>1)*4e + threadID_in_group*e + j (register r covers one 8-row half and one 4e-wide k
	// block); B: register r, element j is row (k) r*4e + threadID_in_group*e + j, column groupID.
	e, bitsPer := elemsPerReg(sp.in1), sp.in1.Bits()
	for ri, s := range in.av[:sp.na] {
		for l := 0; l < 32; l++ {
			v := uint32(r[s+int32(l)])
			row, col0 := l>>2+8*(ri&1), (ri>>1)*4*e+(l&3)*e
			for j := 0; j < e; j++ {
				a[row][col0+j] = mmaIn(sp.in1, v>>(j*bitsPer))
			}
		}
	}
	e, bitsPer = elemsPerReg(sp.in2), sp.in2.Bits()
	for ri, s := range in.av[sp.na : sp.na+sp.nb] {
		for l := 0; l < 32; l++ {
			v := uint32(r[s+int32(l)])
			row0, col := ri*4*e+(l&3)*e, l>>2
			for j := 0; j < e; j++ {
				b[row0+j][col] = mmaIn(sp.in2, v>>(j*bitsPer))
			}
		}
	}
	for ri, s := range in.av[sp.na+sp.nb:] {
		for l := 0; l < 32; l++ {
			v := r[s+int32(l)]
			switch sp.acc {
			case ptx.F16:
				for j := 0; j < 2; j++ {
					row, col := fragC(sp.acc, l, ri, j)
					c[row][col] = h2f(v >> (16 * j) & 0xffff)
				}
			case ptx.F32:
				row, col := fragC(sp.acc, l, ri, 0)
				c[row][col] = float64(f32(v))
			default:
				row, col := fragC(sp.acc, l, ri, 0)
				ci[row][col] = int64(int32(uint32(v)))
			}
		}
	}
	var out [16][8]uint64
	for i := 0; i < sp.m; i++ {
		for j := 0; j < sp.n; j++ {
			if sp.acc == ptx.S32 {
				s := ci[i][j]
				for k := 0; k < sp.k; k++ {
					s += int64(a[i][k]) * int64(b[k][j])
				}
				if sp.sat {
					s = max(math.MinInt32, min(math.MaxInt32, s))
				}
				out[i][j] = uint64(uint32(int32(s)))
				continue
			}
			s := c[i][j]
			for k := 0; k < sp.k; k++ {
				s += a[i][k] * b[k][j]
			}
			if sp.acc == ptx.F16 {
				out[i][j] = f2h(s)
			} else {
				out[i][j] = f2f32(s)
			}
		}
	}
	for ri, s := range in.dv {
		for x := part; x != 0; x &= x - 1 {
			l := trailing(x)
			var v uint64
			if sp.acc == ptx.F16 {
				for j := 0; j < 2; j++ {
					row, col := fragC(sp.acc, l, ri, j)
					v |= out[row][col] << (16 * j)
				}
			} else {
				row, col := fragC(sp.acc, l, ri, 0)
				v = out[row][col]
			}
			r[s+int32(l)] = v
		}
	}
}
