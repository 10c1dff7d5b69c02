package dsl

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// MMAAtom is one warp-wide tensor-core instruction (mma.sync.aligned) after CuTe's
// MMA_Traits: its tile M x N x K, its operand types and the thread-value layouts of its
// fragments, taken from the PTX ISA's fragment figures. ALayout maps (lane, value) to the
// colexicographic index m + M*k of the M x K tile of A, BLayout to n + N*k of the N x K tile
// of B, CLayout to m + M*n of the M x N accumulator tile. A lane's values are numbered as
// the instruction's operand registers hold them: APack (BPack, CPack) consecutive values
// share one 32-bit register.
type MMAAtom struct {
	Name                      string
	M, N, K                   int
	A, B, C                   Type // element types of A, B and the accumulators C and D
	ALayout, BLayout, CLayout layout.Layout
	APack, BPack, CPack       int
	ptxA, ptxB                ptx.Type // the instruction's type suffixes for A and B
	minSM                     int
}

func (a MMAAtom) String() string { return a.Name }

// The warp-level MMA atoms (sm_80+; the fp8 atoms need sm_89+). Names follow CuTe:
// MMA_MxNxK_DAB C (D and C, A, B, C types).
var (
	MMA_16x8x16_F32F16F16F32   = mma16816("mma.sync m16n8k16 f32.f16.f16.f32", F32, F16, ptx.F16)
	MMA_16x8x16_F32BF16BF16F32 = mma16816("mma.sync m16n8k16 f32.bf16.bf16.f32", F32, BF16, ptx.BF16)
	MMA_16x8x16_F16F16F16F16   = mma16816("mma.sync m16n8k16 f16.f16.f16.f16", F16, F16, ptx.F16)
	MMA_16x8x8_F16F16F16F16    = MMAAtom{Name: "mma.sync m16n8k8 f16.f16.f16.f16", M: 16, N: 8, K: 8, A: F16, B: F16, C: F16,
		ALayout: mustTV("((4,8),(2,2)):((32,1),(16,8))"), BLayout: mustTV("((4,8),2):((16,1),8)"), CLayout: cLayout16x8,
		APack: 2, BPack: 2, CPack: 2, ptxA: ptx.F16, ptxB: ptx.F16, minSM: 80}
	MMA_16x8x8_F32F16F16F32 = MMAAtom{Name: "mma.sync m16n8k8 f32.f16.f16.f32", M: 16, N: 8, K: 8, A: F16, B: F16, C: F32,
		ALayout: mustTV("((4,8),(2,2)):((32,1),(16,8))"), BLayout: mustTV("((4,8),2):((16,1),8)"), CLayout: cLayout16x8,
		APack: 2, BPack: 2, CPack: 1, ptxA: ptx.F16, ptxB: ptx.F16, minSM: 80}
	MMA_16x8x8_F32TF32TF32F32 = MMAAtom{Name: "mma.sync m16n8k8 f32.tf32.tf32.f32", M: 16, N: 8, K: 8, A: F32, B: F32, C: F32,
		ALayout: mustTV("((4,8),(2,2)):((16,1),(8,64))"), BLayout: mustTV("((4,8),2):((8,1),32)"), CLayout: cLayout16x8,
		APack: 1, BPack: 1, CPack: 1, ptxA: ptx.TF32, ptxB: ptx.TF32, minSM: 80}
	MMA_16x8x32_S32S8S8S32     = mma16832("mma.sync m16n8k32 s32.s8.s8.s32", I32, I8, ptx.S8, 80)
	MMA_16x8x32_S32U8U8S32     = mma16832("mma.sync m16n8k32 s32.u8.u8.s32", I32, U8, ptx.U8, 80)
	MMA_16x8x32_F32E4M3E4M3F32 = mma16832("mma.sync m16n8k32 f32.e4m3.e4m3.f32", F32, E4M3, ptx.E4M3, 89)
	MMA_16x8x32_F32E5M2E5M2F32 = mma16832("mma.sync m16n8k32 f32.e5m2.e5m2.f32", F32, E5M2, ptx.E5M2, 89)
)

