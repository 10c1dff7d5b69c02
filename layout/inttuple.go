package layout

import (
	"strconv"
	"strings"
)

// IntTuple is a hierarchical integer tuple: either an integer or a tuple of
// IntTuples, as in CuTe. The rank-1 tuple (4) and the integer 4 are distinct
// values. A third kind, the hole "_" (CuTe's Underscore), only appears in
// coordinates passed to slicing operations.
//
// IntTuple values are immutable; the zero value is the integer 0.
type IntTuple struct {
	val   int
	elems []IntTuple
	kind  uint8
}

const (
	kindInt uint8 = iota
	kindTuple
	kindHole
)

// Int returns the integer n as an IntTuple.
func Int(n int) IntTuple { return IntTuple{val: n} }

// Tuple returns the tuple of the given elements. Tuple() is the empty tuple.
func Tuple(elems ...IntTuple) IntTuple {
	e := make([]IntTuple, len(elems))
	copy(e, elems)
	return IntTuple{elems: e, kind: kindTuple}
}

// Ints returns the flat tuple of the given integers, e.g. Ints(4, 8) is (4,8).
func Ints(ns ...int) IntTuple {
	e := make([]IntTuple, len(ns))
	for i, n := range ns {
		e[i] = IntTuple{val: n}
	}
	return IntTuple{elems: e, kind: kindTuple}
}

// Hole is CuTe's Underscore "_": in a coordinate it keeps a mode (slicing).
var Hole = IntTuple{kind: kindHole}

// tup builds a tuple that takes ownership of elems.
func tup(elems []IntTuple) IntTuple { return IntTuple{elems: elems, kind: kindTuple} }

// IsInt reports whether t is an integer (not a tuple and not a hole).
func (t IntTuple) IsInt() bool { return t.kind == kindInt }

// IsTuple reports whether t is a tuple.
func (t IntTuple) IsTuple() bool { return t.kind == kindTuple }

// IsHole reports whether t is the hole "_".
func (t IntTuple) IsHole() bool { return t.kind == kindHole }

// Int returns the value of an integer; it returns 0 for a tuple or a hole.
func (t IntTuple) Int() int {
	if t.kind != kindInt {
		return 0
	}
	return t.val
}

// Len returns the rank: the number of elements of a tuple, 1 for an integer
// or a hole.
func (t IntTuple) Len() int {
	if t.kind == kindTuple {
		return len(t.elems)
	}
	return 1
}

// At returns element i of a tuple. For an integer or a hole, At(0) is t
// itself (CuTe's get<0> on an integral). Out-of-range i yields the hole.
func (t IntTuple) At(i int) IntTuple {
	if t.kind != kindTuple {
		if i == 0 {
			return t
		}
		return Hole
	}
	if i < 0 || i >= len(t.elems) {
		return Hole
	}
	return t.elems[i]
}

// Elems returns a copy of the elements of a tuple (nil for an integer).
func (t IntTuple) Elems() []IntTuple {
	if t.kind != kindTuple {
		return nil
	}
	return append([]IntTuple(nil), t.elems...)
}

// Equal reports whether t and u are the same value (same structure and
// integers).
func (t IntTuple) Equal(u IntTuple) bool {
	if t.kind != u.kind {
		return false
	}
	switch t.kind {
	case kindInt:
		return t.val == u.val
	case kindHole:
		return true
	}
	if len(t.elems) != len(u.elems) {
		return false
	}
	for i := range t.elems {
		if !t.elems[i].Equal(u.elems[i]) {
			return false
		}
	}
	return true
}

// String formats t in CuTe's notation: 4, (4,(2,3)), _.
func (t IntTuple) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t IntTuple) write(b *strings.Builder) {
	switch t.kind {
	case kindInt:
		b.WriteString(strconv.Itoa(t.val))
	case kindHole:
		b.WriteByte('_')
	default:
		b.WriteByte('(')
		for i, e := range t.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b)
		}
		b.WriteByte(')')
	}
}

// Flatten returns the leaves of t as a flat tuple. Flatten of an integer is
// the integer itself.
func (t IntTuple) Flatten() IntTuple {
	if t.kind != kindTuple {
		return t
	}
	return tup(t.appendLeaves(nil))
}

// Leaves returns the integers of t in order (holes count as 0).
func (t IntTuple) Leaves() []int {
	var out []int
	return t.appendInts(out)
}

func (t IntTuple) appendInts(dst []int) []int {
	if t.kind != kindTuple {
		return append(dst, t.val)
	}
	for _, e := range t.elems {
		dst = e.appendInts(dst)
	}
	return dst
}

