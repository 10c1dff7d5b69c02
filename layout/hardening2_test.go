package layout

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRenderTVBadTiler: a tiler with an extent below 1 is an error naming
// the tiler, not a makeslice panic.
func TestRenderTVBadTiler(t *testing.T) {
	tv := MustParse("(4,4):(1,4)")
	for _, tiler := range []IntTuple{Ints(-2, 8), Ints(8, 0), Ints(0), Tuple(Ints(-2, -2), Int(4))} {
		var b bytes.Buffer
		for name, f := range map[string]func() error{
			"PrintTV":    func() error { return PrintTV(&b, tv, tiler) },
			"WriteTVSVG": func() error { return WriteTVSVG(&b, tv, tiler) },
		} {
			err := f()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "tiler "+tiler.String()) {
				t.Errorf("%s(%v): got %v, want ErrInvalid naming the tiler", name, tiler, err)
			}
		}
	}
}

// TestRenderLayoutTooLarge: a plain layout has the same cell bound as a
// composed one, checked before any work.
func TestRenderLayoutTooLarge(t *testing.T) {
	l := MustParse("(100000000,100000000):(1,100000000)")
	start := time.Now()
	for name, f := range map[string]func() error{
		"PrintLayout": func() error { return PrintLayout(&bytes.Buffer{}, l) },
		"WriteSVG":    func() error { return WriteSVG(&bytes.Buffer{}, l) },
		"Composed":    func() error { return PrintLayout(&bytes.Buffer{}, ComposedLayout{Inner: l}) },
	} {
		err := f()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "10000000000000000 cells") {
			t.Errorf("%s: got %v, want ErrInvalid naming the size", name, err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v, want the bound checked before any work", d)
	}
	// At the bound still draws; one past it does not.
	if _, _, _, err := rank2(MustParse("(1024,1024):(1,1024)")); err != nil {
		t.Errorf("1024x1024: %v", err)
	}
	if _, _, _, err := rank2(MustParse("(1025,1024):(1,1025)")); !errors.Is(err, ErrInvalid) {
		t.Errorf("1025x1024: got %v, want ErrInvalid", err)
	}
	if err := PrintLayout(&bytes.Buffer{}, Layout{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero Layout: got %v, want ErrInvalid", err)
	}
}

// TestAlgebraRefusesBadExtents: targets, cotargets and layout operands with
// an extent below 1 are errors naming the operand, never an invalid layout.
func TestAlgebraRefusesBadExtents(t *testing.T) {
	a := MustParse("(4,4):(1,4)")
	z := Layout{} // 0:0, not a layout
	type res struct {
		name string
		want string
		f    func() (Layout, error)
	}
	cases := []res{
		{"TileToShape -4", "target", func() (Layout, error) { return TileToShape(MustParse("(2,2):(1,2)"), Ints(-4, 4)) }},
		{"TileToShape 0", "target", func() (Layout, error) { return TileToShape(MustParse("(2,2):(1,2)"), Ints(0, 4)) }},
		{"TileToShape zero block", "block", func() (Layout, error) { return TileToShape(z, Ints(4, 4)) }},
		{"ComplementTo -8", "cotarget", func() (Layout, error) { return ComplementTo(MustParse("4:2"), Int(-8)) }},
		{"ComplementTo 0", "cotarget", func() (Layout, error) { return ComplementTo(MustParse("4:2"), Int(0)) }},
		{"ComplementTo (-2,-8)", "cotarget", func() (Layout, error) { return ComplementTo(a, Ints(-2, -8)) }},
		{"ComplementTo zero", "layout", func() (Layout, error) { return ComplementTo(z, Int(8)) }},
		{"Complement zero", "layout", func() (Layout, error) { return Complement(z) }},
		{"BlockedProduct", "layout", func() (Layout, error) { return BlockedProduct(a, z) }},
		{"BlockedProduct block", "block", func() (Layout, error) { return BlockedProduct(z, a) }},
		{"RakedProduct", "layout", func() (Layout, error) { return RakedProduct(a, z) }},
		{"MakeLayoutTV thr", "thread layout", func() (Layout, error) { _, tv, err := MakeLayoutTV(z, a); return tv, err }},
		{"MakeLayoutTV val", "value layout", func() (Layout, error) { _, tv, err := MakeLayoutTV(a, z); return tv, err }},
	}
	for _, tl := range []Tiler{z, Modes{z, nil}, Modes{Tile(2), Modes{z}}} {
		cases = append(cases,
			res{"LogicalDivide", "tiler", func() (Layout, error) { return LogicalDivide(a, tl) }},
			res{"ZippedDivide", "tiler", func() (Layout, error) { return ZippedDivide(a, tl) }},
			res{"TiledDivide", "tiler", func() (Layout, error) { return TiledDivide(a, tl) }},
			res{"FlatDivide", "tiler", func() (Layout, error) { return FlatDivide(a, tl) }},
			res{"LogicalProduct", "tiler", func() (Layout, error) { return LogicalProduct(a, tl) }},
			res{"ZippedProduct", "tiler", func() (Layout, error) { return ZippedProduct(a, tl) }},
			res{"TiledProduct", "tiler", func() (Layout, error) { return TiledProduct(a, tl) }},
			res{"FlatProduct", "tiler", func() (Layout, error) { return FlatProduct(a, tl) }},
			res{"Composition", "tiler", func() (Layout, error) { return Composition(a, tl) }},
		)
	}
	for _, f := range []func(Layout, Tiler) (Layout, error){LogicalDivide, LogicalProduct, Composition} {
		cases = append(cases, res{"zero layout operand", "layout", func() (Layout, error) { return f(z, Tile(2)) }})
	}
	for _, c := range cases {
		r, err := c.f()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, %v; want ErrInvalid naming the %s", c.name, r, err, c.want)
		}
	}
}

// TestParseComposedOffsetRange: an offset too large for an int is out of
// range, as Parse says, not "not an integer".
func TestParseComposedOffsetRange(t *testing.T) {
	for _, off := range []string{"92233720368547758079", "-92233720368547758079", "4611686018427387905"} {
		_, err := ParseComposed("Sw<3,4,3> o " + off + " o 8:1")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("offset %s: got %v, want out of range", off, err)
		}
	}
	if _, err := ParseComposed("Sw<3,4,3> o x1 o 8:1"); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("offset x1: got %v, want not an integer", err)
	}
	if c, err := ParseComposed("Sw<3,4,3> o 4611686018427387904 o 8:1"); err != nil || c.Offset != 1<<62 {
		t.Errorf("offset 2^62: got %v, %v", c, err)
	}
}
