package dsl

import "github.com/kgen-dev/kgen/ptx"

// IdentityTensor returns CuTe's identity tensor (make_identity_tensor) of the given shape:
// one extent per mode, each a Go int or an integer Value (a runtime extent, which must be
// tiled before use, as with MakeTensorDyn). It has no memory: the element at coordinate c is
// c itself. Tile and partition it exactly as the data tensor of the same shape (LocalTile,
// ZippedDivide/Tile, LocalPartition, PartitionByTV, Slice) and element i of the result holds
// the coordinate, in the whole tensor, of element i of the data tensor's result: read it
// with Coord, or compare it with the extents with ElemLess to predicate a partial tile.
//
// Copy predicates partial tiles by itself; identity tensors are for the code around it
// (element-wise math, epilogues, custom loads).
func (k *Kernel) IdentityTensor(shape ...any) Tensor {
	if !k.live() {
		return Tensor{}
	}
	defer k.hold()()
	if len(shape) == 0 {
		k.errorf("IdentityTensor: give one extent per mode")
		return k.badTensor(I32)
	}
	t := Tensor{k: k, ptr: Ptr{k: k, addr: Value{k: k, t: U64, op: ptx.IntImm(ptx.U64, 0)}, elem: I32, space: ptx.SpaceReg}, ident: true}
	for i, x := range shape {
		// Strides are zero: the tensor has no offsets, only coordinates.
		l := leaf{mode: i, cstride: 1}
		switch s := x.(type) {
		case int:
			l.shape = s
		case Value:
			if !k.own(s, "IdentityTensor") {
				return k.badTensor(I32)
			}
			if !isInt(s.t) {
				k.errorf("IdentityTensor: extent %d is %s, not an integer", i, s.t)
				return k.badTensor(I32)
			}
			if s.IsConst() {
				l.shape = int(constInt(s))
			}
		default:
			k.errorf("IdentityTensor: extent %d must be a Go int or an integer Value, got %T", i, x)
			return k.badTensor(I32)
		}
		if l.shape < 0 {
			k.errorf("IdentityTensor: extent %d is negative (%d)", i, l.shape)
			return k.badTensor(I32)
		}
		t.modes = append(t.modes, []leaf{l})
		t.origin = append(t.origin, coord{})
		t.bounds = append(t.bounds, Value{})
	}
	return t
}

// IsIdentity reports whether the tensor is an identity tensor (IdentityTensor) or was cut
// from one.
func (t Tensor) IsIdentity() bool { return t.ident }

// Coord returns the coordinate of element i (colexicographic, static) in the tensor this one
// was cut from, one I32 Value per mode of that tensor. For an identity tensor this is the
// element itself. Works on any tensor in memory too (the coordinate its tiling tracks); a
// register fragment has none.
func (t Tensor) Coord(i int) []Value {
	k := t.k
	if k == nil {
		return nil
	}
	defer k.hold()()
	if !t.ok("Coord") {
		return k.poisons(len(t.origin))
	}
	if t.IsFragment() {
		k.errorf("Coord: a register fragment has no coordinates; take them from the tensor it was made like")
		return k.poisons(len(t.origin))
	}
	if i < 0 || i >= t.Size() && !t.hasRuntimeExtent() {
		k.errorf("Coord: index %d out of range [0, %d)", i, t.Size())
		return k.poisons(len(t.origin))
	}
	ls := t.elemLeaves()
	out := make([]Value, len(t.origin))
	for m := range out {
		c := t.coordOfElem(ls, i, m)
		if c.dyn.k != nil {
			out[m] = c.dyn.Add(int32(c.c))
		} else {
			out[m] = k.Const(I32, c.c)
		}
	}
	return out
}

// ElemLess returns a Bool that is true when every coordinate of element i (see Coord) is
// less than the matching extent (CuTe's elem_less(coord, shape)): the bounds predicate of a
// partial tile. extents gives one Go int or integer Value per mode of the original tensor.
// Coordinates of tiles are never negative, so this is the whole bounds check.
func (t Tensor) ElemLess(i int, extents ...any) Value {
	k := t.k
	if k == nil {
		return Value{}
	}
	defer k.hold()()
	if t.ok("ElemLess") && len(extents) != len(t.origin) {
		k.errorf("ElemLess: the tensor's coordinates have %d modes; got %d extents", len(t.origin), len(extents))
		return k.poison(Bool)
	}
	c := t.Coord(i)
	p := k.Const(Bool, true)
	for m, x := range extents {
		var b Value
		switch e := x.(type) {
		case int:
			b = k.Const(I32, e)
		case Value:
			if !k.own(e, "ElemLess") {
				return k.poison(Bool)
			}
			if !isInt(e.t) {
				k.errorf("ElemLess: extent %d is %s, not an integer", m, e.t)
				return k.poison(Bool)
			}
			if !k.fits32(e, "ElemLess", "extent") {
				return k.poison(Bool)
			}
			b = e.To(I32)
		default:
			k.errorf("ElemLess: extent %d must be a Go int or an integer Value, got %T", m, x)
			return k.poison(Bool)
		}
		if m < len(c) {
			p = p.And(c[m].Lt(b))
		}
	}
	return p
}

func (k *Kernel) poisons(n int) []Value { return k.poisonValues(I32, n) }

// maxPoisonValues bounds the values an operation returns for a wrong element count (an
// error recorded): enough for a caller's loop over a small mistaken count, never an
// allocation of a wild one (2^40, or a negative count).
const maxPoisonValues = 64

// poisonValues returns n poisoned values of type t (0 when n is negative, at most
// maxPoisonValues), for an operation that recorded an error.
func (k *Kernel) poisonValues(t Type, n int) []Value {
	out := make([]Value, min(max(n, 0), maxPoisonValues))
	for i := range out {
		out[i] = k.poison(t)
	}
	return out
}
