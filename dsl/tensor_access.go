package dsl

import (
	"github.com/kgen-dev/kgen/ptx"
)

// elemLeaves returns every leaf, flattened over the modes.
func (t Tensor) elemLeaves() []leaf {
	var out []leaf
	for _, m := range t.modes {
		out = append(out, m...)
	}
	return out
}

// unravel returns the per-leaf coordinates of element e (colexicographic).
func unravel(ls []leaf, e int) []int {
	c := make([]int, len(ls))
	for i, l := range ls {
		if l.shape == 0 {
			c[i] = e
			return c
		}
		c[i] = e % l.shape
		e /= l.shape
	}
	return c
}

// elemOffset returns the offset of element e relative to the tensor's offset: a static part
// and a dynamic part (from dynamic strides).
func (t Tensor) elemOffset(ls []leaf, e int) offset {
	k := t.k
	o := offset{div: 1 << 30}
	for i, c := range unravel(ls, e) {
		if c == 0 {
			continue
		}
		s := ls[i].stride
		if s.static() {
			o.c += int64(c) * s.c
			continue
		}
		o = k.offAdd(o, s.dyn.Mul(int32(int64(c)*s.c)), k.divOf(s.dyn)*abs64(int64(c)*s.c))
	}
	return o
}

// ptrAt returns a pointer to element e, applying the swizzle.
func (t Tensor) ptrAt(ls []leaf, e int) Ptr {
	k := t.k
	eo := t.elemOffset(ls, e)
	total := offset{c: t.off.c + eo.c, dyn: t.off.dyn, div: t.off.div}
	if eo.dyn.k != nil {
		total = k.offAdd(total, eo.dyn, eo.div)
	}
	return t.addrOf(total)
}

// addrOf turns an element offset into a pointer.
func (t Tensor) addrOf(o offset) Ptr {
	p := t.ptr
	if t.swz == nil {
		p = p.atConst(o.c)
		if o.dyn.k != nil {
			p = p.At(o.dyn)
		}
		return p
	}
	sw := *t.swz
	if o.dyn.k == nil {
		return p.atConst(int64(sw.Apply(int(o.c))))
	}
	// The swizzle reads and writes bits below M+S+B (M+B for S < 0): a constant multiple of
	// 2^(M+S+B) passes through it, and stays in the address as an immediate offset.
	top := sw.M + sw.B + max(sw.S, 0)
	high := (o.c >> top) << top
	p = p.atConst(high)
	x := o.dyn.Add(int32(o.c - high))
	// Swizzle<B,M,S>: x ^ ((x >> S) & (((1<<B)-1) << M)) for S > 0 (the mask moves down).
	mask := int32(((1 << sw.B) - 1) << sw.M)
	var y Value
	if sw.S >= 0 {
		y = x.Xor(x.To(U32).Shr(uint32(sw.S)).To(I32).And(mask))
	} else {
		y = x.Xor(x.Shl(uint32(-sw.S)).And(mask << (-sw.S)))
	}
	return p.At(y)
}

// coordOfElem returns element e's coordinate in original mode m.
func (t Tensor) coordOfElem(ls []leaf, e int, m int) coord {
	c := t.origin[m]
	for i, x := range unravel(ls, e) {
		if ls[i].mode == m {
			c.c += int64(x * ls[i].cstride)
		}
	}
	return c
}

// inBounds returns a Bool that is true when element e lies inside every runtime extent, or
// a constant true when the tensor has none.
func (t Tensor) inBounds(ls []leaf, e int) Value {
	k := t.k
	p := k.Const(Bool, true)
	for m, b := range t.bounds {
		if b.k == nil {
			continue
		}
		c := t.coordOfElem(ls, e, m)
		var cv Value
		if c.dyn.k != nil {
			cv = c.dyn.Add(int32(c.c))
		} else {
			cv = k.Const(I32, c.c)
		}
		in := cv.Lt(b)
		if c.dyn.k != nil || c.c != 0 {
			in = in.And(cv.Ge(int32(0)))
		}
		p = p.And(in)
	}
	return p
}

// allInBounds returns a Bool that is true when every element lies inside the runtime
// extents: per mode, the origin and the largest coordinate any element reaches.
func (t Tensor) allInBounds(ls []leaf) Value {
	k := t.k
	p := k.Const(Bool, true)
	for m, b := range t.bounds {
		if b.k == nil {
			continue
		}
		lo, hi := t.origin[m], t.origin[m]
		for _, l := range ls {
			if l.mode != m {
				continue
			}
			if l.cstride >= 0 {
				hi.c += int64((l.shape - 1) * l.cstride)
			} else {
				lo.c += int64((l.shape - 1) * l.cstride)
			}
		}
		val := func(c coord) Value {
			if c.dyn.k != nil {
				return c.dyn.Add(int32(c.c))
			}
			return k.Const(I32, c.c)
		}
		p = p.And(val(hi).Lt(b)).And(val(lo).Ge(int32(0)))
	}
	return p
}