// MMAAtoms lists the atoms by name (kgen layout --mma).
func MMAAtoms() []MMAAtom {
	return []MMAAtom{MMA_16x8x16_F32F16F16F32, MMA_16x8x16_F32BF16BF16F32, MMA_16x8x16_F16F16F16F16,
		MMA_16x8x8_F16F16F16F16, MMA_16x8x8_F32F16F16F32, MMA_16x8x8_F32TF32TF32F32, MMA_16x8x32_S32S8S8S32, MMA_16x8x32_S32U8U8S32,
		MMA_16x8x32_F32E4M3E4M3F32, MMA_16x8x32_F32E5M2E5M2F32}
}

// CuteName is the atom's name in CuTe's spelling: MMA_16x8x16_F32BF16BF16F32 (D, A, B, C).
func (a MMAAtom) CuteName() string {
	up := func(t ptx.Type) string {
		if t == ptx.S32 {
			return "S32"
		}
		return strings.ToUpper(t.String())
	}
	ct := ptx.Type(a.C)
	if a.C == I32 {
		ct = ptx.S32
	}
	return fmt.Sprintf("MMA_%dx%dx%d_%s%s%s%s", a.M, a.N, a.K, up(ct), up(a.ptxA), up(a.ptxB), up(ct))
}

// LookupMMAAtom finds an atom by its CuTe name (case-insensitive, the "MMA_" prefix
// optional); the error lists the names.
func LookupMMAAtom(name string) (MMAAtom, error) {
	var names []string
	for _, a := range MMAAtoms() {
		n := a.CuteName()
		if strings.EqualFold(n, name) || strings.EqualFold(n, "MMA_"+name) {
			return a, nil
		}
		names = append(names, n)
	}
	return MMAAtom{}, fmt.Errorf("unknown MMA atom %s (valid: %s)", excerpt.Quote(name), strings.Join(names, ", "))
}

// cLayout16x8 is every m16n8 accumulator: c0,c1 at (g, 2t..2t+1), c2,c3 at (g+8, 2t..2t+1)
// with g = lane/4 and t = lane%4.
var cLayout16x8 = mustTV("((4,8),(2,2)):((32,1),(16,8))")

func mustTV(s string) layout.Layout { return layout.MustParse(s) }

// mma16816: A 16x16 (a0..a7: rows g, g+8; columns 2t, 2t+1, +8), B 16x8 (b0..b3: rows 2t,
// 2t+1, +8; column g).
func mma16816(name string, c, ab Type, pt ptx.Type) MMAAtom {
	cp := 1
	if c == F16 {
		cp = 2
	}
	return MMAAtom{Name: name, M: 16, N: 8, K: 16, A: ab, B: ab, C: c,
		ALayout: mustTV("((4,8),(2,2,2)):((32,1),(16,8,128))"), BLayout: mustTV("((4,8),(2,2)):((16,1),(8,64))"),
		CLayout: cLayout16x8, APack: 2, BPack: 2, CPack: cp, ptxA: pt, ptxB: pt, minSM: 80}
}

// mma16832: A 16x32 (a0..a15: columns 4t..4t+3, +16; rows g, g+8), B 32x8 (b0..b7: rows
// 4t..4t+3, +16; column g).
func mma16832(name string, c, ab Type, pt ptx.Type, sm int) MMAAtom {
	return MMAAtom{Name: name, M: 16, N: 8, K: 32, A: ab, B: ab, C: c,
		ALayout: mustTV("((4,8),(4,2,2)):((64,1),(16,8,256))"), BLayout: mustTV("((4,8),(4,2)):((32,1),(8,128))"),
		CLayout: cLayout16x8, APack: 4, BPack: 4, CPack: 1, ptxA: pt, ptxB: pt, minSM: sm}
}

// shape is the instruction's shape qualifier.
func (a MMAAtom) shape() string { return fmt.Sprintf("m%dn%dk%d", a.M, a.N, a.K) }

