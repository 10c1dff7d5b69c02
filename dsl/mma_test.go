package dsl_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TestMMAAtomLayouts checks every atom's thread-value layouts against the PTX ISA's fragment
// formulas (g = lane/4, t = lane%4, i the value), written out independently here, and that
// each layout covers its tile exactly once.
func TestMMAAtomLayouts(t *testing.T) {
	type rc func(g, t, i int) (int, int)
	a16816 := func(g, t, i int) (int, int) { return g + 8*(i>>1&1), 2*t + i&1 + 8*(i>>2) }
	b16816 := func(g, t, i int) (int, int) { return g, 2*t + i&1 + 8*(i>>1) } // (n, k)
	c168 := func(g, t, i int) (int, int) { return g + 8*(i>>1), 2*t + i&1 }
	a1688 := func(g, t, i int) (int, int) { return g + 8*(i>>1), 2*t + i&1 }
	b1688 := func(g, t, i int) (int, int) { return g, 2*t + i }
	aTF32 := func(g, t, i int) (int, int) { return g + 8*(i&1), t + 4*(i>>1) }
	bTF32 := func(g, t, i int) (int, int) { return g, t + 4*i }
	a16832 := func(g, t, i int) (int, int) { return g + 8*(i>>2&1), 4*t + i&3 + 16*(i>>3) }
	b16832 := func(g, t, i int) (int, int) { return g, 4*t + i&3 + 16*(i>>2) }
	want := map[string][3]rc{
		"m16n8k16 f32.f16":  {a16816, b16816, c168},
		"m16n8k16 f32.bf16": {a16816, b16816, c168},
		"m16n8k16 f16.f16":  {a16816, b16816, c168},
		"m16n8k8 f16.f16":   {a1688, b1688, c168},
		"m16n8k8 f32.f16":   {a1688, b1688, c168},
		"m16n8k8 f32.tf32":  {aTF32, bTF32, c168},
		"m16n8k32 s32.s8":   {a16832, b16832, c168},
		"m16n8k32 s32.u8":   {a16832, b16832, c168},
		"m16n8k32 f32.e4m3": {a16832, b16832, c168},
		"m16n8k32 f32.e5m2": {a16832, b16832, c168},
	}
	seen := 0
	for _, a := range dsl.MMAAtoms() {
		var f [3]rc
		for key, v := range want {
			parts := strings.Fields(key)
			if strings.Contains(a.Name, parts[0]+" "+parts[1]+".") {
				f = v
				seen++
			}
		}
		if f[0] == nil {
			t.Errorf("%s: no expected layout", a.Name)
			continue
		}
		for o, op := range []dsl.Operand{dsl.OperandA, dsl.OperandB, dsl.OperandC} {
			rows, cols := a.M, a.K
			switch op {
			case dsl.OperandB:
				rows = a.N
			case dsl.OperandC:
				cols = a.N
			}
			vals := rows * cols / 32
			hit := map[[2]int]bool{}
			for lane := 0; lane < 32; lane++ {
				for i := 0; i < vals; i++ {
					r, c := a.Coord(op, lane, i)
					wr, wc := f[o](lane/4, lane%4, i)
					if r != wr || c != wc {
						t.Fatalf("%s %s: lane %d value %d at (%d,%d), the PTX ISA says (%d,%d)", a.Name, op, lane, i, r, c, wr, wc)
					}
					hit[[2]int{r, c}] = true
				}
			}
			if len(hit) != rows*cols {
				t.Errorf("%s %s: covers %d of %d elements", a.Name, op, len(hit), rows*cols)
			}
		}
	}
	if seen != len(dsl.MMAAtoms()) {
		t.Errorf("matched %d atoms of %d", seen, len(dsl.MMAAtoms()))
	}
	if _, err := dsl.LookupMMAAtom("16x8x16_F32BF16BF16F32"); err != nil {
		t.Error(err)
	}
	if _, err := dsl.LookupMMAAtom("MMA_16x8x4"); err == nil || !strings.Contains(err.Error(), "MMA_16x8x16_F32BF16BF16F32") {
		t.Errorf("unknown atom: %v", err)
	}
}

