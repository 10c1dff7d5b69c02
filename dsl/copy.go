package dsl

import (
	"github.com/kgen-dev/kgen/ptx"
)

// Copy copies src to dst, element i to element i in each tensor's colexicographic order.
// Both have the same element type and size; either may be a register fragment. It uses the
// widest access both layouts and the known alignments allow (up to 128 bits: vectors of
// consecutive elements, 16-bit elements packed in pairs) and predicates the accesses on the
// runtime extents of either tensor: whole vectors in bounds take the vector path, the others
// fall back to element-wise accesses. Elements of a fragment whose source is out of bounds
// keep their value.
func (k *Kernel) Copy(src, dst Tensor, opts ...MemOption) {
	defer k.hold()()
	if !src.ok("Copy") || !dst.ok("Copy") {
		return
	}
	if src.k != k || dst.k != k {
		k.errorf("Copy: a tensor belongs to another kernel")
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
	for v := 2; v*eb <= 128 && v <= 8; v *= 2 {
		if eb < 16 && v > 4 { // 8-bit elements: at most v4 of b8 without packing
			break
		}
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

// loadInto loads len(regs) consecutive elements at p into the given registers, packing
// 16-bit elements in pairs when the group is wider than four.
func (k *Kernel) loadInto(p Ptr, regs []Value, opts []MemOption) {
	n := len(regs)
	o, ok := k.memOptions("Copy", p, opts, false)
	if !ok {
		return
	}
	if n == 1 {
		k.emit(&ptx.Instr{Op: "ld", Q: o.quals(p.space, 0), Types: []ptx.Type{memType(p.elem)}, Args: []ptx.Operand{regs[0].op, p.addrOperand()}})
		return
	}
	if n <= 4 {
		vec := make(ptx.Vec, n)
		for i, r := range regs {
			vec[i] = r.op
		}
		k.emit(&ptx.Instr{Op: "ld", Q: o.quals(p.space, n), Types: []ptx.Type{memType(p.elem)}, Args: []ptx.Operand{vec, p.addrOperand()}})
		return
	}
	// 16-bit elements, 8 per 128 bits: load b32 words and unpack.
	words := make(ptx.Vec, n/2)
	for i := range words {
		words[i] = k.reg(ptx.B32)
	}
	k.emit(&ptx.Instr{Op: "ld", Q: o.quals(p.space, n/2), Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{words, p.addrOperand()}})
	for i, w := range words {
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{ptx.Vec{regs[2*i].op, regs[2*i+1].op}, w}})
	}
}

// storeFrom stores vals to consecutive elements at p.
func (k *Kernel) storeFrom(p Ptr, vals []Value, opts []MemOption) {
	n := len(vals)
	o, ok := k.memOptions("Copy", p, opts, true)
	if !ok {
		return
	}
	if n == 1 {
		k.emit(&ptx.Instr{Op: "st", Q: o.quals(p.space, 0), Types: []ptx.Type{memType(p.elem)}, Args: []ptx.Operand{p.addrOperand(), k.storeOperand(vals[0])}})
		return
	}
	if n <= 4 {
		vec := make(ptx.Vec, n)
		for i, v := range vals {
			vec[i] = k.storeOperand(v)
		}
		k.emit(&ptx.Instr{Op: "st", Q: o.quals(p.space, n), Types: []ptx.Type{memType(p.elem)}, Args: []ptx.Operand{p.addrOperand(), vec}})
		return
	}
	words := make(ptx.Vec, n/2)
	for i := range words {
		w := k.reg(ptx.B32)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{w, ptx.Vec{k.operand(vals[2*i]), k.operand(vals[2*i+1])}}})
		words[i] = w
	}
	k.emit(&ptx.Instr{Op: "st", Q: o.quals(p.space, n/2), Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{p.addrOperand(), words}})
}
