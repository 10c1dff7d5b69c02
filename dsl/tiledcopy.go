package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// CopyAtom is one copy instruction a tiled copy repeats (CuTe's Copy_Atom).
type CopyAtom struct {
	Name  string
	kind  copyKind
	Num   int // ldmatrix: 8x8 matrices per instruction (1, 2 or 4)
	Bytes int // cp.async: bytes per instruction (4, 8 or 16)
}

type copyKind int

const (
	copyLdMatrix copyKind = iota + 1
	copyCpAsync
	copyUniversal
)

// The copy atoms. ldmatrix (CuTe's SM75_U32xN_LDSM_N and SM75_U16xN_LDSM_T) loads N 8x8
// matrices of 16-bit elements from shared memory into an MMA operand's registers; a tiled
// copy made from it picks the .trans form itself when the shared tile is contiguous along
// the other mode. cp.async (CuTe's SM80_CP_ASYNC_CACHEGLOBAL/CACHEALWAYS) copies global to
// shared memory without registers: .cg for 16 bytes, .ca for 4 and 8; copies that reach past
// a tile's runtime extent read only the bytes inside and zero-fill the rest.
var (
	LdMatrixX1 = CopyAtom{Name: "ldmatrix.x1", kind: copyLdMatrix, Num: 1}
	LdMatrixX2 = CopyAtom{Name: "ldmatrix.x2", kind: copyLdMatrix, Num: 2}
	LdMatrixX4 = CopyAtom{Name: "ldmatrix.x4", kind: copyLdMatrix, Num: 4}
	CpAsync16  = CopyAtom{Name: "cp.async.cg 16", kind: copyCpAsync, Bytes: 16}
	CpAsync8   = CopyAtom{Name: "cp.async.ca 8", kind: copyCpAsync, Bytes: 8}
	CpAsync4   = CopyAtom{Name: "cp.async.ca 4", kind: copyCpAsync, Bytes: 4}
	// UniversalCopy moves elements through registers with ordinary loads and stores (k.Copy:
	// vectors where layouts allow, zeros outside a partial tile): the fallback for
	// addresses cp.async cannot take.
	UniversalCopy = CopyAtom{Name: "universal copy", kind: copyUniversal}
)

// TiledCopy is a copy atom repeated over the threads of a block (CuTe's TiledCopy): either
// over a thread layout and a value block (MakeTiledCopy), or retiled to the registers of an
// MMA operand (MakeTiledCopyA/B).
type TiledCopy struct {
	Atom CopyAtom
	thr  layout.Layout
	val  []int
	mma  *TiledMMA
	o    Operand
	err  string
}

// MakeTiledCopy repeats atom over the threads: thr maps thread indices over the tile's modes
// and each thread copies val consecutive elements per mode (as PartitionTV). For cp.async the
// elements of one instruction are the val block's first mode.
func MakeTiledCopy(atom CopyAtom, thr layout.Layout, val []int) TiledCopy {
	tc := TiledCopy{Atom: atom, thr: thr, val: append([]int(nil), val...)}
	if atom.kind == copyLdMatrix {
		tc.err = fmt.Sprintf("MakeTiledCopy: %s copies into MMA registers: use MakeTiledCopyA or MakeTiledCopyB", atom.Name)
	}
	return tc
}

// MakeTiledCopyA returns a tiled ldmatrix copy of the A operand of m from shared memory to
// the registers PartitionFragmentA makes (CuTe's make_tiled_copy_A; retiling is implied).
func MakeTiledCopyA(atom CopyAtom, m TiledMMA) TiledCopy { return makeTiledCopyMMA(atom, m, OperandA) }

// MakeTiledCopyB is MakeTiledCopyA for the B operand.
func MakeTiledCopyB(atom CopyAtom, m TiledMMA) TiledCopy { return makeTiledCopyMMA(atom, m, OperandB) }

func makeTiledCopyMMA(atom CopyAtom, m TiledMMA, o Operand) TiledCopy {
	tc := TiledCopy{Atom: atom, mma: &m, o: o, err: m.err}
	if atom.kind != copyLdMatrix {
		tc.err = fmt.Sprintf("MakeTiledCopy%s: %s does not load registers; use an ldmatrix atom", o, atom.Name)
	}
	if _, _, _, pack, elem := m.Atom.tv(o); tc.err == "" && (pack != 2 || elem.Bits() != 16) {
		tc.err = fmt.Sprintf("MakeTiledCopy%s: ldmatrix loads 16-bit elements; %s's %s is %s", o, m.Atom.Name, o, elem)
	}
	return tc
}