// TestTiledMMAPartition checks that a 2x2-warp tiled MMA partitions a 64x32 C tile so that
// every element belongs to exactly one (thread, value), in the atom's layout shifted by the
// warp's and the repetition's offsets.
func TestTiledMMAPartition(t *testing.T) {
	atom := dsl.MMA_16x8x16_F32BF16BF16F32
	m := dsl.MakeTiledMMA(atom, layout.MustParse("(2,2,1)"), nil)
	if m.Err() != nil || m.Threads() != 128 || m.Tile != [3]int{32, 16, 16} {
		t.Fatalf("%v: err %v, %d threads", m, m.Err(), m.Threads())
	}
	owner := map[[2]int]int{}
	for tid := 0; tid < 128; tid++ {
		k := dsl.New("p")
		smem := k.SharedArray(dsl.F32, 64*32)
		tile := k.MakeTensor(smem, layout.MustParse("(64,32):(32,1)"))
		c := m.Slice(k.Const(dsl.U32, tid)).PartitionC(tile)
		if got := c.Shape(); len(got) != 3 || got[0] != 4 || got[1] != 2 || got[2] != 2 {
			t.Fatalf("PartitionC shape %v, want [4 2 2]", got)
		}
		frag := m.Slice(k.Const(dsl.U32, tid)).PartitionFragmentC(tile)
		if frag.Size() != c.Size() || frag.Elem() != dsl.F32 {
			t.Fatalf("fragment %v of %s", frag.Shape(), frag.Elem())
		}
		for e := 0; e < c.Size(); e++ {
			rc := c.Coord(e)
			if !rc[0].IsConst() || !rc[1].IsConst() {
				t.Fatal("a constant thread index gave a runtime coordinate")
			}
			key := [2]int{int(ptxConst(rc[0])), int(ptxConst(rc[1]))}
			if prev, dup := owner[key]; dup {
				t.Fatalf("element %v owned by threads %d and %d", key, prev, tid)
			}
			owner[key] = tid
			// The atom's layout, shifted by warp (i, j) and repetition (e/4 % 2, e/8).
			lane, w := tid%32, tid/32
			r, cc := atom.Coord(dsl.OperandC, lane, e%4)
			wr, wc := r+16*(w%2)+32*(e/4%2), cc+8*(w/2)+16*(e/8)
			if key != [2]int{wr, wc} {
				t.Fatalf("thread %d value %d at %v, want (%d,%d)", tid, e, key, wr, wc)
			}
		}
	}
	if len(owner) != 64*32 {
		t.Fatalf("%d of %d elements owned", len(owner), 64*32)
	}
}

