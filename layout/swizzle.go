package layout

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Swizzle is CuTe's Swizzle<B,M,S>: it XORs the B bits at position M+max(0,S)
// of an offset into the B bits at position M-min(0,S):
//
//	offset ^ shiftr(offset & yyy_mask, S)
type Swizzle struct {
	B, M, S int
}

// NewSwizzle returns Swizzle<b,m,s>; it requires b >= 0, m >= 0 and
// |s| >= b, as CuTe does.
func NewSwizzle(b, m, s int) (Swizzle, error) {
	sw := Swizzle{b, m, s}
	return sw, sw.check()
}

func (sw Swizzle) check() error {
	if sw.B < 0 || sw.M < 0 || abs(sw.S) < sw.B || sw.B > 30 || sw.M+abs(sw.S)+sw.B > 62 {
		return &Error{ErrInvalid, fmt.Sprintf("invalid swizzle %v (need B >= 0, M >= 0, |S| >= B, B <= 30 and B+M+|S| <= 62)", sw)}
	}
	return nil
}

// Apply returns the swizzled offset. The swizzle must be valid (see
// NewSwizzle); an invalid one returns offset unchanged.
func (sw Swizzle) Apply(offset int) int {
	if sw.check() != nil {
		return offset
	}
	bitMask := 1<<sw.B - 1
	yyy := bitMask << (sw.M + max(0, sw.S))
	y := offset & yyy
	if sw.S >= 0 {
		y >>= sw.S
	} else {
		y <<= -sw.S
	}
	return offset ^ y
}

// String formats the swizzle as CuTe does: Sw<B,M,S>.
func (sw Swizzle) String() string { return fmt.Sprintf("Sw<%d,%d,%d>", sw.B, sw.M, sw.S) }

// IndexFunc is the outer function of a ComposedLayout: a Swizzle or a
// Layout (evaluated at an integer).
type IndexFunc interface {
	Apply(int) int
	String() string
}

// Apply evaluates l at the integer index i (the same as Value), so a Layout
// can be the outer function of a ComposedLayout.
func (l Layout) Apply(i int) int { return l.Value(i) }

// ComposedLayout is CuTe's ComposedLayout, typically a swizzled layout: its
// value at a coordinate c is Outer(Offset + Inner(c)).
type ComposedLayout struct {
	Outer  IndexFunc
	Offset int
	Inner  Layout
}

// Eval returns Outer(Offset + Inner(coord)).
func (c ComposedLayout) Eval(coord IntTuple) (int, error) {
	if sw, ok := c.Outer.(Swizzle); ok {
		if err := sw.check(); err != nil {
			return 0, err
		}
	}
	if c.Outer == nil {
		return 0, &Error{ErrInvalid, "composed layout without outer function"}
	}
	v, err := c.Inner.Eval(coord)
	if err != nil {
		return 0, err
	}
	var r int
	err = catch(func() { r = c.Outer.Apply(add(c.Offset, v)) })
	return r, err
}

// Value returns Outer(Offset + Inner.Value(i)) for an integer coordinate
// (a nil Outer is the identity).
func (c ComposedLayout) Value(i int) int {
	v := c.Offset + c.Inner.Value(i)
	if c.Outer == nil {
		return v
	}
	return c.Outer.Apply(v)
}

// Size returns the size of the inner layout.
func (c ComposedLayout) Size() int { return c.Inner.Size() }

// String formats the composed layout as CuTe does: "Sw<3,4,3> o 0 o (8,8):(8,1)".
func (c ComposedLayout) String() string {
	return fmt.Sprintf("%v o %d o %v", c.Outer, c.Offset, c.Inner)
}

// ParseSwizzle parses CuTe's notation of a swizzle, "Sw<3,4,3>" (what
// Swizzle.String prints).
func ParseSwizzle(s string) (Swizzle, error) {
	t := strings.TrimSpace(s)
	bad := func(why string) (Swizzle, error) {
		return Swizzle{}, &Error{ErrInvalid, fmt.Sprintf("parse %s: %s", excerpt.Quote(s), why)}
	}
	if !strings.HasPrefix(t, "Sw<") || !strings.HasSuffix(t, ">") {
		return bad("a swizzle is written Sw<B,M,S>")
	}
	parts := strings.Split(t[len("Sw<"):len(t)-1], ",")
	if len(parts) != 3 {
		return bad("a swizzle has three parameters, Sw<B,M,S>")
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return bad(intErr(i+1, strings.TrimSpace(p), err))
		}
		v[i] = n
	}
	return NewSwizzle(v[0], v[1], v[2])
}

// intErr says why parameter i (text p) is not a swizzle parameter: not an integer, or one
// out of range.
func intErr(i int, p string, err error) string {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("parameter %d (%s) is out of range", i, excerpt.Quote(p))
	}
	return fmt.Sprintf("parameter %d (%s) is not an integer", i, excerpt.Quote(p))
}

var composedSep = regexp.MustCompile(`\s+o\s+`)

// ParseComposed parses what ComposedLayout.String prints: "OUTER o OFFSET o
// INNER", OUTER a swizzle (Sw<3,0,3>) or a layout, OFFSET an integer (CuTe
// prints a static one as _0) and INNER a layout, as in
// "Sw<3,0,3> o 0 o (8,8):(8,1)". "OUTER o INNER" has offset 0.
func ParseComposed(s string) (ComposedLayout, error) {
	parts := composedSep.Split(strings.TrimSpace(s), -1)
	var c ComposedLayout
	switch len(parts) {
	case 2:
	case 3:
		off := strings.TrimPrefix(parts[1], "_")
		n, err := strconv.Atoi(off)
		if (err == nil && (n > limit || n < -limit)) || errors.Is(err, strconv.ErrRange) {
			return c, &Error{ErrInvalid, fmt.Sprintf("parse %s: the offset %s is out of range (the magnitude must be at most 2^62)", excerpt.Quote(s), excerpt.Quote(parts[1]))}
		}
		if err != nil {
			return c, &Error{ErrInvalid, fmt.Sprintf("parse %s: the offset %s is not an integer", excerpt.Quote(s), excerpt.Quote(parts[1]))}
		}
		c.Offset = n
	default:
		return c, &Error{ErrInvalid, fmt.Sprintf("parse %s: a composed layout is written OUTER o OFFSET o INNER, each o between spaces, e.g. Sw<3,0,3> o 0 o (8,8):(8,1)", excerpt.Quote(s))}
	}
	if strings.HasPrefix(parts[0], "Sw<") {
		sw, err := ParseSwizzle(parts[0])
		if err != nil {
			return c, err
		}
		c.Outer = sw
	} else {
		l, err := Parse(parts[0])
		if err != nil {
			return c, err
		}
		c.Outer = l
	}
	inner, err := Parse(parts[len(parts)-1])
	if err != nil {
		return c, err
	}
	c.Inner = inner
	return c, nil
}