func (t IntTuple) appendLeaves(dst []IntTuple) []IntTuple {
	if t.kind != kindTuple {
		return append(dst, t)
	}
	for _, e := range t.elems {
		dst = e.appendLeaves(dst)
	}
	return dst
}

// Depth returns the nesting depth: 0 for an integer, 1 + the largest depth of
// the elements for a tuple.
func (t IntTuple) Depth() int {
	if t.kind != kindTuple {
		return 0
	}
	d := 0
	for _, e := range t.elems {
		if x := e.Depth(); x > d {
			d = x
		}
	}
	return d + 1
}

// hasHole reports whether any leaf is a hole.
func (t IntTuple) hasHole() bool {
	switch t.kind {
	case kindHole:
		return true
	case kindInt:
		return false
	}
	for _, e := range t.elems {
		if e.hasHole() {
			return true
		}
	}
	return false
}

// Congruent reports whether t and u have the same hierarchical structure.
func Congruent(t, u IntTuple) bool {
	if t.kind == kindTuple != (u.kind == kindTuple) {
		return false
	}
	if t.kind != kindTuple {
		return true
	}
	if len(t.elems) != len(u.elems) {
		return false
	}
	for i := range t.elems {
		if !Congruent(t.elems[i], u.elems[i]) {
			return false
		}
	}
	return true
}

// Product returns the product of the leaves of t (1 for the empty tuple).
func Product(t IntTuple) (result int, err error) {
	defer recoverErr(&err)
	return product(t), nil
}

// Max returns the largest leaf of t (CuTe's tuple_max).
func Max(t IntTuple) (int, error) {
	var r int
	err := catch(func() {
		first := true
		for _, v := range t.Leaves() {
			if first || v > r {
				r, first = v, false
			}
		}
		if first {
			fail(ErrInvalid, "max of an empty tuple")
		}
	})
	return r, err
}

// InnerProduct returns the sum of the products of corresponding leaves of two
// congruent tuples.
func InnerProduct(a, b IntTuple) (result int, err error) {
	defer recoverErr(&err)
	return innerProduct(a, b), nil
}

func innerProduct(a, b IntTuple) int {
	if a.kind == kindTuple && b.kind == kindTuple {
		if len(a.elems) != len(b.elems) {
			fail(ErrRank, "inner_product: ranks %d and %d differ", len(a.elems), len(b.elems))
		}
		s := 0
		for i := range a.elems {
			s = add(s, innerProduct(a.elems[i], b.elems[i]))
		}
		return s
	}
	if a.kind != kindInt || b.kind != kindInt {
		fail(ErrRank, "inner_product: %v and %v are not congruent", a, b)
	}
	return mul(a.val, b.val)
}

// PrefixProduct returns the exclusive prefix product of a, starting at init
// (1 by default): PrefixProduct((2,3,4)) is (1,2,6). A tuple init applies by
// mode.
func PrefixProduct(a IntTuple, init ...IntTuple) (IntTuple, error) {
	var r IntTuple
	err := catch(func() {
		in := Int(1)
		if len(init) > 1 {
			fail(ErrInvalid, "prefix_product: at most one init")
		}
		if len(init) == 1 {
			in = init[0]
		}
		r = prefixProduct(a, in)
	})
	return r, err
}

func prefixProduct(a, init IntTuple) IntTuple {
	if a.kind == kindTuple {
		if init.kind == kindTuple {
			if len(a.elems) != len(init.elems) {
				fail(ErrRank, "prefix_product: ranks %d and %d differ", len(a.elems), len(init.elems))
			}
			out := make([]IntTuple, len(a.elems))
			for i := range a.elems {
				out[i] = prefixProduct(a.elems[i], init.elems[i])
			}
			return tup(out)
		}
		cur := init
		out := make([]IntTuple, len(a.elems))
		for i, e := range a.elems {
			out[i] = prefixProduct(e, cur)
			cur = Int(mul(cur.val, product(e)))
		}
		return tup(out)
	}
	if init.kind != kindInt || a.kind != kindInt {
		fail(ErrRank, "prefix_product: %v with init %v", a, init)
	}
	return init
}

// ShapeDiv is CuTe's shape_div: a "divided" by b, left to right, with the
// divisibility condition (at every step one operand divides the other).
func ShapeDiv(a, b IntTuple) (result IntTuple, err error) {
	defer recoverErr(&err)
	return shapeDiv(a, b), nil
}