// regType is the type of the registers that hold pack values of t in a fragment.
func regType(t Type, pack int) Type {
	switch {
	case pack == 1:
		return t
	case t == F16:
		return F16x2
	case t == BF16:
		return BF16x2
	}
	return U32 // four 8-bit values
}

// Operand selects a matrix of an MMA: A (M x K), B (N x K) or the accumulators C (M x N).
type Operand int

// The operands of an MMA.
const (
	OperandA Operand = iota
	OperandB
	OperandC
)

func (o Operand) String() string {
	if o >= 0 && o <= 2 {
		return [...]string{"A", "B", "C"}[o]
	}
	return fmt.Sprintf("Operand(%d)", int(o))
}

// tv returns the atom's layout, tile rows, pack and element type for operand o. The tile is
// rows x cols with index row + rows*col: A is M x K, B is N x K, C is M x N.
func (a MMAAtom) tv(o Operand) (l layout.Layout, rows, cols, pack int, elem Type) {
	switch o {
	case OperandA:
		return a.ALayout, a.M, a.K, a.APack, a.A
	case OperandB:
		return a.BLayout, a.N, a.K, a.BPack, a.B
	}
	return a.CLayout, a.M, a.N, a.CPack, a.C
}

// Coord returns the (row, column) of value v of lane's fragment of operand o: (m, k) for A,
// (n, k) for B, (m, n) for C.
func (a MMAAtom) Coord(o Operand, lane, v int) (int, int) {
	l, rows, _, _, _ := a.tv(o)
	if rows <= 0 {
		return 0, 0 // the zero MMAAtom
	}
	idx := l.Value(lane + 32*v)
	return idx % rows, idx / rows
}

// TiledMMA is an atom repeated over the warps of a block (CuTe's TiledMMA): warp w computes
// the atom tile at (WarpM, WarpN) = atomLayout^-1(w), and a block tile larger than the
// warps' tile (16*WarpsM x 8*WarpsN) repeats it.
type TiledMMA struct {
	Atom           MMAAtom
	WarpsM, WarpsN int
	warpStride     [2]int // atomLayout's strides: w = i*stride[0] + j*stride[1]
	Tile           [3]int // the permutation tile M x N x K (at least the warps' tile)
	err            string
}

// MakeTiledMMA tiles atom over warps: atomLayout has shape (WarpsM, WarpsN) or (WarpsM,
// WarpsN, 1) and maps a warp's coordinate to its index (compact, any mode order; "(2,2,1)"
// is column-major). perm is CuTe's permutation given as a tile (M, N, K): nil for the warps'
// tile, else multiples of it that the block tile must be a multiple of; the order inside it
// is the identity (CuTe's integer tiles; layout permutations are not supported).
func MakeTiledMMA(atom MMAAtom, atomLayout layout.Layout, perm []int) TiledMMA {
	m := TiledMMA{Atom: atom, WarpsM: 1, WarpsN: 1}
	fail := func(f string, a ...any) TiledMMA { m.err = "MakeTiledMMA: " + fmt.Sprintf(f, a...); return m }
	sh, st := atomLayout.FlatShape(), atomLayout.FlatStride()
	if len(sh) == 3 && sh[2] == 1 {
		sh, st = sh[:2], st[:2]
	}
	if len(sh) != 2 {
		return fail("atom layout %v: want (warpsM, warpsN) or (warpsM, warpsN, 1)", atomLayout)
	}
	m.WarpsM, m.WarpsN = sh[0], sh[1]
	if m.WarpsM <= 0 || m.WarpsN <= 0 {
		return fail("atom layout %v has an empty mode", atomLayout)
	}
	seen := map[int]bool{}
	for j := 0; j < m.WarpsN; j++ {
		for i := 0; i < m.WarpsM; i++ {
			w := i*st[0] + j*st[1]
			if w < 0 || w >= m.WarpsM*m.WarpsN || seen[w] {
				return fail("atom layout %v is not a compact map of warps 0..%d", atomLayout, m.WarpsM*m.WarpsN-1)
			}
			seen[w] = true
		}
	}
	if m.WarpsM == 1 {
		st[0] = 1
	}
	if m.WarpsN == 1 {
		st[1] = m.WarpsM
	}
	m.warpStride = [2]int{st[0], st[1]}
	m.Tile = [3]int{atom.M * m.WarpsM, atom.N * m.WarpsN, atom.K}
	if perm != nil {
		if len(perm) != 3 {
			return fail("permutation %v: want a tile (M, N, K)", perm)
		}
		for i, p := range perm {
			if p <= 0 || p%m.Tile[i] != 0 {
				return fail("permutation tile %v is not a multiple of the warps' tile %v", perm, m.Tile)
			}
		}
		m.Tile = [3]int{perm[0], perm[1], perm[2]}
	}
	return m
}