// ThrCopy is one thread's slice of a tiled copy.
type ThrCopy struct {
	tc  TiledCopy
	k   *Kernel
	tid Value
}

// Slice returns thread tid's slice of the tiled copy.
func (tc TiledCopy) Slice(tid Value) ThrCopy {
	if k := tid.k; k != nil && tc.err != "" {
		k.errorf("%s", tc.err)
	}
	return ThrCopy{tc: tc, k: tid.k, tid: tid}
}

// PartitionS returns the thread's part of the source tile. For cp.async it is the elements
// the thread copies (values, tiles...); for ldmatrix it is one address per instruction: the
// 8-element row this thread supplies to each ldmatrix, shaped (instructions per atom tile,
// MMA_M, MMA_K) for A (MMA_N for B) so that it slices like the fragment.
func (c ThrCopy) PartitionS(src Tensor) Tensor {
	if c.k == nil {
		orphan("ThrCopy.PartitionS", src.k)
		return src
	}
	if c.tc.err != "" || c.k.zeroTensor("PartitionS", src) {
		return src
	}
	if c.tc.Atom.kind == copyLdMatrix {
		return c.ldmatrixSource(src)
	}
	return src.LocalPartition(c.tc.thr, c.tid, c.tc.val...)
}

// PartitionD returns the thread's part of the destination tile (cp.async).
func (c ThrCopy) PartitionD(dst Tensor) Tensor {
	if c.k == nil {
		orphan("ThrCopy.PartitionD", dst.k)
		return dst
	}
	if c.tc.err != "" || c.k.zeroTensor("PartitionD", dst) {
		return dst
	}
	if c.tc.Atom.kind == copyLdMatrix {
		c.k.errorf("PartitionD: an ldmatrix copy writes the MMA fragment itself (PartitionFragment%s)", c.tc.o)
		return dst
	}
	return dst.LocalPartition(c.tc.thr, c.tid, c.tc.val...)
}

// Copy runs the thread's part of the tiled copy: for ldmatrix src is (a slice of)
// PartitionS's result and dst the MMA fragment sliced the same way; for cp.async src and dst
// are PartitionS and PartitionD of a global and a shared tile.
func (c ThrCopy) Copy(src, dst Tensor) {
	k := c.k
	if k == nil {
		orphan("ThrCopy.Copy", src.k, dst.k)
		return
	}
	if c.tc.err != "" {
		return
	}
	defer k.hold()()
	if k.zeroTensor("ThrCopy.Copy", src, dst) || !src.ok("Copy") || !dst.ok("Copy") {
		return
	}
	if src.k != k || dst.k != k {
		k.errorf("Copy: a tensor belongs to another kernel")
		return
	}
	if c.tc.Atom.kind == copyLdMatrix {
		c.copyLdMatrix(src, dst)
		return
	}
	if c.tc.Atom.kind == copyUniversal {
		f := k.Fragment(src.ptr.elem, src) // zeroed: elements outside the extents stay 0
		k.Copy(src, f)
		k.Copy(f, dst)
		return
	}
	c.copyCpAsync(src, dst)
}

// ShiftBase returns the tensor with its base pointer moved by n elements (a Go int or an
// integer Value), outside its swizzle: the stage of a multistage buffer whose stages are
// multiples of the swizzle's period (2^(M+S+B) elements), with the partitions made once.
func (t Tensor) ShiftBase(n any) Tensor {
	k := t.k
	if k == nil || !t.ok("ShiftBase") {
		return t
	}
	if t.IsFragment() || t.ident {
		k.errorf("ShiftBase: the tensor has no memory")
		return t
	}
	u := t
	u.ptr = t.ptr.At(n)
	return u
}

