package dsl

import (
	"fmt"

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
// Tiling (LocalTile, ZippedDivide), partitioning over threads (PartitionTV, LocalPartition)
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
	regs   []Value // register fragments: the element registers, colexicographic
	ident  bool    // an identity tensor (IdentityTensor): no memory, elements are coordinates
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
// on the extents.
func (k *Kernel) MakeTensorDyn(p Ptr, shape, strides []any) Tensor {
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
			} else {
				bound = s.To(I32)
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

// splitMode divides the leaves of one mode by t (logical_divide by t:1): the first t
// elements' leaves, and the rest. Shapes must divide as CuTe requires.
func splitMode(m []leaf, t int) (tile, rest []leaf, err error) {
	if t <= 0 {
		return nil, nil, fmt.Errorf("tile extent %d must be positive", t)
	}
	n := t
	for i, l := range m {
		switch {
		case n == 1:
			rest = append(rest, m[i:]...)
			return tile, rest, nil
		case l.shape == 0:
			// A runtime extent: the tile takes n elements of it, the rest is runtime too.
			tile = append(tile, leaf{shape: n, stride: l.stride, mode: l.mode, cstride: l.cstride})
			rest = append(rest, leaf{shape: 0, stride: mulStride(l.stride, int64(n)), mode: l.mode, cstride: l.cstride * n})
			rest = append(rest, m[i+1:]...)
			return tile, rest, nil
		case n%l.shape == 0:
			tile = append(tile, l)
			n /= l.shape
		case l.shape%n == 0:
			tile = append(tile, leaf{shape: n, stride: l.stride, mode: l.mode, cstride: l.cstride})
			rest = append(rest, leaf{shape: l.shape / n, stride: mulStride(l.stride, int64(n)), mode: l.mode, cstride: l.cstride * n})
			rest = append(rest, m[i+1:]...)
			return tile, rest, nil
		default:
			return nil, nil, fmt.Errorf("tile extent %d does not divide the mode's shape (leaf of extent %d)", t, l.shape)
		}
	}
	if n != 1 {
		return nil, nil, fmt.Errorf("tile extent %d is larger than the mode", t)
	}
	return tile, rest, nil
}

func mulStride(s stride, f int64) stride { return stride{c: s.c * f, dyn: s.dyn} }

func modeSize(m []leaf) int {
	n := 1
	for _, l := range m {
		n *= l.shape
	}
	return n
}

// LocalTile returns the tile at coordinate coord of the tensor tiled by tile (one extent per
// mode): CuTe's local_tile(tensor, tile, coord). Coordinates are Go ints or integer Values.
func (t Tensor) LocalTile(tile []int, coord ...any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("LocalTile") {
		return t
	}
	if len(tile) != len(t.modes) || len(coord) != len(t.modes) {
		k.errorf("LocalTile: tensor has rank %d; got %d tile extents and %d coordinates", len(t.modes), len(tile), len(coord))
		return t
	}
	u := t.clone()
	for m := range t.modes {
		tl, rest, err := splitMode(t.modes[m], tile[m])
		if err != nil {
			k.errorf("LocalTile: mode %d: %v", m, err)
			return t
		}
		c, ok := k.coordOf(coord[m], "LocalTile")
		if !ok {
			return t
		}
		u.modes[m] = tl
		u.advance(rest, c)
	}
	return u
}

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
		return coord{dyn: c.To(I32)}, true
	}
	k.errorf("%s: coordinate must be a Go int or an integer Value, got %T", what, x)
	return coord{}, false
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

// ZippedDivide tiles the tensor by tile (one extent per mode) and returns a rank-2 tensor:
// mode 0 the tile (its modes grouped), mode 1 the tiles. Index mode 1 with a dynamic tile
// coordinate through Slice or Tile.
func (t Tensor) ZippedDivide(tile []int) Tensor {
	k := t.k
	if !t.ok("ZippedDivide") {
		return t
	}
	if len(tile) != len(t.modes) {
		k.errorf("ZippedDivide: tensor has rank %d; got %d tile extents", len(t.modes), len(tile))
		return t
	}
	var in, out []leaf
	for m := range t.modes {
		tl, rest, err := splitMode(t.modes[m], tile[m])
		if err != nil {
			k.errorf("ZippedDivide: mode %d: %v", m, err)
			return t
		}
		in = append(in, tl...)
		out = append(out, rest...)
	}
	u := t.clone()
	u.modes = [][]leaf{in, out}
	return u
}

// Tile selects tile i (a Go int or integer Value) of a ZippedDivide result: the tensor of
// its mode 0, moved to the tile's origin.
func (t Tensor) Tile(i any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("Tile") {
		return t
	}
	if len(t.modes) != 2 {
		k.errorf("Tile: want the rank-2 result of ZippedDivide, got rank %d", len(t.modes))
		return t
	}
	c, ok := k.coordOf(i, "Tile")
	if !ok {
		return t
	}
	u := t.clone()
	rest := u.modes[1]
	u.modes = [][]leaf{u.modes[0]}
	u.advance(rest, c)
	return u
}

// PartitionTV splits a tile over the threads of a block: thr is the thread layout over the
// tile's modes (rank equal to the tensor's; thread tid sits at thr's coordinate of tid, as
// CuTe's get_flat_coord), val the number of consecutive elements each thread owns per
// mode. Each thread gets, per mode, blocks of val elements strided by thr*val: the result has
// modes (val_m, rest_m). A 128-bit copy of f32 uses val 4 along the contiguous mode.
func (t Tensor) PartitionTV(thr layout.Layout, val []int, tid Value) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("PartitionTV") {
		return t
	}
	shape, st := thr.FlatShape(), thr.FlatStride()
	if len(shape) != len(t.modes) || len(val) != len(t.modes) {
		k.errorf("PartitionTV: tensor has rank %d; thread layout %v has %d modes and val %d", len(t.modes), thr, len(shape), len(val))
		return t
	}
	if !k.own(tid, "PartitionTV") {
		return t
	}
	if !isInt(tid.t) {
		k.errorf("PartitionTV: thread index is %s, not an integer", tid.t)
		return t
	}
	id := tid.To(I32)
	u := t.clone()
	for m := range t.modes {
		v, n := val[m], shape[m]
		if v <= 0 {
			k.errorf("PartitionTV: val[%d] = %d must be positive", m, v)
			return t
		}
		size := modeSize(t.modes[m])
		if size == 0 || size%(n*v) != 0 {
			k.errorf("PartitionTV: mode %d of extent %d is not divisible by %d threads x %d values", m, size, n, v)
			return t
		}
		vals, rest, err := splitMode(t.modes[m], v)
		if err != nil {
			k.errorf("PartitionTV: mode %d: %v", m, err)
			return t
		}
		thrs, more, err := splitMode(rest, n)
		if err != nil {
			k.errorf("PartitionTV: mode %d: %v", m, err)
			return t
		}
		// The thread's coordinate along this mode: (tid / stride) % shape.
		var c coord
		switch {
		case n == 1:
		case tid.IsConst():
			c = coord{c: (constInt(id) / int64(st[m])) % int64(n)}
		default:
			c = coord{dyn: k.imod(k.idiv(id, int64(st[m])), int64(n))}
		}
		u.modes[m] = append(dropUnit(vals), more...)
		if len(u.modes[m]) == 0 {
			u.modes[m] = []leaf{{shape: 1, mode: m, cstride: 1}}
		}
		u.advance(thrs, c)
	}
	return u
}

