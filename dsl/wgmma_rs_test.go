package dsl_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// attnChain is FA3's two-GEMM chain for one warpgroup: S = Q K^T (Q 64 x d, K kv x d, both
// K-major in shared memory), P = bf16(S) in registers (AccToA), O = P V with V (kv x d,
// row-major in global memory: an N-major B) in shared memory and P as wgmma's A registers.
// With softmax, P = exp2((S - rowmax) / 8) and O is divided by the row sums of P (the
// AccView's RowReduce), and each thread stores its rows' max and sum at ml[4t + 2r + {0,1}].
type attnChain struct {
	d, kv   int
	softmax bool
	f16     bool // F16 in place of BF16
}

// elem is the chain's input type.
func (c attnChain) elem() dsl.Type {
	if c.f16 {
		return dsl.F16
	}
	return dsl.BF16
}

func (c attnChain) build(t testing.TB) *dsl.Kernel {
	t.Helper()
	k := dsl.New("chain", dsl.WithTarget(ptx.SM90a))
	ab := c.elem()
	q, kk, v := k.PtrParam("q", ab), k.PtrParam("k", ab), k.PtrParam("v", ab)
	out, ml := k.PtrParam("o", dsl.F32), k.PtrParam("ml", dsl.F32)
	tile := func(major dsl.GMMAMajor, mn, kext int) dsl.SharedTile {
		la, err := dsl.GMMALayoutAtom(ab, major, 128)
		if err != nil {
			t.Fatal(err)
		}
		l, err := dsl.TileToShape(la, mn, kext)
		if err != nil {
			t.Fatal(err)
		}
		return k.SharedTile(ab, l, 1)
	}
	sQ, sK, sV := tile(dsl.KMajor, 64, c.d), tile(dsl.KMajor, c.kv, c.d), tile(dsl.MNMajor, c.d, c.kv)
	atomS, err := dsl.MakeGMMAAtom(ab, c.kv)
	if err != nil {
		t.Fatal(err)
	}
	atomO, err := dsl.MakeGMMAAtom(ab, c.d)
	if err != nil {
		t.Fatal(err)
	}
	qk, pv := dsl.MakeTiledGMMA(atomS, 1), dsl.MakeTiledGMMA(atomO, 1)
	tid := k.ThreadIdx(dsl.X)
	// fill copies a rows x cols row-major global matrix into the tile; colsMN: the tile's
	// MN index is the column (V: (d, kv)), else the row.
	fill := func(g dsl.Ptr, s dsl.SharedTile, rows, cols int, colsMN bool) {
		view := s.Tensor(0)
		k.For(0, rows*cols/128, 1, func(j dsl.Value) {
			i := j.Mul(uint32(128)).Add(tid)
			r, col := i.Shr(uint32(math.Ilogb(float64(cols)))), i.And(uint32(cols-1))
			if colsMN {
				view.Store(k.Load(g.At(i)), col, r)
			} else {
				view.Store(k.Load(g.At(i)), r, col)
			}
		})
	}
	fill(q, sQ, 64, c.d, false)
	fill(kk, sK, c.kv, c.d, false)
	fill(v, sV, c.kv, c.d, true)
	k.FenceProxyAsync() // generic-proxy stores, read by wgmma (async proxy)
	k.SyncThreads()
	accS := qk.Accumulators(k)
	qk.Gemm(k, 0, sQ, sK, 0, accS)
	k.WaitGroup(0)
	pf := accS
	var sums []dsl.Value
	if c.softmax {
		view := qk.AccView(k, tid)
		mx := view.RowReduce(accS, dsl.Max)
		e := make([]dsl.Value, atomS.AccRegs())
		for r, regs := range view.Rows() {
			for _, i := range regs {
				e[i] = accS.Get(i).Sub(mx[r]).Mul(float32(0.125)).Exp2()
			}
		}
		pf = k.FragmentOf(e...)
		sums = view.RowReduce(pf, dsl.Sum)
		for r := range sums {
			k.Store(ml.At(tid.Mul(uint32(4)).Add(uint32(2*r))), mx[r])
			k.Store(ml.At(tid.Mul(uint32(4)).Add(uint32(2*r+1))), sums[r])
		}
	}
	p := qk.AccToA(k, pf, ab)
	accO := pv.Accumulators(k)
	pv.Accumulating(k.Const(dsl.Bool, false)).GemmRS(k, p, sV, 0, accO)
	k.WaitGroup(0)
	vo := pv.AccView(k, tid)
	for r, regs := range vo.Rows() {
		for _, i := range regs {
			x := accO.Get(i)
			if c.softmax {
				x = x.Div(sums[r])
			}
			k.Store(out.At(tid.Add(uint32(128*i))), x)
		}
	}
	return k
}