// Threads returns the number of threads the tiled MMA runs on (32 per warp).
func (m TiledMMA) Threads() int { return 32 * m.WarpsM * m.WarpsN }

// String describes the tiled MMA.
func (m TiledMMA) String() string {
	return fmt.Sprintf("%s x (%d,%d) warps, tile %dx%dx%d", m.Atom.Name, m.WarpsM, m.WarpsN, m.Tile[0], m.Tile[1], m.Tile[2])
}

// Err reports a malformed tiled MMA (kernels using it also record the error at their line).
func (m TiledMMA) Err() error {
	if m.err == "" {
		return nil
	}
	return &Error{Msg: m.err}
}

// operandTV returns the thread-value layout of operand o over the warps' tile (rows x cols:
// 16*WarpsM x K for A, 8*WarpsN x K for B, the M x N tile for C), with index row +
// rows*col; threads are numbered as in the block (tid = lane + 32*warp).
func (m TiledMMA) operandTV(o Operand) (tv layout.Layout, rows, cols, pack int) {
	a := m.Atom
	al, ar, ac, pack, _ := a.tv(o)
	wr := [3]int{m.WarpsM, m.WarpsN, m.WarpsM}[o]
	rows = ar * wr
	cols = ac
	if o == OperandC {
		cols = ac * m.WarpsN
	}
	// Re-index the atom's leaves from row + ar*col to row + rows*col.
	conv := func(d int) int {
		if d < ar {
			return d
		}
		return (d / ar) * rows
	}
	ts, td := al.FlatShape(), al.FlatStride()
	var shape, stride []layout.IntTuple
	for i := 0; i < 2; i++ { // the lane leaves (4, 8)
		shape = append(shape, layout.Int(ts[i]))
		stride = append(stride, layout.Int(conv(td[i])))
	}
	// The warp leaves, in the order of their strides in the atom layout.
	wm := [2]int{m.WarpsM, m.WarpsN}
	wd := [2]int{}
	switch o {
	case OperandA:
		wd = [2]int{ar, 0}
	case OperandB:
		wd = [2]int{0, ar}
	default:
		wd = [2]int{ar, rows * a.N}
	}
	order := []int{0, 1}
	if m.warpStride[1] < m.warpStride[0] {
		order = []int{1, 0}
	}
	for _, i := range order {
		shape = append(shape, layout.Int(wm[i]))
		stride = append(stride, layout.Int(wd[i]))
	}
	var vs, vd []layout.IntTuple
	vshape, vstride := al.FlatShape()[2:], al.FlatStride()[2:]
	for i := range vshape {
		vs = append(vs, layout.Int(vshape[i]))
		vd = append(vd, layout.Int(conv(vstride[i])))
	}
	thr := layout.Must(layout.New(layout.Tuple(shape...), layout.Tuple(stride...)))
	val := layout.Must(layout.New(layout.Tuple(vs...), layout.Tuple(vd...)))
	return layout.Must(layout.MakeLayoutOf(thr, val)), rows, cols, pack
}

// ThrMMA is one thread's slice of a tiled MMA (CuTe's get_slice).
type ThrMMA struct {
	m   TiledMMA
	k   *Kernel
	tid Value
}

