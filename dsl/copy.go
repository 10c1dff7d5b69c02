package dsl

import (
	"github.com/kgen-dev/kgen/ptx"
)

// zeroTensor records a zero (invalid) Tensor among ts, arguments of what.
func (k *Kernel) zeroTensor(what string, ts ...Tensor) bool {
	for _, t := range ts {
		if t.k == nil {
			k.errorf("%s: a zero (invalid) Tensor", what)
			return true
		}
	}
	return false
}

// Copy copies src to dst, element i to element i in each tensor's colexicographic order.
// Both have the same element type and size; either may be a register fragment. It uses the
// widest access both layouts and the known alignments allow (up to 128 bits: vectors of
// consecutive elements; eight 16-bit or eight to sixteen 8-bit elements move as .v2/.v4.b32
// words, packed and unpacked in registers) and predicates the accesses on the
// runtime extents of either tensor: whole vectors in bounds take the vector path, the others
// fall back to element-wise accesses. Elements of a fragment whose source is out of bounds
// keep their value.
func (k *Kernel) Copy(src, dst Tensor, opts ...MemOption) {
	if !k.live() {
		return
	}
	defer k.hold()()
	if k.zeroTensor("Copy", src, dst) || !src.ok("Copy") || !dst.ok("Copy") {
		return
	}
	if src.k != k || dst.k != k {
		k.errorf("Copy: a tensor belongs to another kernel")
		return
	}
	if src.ident || dst.ident {
		k.errorf("Copy: an identity tensor has no memory; its elements are coordinates (use Coord or ElemLess)")
		return
	}
	if src.ptr.elem != dst.ptr.elem {
		k.errorf("Copy: element types differ: %s and %s", src.ptr.elem, dst.ptr.elem)
		return
	}
	n := src.Size()
	if n != dst.Size() {
		k.errorf("Copy: sizes differ: %d and %d elements", n, dst.Size())
		return
	}
	if n == 0 || src.hasRuntimeExtent() || dst.hasRuntimeExtent() {
		k.errorf("Copy: a tensor has a runtime extent; tile it to a static shape first (LocalTile)")
		return
	}
	if src.IsFragment() && dst.IsFragment() {
		for i := range src.regs {
			k.Set(dst.regs[i], src.regs[i])
		}
		return
	}
	sl, dl := dropUnit(src.elemLeaves()), dropUnit(dst.elemLeaves())
	vec := copyVector(src, sl, dst, dl)
	if src.bounded() || dst.bounded() {
		// The whole tensor in bounds (the common case of a full tile): no predicates.
		all := src.allInBounds(sl).And(dst.allInBounds(dl))
		k.If(all, func() { k.copyElems(src, sl, dst, dl, vec, false, opts) }).Else(func() {
			k.copyElems(src, sl, dst, dl, vec, true, opts)
		})
		return
	}
	k.copyElems(src, sl, dst, dl, vec, false, opts)
}

func (k *Kernel) copyElems(src Tensor, sl []leaf, dst Tensor, dl []leaf, vec int, pred bool, opts []MemOption) {
	n := src.Size()
	for e := 0; e < n; e += vec {
		if !pred {
			k.copyGroup(src, sl, dst, dl, e, vec, opts)
			continue
		}
		in := src.inBounds(sl, e).And(src.inBounds(sl, e+vec-1)).And(dst.inBounds(dl, e)).And(dst.inBounds(dl, e+vec-1))
		if vec == 1 {
			k.If(in, func() { k.copyGroup(src, sl, dst, dl, e, 1, opts) })
			continue
		}
		k.If(in, func() { k.copyGroup(src, sl, dst, dl, e, vec, opts) }).Else(func() {
			for i := e; i < e+vec; i++ {
				ok := src.inBounds(sl, i).And(dst.inBounds(dl, i))
				k.If(ok, func() { k.copyGroup(src, sl, dst, dl, i, 1, opts) })
			}
		})
	}
}

func (t Tensor) hasRuntimeExtent() bool {
	for _, l := range t.elemLeaves() {
		if l.shape == 0 {
			return true
		}
	}
	return false
}

// copyVector returns the number of consecutive elements (a power of two) that one access
// can move for both tensors.
func copyVector(src Tensor, sl []leaf, dst Tensor, dl []leaf) int {
	eb := src.ptr.elem.Bits()
	best := 1
	for v := 2; v*eb <= 128; v *= 2 {
		if vectorOK(src, sl, v) && vectorOK(dst, dl, v) {
			best = v
		}
	}
	return best
}

// vectorOK reports whether groups of v consecutive elements are contiguous and aligned.
func vectorOK(t Tensor, ls []leaf, v int) bool {
	if t.IsFragment() {
		return true
	}
	if len(ls) == 0 || ls[0].shape%v != 0 || !ls[0].stride.static() || ls[0].stride.c != 1 {
		return false
	}
	for _, l := range ls[1:] {
		if l.stride.static() {
			if l.stride.c%int64(v) != 0 {
				return false
			}
		} else if (l.stride.c*t.k.divOf(l.stride.dyn))%int64(v) != 0 {
			return false
		}
	}
	if t.off.c%int64(v) != 0 || (t.off.dyn.k != nil && t.off.div%int64(v) != 0) {
		return false
	}
	if t.ptr.Align()%(v*t.ptr.elem.Bytes()) != 0 {
		return false
	}
	if t.swz != nil && 1<<t.swz.M < v {
		return false
	}
	return true
}

