package dsl

import (
	"github.com/kgen-dev/kgen/ptx"
)

// coordOf converts a Go int or an integer Value to a coordinate.
func (k *Kernel) coordOf(x any, what string) (coord, bool) {
	switch c := x.(type) {
	case int:
		return coord{c: int64(c)}, true
	case Value:
		if !k.own(c, what) {
			return coord{}, false
		}
		if !isInt(c.t) {
			k.errorf("%s: coordinate is %s, not an integer", what, c.t)
			return coord{}, false
		}
		if c.IsConst() {
			return coord{c: constInt(c)}, true
		}
		if !k.fits32(c, what, "coordinate") {
			return coord{}, false
		}
		return coord{dyn: c.To(I32)}, true
	}
	k.errorf("%s: coordinate must be a Go int or an integer Value, got %T", what, x)
	return coord{}, false
}

// fits32 reports whether run-time value v (a coordinate, extent or stride) may take part in
// a tensor's offsets, which are 32-bit signed: a 64-bit Value is a Build error naming what,
// not a silent truncation to its low 32 bits.
func (k *Kernel) fits32(v Value, what, role string) bool {
	if v.t.Bits() == 64 {
		k.errorf("%s: the %s is a %s Value, but tensor offsets are 32-bit signed (its high bits would be dropped): convert it with To(dsl.I32) where it fits, or start the tensor at a 64-bit base (Ptr.At with the large part)", what, role, v.t)
		return false
	}
	return true
}

// advance moves the tensor's origin by coordinate c along the leaves ls (a colexicographic
// index into them): offset += ls(c), and the coordinates move with it.
func (t *Tensor) advance(ls []leaf, c coord) {
	k := t.k
	if c.dyn.k == nil && c.c == 0 {
		return
	}
	// Decompose c over the leaves (the last takes the remainder, as CuTe's idx2crd does).
	rem := c
	for i, l := range ls {
		var ci coord
		last := i == len(ls)-1 || l.shape == 0
		if last {
			ci, rem = rem, coord{}
		} else {
			ci = k.cmod(rem, int64(l.shape))
			rem = k.cdiv(rem, int64(l.shape))
		}
		t.addOffset(ci, l.stride)
		o := &t.origin[l.mode]
		*o = k.caddMul(*o, ci, int64(l.cstride))
		if last {
			break
		}
	}
}

// addOffset adds c*s elements to the tensor's offset.
func (t *Tensor) addOffset(c coord, s stride) {
	k := t.k
	// Static part times static stride.
	if s.static() {
		t.off.c += c.c * s.c
		if c.dyn.k != nil {
			t.off = k.offAdd(t.off, c.dyn.Mul(k.Const(I32, s.c)), abs64(s.c))
		}
		return
	}
	// Dynamic stride: (c.c + c.dyn) * s.c * s.dyn.
	var cv Value
	switch {
	case c.dyn.k == nil:
		cv = k.Const(I32, c.c*s.c)
	default:
		cv = c.dyn.Add(c.c).Mul(s.c)
	}
	if cv.IsConst() && constInt(cv) == 0 {
		return
	}
	t.off = k.offAdd(t.off, cv.Mul(s.dyn), k.divOf(s.dyn)*abs64(s.c))
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func (k *Kernel) offAdd(o offset, v Value, div int64) offset {
	if div <= 0 {
		div = 1
	}
	if v.IsConst() {
		o.c += constInt(v)
		return o
	}
	if o.dyn.k == nil {
		return offset{c: o.c, dyn: v, div: div}
	}
	return offset{c: o.c, dyn: o.dyn.Add(v), div: gcd(o.div, div)}
}

func gcd(a, b int64) int64 {
	a, b = abs64(a), abs64(b)
	for b != 0 {
		a, b = b, a%b
	}
	if a == 0 {
		return 1 << 30
	}
	return a
}

func (k *Kernel) cmod(c coord, n int64) coord {
	if c.dyn.k == nil {
		return coord{c: c.c % n}
	}
	return coord{dyn: k.imod(c.dyn.Add(c.c), n)}
}

func (k *Kernel) cdiv(c coord, n int64) coord {
	if c.dyn.k == nil {
		return coord{c: c.c / n}
	}
	return coord{dyn: k.idiv(c.dyn.Add(c.c), n)}
}

func (k *Kernel) caddMul(a, b coord, f int64) coord {
	r := coord{c: a.c + b.c*f, dyn: a.dyn}
	if b.dyn.k != nil {
		x := b.dyn.Mul(k.Const(I32, f))
		if r.dyn.k == nil {
			r.dyn = x
		} else {
			r.dyn = r.dyn.Add(x)
		}
	}
	return r
}

// idiv and imod divide a non-negative I32 by a constant, with shifts for powers of two.
func (k *Kernel) idiv(v Value, n int64) Value {
	if n == 1 {
		return v
	}
	if n&(n-1) == 0 {
		return v.To(U32).Shr(uint32(log2(n))).To(I32)
	}
	return v.To(U32).Div(uint32(n)).To(I32)
}

func (k *Kernel) imod(v Value, n int64) Value {
	if n == 1 {
		return k.Const(I32, 0)
	}
	if n&(n-1) == 0 {
		return v.And(int32(n - 1))
	}
	return v.To(U32).Rem(uint32(n)).To(I32)
}

func log2(n int64) int {
	r := 0
	for n > 1 {
		n >>= 1
		r++
	}
	return r
}

// divOf returns a known divisor of v (from Assume), or 1.
func (k *Kernel) divOf(v Value) int64 {
	if v.IsConst() {
		c := abs64(constInt(v))
		if c == 0 {
			return 1 << 30
		}
		return c
	}
	if r, ok := v.op.(ptx.Reg); ok {
		if d, ok := k.divs[r]; ok {
			return d
		}
	}
	return 1
}

// Assume records that the runtime value v is a multiple of n (like CuTe's assume or
// divisibility hints), so that tensors with v as a stride can use vector accesses.
func (k *Kernel) Assume(v Value, multipleOf int) Value {
	if !k.live() {
		return Value{}
	}
	if !k.own(v, "Assume") {
		return v
	}
	if !isInt(v.t) || multipleOf <= 0 {
		k.errorf("Assume: want an integer Value and a positive divisor, got %s and %d", v.t, multipleOf)
		return v
	}
	if r, ok := v.op.(ptx.Reg); ok {
		k.divs[r] = int64(multipleOf)
	}
	return v
}
