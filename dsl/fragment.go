package dsl

// Element-wise arithmetic on register fragments (CuTe DSL's frg.load()/store() arithmetic):
// each operation returns a new fragment of the same shape, one instruction per element, so
// epilogues read as expressions rather than loops over registers.

// fragMap applies f to every register of a fragment.
func (t Tensor) fragMap(what string, elem Type, f func(i int, v Value) Value) Tensor {
	k := t.k
	if k == nil {
		return t
	}
	if !t.IsFragment() {
		k.errorf("%s: not a register fragment (load it with Copy into a Fragment first)", what)
		return t
	}
	u := t.clone()
	u.mma = nil
	u.ptr.elem = elem
	u.regs = make([]Value, len(t.regs))
	for i, v := range t.regs {
		u.regs[i] = f(i, v)
	}
	return u
}

// Scale returns the fragment times x (a Value of the element type or a Go number).
func (t Tensor) Scale(x any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	return t.fragMap("Scale", t.ptr.elem, func(_ int, v Value) Value { return v.Mul(x) })
}

// To returns the fragment converted element-wise to dt (see Value.To).
func (t Tensor) To(dt Type) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	return t.fragMap("To", dt, func(_ int, v Value) Value { return v.To(dt) })
}

// Add returns the element-wise sum of two fragments of one shape and type.
func (t Tensor) Add(u Tensor) Tensor { return t.zip("Add", u, Value.Add) }

// Mul returns the element-wise product of two fragments of one shape and type.
func (t Tensor) Mul(u Tensor) Tensor { return t.zip("Mul", u, Value.Mul) }

// FMA returns t*x + u element-wise (x a scalar Value or Go number, u a fragment): the
// epilogue's alpha*acc + beta*c in one instruction per element with u = c.Scale(beta).
func (t Tensor) FMA(x any, u Tensor) Tensor {
	k := t.k
	if k == nil {
		return t
	}
	defer k.hold()()
	if !u.IsFragment() || len(u.regs) != len(t.regs) {
		k.errorf("FMA: want two register fragments of one size")
		return t
	}
	return t.fragMap("FMA", t.ptr.elem, func(i int, v Value) Value {
		s, ok := k.val(x, v.t, "FMA")
		if !ok {
			return v
		}
		return k.FMA(v, s, u.regs[i])
	})
}

// Map returns f applied to every element (for operations without a fragment method); every
// result must have one type.
func (t Tensor) Map(f func(Value) Value) Tensor {
	k := t.k
	if k == nil {
		return t
	}
	defer k.hold()()
	if !t.IsFragment() {
		k.errorf("Map: not a register fragment (load it with Copy into a Fragment first)")
		return t
	}
	if f == nil {
		k.errorf("Map: nil function")
		return t
	}
	out := make([]Value, len(t.regs))
	for i, v := range t.regs {
		out[i] = f(v)
		if out[i].k != k {
			k.errorf("Map: the function's result %d is not a value of this kernel", i)
			return t
		}
		if out[i].t != out[0].t {
			k.errorf("Map: the function's results differ in type: element 0 is %s, element %d %s", out[0].t, i, out[i].t)
			return t
		}
	}
	elem := t.ptr.elem
	if len(out) > 0 {
		elem = out[0].t
	}
	return t.fragMap("Map", elem, func(i int, _ Value) Value { return out[i] })
}

func (t Tensor) zip(what string, u Tensor, op func(Value, any) Value) Tensor {
	k := t.k
	if k == nil {
		return t
	}
	defer k.hold()()
	if !u.IsFragment() || !t.IsFragment() || len(u.regs) != len(t.regs) {
		k.errorf("%s: want two register fragments of one size", what)
		return t
	}
	return t.fragMap(what, t.ptr.elem, func(i int, v Value) Value { return op(v, u.regs[i]) })
}

// LoadFragment copies a tensor into a new register fragment of its shape (Fragment + Copy;
// elements outside a partial tile's extents read as zero).
func (k *Kernel) LoadFragment(src Tensor) Tensor {
	if !k.live() {
		return Tensor{}
	}
	defer k.hold()()
	f := k.Fragment(src.ptr.elem, src)
	k.Copy(src, f)
	return f
}

// CopyPredicated is Copy element by element, each access predicated on the tensors'
// runtime extents, with no whole-tile or whole-vector fast path: the least code, for code
// that has already branched on whether its whole tile is inside (an epilogue's edge blocks).
func (k *Kernel) CopyPredicated(src, dst Tensor, opts ...MemOption) {
	if !k.live() {
		return
	}
	defer k.hold()()
	if k.zeroTensor("CopyPredicated", src, dst) || !src.ok("CopyPredicated") || !dst.ok("CopyPredicated") {
		return
	}
	if src.k != k || dst.k != k || src.ident || dst.ident || src.ptr.elem != dst.ptr.elem || src.Size() != dst.Size() ||
		src.hasRuntimeExtent() || dst.hasRuntimeExtent() || (src.IsFragment() && dst.IsFragment()) || src.Size() == 0 {
		k.Copy(src, dst, opts...) // Copy reports what is wrong
		return
	}
	if !src.bounded() && !dst.bounded() {
		k.Copy(src, dst, opts...)
		return
	}
	sl, dl := dropUnit(src.elemLeaves()), dropUnit(dst.elemLeaves())
	k.copyElems(src, sl, dst, dl, 1, true, opts)
}

// SelectPtr returns a if cond (a Bool) holds, else b: two pointers to one element type in
// one state space; the result keeps the alignment both have.
func (k *Kernel) SelectPtr(cond Value, a, b Ptr) Ptr {
	if !k.live() {
		return Ptr{}
	}
	if !k.checkPtr(a, "SelectPtr") || !k.checkPtr(b, "SelectPtr") {
		return a
	}
	if a.elem != b.elem || a.space != b.space {
		k.errorf("SelectPtr: pointers to %s in %s and %s in %s", a.elem, spaceName(a.space), b.elem, spaceName(b.space))
		return a
	}
	p := a
	p.addr = k.Select(cond, a.addrPlusOff(), b.addrPlusOff())
	p.off = 0
	p.align = int(gcd(int64(a.Align()), int64(b.Align())))
	if a.off != 0 || b.off != 0 {
		p.align = int(gcd(int64(p.align), gcd(a.off, b.off)))
	}
	return p
}