// Slice returns thread tid's slice of the tiled MMA (tid: the thread's index in the block).
func (m TiledMMA) Slice(tid Value) ThrMMA {
	k := tid.k
	if k != nil && m.err != "" {
		k.errorf("%s", m.err)
	}
	if k != nil && !isInt(tid.t) {
		k.errorf("TiledMMA.Slice: thread index is %s, not an integer", tid.t)
	}
	if k != nil && k.target.SM() < m.Atom.minSM {
		k.errorf("%s needs sm_%d or later; the kernel targets %s", m.Atom.Name, m.Atom.minSM, k.target)
	}
	return ThrMMA{m: m, k: k, tid: tid}
}

// TiledMMA returns the tiled MMA the slice belongs to.
func (t ThrMMA) TiledMMA() TiledMMA { return t.m }

// partition returns the thread's elements of operand o of the tile x (rows x cols of the
// operand: M x K for A, N x K for B, M x N for C): (values, tiles along rows, tiles along
// cols), CuTe's (MMA, MMA_M, MMA_K).
func (t ThrMMA) partition(o Operand, x Tensor, what string) Tensor {
	k := t.k
	if k == nil {
		orphan("ThrMMA."+what, x.k)
		return x
	}
	if t.m.err != "" {
		return x
	}
	if k.zeroTensor(what, x) || !x.ok(what) {
		return x
	}
	if x.Rank() != 2 {
		k.errorf("%s: want a rank-2 tile, got rank %d", what, x.Rank())
		return x
	}
	tv, rows, cols, _ := t.m.operandTV(o)
	tr, tc := rows, cols
	switch o {
	case OperandA:
		tr, tc = t.m.Tile[0], t.m.Tile[2]
	case OperandB:
		tr, tc = t.m.Tile[1], t.m.Tile[2]
	default:
		tr, tc = t.m.Tile[0], t.m.Tile[1]
	}
	sh := x.Shape()
	if sh[0]%tr != 0 || sh[1]%tc != 0 {
		k.errorf("%s: tile %dx%d is not a multiple of the tiled MMA's %s tile %dx%d", what, sh[0], sh[1], o, tr, tc)
		return x
	}
	return x.PartitionByTV(layout.Ints(rows, cols), tv, t.tid)
}

// PartitionA returns the thread's elements of sA (an M x K tile): (values, MMA_M, MMA_K).
func (t ThrMMA) PartitionA(sA Tensor) Tensor { return t.partition(OperandA, sA, "PartitionA") }

// PartitionB returns the thread's elements of sB (an N x K tile): (values, MMA_N, MMA_K).
func (t ThrMMA) PartitionB(sB Tensor) Tensor { return t.partition(OperandB, sB, "PartitionB") }

// PartitionC returns the thread's elements of gC (an M x N tile): (values, MMA_M, MMA_N),
// the same elements, in the same order, as PartitionFragmentC's registers.
func (t ThrMMA) PartitionC(gC Tensor) Tensor { return t.partition(OperandC, gC, "PartitionC") }

// fragment allocates the registers of operand o for a partition p (values, rows, cols):
// (values/pack, rows, cols) registers of the operand's register type.
func (t ThrMMA) fragment(o Operand, p Tensor, zero bool) Tensor {
	k := t.k
	if k == nil || !p.ok("PartitionFragment") || p.Rank() != 3 {
		return p
	}
	_, _, _, pack, elem := t.m.Atom.tv(o)
	sh := p.Shape()
	rt := regType(elem, pack)
	f := k.newFragment(rt, []int{sh[0] / pack, sh[1], sh[2]}, zero)
	f.mma = &fragInfo{m: t.m, o: o}
	return f
}

// PartitionFragmentA returns registers for the thread's A values of sA, shaped (values,
// MMA_M, MMA_K) with the instruction's packing: a 16-bit A holds pairs (F16x2, BF16x2), an
// 8-bit A four values per U32.
func (t ThrMMA) PartitionFragmentA(sA Tensor) Tensor {
	return t.fragment(OperandA, t.PartitionA(sA), false)
}

