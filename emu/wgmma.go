package emu

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kgen-dev/kgen/ptx"
)

// wgmma.mma_async.sync.aligned.m64nNkK: the warpgroup matrix multiply-accumulate of sm_90a
// (f16, bf16, tf32, e4m3/e5m2 into f32 or f16; s8/u8 into s32, exact, wrapping or with
// .satfinite clamping).
// The 128 threads of a warpgroup (4 consecutive warps of the block) compute D (64 x N) =
// A (64 x K) x B (K x N) + D. Warp w of the group holds rows 16w..16w+15 of A (when A is in
// registers) and of D, in the fragment layout of mma.m16n8kK (A) and of mma's C repeated over
// the N/8 column blocks (D): so each warp's share is computed on its own, when its 32 lanes
// reach the instruction. A (from a descriptor) and B are read from shared memory as the
// PTX ISA's matrix descriptors and canonical layouts define them (wgmmaDesc).
//
// The operation is asynchronous: the inputs are read at issue; the results land in the D
// registers when a wgmma.wait_group retires the commit group that holds it. An instruction
// that reads or writes accumulator registers, or the A registers of the register form, of a
// wgmma in flight (other than a later wgmma.mma_async, which the hardware chains) is
// reported as KindWgmma (the PTX ISA makes such an access undefined). Arithmetic is mma's (mma.go): exact products, a float64 sum in k order, one
// rounding to the accumulator type.

// KindWgmma: an instruction accessed the accumulator registers of a wgmma.mma_async before
// the wgmma.wait_group that retires it.
const KindWgmma Kind = "wgmma in flight"

// wgmmaDesc is a decoded 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix
// Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading dimension byte offset
// >> 4, 32-45 stride dimension byte offset >> 4, 49-51 matrix base offset, 62-63 swizzle
// mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
type wgmmaDesc struct {
	start, lbo, sbo uint64
	base            uint64
	swz             int // swizzle width in bytes: 0 (none), 32, 64 or 128
}

func decodeWgmmaDesc(v uint64) wgmmaDesc {
	d := wgmmaDesc{start: (v & 0x3fff) << 4, lbo: (v >> 16 & 0x3fff) << 4, sbo: (v >> 32 & 0x3fff) << 4, base: v >> 49 & 7}
	d.swz = [4]int{0, 128, 64, 32}[v>>62]
	return d
}

// swizzleAddr applies a shared-memory swizzle to a shared address: Swizzle<B,4,3> (CuTe's
// name), the 16-byte chunk index bits 4..4+B XORed with the bits 7..7+B, where B is 1, 2, 3
// for the 32, 64 and 128-byte modes. The pattern repeats every 256, 512 and 1024 bytes.
func swizzleAddr(a uint64, swz int) uint64 {
	var b uint
	switch swz {
	case 32:
		b = 1
	case 64:
		b = 2
	case 128:
		b = 3
	default:
		return a
	}
	return a ^ (a>>7&(1<<b-1))<<4
}

// addr returns the shared address of element (mn, k) of a matrix of es-byte elements in the
// canonical layout the descriptor describes; kMajor says the K index is contiguous (no
// transpose). In 16-byte units, with T = 16/es elements a unit and W = swizzle width / 16:
//
//	K-major,  no swizzle: ((8,m),(T,2k)):((1,SBO),(1,LBO))   row r: (r%8) + (r/8)*SBO; unit c of K: c*LBO
//	K-major,  swizzled:   ((8,m),(T,2k)):((W,SBO),(1,1))     row r: (r%8)*W + (r/8)*SBO; unit c: c
//	MN-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1,LBO)) unit u of MN: u*SBO; k: (k%8) + (k/8)*LBO
//	MN-major, swizzled:   ((T,W,m),(8,k)):((1,T,LBO),(W,SBO)) unit u: (u%W) + (u/W)*LBO; k: (k%8)*W + (k/8)*SBO
//
// then the swizzle of the mode applies to the address.
func (d wgmmaDesc) addr(mn, k, es int, kMajor bool) uint64 {
	w := uint64(d.swz / 16)
	var off uint64
	if kMajor {
		kb := k * es
		c, in := uint64(kb/16), uint64(kb%16)
		r8, rg := uint64(mn%8), uint64(mn/8)
		if w == 0 {
			off = r8*16 + rg*d.sbo + c*d.lbo + in
		} else {
			off = r8*16*w + rg*d.sbo + c*16 + in
		}
	} else {
		t := 16 / es
		u, in := uint64(mn/t), uint64(mn%t*es)
		k8, kg := uint64(k%8), uint64(k/8)
		if w == 0 {
			off = u*d.sbo + k8*16 + kg*d.lbo + in
		} else {
			off = u%w*16 + u/w*d.lbo + k8*16*w + kg*d.sbo + in
		}
	}
	return swizzleAddr(d.start+off, d.swz)
}