// LocalPartition is PartitionTV with one value per thread per mode: CuTe's
// local_partition(tensor, thr, tid).
func (t Tensor) LocalPartition(thr layout.Layout, tid Value) Tensor {
	val := make([]int, len(thr.FlatShape()))
	for i := range val {
		val[i] = 1
	}
	return t.PartitionTV(thr, val, tid)
}

func dropUnit(ls []leaf) []leaf {
	out := ls[:0:0]
	for _, l := range ls {
		if l.shape != 1 {
			out = append(out, l)
		}
	}
	return out
}

// Slice fixes mode m at coordinate c (a Go int or integer Value) and removes the mode.
func (t Tensor) Slice(m int, c any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("Slice") {
		return t
	}
	if m < 0 || m >= len(t.modes) {
		k.errorf("Slice: mode %d out of range for rank %d", m, len(t.modes))
		return t
	}
	cc, ok := k.coordOf(c, "Slice")
	if !ok {
		return t
	}
	u := t.clone()
	ls := u.modes[m]
	u.modes = append(u.modes[:m:m], u.modes[m+1:]...)
	u.advance(ls, cc)
	return u
}

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
		p = p.At(o.c)
		if o.dyn.k != nil {
			p = p.At(o.dyn)
		}
		return p
	}
	sw := *t.swz
	if o.dyn.k == nil {
		return p.At(int64(sw.Apply(int(o.c))))
	}
	x := o.dyn.Add(int32(o.c))
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
