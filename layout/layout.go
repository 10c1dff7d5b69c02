package layout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Layout is a CuTe layout Shape:Stride, a function from coordinates to
// indices. Shape and Stride are congruent IntTuples; every extent is >= 1.
// Layouts are immutable values; the zero Layout is not valid (use New,
// MakeLayout or Parse).
type Layout struct {
	shape, stride IntTuple
}

// limit bounds every integer this package accepts so that sums and products
// checked against it never wrap.
const limit = 1 << 62

// New returns the layout shape:stride. Shape and stride must be congruent,
// extents must be >= 1 and the size and cosize must fit in an int.
func New(shape, stride IntTuple) (Layout, error) {
	l := Layout{shape, stride}
	return l, catch(func() { l.validate() })
}

func (l Layout) validate() {
	if !Congruent(l.shape, l.stride) {
		fail(ErrRank, "shape %v and stride %v are not congruent", l.shape, l.stride)
	}
	if l.shape.hasHole() || l.stride.hasHole() {
		fail(ErrInvalid, "a layout cannot contain _")
	}
	var buf [16]int // most layouts have fewer leaves: no allocation
	for _, s := range l.shape.appendInts(buf[:0]) {
		if s < 1 || s > limit {
			fail(ErrInvalid, "extent %d out of range (must be >= 1)", s)
		}
	}
	for _, d := range l.stride.appendInts(buf[:0]) {
		if d > limit || d < -limit {
			fail(ErrOverflow, "stride %d out of range", d)
		}
	}
	product(l.shape)
	l.cosize()
}

// mk builds a layout without checks (internal results are congruent by
// construction).
func mk(shape, stride IntTuple) Layout { return Layout{shape, stride} }

// MakeLayout returns the column-major (colexicographic) layout of shape:
// MakeLayout((4,(2,3))) is (4,(2,3)):(1,(4,8)). As in C++ CuTe, extent-1
// modes get stride 0.
func MakeLayout(shape IntTuple) (Layout, error) {
	var l Layout
	err := catch(func() {
		st, _ := compactMajor(shape, 1, true)
		l = mk(shape, st)
		l.validate()
	})
	return l, err
}

// RowMajor returns the row-major (lexicographic) layout of shape:
// RowMajor((4,8)) is (4,8):(8,1).
func RowMajor(shape IntTuple) (Layout, error) {
	var l Layout
	err := catch(func() {
		st, _ := compactMajor(shape, 1, false)
		l = mk(shape, st)
		l.validate()
	})
	return l, err
}

// Must returns l and panics if err is not nil. It is meant for tests,
// examples and package-level variables built from constant input.
func Must(l Layout, err error) Layout {
	if err != nil {
		panic(err)
	}
	return l
}

// MustParse parses a constant layout (see Parse) and panics if it is
// malformed: for literal layouts in kernels, layout.MustParse("(32,8):(8,1)").
func MustParse(s string) Layout { return Must(Parse(s)) }

// Shape returns the shape.
func (l Layout) Shape() IntTuple { return l.shape }

// Stride returns the stride.
func (l Layout) Stride() IntTuple { return l.stride }

// FlatShape returns the leaves of the shape.
func (l Layout) FlatShape() []int { return l.shape.Leaves() }

// FlatStride returns the leaves of the stride, in the order of FlatShape.
func (l Layout) FlatStride() []int { return l.stride.Leaves() }

// Size returns the number of coordinates, the product of the shape.
func (l Layout) Size() int {
	p := 1
	for _, s := range l.shape.Leaves() {
		p *= s
	}
	return p
}

// Cosize returns the size of the codomain: 1 + L(Size()-1) with the strides
// taken as absolute values.
func (l Layout) Cosize() int { return l.cosizeRaw() }

func (l Layout) cosizeRaw() int {
	c := 1
	var f func(s, d IntTuple)
	f = func(s, d IntTuple) {
		if s.kind != kindTuple {
			c += (s.val - 1) * abs(d.val)
			return
		}
		for i := range s.elems {
			f(s.elems[i], d.elems[i])
		}
	}
	f(l.shape, l.stride)
	return c
}

func (l Layout) cosize() int {
	c := 1
	var f func(s, d IntTuple)
	f = func(s, d IntTuple) {
		if s.kind != kindTuple {
			c = add(c, mul(s.val-1, abs(d.val)))
			return
		}
		for i := range s.elems {
			f(s.elems[i], d.elems[i])
		}
	}
	f(l.shape, l.stride)
	return c
}