// copyGroup moves elements e..e+n-1.
func (k *Kernel) copyGroup(src Tensor, sl []leaf, dst Tensor, dl []leaf, e, n int, opts []MemOption) {
	var vals []Value
	if src.IsFragment() {
		vals = src.regs[e : e+n]
	} else {
		p := src.ptrAt(sl, e)
		if dst.IsFragment() {
			k.loadInto(p, dst.regs[e:e+n], opts)
			return
		}
		vals = make([]Value, n)
		for i := range vals {
			vals[i] = Value{k: k, t: src.ptr.elem, op: k.reg(src.ptr.elem)}
		}
		k.loadInto(p, vals, opts)
	}
	if dst.IsFragment() {
		for i, v := range vals {
			k.Set(dst.regs[e+i], v)
		}
		return
	}
	k.storeFrom(dst.ptrAt(dl, e), vals, opts)
}

// loadInto loads len(regs) consecutive elements at p into the given registers. Groups wider
// than four elements (16-bit elements by eight, 8-bit elements by eight or sixteen) are
// loaded as b32 words and unpacked: ld/st vectors have at most four elements.
func (k *Kernel) loadInto(p Ptr, regs []Value, opts []MemOption) {
	n := len(regs)
	o, ok := k.memOptions("Copy", p, opts, false)
	if !ok {
		return
	}
	if n == 1 {
		k.op("ld", o.quals(p.space, 0), memType(p.elem), regs[0].op, p.addrOperand())
		return
	}
	if n <= 4 {
		vec := make(ptx.Vec, n)
		for i, r := range regs {
			vec[i] = r.op
		}
		k.op("ld", o.quals(p.space, n), memType(p.elem), vec, p.addrOperand())
		return
	}
	per := 32 / memType(p.elem).Bits() // elements per b32 word
	words := make(ptx.Vec, n/per)
	for i := range words {
		words[i] = k.reg(ptx.B32)
	}
	k.emit(&ptx.Instr{Op: "ld", Q: o.quals(p.space, len(words)), Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{words, p.addrOperand()}})
	for i, w := range words {
		if per == 2 {
			k.op("mov", nil, ptx.B32, ptx.Vec{regs[2*i].op, regs[2*i+1].op}, w)
			continue
		}
		// Four bytes: split the word into 16-bit halves, then each half into its low and
		// high byte, zero- or sign-extended as ld.u8/ld.s8 would.
		lo, hi := k.reg(ptx.B16), k.reg(ptx.B16)
		k.op("mov", nil, ptx.B32, ptx.Vec{lo, hi}, w)
		for j, h := range []ptx.Reg{lo, hi} {
			k.unpackBytes(h, regs[4*i+2*j], regs[4*i+2*j+1])
		}
	}
}

// unpackBytes sets b0 and b1 to the low and high byte of the 16-bit h.
func (k *Kernel) unpackBytes(h ptx.Reg, b0, b1 Value) {
	eight := ptx.IntImm(ptx.U32, 8)
	if b0.t == I8 {
		t := k.reg(ptx.B16)
		k.op("shl", nil, ptx.B16, t, h, eight)
		k.op("shr", nil, ptx.S16, b0.op, t, eight)
		k.op("shr", nil, ptx.S16, b1.op, h, eight)
		return
	}
	k.op("and", nil, ptx.B16, b0.op, h, ptx.Imm{Type: ptx.B16, Bits: 0xff})
	k.op("shr", nil, ptx.U16, b1.op, h, eight)
}

// packBytes returns a 16-bit register holding the low bytes of b0 (low) and b1 (high).
func (k *Kernel) packBytes(b0, b1 Value) ptx.Reg {
	lo, hi, h := k.reg(ptx.B16), k.reg(ptx.B16), k.reg(ptx.B16)
	k.op("and", nil, ptx.B16, lo, k.byteOperand(b0), ptx.Imm{Type: ptx.B16, Bits: 0xff})
	k.op("shl", nil, ptx.B16, hi, k.byteOperand(b1), ptx.IntImm(ptx.U32, 8))
	k.op("or", nil, ptx.B16, h, lo, hi)
	return h
}

// byteOperand returns an 8-bit value as a b16 operand.
func (k *Kernel) byteOperand(v Value) ptx.Operand {
	if im, ok := v.op.(ptx.Imm); ok {
		return ptx.Imm{Type: ptx.B16, Bits: im.Bits & 0xff}
	}
	return v.op
}

// storeFrom stores vals to consecutive elements at p, packing groups wider than four into
// b32 words (see loadInto).
func (k *Kernel) storeFrom(p Ptr, vals []Value, opts []MemOption) {
	n := len(vals)
	o, ok := k.memOptions("Copy", p, opts, true)
	if !ok {
		return
	}
	if n == 1 {
		k.op("st", o.quals(p.space, 0), memType(p.elem), p.addrOperand(), k.storeOperand(vals[0]))
		return
	}
	if n <= 4 {
		vec := make(ptx.Vec, n)
		for i, v := range vals {
			vec[i] = k.storeOperand(v)
		}
		k.op("st", o.quals(p.space, n), memType(p.elem), p.addrOperand(), vec)
		return
	}
	per := 32 / memType(p.elem).Bits()
	words := make(ptx.Vec, n/per)
	for i := range words {
		w := k.reg(ptx.B32)
		var halves ptx.Vec
		if per == 2 {
			halves = ptx.Vec{k.operand(vals[2*i]), k.operand(vals[2*i+1])}
		} else {
			halves = ptx.Vec{k.packBytes(vals[4*i], vals[4*i+1]), k.packBytes(vals[4*i+2], vals[4*i+3])}
		}
		k.op("mov", nil, ptx.B32, w, halves)
		words[i] = w
	}
	k.emit(&ptx.Instr{Op: "st", Q: o.quals(p.space, len(words)), Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{p.addrOperand(), words}})
}
