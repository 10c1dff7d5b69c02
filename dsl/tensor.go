package dsl

import (
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// A Tensor is a pointer plus a layout, as in CuTe: element c lives at ptr + layout(c).
//
// Shapes are static (Go ints); strides are static, or a static factor times a dynamic Value
// (a runtime leading dimension); coordinates may be static or dynamic. A tensor remembers,
// for each element, its coordinate in the tensor it was cut from (CuTe's identity tensor),
// so tiles of a tensor with runtime extents (MakeTensorDyn) predicate their accesses.
//
// Tiling (LocalTile, ZippedDivide), partitioning over threads (LocalPartition, PartitionByTV)
// and slicing are layout algebra on the static parts; offsets that depend on dynamic
// coordinates become index arithmetic in the kernel. Register fragments (Fragment) are
// tensors whose elements are virtual registers.
type Tensor struct {
	k      *Kernel
	ptr    Ptr      // base pointer; for register fragments, elem only
	modes  [][]leaf // top-level modes, each a list of leaves, colexicographic
	off    offset   // element offset from ptr (kept separate for swizzled shared memory)
	origin []coord  // per original mode: the coordinate of element 0
	bounds []Value  // per original mode: the runtime extent, zero Value when unbounded
	swz    *layout.Swizzle
	regs   []Value   // register fragments: the element registers, colexicographic
	ident  bool      // an identity tensor (IdentityTensor): no memory, elements are coordinates
	mma    *fragInfo // register fragments of an MMA operand (PartitionFragmentA/B/C)
	ldsm   *ldsmInfo // the rows an ldmatrix copy's lanes supply (ThrCopy.PartitionS)
}

// leaf is one extent of a mode: shape elements at stride, and the coordinate stride it
// contributes in original mode m (for bounds predicates).
type leaf struct {
	shape   int
	stride  stride
	mode    int
	cstride int
}

// stride is c, or c times a dynamic Value.
type stride struct {
	c   int64
	dyn Value // zero Value: static
}

func (s stride) static() bool { return s.dyn.k == nil }

// offset is a static element count plus an optional dynamic I32 Value.
type offset struct {
	c   int64
	dyn Value
	div int64 // a known divisor of dyn (>= 1)
}

// coord is a static coordinate plus an optional dynamic I32 part.
type coord struct {
	c   int64
	dyn Value
}

// Tensor accessors.

// Rank returns the number of top-level modes.
func (t Tensor) Rank() int { return len(t.modes) }

// Size returns the number of elements.
func (t Tensor) Size() int {
	n := 1
	for _, m := range t.modes {
		for _, l := range m {
			n *= l.shape
		}
	}
	return n
}

// Shape returns the extent of each top-level mode.
func (t Tensor) Shape() []int {
	out := make([]int, len(t.modes))
	for i, m := range t.modes {
		out[i] = 1
		for _, l := range m {
			out[i] *= l.shape
		}
	}
	return out
}

// Elem returns the element type.
func (t Tensor) Elem() Type { return t.ptr.elem }

// IsFragment reports whether the tensor lives in registers.
func (t Tensor) IsFragment() bool { return t.regs != nil }

// MakeTensor views memory at p through a static layout (strides in elements).
func (k *Kernel) MakeTensor(p Ptr, l layout.Layout) Tensor {
	if !k.live() {
		return Tensor{}
	}
	if !k.checkPtr(p, "MakeTensor") {
		return k.badTensor(p.elem)
	}
	t := Tensor{k: k, ptr: p}
	for i := 0; i < l.Rank(); i++ {
		m, err := l.Mode(i)
		if err != nil {
			k.errorf("MakeTensor: %v", err)
			return k.badTensor(p.elem)
		}
		t.modes = append(t.modes, leavesOf(m, i))
		t.origin = append(t.origin, coord{})
		t.bounds = append(t.bounds, Value{})
	}
	return t
}

// MakeSwizzledTensor views shared memory at p through layout l whose offsets are then
// permuted by the swizzle (CuTe's ComposedLayout<Swizzle, 0, Layout>), to avoid bank
// conflicts.
func (k *Kernel) MakeSwizzledTensor(p Ptr, sw layout.Swizzle, l layout.Layout) Tensor {
	if !k.live() {
		return Tensor{}
	}
	t := k.MakeTensor(p, l)
	if t.k == nil || t.modes == nil {
		return t
	}
	if p.space != ptx.SpaceShared {
		k.errorf("MakeSwizzledTensor: swizzled layouts apply to shared memory, got %s", spaceName(p.space))
		return t
	}
	t.swz = &sw
	return t
}

func spaceName(s ptx.Space) string {
	if s == ptx.SpaceGeneric {
		return "generic"
	}
	return s.String()
}

func leavesOf(m layout.Layout, mode int) []leaf {
	shape, st := m.FlatShape(), m.FlatStride()
	out := make([]leaf, 0, len(shape))
	cs := 1
	for j := range shape {
		out = append(out, leaf{shape: shape[j], stride: stride{c: int64(st[j])}, mode: mode, cstride: cs})
		cs *= shape[j]
	}
	return out
}

// MakeTensorDyn views global memory at p as a tensor with runtime extents and strides:
// shape and strides give one entry per mode, each a Go int or an integer Value. Modes with a
// runtime extent must be tiled (LocalTile) before use; accesses to the tiles are predicated
// on the extents. A tensor's run-time offsets are 32-bit signed, as CuTe's: an element offset
// of 2^31 or more wraps (start such a tensor at a 64-bit base, Ptr.At with Value.MulWide, as
// the library's kernels do per tile), and a 64-bit Value as an extent, stride or coordinate
// is a Build error rather than cut to 32 bits.
func (k *Kernel) MakeTensorDyn(p Ptr, shape, strides []any) Tensor {
	if !k.live() {
		return Tensor{}
	}
	defer k.hold()()
	if !k.checkPtr(p, "MakeTensorDyn") {
		return k.badTensor(p.elem)
	}
	if len(shape) != len(strides) || len(shape) == 0 {
		k.errorf("MakeTensorDyn: %d extents and %d strides; give one of each per mode", len(shape), len(strides))
		return k.badTensor(p.elem)
	}
	t := Tensor{k: k, ptr: p}
	for i := range shape {
		l := leaf{mode: i, cstride: 1}
		var bound Value
		switch s := shape[i].(type) {
		case Value:
			if !k.own(s, "MakeTensorDyn") || !isInt(s.t) {
				k.errorf("MakeTensorDyn: extent %d must be an integer Value or Go int", i)
				return k.badTensor(p.elem)
			}
			if s.IsConst() {
				l.shape = int(constInt(s))
			} else if k.fits32(s, "MakeTensorDyn", "extent") {
				bound = s.To(I32)
			} else {
				return k.badTensor(p.elem)
			}
		case int:
			l.shape = s
		default:
			k.errorf("MakeTensorDyn: extent %d must be an integer Value or Go int, got %T", i, shape[i])
			return k.badTensor(p.elem)
		}
		if l.shape < 0 {
			k.errorf("MakeTensorDyn: extent %d is negative (%d)", i, l.shape)
			return k.badTensor(p.elem)
		}
		st, ok := k.strideOf(strides[i], "MakeTensorDyn")
		if !ok {
			return k.badTensor(p.elem)
		}
		l.stride = st
		t.modes = append(t.modes, []leaf{l})
		t.origin = append(t.origin, coord{})
		t.bounds = append(t.bounds, bound)
	}
	return t
}

func (k *Kernel) strideOf(x any, what string) (stride, bool) {
	switch s := x.(type) {
	case int:
		return stride{c: int64(s)}, true
	case Value:
		if !k.own(s, what) || !isInt(s.t) {
			k.errorf("%s: a stride must be an integer Value or Go int", what)
			return stride{}, false
		}
		if s.IsConst() {
			return stride{c: constInt(s)}, true
		}
		if !k.fits32(s, what, "stride") {
			return stride{}, false
		}
		d := s.To(I32)
		if div := k.divOf(s); div > 1 && d.op != s.op {
			k.Assume(d, int(div)) // the conversion keeps what Assume said of s
		}
		return stride{c: 1, dyn: d}, true
	}
	k.errorf("%s: a stride must be an integer Value or Go int, got %T", what, x)
	return stride{}, false
}

func (k *Kernel) badTensor(elem Type) Tensor {
	return Tensor{k: k, ptr: Ptr{k: k, addr: k.poison(U64), elem: elem}}
}

func (t Tensor) ok(what string) bool {
	if t.k == nil {
		return false
	}
	if t.modes == nil {
		// Already reported when it was made.
		return false
	}
	return true
}

// clone copies the slices so derived tensors never share mutable state.
func (t Tensor) clone() Tensor {
	u := t
	u.modes = make([][]leaf, len(t.modes))
	for i, m := range t.modes {
		u.modes[i] = append([]leaf(nil), m...)
	}
	u.origin = append([]coord(nil), t.origin...)
	u.bounds = append([]Value(nil), t.bounds...)
	return u
}