// Rank returns the number of top-level modes (1 for an integral shape).
func (l Layout) Rank() int { return l.shape.Len() }

// Depth returns the nesting depth of the shape (0 for an integral shape).
func (l Layout) Depth() int { return l.shape.Depth() }

// Mode returns mode i (CuTe's layout<i>). Mode(0) of an integral layout is
// the layout itself.
func (l Layout) Mode(i int) (Layout, error) {
	if i < 0 || i >= l.Rank() {
		return Layout{}, &Error{ErrRank, "mode " + strconv.Itoa(i) + " out of range for " + shown(l)}
	}
	return l.mode(i), nil
}

func (l Layout) mode(i int) Layout { return mk(l.shape.At(i), l.stride.At(i)) }

// Select returns the layout made of the given modes, in that order (CuTe's
// select<I...>).
func (l Layout) Select(modes ...int) (Layout, error) {
	s := make([]IntTuple, len(modes))
	d := make([]IntTuple, len(modes))
	for k, i := range modes {
		m, err := l.Mode(i)
		if err != nil {
			return Layout{}, err
		}
		s[k], d[k] = m.shape, m.stride
	}
	return mk(tup(s), tup(d)), nil
}

// GroupModes returns l with modes [begin,end) grouped into one mode (CuTe's
// group_modes<B,E>).
func (l Layout) GroupModes(begin, end int) (Layout, error) {
	r := l.Rank()
	if begin < 0 || end > r || begin > end {
		return Layout{}, &Error{ErrRank, "group_modes: bad range for " + shown(l)}
	}
	var s, d []IntTuple
	for i := 0; i < begin; i++ {
		s, d = append(s, l.shape.At(i)), append(d, l.stride.At(i))
	}
	var gs, gd []IntTuple
	for i := begin; i < end; i++ {
		gs, gd = append(gs, l.shape.At(i)), append(gd, l.stride.At(i))
	}
	s, d = append(s, tup(gs)), append(d, tup(gd))
	for i := end; i < r; i++ {
		s, d = append(s, l.shape.At(i)), append(d, l.stride.At(i))
	}
	return mk(tup(s), tup(d)), nil
}

// Flatten returns the layout with the leaves of shape and stride as flat
// tuples (an integral layout is returned unchanged).
func (l Layout) Flatten() Layout { return mk(l.shape.Flatten(), l.stride.Flatten()) }

// Equal reports whether l and m have identical shapes and strides.
func (l Layout) Equal(m Layout) bool { return l.shape.Equal(m.shape) && l.stride.Equal(m.stride) }

// String formats l in CuTe's notation, e.g. (4,(2,3)):(1,(4,8)) or 8:1.
func (l Layout) String() string {
	var b strings.Builder
	l.shape.write(&b)
	b.WriteByte(':')
	l.stride.write(&b)
	return b.String()
}

// Value returns L(i) for the integer coordinate i (colexicographic
// unfolding; the last mode extends past the size as in CuTe). It never
// fails; outside the domain the result may wrap.
func (l Layout) Value(i int) int { return valueInt(i, l.shape, l.stride) }

func valueInt(c int, s, d IntTuple) int {
	if s.kind != kindTuple {
		return c * d.val
	}
	n := len(s.elems)
	r := 0
	for k := 0; k < n-1; k++ {
		p := leafProduct(s.elems[k])
		if p == 0 { // only in an invalid (zero-extent) layout
			return r
		}
		r += valueInt(c%p, s.elems[k], d.elems[k])
		c /= p
	}
	if n > 0 {
		r += valueInt(c, s.elems[n-1], d.elems[n-1])
	}
	return r
}

// leafProduct multiplies t's integers without collecting them.
func leafProduct(t IntTuple) int {
	if t.kind != kindTuple {
		return t.val
	}
	p := 1
	for _, e := range t.elems {
		p *= leafProduct(e)
	}
	return p
}

// Eval returns L(coord) for a coordinate that is an integer or a tuple
// congruent to (a prefix-profile of) the shape, as CuTe's crd2idx. Holes in
// coord count as 0.
func (l Layout) Eval(coord IntTuple) (int, error) {
	var r int
	err := catch(func() { r = crd2idx(coord, l.shape, l.stride) })
	return r, err
}