// ldmatrixSource builds the provider view of the shared tile: lane l supplies row l%8 of
// matrix l/8 of every instruction.
func (c ThrCopy) ldmatrixSource(src Tensor) Tensor {
	k := c.k
	m, o, num := *c.tc.mma, c.tc.o, c.tc.Atom.Num
	if src.IsFragment() || src.ptr.space != ptx.SpaceShared || src.Rank() != 2 {
		k.errorf("ldmatrix: the source must be a rank-2 tile of shared memory")
		return src
	}
	if src.ptr.elem.Bits() != 16 {
		k.errorf("ldmatrix: the source holds %s; ldmatrix loads 16-bit elements", src.ptr.elem)
		return src
	}
	// Which mode is contiguous: the column mode (K) for the plain form, the row mode for .trans.
	contig := -1
	for mi := 0; mi < 2; mi++ {
		if l := src.modes[mi][0]; l.stride.static() && l.stride.c == 1 && l.shape%8 == 0 {
			contig = mi
		}
	}
	if contig < 0 {
		k.errorf("ldmatrix: neither mode of the shared tile is contiguous in runs of 8 elements")
		return src
	}
	if src.swz != nil && src.swz.M < 3 {
		k.errorf("ldmatrix: swizzle %v breaks up the 16-byte rows ldmatrix reads (want M >= 3)", *src.swz)
		return src
	}
	trans := contig == 0
	at := m.Atom
	_, arows, _, pack, _ := at.tv(o)
	_, rows, cols, _ := m.operandTV(o)
	vregs := at.M * at.K / 32 / pack // registers per atom tile
	if o == OperandB {
		vregs = at.N * at.K / 32 / pack
	}
	f := 1 // atom tiles along rows one instruction covers
	groups := 1
	switch {
	case vregs%num == 0:
		groups = vregs / num
	case num%vregs == 0:
		f = num / vregs
	default:
		k.errorf("ldmatrix.x%d does not fit %d registers per %s tile", num, vregs, o)
		return src
	}
	crows := rows * f
	if src.Shape()[0]%crows != 0 {
		k.errorf("ldmatrix.x%d: the tile's %d rows are not a multiple of %d", num, src.Shape()[0], crows)
		return src
	}
	// regCoord returns the (row, col) of register r's element p for lane t of warp (0,0).
	regCoord := func(t, r, p int) (int, int) {
		v := r % vregs
		tr := r / vregs
		row, col := at.Coord(o, t, pack*v+p)
		return row + tr*rows, col
	}
	_ = arows
	// The row each lane supplies, for group 0.
	var prov [32][2]int
	for l := 0; l < 32; l++ {
		j, i := (l/8)%num, l%8
		if trans {
			prov[l][0], prov[l][1] = regCoord(i/2, j, i%2)
		} else {
			prov[l][0], prov[l][1] = regCoord(4*i, j, 0)
		}
	}
	// Check the fragment is what ldmatrix delivers: thread t's register j holds row t/4,
	// elements 2(t%4)+p (plain) or rows 2(t%4)+p, element t/4 (.trans).
	for t := 0; t < 32; t++ {
		for j := 0; j < num; j++ {
			for p := 0; p < 2; p++ {
				var er, ec int
				if trans {
					q := prov[8*j+2*(t%4)+p]
					er, ec = q[0]+t/4, q[1]
				} else {
					q := prov[8*j+t/4]
					er, ec = q[0], q[1]+2*(t%4)+p
				}
				if gr, gc := regCoord(t, j, p); gr != er || gc != ec {
					k.errorf("ldmatrix: %s's %s fragment is not what ldmatrix%s.x%d delivers (lane %d register %d)", at.Name, o, map[bool]string{true: ".trans"}[trans], num, t, j)
					return src
				}
			}
		}
	}
	// The provider map must be a layout over the lane's bits.
	var ls, ld []layout.IntTuple
	for b := 0; b < 5; b++ {
		q := prov[1<<b]
		ls = append(ls, layout.Int(2))
		ld = append(ld, layout.Int(q[0]+crows*q[1]))
	}
	lanes := layout.Must(layout.New(layout.Tuple(ls...), layout.Tuple(ld...)))
	for l := 0; l < 32; l++ {
		if lanes.Value(l) != prov[l][0]+crows*prov[l][1] {
			k.errorf("ldmatrix: the rows lanes supply are not a layout of the lane index (lane %d)", l)
			return src
		}
	}
	// Warps: as in the MMA's layout of this operand.
	tv, _, _, _ := m.operandTV(o)
	thrMode, _ := tv.Mode(0)
	wsh, wst := thrMode.FlatShape()[2:], thrMode.FlatStride()[2:]
	shape, strd := append([]layout.IntTuple(nil), ls...), append([]layout.IntTuple(nil), ld...)
	for i := range wsh {
		s := wst[i]
		s = s%rows + crows*(s/rows)
		shape = append(shape, layout.Int(wsh[i]))
		strd = append(strd, layout.Int(s))
	}
	thr := layout.Must(layout.New(layout.Tuple(shape...), layout.Tuple(strd...)))
	// Values: the groups of num registers inside one atom tile.
	val := layout.Must(layout.New(layout.Int(1), layout.Int(0)))
	if groups > 1 {
		r0, c0 := regCoord(0, 0, 0)
		r1, c1 := regCoord(0, num, 0)
		d := (r1 - r0) + crows*(c1-c0)
		for g := 2; g < groups; g++ {
			rg, cg := regCoord(0, g*num, 0)
			if (rg-r0)+crows*(cg-c0) != g*d {
				k.errorf("ldmatrix.x%d: the instruction groups of a %s tile are not evenly spaced", num, o)
				return src
			}
		}
		val = layout.Must(layout.New(layout.Int(groups), layout.Int(d)))
	}
	p := src.PartitionByTV(layout.Ints(crows, cols), layout.Must(layout.MakeLayoutOf(thr, val)), c.tid)
	p.ldsm = &ldsmInfo{trans: trans, num: num}
	return p
}