// bounded reports whether the tensor carries runtime extents.
func (t Tensor) bounded() bool {
	for _, b := range t.bounds {
		if b.k != nil {
			return true
		}
	}
	return false
}

// At returns a pointer to the element at the given coordinate (one Go int or integer Value
// per top-level mode; a single coordinate indexes the tensor colexicographically).
func (t Tensor) At(coords ...any) Ptr {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("At") {
		return t.ptr
	}
	if t.IsFragment() {
		k.errorf("At: a register fragment has no address; use Get and Set")
		return t.ptr
	}
	if t.ident {
		k.errorf("At: an identity tensor has no memory; its elements are coordinates (use Coord or ElemLess)")
		return t.ptr
	}
	u := t.clone()
	switch {
	case len(coords) == 1 && len(t.modes) != 1:
		c, ok := k.coordOf(coords[0], "At")
		if !ok {
			return t.ptr
		}
		u.advance(t.elemLeaves(), c)
	case len(coords) == len(t.modes):
		for m := range t.modes {
			c, ok := k.coordOf(coords[m], "At")
			if !ok {
				return t.ptr
			}
			u.advance(t.modes[m], c)
		}
	default:
		k.errorf("At: tensor has rank %d; got %d coordinates", len(t.modes), len(coords))
		return t.ptr
	}
	return u.addrOf(u.off)
}

// Load reads the element at the coordinate (see At).
func (t Tensor) Load(coords ...any) Value { return t.k.Load(t.At(coords...)) }

// Store writes v to the element at the coordinate (see At).
func (t Tensor) Store(v any, coords ...any) { t.k.Store(t.At(coords...), v) }

// MaxFragment is the most elements a register fragment may hold. A thread has at most 255
// 32-bit registers; larger fragments spill to local memory, and ones beyond this are a
// mistake (a whole tensor where a tile was meant).
const MaxFragment = 4096

// Fragment allocates a register tensor of elem values with the shape of like (CuTe's
// make_fragment_like), zero-initialised (for every element type, fp8 included: the bit
// pattern 0).
func (k *Kernel) Fragment(elem Type, like Tensor) Tensor {
	if !k.live() {
		return Tensor{}
	}
	defer k.hold()()
	if like.k != k {
		k.errorf("Fragment: the tensor belongs to another kernel")
		return k.badTensor(elem)
	}
	n := 1
	for _, m := range like.modes {
		for _, l := range m {
			if l.shape > 0 && n > MaxFragment/l.shape {
				k.errorf("Fragment: the tensor has more than %d elements (MaxFragment); a fragment lives in one thread's registers, so tile the tensor first", MaxFragment)
				return k.badTensor(elem)
			}
			n *= max(l.shape, 1)
		}
	}
	f := Tensor{k: k, ptr: Ptr{k: k, elem: elem, space: ptx.SpaceReg}}
	cs := 1
	for _, m := range like.modes {
		var mode []leaf
		for _, l := range m {
			if l.shape == 0 {
				k.errorf("Fragment: the tensor has a runtime extent; tile it first")
				return k.badTensor(elem)
			}
			mode = append(mode, leaf{shape: l.shape, stride: stride{c: int64(cs)}, mode: 0, cstride: cs})
			cs *= l.shape
		}
		f.modes = append(f.modes, mode)
	}
	f.origin = []coord{{}}
	f.bounds = []Value{{}}
	f.regs = make([]Value, n)
	for i := range f.regs {
		f.regs[i] = k.Var(elem, 0)
	}
	return f
}

// Get returns element i (colexicographic, static) of a register fragment.
func (t Tensor) Get(i int) Value {
	k := t.k
	if !t.IsFragment() {
		if k != nil {
			k.errorf("Get: not a register fragment (use Load)")
			return k.poison(t.ptr.elem)
		}
		return Value{}
	}
	if i < 0 || i >= len(t.regs) {
		k.errorf("Get: index %d out of range [0, %d)", i, len(t.regs))
		return k.poison(t.ptr.elem)
	}
	return t.regs[i]
}

// Set assigns element i (static) of a register fragment.
func (t Tensor) Set(i int, v any) {
	k := t.k
	if k == nil {
		return
	}
	if !t.IsFragment() {
		k.errorf("Set: not a register fragment (use Store)")
		return
	}
	if i < 0 || i >= len(t.regs) {
		k.errorf("Set: index %d out of range [0, %d)", i, len(t.regs))
		return
	}
	k.Set(t.regs[i], v)
}