// Values returns [L(0), ..., L(Size()-1)]: at most MaxValues of them (a larger layout is an
// error; Value(i) gives one at a time).
func (l Layout) Values() ([]int, error) {
	n := l.Size()
	if n > MaxValues || n < 0 {
		return nil, &Error{ErrOverflow, fmt.Sprintf("Values of %s: %d values; Values lists at most %d (use Value(i))", shown(l), n, MaxValues)}
	}
	out := make([]int, n)
	for i := range out {
		out[i] = l.Value(i)
	}
	return out, nil
}

// MaxValues bounds the values Layout.Values lists.
const MaxValues = 1 << 31

// Crd2Idx maps a coordinate to an index through shape and stride (CuTe's
// crd2idx). With a nil stride the compact column-major stride of shape is
// used.
func Crd2Idx(coord, shape IntTuple, stride *IntTuple) (int, error) {
	var r int
	err := catch(func() {
		if stride == nil {
			st, _ := compactMajor(shape, 1, true)
			r = crd2idx(coord, shape, st)
			return
		}
		r = crd2idx(coord, shape, *stride)
	})
	return r, err
}

func crd2idx(c, s, d IntTuple) int {
	switch c.kind {
	case kindHole:
		return 0
	case kindTuple:
		if s.kind != kindTuple || d.kind != kindTuple || len(c.elems) != len(s.elems) || len(c.elems) != len(d.elems) {
			fail(ErrRank, "coordinate %v does not match shape %v", c, s)
		}
		r := 0
		for i := range c.elems {
			r = add(r, crd2idx(c.elems[i], s.elems[i], d.elems[i]))
		}
		return r
	}
	if s.kind == kindTuple {
		if d.kind != kindTuple || len(s.elems) != len(d.elems) {
			fail(ErrRank, "shape %v and stride %v do not match", s, d)
		}
		n := len(s.elems)
		r, x := 0, c.val
		for i := 0; i < n-1; i++ {
			p := product(s.elems[i])
			if p == 0 {
				fail(ErrInvalid, "zero extent in %v", s)
			}
			r = add(r, crd2idx(Int(x%p), s.elems[i], d.elems[i]))
			x /= p
		}
		if n > 0 {
			r = add(r, crd2idx(Int(x), s.elems[n-1], d.elems[n-1]))
		}
		return r
	}
	if d.kind != kindInt || s.kind != kindInt {
		fail(ErrRank, "shape %v and stride %v do not match", s, d)
	}
	return mul(c.val, d.val)
}

// Idx2Crd maps an index to a coordinate in shape (CuTe's idx2crd). With a
// nil stride the result is the colexicographic coordinate; with a stride,
// each leaf is (idx / stride) % extent.
func Idx2Crd(idx, shape IntTuple, stride *IntTuple) (IntTuple, error) {
	var r IntTuple
	err := catch(func() {
		if stride == nil {
			r = idx2crdDefault(idx, shape)
			return
		}
		r = idx2crd(idx, shape, *stride)
	})
	return r, err
}

func idx2crdDefault(i, s IntTuple) IntTuple {
	if i.kind == kindTuple {
		if s.kind != kindTuple || len(s.elems) != len(i.elems) {
			fail(ErrRank, "index %v does not match shape %v", i, s)
		}
		out := make([]IntTuple, len(s.elems))
		for k := range s.elems {
			out[k] = idx2crdDefault(i.elems[k], s.elems[k])
		}
		return tup(out)
	}
	checkInt(i)
	return splitIdx(i.val, s)
}

// splitIdx is CuTe's idx2crd(idx, shape): colexicographic, with the last
// mode (recursively) taking whatever is left, so it is unbounded.
func splitIdx(c int, s IntTuple) IntTuple {
	if s.kind != kindTuple {
		return Int(c)
	}
	n := len(s.elems)
	out := make([]IntTuple, n)
	for k := 0; k < n-1; k++ {
		p := product(s.elems[k])
		if p == 0 {
			fail(ErrInvalid, "zero extent in %v", s)
		}
		out[k] = splitIdx(c%p, s.elems[k])
		c /= p
	}
	if n > 0 {
		out[n-1] = splitIdx(c, s.elems[n-1])
	}
	return tup(out)
}

