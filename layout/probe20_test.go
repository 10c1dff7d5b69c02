package layout

import (
	"strings"
	"testing"
)

// TestProbe20PrintLayoutAligned: PrintLayout sized its cells by the cosize's digits only, so
// a negative value (a negative stride or offset), a column index of a stride-0 layout past
// the cosize's digits, or a row index from 100 on overran them and the grid's rules no
// longer lined up with the cells ("+---+" over "| -2 |"). Probe 20.
func TestProbe20PrintLayoutAligned(t *testing.T) {
	for _, src := range []string{"(2,3):(1,-2)", "(3,12):(0,0)", "(101,1):(1,1)", "Sw<3,0,3> o -5 o (8,8):(8,1)"} {
		var d Drawable
		if strings.HasPrefix(src, "Sw") {
			c, err := ParseComposed(src)
			if err != nil {
				t.Fatal(err)
			}
			d = c
		} else {
			l, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			d = l
		}
		var b strings.Builder
		if err := PrintLayout(&b, d); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		rule := lines[2]
		if len(lines[1]) > len(rule) {
			t.Errorf("%s: the column header %q is wider than the rule %q", src, lines[1], rule)
		}
		for i, l := range lines[2:] {
			if len(l) != len(rule) {
				t.Errorf("%s: line %d %q is %d wide, the rule %q %d", src, i+2, l, len(l), rule, len(rule))
				break
			}
			for j := range l {
				if rule[j] == '+' && l[j] != '+' && l[j] != '|' {
					t.Errorf("%s: line %d %q does not put a bar under the rule's %q", src, i+2, l, rule)
					break
				}
			}
		}
	}
	// An ordinary layout prints exactly as before (cute::print_layout's format).
	l, _ := Parse("(2,2):(2,1)")
	var b strings.Builder
	if err := PrintLayout(&b, l); err != nil {
		t.Fatal(err)
	}
	if want := "(2,2):(2,1)\n      0   1\n    +---+---+\n 0  | 0 | 1 |\n    +---+---+\n 1  | 2 | 3 |\n    +---+---+\n"; b.String() != want {
		t.Errorf("PrintLayout((2,2):(2,1)) =\n%s; want\n%s", b.String(), want)
	}
}