// wgmmaSpec is a decoded wgmma.mma_async.
type wgmmaSpec struct {
	n, k        int
	acc, ta, tb ptx.Type
	aDesc       bool // A from a descriptor (else four registers a lane; in.a, in.b: the descriptors)
	scaleNeg    bool // scale-d (in.c) is negated
	negA, negB  bool
	transA      bool // A is M-major (imm-trans-a = 1)
	transB      bool // B is N-major (imm-trans-b = 1)
	sat         bool // .satfinite: integer results clamp to the int32 range
	nd          int  // accumulator registers a lane
}

// wgOp is one wgmma in flight: the values it leaves in its accumulator slots, and the A
// register slots it holds (register form).
type wgOp struct {
	in     *dinst
	slots  []int32
	vals   [][32]uint64
	aSlots []int32
}

// wgState is a warp's wgmma operations in flight.
type wgState struct {
	pending []wgOp   // issued since the last commit_group
	groups  [][]wgOp // committed, oldest first
	busy    map[int32]*dinst
	latest  map[int32]*[32]uint64 // the value the newest wgmma in flight leaves in a slot
}

func (d *decoder) decodeWgmma(di *dinst, in *ptx.Instr, toks tokens) error {
	if !toks.has("sync") || !toks.has("aligned") {
		return errUnsupported
	}
	switch {
	case toks.has("fence"):
		di.exec = execNop
		return nil
	case toks.has("commit_group"):
		di.kind, di.aligned = ctlWarpSync, true
		di.exec = func(w *warp, in *dinst, part uint32) { w.wgCommit() }
		return nil
	case toks.has("wait_group"):
		if len(in.Args) != 1 {
			return errors.New("wgmma.wait_group takes an immediate")
		}
		im, ok := in.Args[0].(ptx.Imm)
		if !ok {
			return errors.New("wgmma.wait_group takes an immediate")
		}
		n := int(im.Bits)
		di.kind, di.aligned = ctlWarpSync, true
		di.exec = func(w *warp, in *dinst, part uint32) { w.wgWait(n) }
		return nil
	case toks.has("mma_async"):
	default:
		return errUnsupported
	}
	if len(in.Types) != 3 {
		return errUnsupported
	}
	var sp wgmmaSpec
	for _, q := range toks {
		if n, k, ok := ptx.WgmmaShape(q); ok {
			sp.n, sp.k = n, k
		}
	}
	sp.acc, sp.ta, sp.tb = in.Types[0], in.Types[1], in.Types[2]
	ints := sp.ta == ptx.S8 || sp.ta == ptx.U8
	if sp.n == 0 || ptx.WgmmaK(sp.ta) != sp.k || ptx.WgmmaK(sp.tb) != sp.k || ints != (sp.acc == ptx.S32) ||
		sp.acc != ptx.F32 && sp.acc != ptx.F16 && sp.acc != ptx.S32 {
		return errUnsupported
	}
	sp.sat = toks.has("satfinite")
	sp.nd = ptx.WgmmaAccRegs(sp.n, sp.acc)
	args := in.Args
	if len(args) < 4 {
		return errors.New("wgmma.mma_async takes d, a, b-desc, scale-d{, imm-scale-a, imm-scale-b{, imm-trans-a}{, imm-trans-b}}")
	}
	dv, ok := args[0].(ptx.Vec)
	if !ok || len(dv) != sp.nd {
		return fmt.Errorf("wgmma.mma_async: D wants a vector of %d registers", sp.nd)
	}
	for _, o := range dv {
		s, _, err := d.dst(o)
		if err != nil {
			return err
		}
		di.dv = append(di.dv, s)
	}
	var err error
	if av, isVec := args[1].(ptx.Vec); isVec {
		if len(av) != 4 {
			return errors.New("wgmma.mma_async: A in registers wants a vector of 4")
		}
		for _, o := range av {
			s, err := d.src(o, ptx.B32)
			if err != nil {
				return err
			}
			di.av = append(di.av, s)
		}
	} else {
		sp.aDesc = true
		if di.a, err = d.src(args[1], ptx.B64); err != nil {
			return err
		}
	}
	if di.b, err = d.src(args[2], ptx.B64); err != nil {
		return err
	}
	if di.c, sp.scaleNeg, err = d.pred(args[3]); err != nil {
		return err
	}
	imm := func(i int) (int64, error) {
		im, ok := args[i].(ptx.Imm)
		if !ok {
			return 0, fmt.Errorf("wgmma.mma_async operand %d must be an immediate", i+1)
		}
		return int64(im.Bits), nil
	}
	rest := []*bool{&sp.negA, &sp.negB}
	if ints {
		rest = nil
	}
	if sp.ta == ptx.F16 || sp.ta == ptx.BF16 {
		if sp.aDesc {
			rest = append(rest, &sp.transA)
		}
		rest = append(rest, &sp.transB)
	}
	if len(args) != 4+len(rest) {
		return fmt.Errorf("wgmma.mma_async takes %d operands here, got %d", 4+len(rest), len(args))
	}
	for i, p := range rest {
		v, err := imm(4 + i)
		if err != nil {
			return err
		}
		if i < 2 {
			*p = v == -1 || uint32(v) == math.MaxUint32
		} else {
			*p = v == 1
		}
	}
	// The accumulators are read too (as C): compaction must see them live before.
	di.av = append(di.av, di.dv...)
	di.kind, di.aligned = ctlWarpSync, true
	di.exec = func(w *warp, in *dinst, part uint32) { execWgmma(w, in, &sp) }
	return nil
}