func idx2crd(i, s, d IntTuple) IntTuple {
	if i.kind == kindTuple {
		if s.kind != kindTuple || d.kind != kindTuple || len(s.elems) != len(i.elems) || len(d.elems) != len(i.elems) {
			fail(ErrRank, "index %v does not match shape %v", i, s)
		}
		out := make([]IntTuple, len(s.elems))
		for k := range s.elems {
			out[k] = idx2crd(i.elems[k], s.elems[k], d.elems[k])
		}
		return tup(out)
	}
	checkInt(i)
	if s.kind == kindTuple {
		if d.kind == kindTuple {
			if len(s.elems) != len(d.elems) {
				fail(ErrRank, "shape %v and stride %v do not match", s, d)
			}
			out := make([]IntTuple, len(s.elems))
			for k := range s.elems {
				out[k] = idx2crd(i, s.elems[k], d.elems[k])
			}
			return tup(out)
		}
		checkInt(d)
		st, _ := compactMajor(s, d.val, true)
		return idx2crd(i, s, st)
	}
	if d.kind != kindInt {
		fail(ErrRank, "shape %v and stride %v do not match", s, d)
	}
	checkInt(s)
	if s.val == 1 {
		return Int(0)
	}
	if d.val == 0 || s.val == 0 {
		fail(ErrInvalid, "idx2crd: division by zero (shape %d, stride %d)", s.val, d.val)
	}
	return Int((i.val / d.val) % s.val)
}

// ParseIntTuple parses CuTe's notation for an IntTuple: 4, (4,(2,3)), (),
// _ (a hole). Spaces are ignored.
func ParseIntTuple(s string) (IntTuple, error) {
	p := parser{s: s}
	var t IntTuple
	err := catch(func() {
		t = p.tuple()
		p.skip()
		if p.i != len(p.s) {
			p.errorf("unexpected %s", excerpt.Quote(p.s[p.i:]))
		}
	})
	return t, err
}

// Parse parses a layout in CuTe's notation: "(4,(2,3)):(1,(4,8))" or "8:1".
// A shape without ":stride" gets the column-major stride.
func Parse(s string) (Layout, error) {
	p := parser{s: s}
	var l Layout
	err := catch(func() {
		shape := p.tuple()
		p.skip()
		if p.i < len(p.s) && p.s[p.i] == ':' {
			p.i++
			stride := p.tuple()
			p.skip()
			if p.i != len(p.s) {
				p.errorf("unexpected %s", excerpt.Quote(p.s[p.i:]))
			}
			l = mk(shape, stride)
		} else {
			if p.i != len(p.s) {
				p.errorf("unexpected %s", excerpt.Quote(p.s[p.i:]))
			}
			st, _ := compactMajor(shape, 1, true)
			l = mk(shape, st)
		}
		l.validate()
	})
	return l, err
}

type parser struct {
	s     string
	i     int
	depth int
}

func (p *parser) errorf(format string, args ...any) {
	fail(ErrInvalid, "parse %s at %d: "+format, append([]any{excerpt.Around(p.s, p.i), p.i}, args...)...)
}

func (p *parser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *parser) tuple() IntTuple {
	p.skip()
	if p.i >= len(p.s) {
		p.errorf("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '_':
		p.i++
		return Hole
	case c == '(':
		p.depth++
		if p.depth > 64 {
			p.errorf("nesting too deep")
		}
		p.i++
		var elems []IntTuple
		p.skip()
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			p.depth--
			return tup([]IntTuple{})
		}
		for {
			elems = append(elems, p.tuple())
			p.skip()
			if p.i >= len(p.s) {
				p.errorf("missing )")
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] == ')' {
				p.i++
				p.depth--
				return tup(elems)
			}
			p.errorf("unexpected %s", excerpt.Rune(p.s, p.i))
		}
	case c == '-' || (c >= '0' && c <= '9'):
		j := p.i
		if c == '-' {
			p.i++
		}
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		v, err := strconv.Atoi(p.s[j:p.i])
		if err != nil || v > limit || v < -limit {
			num := p.s[j:p.i]
			p.i = j
			switch {
			case num == "-":
				p.errorf("'-' without digits")
			case err == nil || errors.Is(err, strconv.ErrRange):
				p.errorf("integer %s out of range (the magnitude must be at most 2^62)", excerpt.Quote(num))
			default:
				p.errorf("bad integer %s", excerpt.Quote(num))
			}
		}
		return Int(v)
	}
	p.errorf("unexpected %s", excerpt.Rune(p.s, p.i))
	return IntTuple{}
}