func shapeDiv(a, b IntTuple) IntTuple {
	if a.kind == kindTuple {
		if b.kind == kindTuple {
			if len(a.elems) != len(b.elems) {
				fail(ErrRank, "shape_div: ranks %d and %d differ", len(a.elems), len(b.elems))
			}
			out := make([]IntTuple, len(a.elems))
			for i := range a.elems {
				out[i] = shapeDiv(a.elems[i], b.elems[i])
			}
			return tup(out)
		}
		checkInt(b)
		rest := b
		out := make([]IntTuple, len(a.elems))
		for i, e := range a.elems {
			out[i] = shapeDiv(e, rest)
			rest = shapeDiv(rest, e)
		}
		return tup(out)
	}
	checkInt(a)
	if b.kind == kindTuple {
		return Int(shapeDivInt(a.val, product(b)))
	}
	checkInt(b)
	return Int(shapeDivInt(a.val, b.val))
}

func checkInt(t IntTuple) {
	if t.kind == kindHole {
		fail(ErrInvalid, "unexpected _")
	}
}

func shapeDivInt(a, b int) int {
	if b == 0 || a == 0 || (a%b != 0 && b%a != 0) {
		fail(ErrDivisibility, "shape_div(%d, %d): neither divides the other", a, b)
	}
	return ceilDivInt(a, b)
}

func ceilDivInt(a, b int) int {
	if b == 0 {
		fail(ErrInvalid, "division by zero")
	}
	return (add(a, b) - 1) / b
}

// ceilDiv is CuTe's ceil_div on IntTuples.
func ceilDiv(a, b IntTuple) IntTuple {
	if a.kind == kindTuple {
		if b.kind == kindTuple {
			if len(a.elems) < len(b.elems) {
				fail(ErrRank, "ceil_div: rank %d < %d", len(a.elems), len(b.elems))
			}
			out := make([]IntTuple, len(a.elems))
			for i := range a.elems {
				y := Int(1)
				if i < len(b.elems) {
					y = b.elems[i]
				}
				out[i] = ceilDiv(a.elems[i], y)
			}
			return tup(out)
		}
		rest := b
		out := make([]IntTuple, len(a.elems))
		for i, e := range a.elems {
			out[i] = ceilDiv(e, rest)
			rest = ceilDiv(rest, e)
		}
		return tup(out)
	}
	if b.kind == kindTuple {
		return Int(ceilDivInt(a.val, product(b)))
	}
	return Int(ceilDivInt(a.val, b.val))
}

func product(t IntTuple) int {
	if t.kind != kindTuple {
		checkInt(t)
		return t.val
	}
	p := 1
	for _, e := range t.elems {
		p = mul(p, product(e))
	}
	return p
}

// productEach returns the tuple of the products of the modes of t (an int
// stays an int).
func productEach(t IntTuple) IntTuple {
	if t.kind != kindTuple {
		return t
	}
	out := make([]IntTuple, len(t.elems))
	for i, e := range t.elems {
		out[i] = Int(product(e))
	}
	return tup(out)
}

// compactMajor returns CuTe's compact column-major (left=true) or row-major
// strides for shape starting at current; extent-1 modes get stride 0.
func compactMajor(shape IntTuple, current int, left bool) (IntTuple, int) {
	if shape.kind != kindTuple {
		if shape.val == 1 {
			return Int(0), current
		}
		return Int(current), mul(current, shape.val)
	}
	out := make([]IntTuple, len(shape.elems))
	if left {
		for i, e := range shape.elems {
			out[i], current = compactMajor(e, current, left)
		}
	} else {
		for i := len(shape.elems) - 1; i >= 0; i-- {
			out[i], current = compactMajor(shape.elems[i], current, left)
		}
	}
	return tup(out), current
}

// Slice returns the parts of t selected by the holes of crd (CuTe's slice):
// a hole keeps its mode, an integer drops it, and the kept modes are
// gathered into one tuple.
//
// A lone hole returns t wrapped in a rank-1 tuple, as the conformance
// vectors record for C++ CuTe.
func Slice(crd, t IntTuple) (IntTuple, error) {
	var r IntTuple
	err := catch(func() {
		if crd.kind == kindHole {
			r = tup([]IntTuple{t})
			return
		}
		r = slice(crd, t)
	})
	return r, err
}

func slice(crd, t IntTuple) IntTuple {
	switch crd.kind {
	case kindHole:
		return t
	case kindInt:
		return tup(nil)
	}
	return tup(liftSlice(crd, t, nil))
}

func liftSlice(crd, t IntTuple, dst []IntTuple) []IntTuple {
	switch crd.kind {
	case kindHole:
		return append(dst, t)
	case kindInt:
		return dst
	}
	if t.kind != kindTuple || len(t.elems) != len(crd.elems) {
		fail(ErrRank, "slice: coordinate %v does not match %v", crd, t)
	}
	for i := range crd.elems {
		dst = liftSlice(crd.elems[i], t.elems[i], dst)
	}
	return dst
}