// wgmmaElem reads element (mn, k) of a descriptor-described operand of type t.
func (w *warp) wgmmaElem(in *dinst, d wgmmaDesc, mn, k int, t ptx.Type, kMajor bool) (float64, bool) {
	es := max(t.Bits()/8, 1)
	a := d.addr(mn, k, es, kMajor)
	b, f := w.sharedSpan(a, es)
	if f != nil {
		f.msg += fmt.Sprintf(" (wgmma operand element (%d, %d) through descriptor start %#x, LBO %d, SBO %d, %d-byte swizzle)", mn, k, d.start, d.lbo, d.sbo, d.swz)
		w.memFault(in, 0, f)
		return 0, false
	}
	return mmaIn(t, uint32(getN(b, es))), true
}

func execWgmma(w *warp, in *dinst, sp *wgmmaSpec) {
	if w.wg == nil {
		w.wg = &wgState{busy: map[int32]*dinst{}, latest: map[int32]*[32]uint64{}}
	}
	r := w.r
	row0 := 16 * (w.idx % 4) // this warp's rows of the 64
	a := make([][]float64, 16)
	for i := range a {
		a[i] = make([]float64, sp.k)
	}
	desc := func(slot int32, what string) (wgmmaDesc, bool) {
		v := r[slot] // descriptors are warp-uniform: lane 0's
		d := decodeWgmmaDesc(v)
		if d.swz != 0 && d.base != 0 && d.base != d.start>>7&7 {
			w.fault(in, 0, KindUnsupported, fmt.Sprintf("wgmma %s descriptor %#x: matrix base offset %d (the emulator swizzles absolute shared addresses: base offset 0 or (start >> 7) & 7 only)", what, v, d.base))
			return d, false
		}
		return d, true
	}
	if sp.aDesc {
		d, ok := desc(in.a, "A")
		if !ok {
			return
		}
		for i := 0; i < 16; i++ {
			for k := 0; k < sp.k; k++ {
				if a[i][k], ok = w.wgmmaElem(in, d, row0+i, k, sp.ta, !sp.transA); !ok {
					return
				}
			}
		}
	} else {
		// The fragment of mma.m16n8kK's A (mma.go): register ri, element j of lane l is row
		// groupID + 8(ri&1), column (ri>>1)*4e + threadID_in_group*e + j.
		e, bitsPer := elemsPerReg(sp.ta), sp.ta.Bits()
		for ri, s := range in.av[:4] {
			for l := 0; l < 32; l++ {
				v := uint32(r[s+int32(l)])
				row, col0 := l>>2+8*(ri&1), (ri>>1)*4*e+(l&3)*e
				for j := 0; j < e; j++ {
					a[row][col0+j] = mmaIn(sp.ta, v>>(j*bitsPer))
				}
			}
		}
	}
	bd, ok := desc(in.b, "B")
	if !ok {
		return
	}
	b := make([][]float64, sp.n) // b[n][k]
	for n := range b {
		b[n] = make([]float64, sp.k)
		for k := 0; k < sp.k; k++ {
			if b[n][k], ok = w.wgmmaElem(in, bd, n, k, sp.tb, !sp.transB); !ok {
				return
			}
		}
	}
	if sp.negA {
		for i := range a {
			for k := range a[i] {
				a[i][k] = -a[i][k]
			}
		}
	}
	if sp.negB {
		for n := range b {
			for k := range b[n] {
				b[n][k] = -b[n][k]
			}
		}
	}
	useD := r[in.c]&1 != 0 != sp.scaleNeg // warp-uniform: lane 0's
	st := w.wg
	cur := func(s int32, l int) uint64 {
		if v := st.latest[s]; v != nil {
			return v[l]
		}
		return r[s+int32(l)]
	}
	c := make([][]float64, 16)
	for i := range c {
		c[i] = make([]float64, sp.n)
	}
	if useD {
		for ri, s := range in.dv {
			blk, rr := ri/4, ri%4
			if sp.acc == ptx.F16 {
				blk, rr = ri/2, ri%2
			}
			for l := 0; l < 32; l++ {
				v := cur(s, l)
				if sp.acc == ptx.F16 {
					for j := 0; j < 2; j++ {
						row, col := fragC(sp.acc, l, rr, j)
						c[row][blk*8+col] = h2f(v >> (16 * j) & 0xffff)
					}
				} else {
					row, col := fragC(sp.acc, l, rr, 0)
					if sp.acc == ptx.S32 {
						c[row][blk*8+col] = float64(int32(uint32(v)))
					} else {
						c[row][blk*8+col] = float64(f32(v))
					}
				}
			}
		}
	}
	op := wgOp{in: in, slots: in.dv, vals: make([][32]uint64, len(in.dv))}
	round := func(s float64) uint64 {
		switch sp.acc {
		case ptx.F16:
			return f2h(s)
		case ptx.S32: // exact: |s| < 2^53 (products of 8-bit integers, 32 of them, plus an int32)
			v := int64(s)
			if sp.sat {
				return uint64(uint32(int32(max(math.MinInt32, min(math.MaxInt32, v)))))
			}
			return uint64(uint32(v))
		}
		return f2f32(s)
	}
	for ri := range in.dv {
		blk, rr := ri/4, ri%4
		if sp.acc == ptx.F16 {
			blk, rr = ri/2, ri%2
		}
		for l := 0; l < 32; l++ {
			var v uint64
			for j := 0; j < 1+btoi(sp.acc == ptx.F16); j++ {
				row, col := fragC(sp.acc, l, rr, j)
				col += blk * 8
				s := c[row][col]
				for k := 0; k < sp.k; k++ {
					s += a[row][k] * b[col][k]
				}
				v |= round(s) << (16 * j)
			}
			op.vals[ri][l] = v
		}
	}
	for ri, s := range in.dv {
		st.busy[s] = in
		st.latest[s] = &op.vals[ri]
	}
	if !sp.aDesc {
		op.aSlots = in.av[:4]
		for _, s := range op.aSlots {
			if _, acc := st.latest[s]; !acc {
				st.busy[s] = in
			}
		}
	}
	st.pending = append(st.pending, op)
	w.l.progressed()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wgCommit makes the wgmma operations issued since the last commit a group.
func (w *warp) wgCommit() {
	if w.wg == nil || len(w.wg.pending) == 0 {
		if w.wg != nil {
			w.wg.groups = append(w.wg.groups, nil) // an empty group still counts
		}
		return
	}
	w.wg.groups = append(w.wg.groups, w.wg.pending)
	w.wg.pending = nil
}

// wgWait retires the committed groups but the newest n: their results land in registers.
func (w *warp) wgWait(n int) {
	st := w.wg
	if st == nil {
		return
	}
	for len(st.groups) > n {
		for _, op := range st.groups[0] {
			for i, s := range op.slots {
				copy(w.r[s:s+32], op.vals[i][:])
				if st.busy[s] == op.in && st.latest[s] == &op.vals[i] {
					delete(st.busy, s)
					delete(st.latest, s)
				}
			}
			for _, s := range op.aSlots {
				if _, acc := st.latest[s]; st.busy[s] == op.in && !acc {
					delete(st.busy, s)
				}
			}
		}
		st.groups = st.groups[1:]
	}
	w.l.progressed()
}

// wgTouches reports (as a fault) an instruction that accesses the accumulators of a wgmma in
// flight; it returns true when it did.
func (w *warp) wgTouches(in *dinst) bool {
	if in.src != nil && strings.HasPrefix(in.src.Op, "wgmma") && (in.src.Op == "wgmma.mma_async" || slices.Contains(in.src.Q, "mma_async")) {
		return false
	}
	var hit *dinst
	var name string
	forSlots(in, func(p *int32, _ bool) {
		o := w.wg.busy[*p]
		if hit != nil || o == nil {
			return
		}
		if n, ok := wgBusyName(o, *p, in); ok {
			hit, name = o, n
		}
	})
	if hit == nil {
		return false
	}
	w.fault(in, 0, KindWgmma, fmt.Sprintf("%s of the wgmma.mma_async at %s is accessed before the wgmma.wait_group that retires it", name, posString(hit.src.Pos)))
	return true
}

// wgBusyName names slot of the wgmma o in flight, which instruction in accesses: an
// accumulator, or an A register of the register form. ok is false for an A slot that in
// reaches under another virtual register (the slot reused once A's register was dead: the
// wgmma read A at issue, and PTX registers are distinct).
func wgBusyName(o *dinst, slot int32, in *dinst) (string, bool) {
	reg := func(arg, i int) (ptx.Reg, bool) {
		if o.src == nil || arg >= len(o.src.Args) {
			return ptx.Reg{}, false
		}
		v, ok := o.src.Args[arg].(ptx.Vec)
		if !ok || i >= len(v) {
			return ptx.Reg{}, false
		}
		r, ok := v[i].(ptx.Reg)
		return r, ok
	}
	for i, s := range o.dv {
		if s == slot {
			if r, ok := reg(0, i); ok {
				return "accumulator " + ptx.RegName(r), true
			}
			return "an accumulator register", true
		}
	}
	for i, s := range o.av[:min(4, len(o.av))] {
		if s != slot {
			continue
		}
		r, ok := reg(1, i)
		if !ok || in.src == nil || !slices.Contains(instrRegs(in.src), r) {
			return "", false
		}
		return "A register " + ptx.RegName(r), true
	}
	return "", false
}

// instrRegs returns the registers an instruction names (its guard and every operand).
func instrRegs(in *ptx.Instr) []ptx.Reg {
	var out []ptx.Reg
	if in.Guard != nil {
		out = append(out, *in.Guard)
	}
	var walk func(o ptx.Operand)
	walk = func(o ptx.Operand) {
		switch v := o.(type) {
		case ptx.Reg:
			out = append(out, v)
		case ptx.Not:
			out = append(out, v.P)
		case ptx.Addr:
			walk(v.Base)
		case ptx.TensorAddr:
			walk(v.Map)
			walk(v.Coords)
		case ptx.Vec:
			for _, e := range v {
				walk(e)
			}
		case ptx.Pair:
			walk(v.A)
			walk(v.B)
		}
	}
	for _, a := range in.Args {
		walk(a)
	}
	return out
}