// ldsmInfo marks the provider view of an ldmatrix copy.
type ldsmInfo struct {
	trans bool
	num   int
}

func (c ThrCopy) copyLdMatrix(src, dst Tensor) {
	k := c.k
	if src.ldsm == nil {
		k.errorf("Copy: an ldmatrix copy reads the tensor its PartitionS returned")
		return
	}
	if !dst.IsFragment() || dst.mma == nil || dst.mma.o != c.tc.o {
		k.errorf("Copy: an ldmatrix copy of %s writes a PartitionFragment%s fragment", c.tc.o, c.tc.o)
		return
	}
	num := src.ldsm.num
	if src.Size()*num != len(dst.regs) {
		k.errorf("Copy: ldmatrix source has %d rows for %d registers (want one per %d; slice both alike)", src.Size(), len(dst.regs), num)
		return
	}
	ls := dropUnit(src.elemLeaves())
	q := []string{"sync", "aligned", "m8n8", fmt.Sprintf("x%d", num)}
	if src.ldsm.trans {
		q = append(q, "trans")
	}
	q = append(q, "shared")
	for e := 0; e < src.Size(); e++ {
		p := src.ptrAt(ls, e)
		regs := make(ptx.Vec, num)
		for j := range regs {
			regs[j] = dst.regs[num*e+j].op
		}
		k.emit(&ptx.Instr{Op: "ldmatrix", Q: q, Types: []ptx.Type{ptx.B16}, Args: []ptx.Operand{regs, p.addrOperand()}})
	}
}