// ptxConst reads a constant I32 Value ("s32 constant 5").
func ptxConst(v dsl.Value) int64 {
	f := strings.Fields(v.String())
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// TestMMAMisuse checks the tensor-core operations' errors name the caller's line.
func TestMMAMisuse(t *testing.T) {
	atom := dsl.MMA_16x8x16_F32BF16BF16F32
	mma := dsl.MakeTiledMMA(atom, layout.MustParse("(2,2,1)"), nil)
	smemTile := func(k *dsl.Kernel, rows, cols int, l string) dsl.Tensor {
		return k.MakeTensor(k.SharedArray(dsl.BF16, rows*cols), layout.MustParse(l))
	}
	cases := []misuse{
		{"bad atom layout", "not a compact map", func(k *dsl.Kernel) int {
			bad := dsl.MakeTiledMMA(atom, layout.MustParse("(2,2):(1,1)"), nil)
			return at(func() { bad.Slice(k.ThreadIdx(dsl.X)) })
		}},
		{"bad permutation", "not a multiple", func(k *dsl.Kernel) int {
			bad := dsl.MakeTiledMMA(atom, layout.MustParse("(2,2,1)"), []int{24, 16, 16})
			return at(func() { bad.Slice(k.ThreadIdx(dsl.X)) })
		}},
		{"tile not a multiple", "not a multiple of the tiled MMA's A tile", func(k *dsl.Kernel) int {
			thr := mma.Slice(k.ThreadIdx(dsl.X))
			s := smemTile(k, 48, 16, "(48,16):(16,1)")
			return at(func() { thr.PartitionA(s) })
		}},
		{"gemm fragments swapped", "is not a A fragment", func(k *dsl.Kernel) int {
			thr := mma.Slice(k.ThreadIdx(dsl.X))
			sA, sB := smemTile(k, 32, 16, "(32,16):(16,1)"), smemTile(k, 16, 16, "(16,16):(16,1)")
			a, b := thr.PartitionFragmentA(sA), thr.PartitionFragmentB(sB)
			c := thr.PartitionFragmentC(k.MakeTensor(k.SharedArray(dsl.F32, 32*16), layout.MustParse("(32,16):(16,1)")))
			return at(func() { k.Gemm(mma, b, a, c) })
		}},
		{"gemm shapes disagree", "do not agree", func(k *dsl.Kernel) int {
			thr := mma.Slice(k.ThreadIdx(dsl.X))
			sA, sB := smemTile(k, 64, 16, "(64,16):(16,1)"), smemTile(k, 16, 16, "(16,16):(16,1)")
			c := thr.PartitionFragmentC(k.MakeTensor(k.SharedArray(dsl.F32, 32*16), layout.MustParse("(32,16):(16,1)")))
			return at(func() { k.Gemm(mma, thr.PartitionFragmentA(sA), thr.PartitionFragmentB(sB), c) })
		}},
		{"ldmatrix of 8-bit", "ldmatrix loads 16-bit elements", func(k *dsl.Kernel) int {
			m := dsl.MakeTiledMMA(dsl.MMA_16x8x32_S32S8S8S32, layout.MustParse("(1,1,1)"), nil)
			return at(func() { dsl.MakeTiledCopyA(dsl.LdMatrixX4, m).Slice(k.ThreadIdx(dsl.X)) })
		}},
		{"cp.async as ldmatrix", "does not load registers", func(k *dsl.Kernel) int {
			return at(func() { dsl.MakeTiledCopyA(dsl.CpAsync16, mma).Slice(k.ThreadIdx(dsl.X)) })
		}},
		{"ldmatrix from global", "rank-2 tile of shared memory", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.BF16), layout.MustParse("(32,16):(16,1)"))
			c := dsl.MakeTiledCopyA(dsl.LdMatrixX4, mma).Slice(k.ThreadIdx(dsl.X))
			return at(func() { c.PartitionS(g) })
		}},
		{"ldmatrix swizzle too fine", "breaks up the 16-byte rows", func(k *dsl.Kernel) int {
			s := k.MakeSwizzledTensor(k.SharedArray(dsl.BF16, 32*16), layout.Swizzle{B: 1, M: 1, S: 3}, layout.MustParse("(32,16):(16,1)"))
			c := dsl.MakeTiledCopyA(dsl.LdMatrixX4, mma).Slice(k.ThreadIdx(dsl.X))
			return at(func() { c.PartitionS(s) })
		}},
		{"cp.async misaligned runs", "needs runs of 8 consecutive", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.BF16), layout.MustParse("(32,16):(1,32)"))
			s := smemTile(k, 32, 16, "(32,16):(1,32)")
			c := dsl.MakeTiledCopy(dsl.CpAsync16, layout.MustParse("(32,4):(4,1)"), []int{1, 4}).Slice(k.ThreadIdx(dsl.X))
			return at(func() { c.Copy(c.PartitionS(g), c.PartitionD(s)) })
		}},
		{"pipeline of one stage", "at least 2", func(k *dsl.Kernel) int {
			return at(func() { k.CpAsyncPipeline(1, k.Const(dsl.I32, 4), func(_, _ dsl.Value) {}) })
		}},
		{"fragment sliced at runtime", "sliced at a Go int", func(k *dsl.Kernel) int {
			f := mma.Slice(k.ThreadIdx(dsl.X)).PartitionFragmentA(smemTile(k, 32, 16, "(32,16):(16,1)"))
			return at(func() { f.Slice(2, k.ThreadIdx(dsl.X)) })
		}},
		{"fragment arithmetic on memory", "not a register fragment", func(k *dsl.Kernel) int {
			s := smemTile(k, 32, 16, "(32,16):(16,1)")
			return at(func() { s.Scale(2.0) })
		}},
	}
	checkMisuses(t, "dsl/mma_test.go", cases)
	k := dsl.New("sm80", dsl.WithTarget(ptx.SM80))
	m := dsl.MakeTiledMMA(dsl.MMA_16x8x32_F32E4M3E4M3F32, layout.MustParse("(1,1,1)"), nil)
	m.Slice(k.ThreadIdx(dsl.X))
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "needs sm_89") {
		t.Fatalf("fp8 MMA on sm_80: %v", err)
	}
}
