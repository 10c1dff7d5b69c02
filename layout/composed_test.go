package layout

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestParseComposedRoundTrip parses what ComposedLayout.String prints and checks the parsed
// layout prints the same and has the same values.
func TestParseComposedRoundTrip(t *testing.T) {
	for _, c := range []ComposedLayout{
		{Outer: Swizzle{3, 0, 3}, Inner: Must(Parse("(8,8):(8,1)"))},
		{Outer: Swizzle{2, 4, 3}, Offset: 16, Inner: Must(Parse("((2,4),(8,8)):((512,64),(1,8))"))},
		{Outer: Swizzle{1, 2, -3}, Offset: -4, Inner: Must(Parse("32:1"))},
		{Outer: Must(Parse("(4,2):(2,1)")), Offset: 1, Inner: Must(Parse("(2,3):(3,1)"))},
	} {
		s := c.String()
		got, err := ParseComposed(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got.String() != s {
			t.Errorf("%s parsed back as %s", s, got)
		}
		for i := 0; i < c.Size(); i++ {
			if got.Value(i) != c.Value(i) {
				t.Fatalf("%s: value %d is %d, want %d", s, i, got.Value(i), c.Value(i))
			}
		}
	}
	// CuTe prints a static offset as _0; "OUTER o INNER" has offset 0.
	for _, s := range []string{"Sw<3,0,3> o _0 o (8,8):(8,1)", "Sw<3,0,3> o (8,8):(8,1)", "  Sw< 3, 0, 3 >  o  0  o  (8,8):(8,1) "} {
		got, err := ParseComposed(s)
		if err != nil || got.String() != "Sw<3,0,3> o 0 o (8,8):(8,1)" {
			t.Errorf("%q: %v, %v", s, got, err)
		}
	}
}

func TestParseComposedErrors(t *testing.T) {
	for s, want := range map[string]string{
		"(8,8):(8,1)":                   "OUTER o OFFSET o INNER",
		"Sw<3,0,3> o x o (8,8):(8,1)":   `offset "x" is not an integer`,
		"Sw<3,0> o 0 o (8,8):(8,1)":     "three parameters",
		"Sw<3,0,a> o 0 o (8,8):(8,1)":   `parameter 3 ("a")`,
		"Sw<3,0,1> o 0 o (8,8):(8,1)":   "invalid swizzle",
		"Sw<3,0,3> o 0 o (8,8):(8,1":    "parse",
		"Sw<3,0,3> o 0 o 8:1 o 0 o 8:1": "OUTER o OFFSET o INNER",
		"Sw[3,0,3] o 0 o 8:1":           "parse",
	} {
		_, err := ParseComposed(s)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: error %v, want ErrInvalid with %q", s, err, want)
		}
	}
}

// TestPrintComposed draws Sw<3,0,3> o 0 o (8,8):(8,1): row m holds 8m + (n xor m).
func TestPrintComposed(t *testing.T) {
	c, err := ParseComposed("Sw<3,0,3> o 0 o (8,8):(8,1)")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := PrintLayout(&b, c); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if lines[0] != "Sw<3,0,3> o 0 o (8,8):(8,1)" {
		t.Errorf("title %q", lines[0])
	}
	if want := " 1  |  9 |  8 | 11 | 10 | 13 | 12 | 15 | 14 |"; lines[5] != want {
		t.Errorf("row 1:\n%s\nwant\n%s\n%s", lines[5], want, b.String())
	}
	b.Reset()
	if err := WriteSVG(&b, c); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "<rect") != 65 || !strings.Contains(b.String(), ">63<") {
		t.Errorf("unexpected SVG:\n%s", b.String())
	}
	if err := PrintLayout(&b, ComposedLayout{Outer: Swizzle{3, 0, 1}, Inner: Must(Parse("8:1"))}); err == nil {
		t.Error("an invalid swizzle was drawn")
	}
}

func TestMustParse(t *testing.T) {
	if l := MustParse("(4,8):(8,1)"); l.String() != "(4,8):(8,1)" {
		t.Errorf("MustParse gave %v", l)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustParse accepted a malformed layout")
		}
	}()
	MustParse("(4,8):(8,")
}

func FuzzParseComposed(f *testing.F) {
	for _, s := range []string{"Sw<3,0,3> o 0 o (8,8):(8,1)", "Sw<2,4,3> o _0 o 64:1", "(4,2):(2,1) o 1 o (2,3):(3,1)", "Sw<1,2,-3> o 8:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseComposed(s)
		if err != nil {
			return
		}
		d, err := ParseComposed(c.String())
		if err != nil || d.String() != c.String() {
			t.Fatalf("round trip: %q -> %v -> %v, %v", s, c, d, err)
		}
		// Draw small ones (Value on a shape of hundreds of nested leaves is slow, and drawing
		// evaluates every cell).
		if c.Size() <= 1<<12 && len(s) <= 100 {
			var b bytes.Buffer
			_ = PrintLayout(&b, c)
		}
	})
}