// PartitionFragmentB returns registers for the thread's B values of sB (see
// PartitionFragmentA).
func (t ThrMMA) PartitionFragmentB(sB Tensor) Tensor {
	return t.fragment(OperandB, t.PartitionB(sB), false)
}

// PartitionFragmentC returns zeroed accumulators for the thread's part of the M x N tile gC,
// shaped like PartitionC(gC) (F16 accumulators are packed in F16x2 pairs).
func (t ThrMMA) PartitionFragmentC(gC Tensor) Tensor {
	return t.fragment(OperandC, t.PartitionC(gC), true)
}

// fragInfo marks a register fragment made for an MMA operand.
type fragInfo struct {
	m TiledMMA
	o Operand
}

// newFragment allocates a register tensor of the given shape (one leaf per mode), zeroed
// when zero is set (else written before it is read, as ldmatrix does).
func (k *Kernel) newFragment(elem Type, shape []int, zero bool) Tensor {
	f := Tensor{k: k, ptr: Ptr{k: k, elem: elem, space: ptx.SpaceReg}}
	cs := 1
	for _, s := range shape {
		f.modes = append(f.modes, []leaf{{shape: s, stride: stride{c: int64(cs)}, mode: 0, cstride: cs}})
		cs *= s
	}
	f.origin = []coord{{}}
	f.bounds = []Value{{}}
	f.regs = make([]Value, cs)
	for i := range f.regs {
		if zero && (isNum(elem)) {
			f.regs[i] = k.Var(elem, 0)
			continue
		}
		d := k.reg(elem)
		k.mutable.add(d)
		f.regs[i] = Value{k: k, t: elem, op: d}
		if zero { // packed pairs: all bits zero
			k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{d, ptx.Imm{Type: ptx.B32}}})
		}
	}
	return f
}

// fragSlice fixes mode m of a fragment at the static index i (Slice on registers).
func (t Tensor) fragSlice(m, i int) Tensor {
	k := t.k
	sh := t.Shape()
	if i < 0 || i >= sh[m] {
		k.errorf("Slice: index %d out of range [0, %d) of mode %d", i, sh[m], m)
		return t
	}
	inner := 1
	for j := 0; j < m; j++ {
		inner *= sh[j]
	}
	var regs []Value
	for e := range t.regs {
		if (e/inner)%sh[m] == i {
			regs = append(regs, t.regs[e])
		}
	}
	nsh := append(append([]int(nil), sh[:m]...), sh[m+1:]...)
	u := Tensor{k: k, ptr: t.ptr, mma: t.mma}
	cs := 1
	for _, s := range nsh {
		u.modes = append(u.modes, []leaf{{shape: s, stride: stride{c: int64(cs)}, cstride: cs}})
		cs *= s
	}
	if len(u.modes) == 0 {
		u.modes = [][]leaf{{{shape: 1, stride: stride{c: 1}, cstride: 1}}}
	}
	u.origin = []coord{{}}
	u.bounds = []Value{{}}
	u.regs = regs
	return u
}