func (c attnChain) run(t *testing.T) {
	k := c.build(t)
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	qf, kf, vf, in := c.inputs()
	var ptrs []uint64
	for _, b := range append(in, make([]byte, 4*64*c.d), make([]byte, 4*4*128)) {
		p, err := sys.Malloc(0, len(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := emu.WriteSlice(sys, p, b); err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "chain", Grid: emu.D1(1), Block: emu.D1(128),
		Args: []any{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4]}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[float32](sys, ptrs[3], 64*c.d)
	if err != nil {
		t.Fatal(err)
	}
	ml, err := emu.ReadSlice[float32](sys, ptrs[4], 4*128)
	if err != nil {
		t.Fatal(err)
	}
	c.check(t, qf, kf, vf, got, ml)
}

// inputs returns Q, K and V as floats and as bf16 bytes (row-major).
func (c attnChain) inputs() (qf, kf, vf []float64, bytes [][]byte) {
	qf, qb := elems(c.elem(), 64*c.d, 1)
	kf, kb := elems(c.elem(), c.kv*c.d, 2)
	vf, vb := elems(c.elem(), c.kv*c.d, 3)
	return qf, kf, vf, [][]byte{qb, kb, vb}
}

// check compares O (got) and the row statistics (ml) with the float64 reference.
func (c attnChain) check(t *testing.T, qf, kf, vf []float64, got, ml []float32) {
	t.Helper()
	// The float64 reference: S exact (small multiples of 1/2), P = S (or its exp2) rounded to
	// bf16, the row max exact and the row sum of the unrounded exp2.
	p := make([]float64, 64*c.kv)
	mx, sum := make([]float64, 64), make([]float64, 64)
	for i := 0; i < 64; i++ {
		mx[i] = math.Inf(-1)
		for j := 0; j < c.kv; j++ {
			s := 0.0
			for x := 0; x < c.d; x++ {
				s += qf[i*c.d+x] * kf[j*c.d+x]
			}
			p[i*c.kv+j] = s
			mx[i] = max(mx[i], s)
		}
		for j := 0; j < c.kv; j++ {
			if c.softmax {
				p[i*c.kv+j] = math.Exp2((p[i*c.kv+j] - mx[i]) / 8)
				sum[i] += p[i*c.kv+j]
			}
			if c.f16 {
				p[i*c.kv+j] = float64(fp.F16ToF32(fp.F32ToF16(float32(p[i*c.kv+j]))))
			} else {
				p[i*c.kv+j] = float64(fp.BF16ToF32(fp.F32ToBF16(float32(p[i*c.kv+j]))))
			}
		}
	}
	tol := 1e-6
	if c.softmax {
		tol = 1e-3 // ex2.approx before the bf16 rounding
		for tid := 0; tid < 128; tid++ {
			for r := 0; r < 2; r++ {
				row := 16*(tid/32) + tid%32/4 + 8*r
				if g := float64(ml[4*tid+2*r]); g != mx[row] {
					t.Fatalf("thread %d: row %d max %g, want %g", tid, row, g, mx[row])
				}
				if g := float64(ml[4*tid+2*r+1]); math.Abs(g-sum[row]) > 1e-5*sum[row] {
					t.Fatalf("thread %d: row %d sum %g, want %g", tid, row, g, sum[row])
				}
			}
		}
	}
	atom, _ := dsl.MakeGMMAAtom(c.elem(), c.d)
	bad := 0
	for tid := 0; tid < 128; tid++ {
		for i := 0; i < atom.AccRegs(); i++ {
			row, col := atom.Coord(tid, i)
			want, mag := 0.0, 0.0
			for j := 0; j < c.kv; j++ {
				want += p[row*c.kv+j] * vf[j*c.d+col]
				mag += math.Abs(p[row*c.kv+j] * vf[j*c.d+col])
			}
			if c.softmax {
				want, mag = want/sum[row], mag/sum[row]
			}
			g := float64(got[128*i+tid])
			if math.Abs(g-want) > tol*mag+1e-6 {
				if bad < 5 {
					t.Errorf("O[%d][%d] = %g, want %g", row, col, g, want)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d elements differ", bad, 64*c.d)
	}
}

// TestGemmRSChain runs S = Q K^T, P = bf16(S) (or softmax's exp2 with the AccView's row
// max and sum) from the accumulators, O = P V with P as wgmma's A registers on the emulator
// against a float64 reference, and assembles it for sm_90a.
func TestGemmRSChain(t *testing.T) {
	for _, c := range attnChains {
		t.Run(c.String(), c.run)
	}
}

// attnChains are the chains TestGemmRSChain (and the GPU test) run.
var attnChains = []attnChain{{64, 64, false, false}, {64, 128, false, false}, {128, 64, false, false},
	{64, 64, true, false}, {64, 128, true, false}, {64, 64, false, true}, {64, 128, true, true}}

func (c attnChain) String() string {
	name := fmt.Sprintf("%s_d%d_kv%d", c.elem(), c.d, c.kv)
	if c.softmax {
		name += "_softmax"
	}
	return name
}

// TestGemmRSMisuse: RS wgmma misuse is reported by Build at the caller's line.
func TestGemmRSMisuse(t *testing.T) {
	cases := []misuse{
		{"A fragment of the wrong size", "A must be a fragment of 16 bf16x2 registers", func(k *dsl.Kernel) int {
			m, _, sB, _, _, _ := hopperParts(k)
			small, _ := dsl.MakeGMMAAtom(dsl.BF16, 32)
			sm := dsl.MakeTiledGMMA(small, 1)
			a := sm.AccToA(k, sm.Accumulators(k), dsl.BF16) // K 32: 8 registers
			acc := m.Accumulators(k)
			return at(func() { m.GemmRS(k, a, sB, 0, acc) })
		}},
		{"A of f32 values", "A must be a fragment of 16 bf16x2 registers", func(k *dsl.Kernel) int {
			m, _, sB, _, _, _ := hopperParts(k)
			acc := m.Accumulators(k)
			return at(func() { m.GemmRS(k, acc, sB, 0, acc) })
		}},
		{"AccToA to f32", "element type f32; the A registers of wgmma hold F16 or BF16 pairs", func(k *dsl.Kernel) int {
			m, _, _, _, _, _ := hopperParts(k)
			acc := m.Accumulators(k)
			return at(func() { m.AccToA(k, acc, dsl.F32) })
		}},
		{"AccToA with N not a multiple of 16", "N = 8; an A fragment takes K blocks of 16", func(k *dsl.Kernel) int {
			small, _ := dsl.MakeGMMAAtom(dsl.BF16, 8)
			m := dsl.MakeTiledGMMA(small, 1)
			acc := m.Accumulators(k)
			return at(func() { m.AccToA(k, acc, dsl.BF16) })
		}},
		{"RS for fp8", "A from registers is supported for F16 and BF16 atoms", func(k *dsl.Kernel) int {
			atom, _ := dsl.MakeGMMAAtom(dsl.E4M3, 64)
			m := dsl.MakeTiledGMMA(atom, 1)
			la, _ := dsl.GMMALayoutAtom(dsl.E4M3, dsl.KMajor, 128)
			l, _ := dsl.TileToShape(la, 64, 64)
			sB := k.SharedTile(dsl.E4M3, l, 1)
			acc := m.Accumulators(k)
			return at(func() { m.GemmRS(k, acc, sB, 0, acc) })
		}},
		{"SS Gemm over tiles of different stage counts", "tile A has 1 stages, tile B 2; Gemm reads the same run-time stage of both", func(k *dsl.Kernel) int {
			m, _, sB, _, _, p := hopperParts(k)
			la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
			l, _ := dsl.TileToShape(la, 64, 64)
			sQ := k.SharedTile(dsl.BF16, l, 1)
			st := p.ConsumerState()
			acc := m.Accumulators(k)
			return at(func() { m.Gemm(k, 0, sQ, sB, st.Index, acc) })
		}},
	}
	checkMisuses(t, "dsl/wgmma_rs_test.go", cases, dsl.WithTarget(ptx.SM90a))
}