// copyCpAsync issues one cp.async per group of consecutive elements: whole groups inside the
// tile's extents copy Bytes bytes, groups at an edge copy the bytes inside and zero-fill the
// rest (the src-size form), groups outside copy nothing and zero-fill.
func (c ThrCopy) copyCpAsync(src, dst Tensor) {
	k := c.k
	if src.IsFragment() || dst.IsFragment() || src.ptr.space != ptx.SpaceGlobal || dst.ptr.space != ptx.SpaceShared {
		k.errorf("Copy: cp.async copies a global tile to a shared tile")
		return
	}
	if src.ptr.elem != dst.ptr.elem || src.Size() != dst.Size() {
		k.errorf("Copy: cp.async between %d %s and %d %s elements", src.Size(), src.ptr.elem, dst.Size(), dst.ptr.elem)
		return
	}
	if k.target.SM() < 80 {
		k.errorf("Copy: cp.async needs sm_80 or later")
		return
	}
	eb := src.ptr.elem.Bytes()
	vec := c.tc.Atom.Bytes / eb
	// Runs lie along the mode whose first leaf is contiguous: take it first in both tensors.
	if src.Rank() == dst.Rank() {
		for m := 1; m < src.Rank(); m++ {
			if l := dropUnit(src.modes[m]); len(l) > 0 && l[0].stride.static() && l[0].stride.c == 1 {
				src, dst = src.modeFirst(m), dst.modeFirst(m)
				break
			}
		}
	}
	sl, dl := dropUnit(src.elemLeaves()), dropUnit(dst.elemLeaves())
	if vec < 1 || src.Size()%vec != 0 || !vectorOK(src, sl, vec) || !vectorOK(dst, dl, vec) {
		k.errorf("Copy: %s needs runs of %d consecutive %s elements, %d-byte aligned, in both tiles (declare a runtime leading dimension's divisibility with Assume)", c.tc.Atom.Name, vec, src.ptr.elem, c.tc.Atom.Bytes)
		return
	}
	q := qCpAsyncCA
	if c.tc.Atom.Bytes == 16 {
		q = qCpAsyncCG
	}
	var bytes ptx.Operand = ptx.IntImm(ptx.U32, int64(c.tc.Atom.Bytes)) // boxed once
	// cpAsync emits "cp.async.{ca,cg}.shared.global [d], [s], bytes{, size}" from the slab.
	cpAsync := func(d, s ptx.Operand, size ptx.Operand) {
		x := k.box()
		x.in = ptx.Instr{Op: "cp.async", Q: q, Args: append(x.args[:0:len(x.args)], d, s, bytes)}
		if size != nil {
			x.in.Args = append(x.in.Args, size)
		}
		k.emit(&x.in)
	}
	emit := func(e int) {
		d, s := dst.ptrAt(dl, e), src.ptrAt(sl, e)
		cpAsync(d.addrOperand(), s.addrOperand(), nil)
	}
	if !src.bounded() {
		for e := 0; e < src.Size(); e += vec {
			emit(e)
		}
		return
	}
	k.If(src.allInBounds(sl), func() {
		for e := 0; e < src.Size(); e += vec {
			emit(e)
		}
	}).Else(func() {
		for e := 0; e < src.Size(); e += vec {
			n := src.runBytes(sl, e, vec)
			in := n.Ne(uint32(0))
			d := dst.ptrAt(dl, e)
			s := src.ptrAt(sl, e)
			// Nothing is read when no byte is inside: point at the tile's first element.
			addr := k.Select(in, s.addrPlusOff(), src.ptr.addrPlusOff())
			cpAsync(d.addrOperand(), ptx.Addr{Base: addr.op}, k.operand(n))
		}
	})
}

// Qualifier lists of cp.async, shared by the instructions that use them.
var (
	qCpAsyncCA = []string{"ca", "shared", "global"}
	qCpAsyncCG = []string{"cg", "shared", "global"}
)

// addrPlusOff returns the pointer's address with its constant offset added.
func (p Ptr) addrPlusOff() Value {
	if p.off >= 0 {
		return p.addr.Add(uint64(p.off))
	}
	return p.addr.Sub(uint64(-p.off))
}

// modeFirst returns the tensor with mode m moved to the front (the same elements, visited
// in another order).
func (t Tensor) modeFirst(m int) Tensor {
	u := t.clone()
	u.modes = append([][]leaf{u.modes[m]}, append(u.modes[:m:m], u.modes[m+1:]...)...)
	return u
}

// runBytes returns the bytes of the run of vec elements from element e that lie inside the
// tensor's runtime extents (a U32): along the run's mode, clamp(extent - coordinate, 0, vec)
// elements; 0 when another mode's coordinate is outside.
func (t Tensor) runBytes(ls []leaf, e, vec int) Value {
	k := t.k
	eb := uint32(t.ptr.elem.Bytes())
	run := ls[0]
	if run.cstride != 1 { // the run's coordinates are not consecutive: element by element
		n := k.Const(U32, 0)
		for i := vec - 1; i >= 0; i-- {
			n = k.Select(t.inBounds(ls, e+i).And(n.Eq(uint32(0))), uint32(i+1)*eb, n)
		}
		return n
	}
	val := func(c coord) Value {
		if c.dyn.k != nil {
			return c.dyn.Add(int32(c.c))
		}
		return k.Const(I32, c.c)
	}
	ok := k.Const(Bool, true)
	cnt := k.Const(I32, int64(vec))
	for m, b := range t.bounds {
		if b.k == nil {
			continue
		}
		c := val(t.coordOfElem(ls, e, m))
		if m == run.mode {
			cnt = b.Sub(c).Min(int32(vec)).Max(int32(0))
			continue
		}
		ok = ok.And(c.Lt(b))
	}
	return k.Select(ok, cnt.To(U32).Mul(eb), uint32(0))
}