// Gemm accumulates c += a * b on register fragments of a tiled MMA's thread (CuTe's gemm):
// a is (values, MMA_M, MMA_K) (or one K block, (values, MMA_M)), b (values, MMA_N, MMA_K)
// (or (values, MMA_N)), c (values, MMA_M, MMA_N), as PartitionFragmentA/B/C make them. It
// emits one mma.sync per (k, m, n), n in serpentine order so that consecutive instructions
// share an operand.
func (k *Kernel) Gemm(m TiledMMA, a, b, c Tensor) {
	if !k.live() {
		return
	}
	defer k.hold()()
	if m.err != "" {
		k.errorf("%s", m.err)
		return
	}
	for _, x := range []struct {
		t Tensor
		o Operand
	}{{a, OperandA}, {b, OperandB}, {c, OperandC}} {
		if x.t.k != k || !x.t.IsFragment() {
			k.errorf("Gemm: %s must be a register fragment of this kernel (PartitionFragment%s)", x.o, x.o)
			return
		}
		if x.t.mma == nil || x.t.mma.o != x.o || x.t.mma.m.Atom.Name != m.Atom.Name {
			k.errorf("Gemm: %s is not a %s fragment of %s (make it with PartitionFragment%s)", x.o, x.o, m.Atom.Name, x.o)
			return
		}
	}
	if k.target.SM() < m.Atom.minSM {
		k.errorf("Gemm: %s needs sm_%d or later; the kernel targets %s", m.Atom.Name, m.Atom.minSM, k.target)
		return
	}
	sa, sb, sc := a.Shape(), b.Shape(), c.Shape()
	if len(sa) == 2 {
		sa = append(sa, 1)
	}
	if len(sb) == 2 {
		sb = append(sb, 1)
	}
	at := m.Atom
	va, vb, vc := at.M*at.K/32/at.APack, at.N*at.K/32/at.BPack, at.M*at.N/32/at.CPack
	if len(sa) != 3 || len(sb) != 3 || len(sc) != 3 || sa[0] != va || sb[0] != vb || sc[0] != vc {
		k.errorf("Gemm: fragment shapes %v, %v, %v: want (%d, M, K), (%d, N, K), (%d, M, N)", a.Shape(), b.Shape(), c.Shape(), va, vb, vc)
		return
	}
	if sa[1] != sc[1] || sb[1] != sc[2] || sa[2] != sb[2] {
		k.errorf("Gemm: fragment shapes %v, %v, %v do not agree: want (_, M, K), (_, N, K), (_, M, N)", a.Shape(), b.Shape(), c.Shape())
		return
	}
	M, N, K := sc[1], sc[2], sa[2]
	ct := ptx.Type(at.C)
	if at.C == I32 {
		ct = ptx.S32
	}
	// Every mma shares its qualifiers and types (nothing changes an emitted instruction's).
	q := []string{"sync", "aligned", at.shape(), "row", "col"}
	types := []ptx.Type{ct, at.ptxA, at.ptxB, ct}
	for kk := 0; kk < K; kk++ {
		for mm := 0; mm < M; mm++ {
			for i := 0; i < N; i++ {
				nn := i
				if mm%2 == 1 {
					nn = N - 1 - i
				}
				k.emitMMA(q, types, [3]int{vc, va, vb}, c, a, b, mm, nn, kk, M, N)
			}
		}
	}
}

// mmaBox holds an mma instruction with its operand lists: one allocation per mma.
type mmaBox struct {
	in   ptx.Instr
	args [4]ptx.Operand
	vecs [3]ptx.Vec
	regs [16]ptx.Operand
}

// emitMMA emits d = a*b + d for fragment tile (mm, nn) at k-step kk of c, a and b, whose
// values per thread are vs (c, a, b).
func (k *Kernel) emitMMA(q []string, types []ptx.Type, vs [3]int, c, a, b Tensor, mm, nn, kk, M, N int) {
	x := &mmaBox{}
	used := 0
	regs := func(t Tensor, v, i, j, ni int) ptx.Vec {
		var out ptx.Vec
		if used+v <= len(x.regs) {
			out = x.regs[used : used+v : used+v]
			used += v
		} else {
			out = make(ptx.Vec, v)
		}
		for e := 0; e < v; e++ {
			out[e] = t.regs[e+v*(i+ni*j)].op
		}
		return out
	}
	x.vecs = [3]ptx.Vec{regs(c, vs[0], mm, nn, M), regs(a, vs[1], mm, kk, M), regs(b, vs[2], nn, kk, N)}
	d := ptx.Operand(x.vecs[0])
	x.args = [4]ptx.Operand{d, x.vecs[1], x.vecs[2], d}
	x.in = ptx.Instr{Op: "mma", Q: q, Types: types, Args: x.args[:]}
	k.emit(&x.in)
}
