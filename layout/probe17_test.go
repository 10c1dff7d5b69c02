package layout

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestProbe17LongLayoutsInErrors: an error about a layout or tuple of 50000 modes shows its
// first 200 bytes and its length (each quoted all 100-200 KB of it: Mode, Select,
// GroupModes, Eval, Crd2Idx, Idx2Crd, SliceAndOffset, TileToShape, New, PrintLayout); probe 17.
func TestProbe17LongLayoutsInErrors(t *testing.T) {
	ones := "(" + strings.TrimSuffix(strings.Repeat("1,", 50000), ",") + ")"
	big := MustParse(ones + ":" + strings.ReplaceAll(ones, "1", "3"))
	twos, err := ParseIntTuple(strings.ReplaceAll(ones, "1", "2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		call func() error
		want string
	}{
		{"Mode", func() error { _, err := big.Mode(60000); return err }, "mode 60000 out of range for (1,1,"},
		{"Select", func() error { _, err := big.Select(60000); return err }, "mode 60000 out of range for (1,1,"},
		{"GroupModes", func() error { _, err := big.GroupModes(5, 1); return err }, "group_modes: bad range for (1,1,"},
		{"Eval", func() error { _, err := big.Eval(Ints(1, 2)); return err }, "coordinate (1,2) does not match shape (1,1,"},
		{"Crd2Idx", func() error { _, err := Crd2Idx(twos, Ints(3), nil); return err }, "coordinate (2,2,"},
		{"Idx2Crd", func() error { _, err := Idx2Crd(twos, Ints(3), nil); return err }, "index (2,2,"},
		{"SliceAndOffset", func() error { _, _, err := SliceAndOffset(Ints(1, 2), big); return err }, "slice: coordinate (1,2) does not match (1,1,"},
		{"TileToShape", func() error { _, err := TileToShape(big, Ints(3)); return err }, "tile_to_shape: rank of (1,1,"},
		{"New", func() error { _, err := New(twos, Ints(1)); return err }, "shape (2,2,"},
		{"PrintLayout", func() error { return PrintLayout(io.Discard, big) }, "rendering needs a rank-1 or rank-2 layout, got (1,1,"},
	} {
		err := c.call()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), " bytes)") || len(err.Error()) > 600 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: %d bytes: %.300v; want a short error holding %q and the length", c.what, n, err, c.want)
		}
	}
	// A short layout is shown whole.
	if _, err := MustParse("(4,2):(2,1)").Mode(7); err == nil || err.Error() != "layout: mode 7 out of range for (4,2):(2,1)" {
		t.Errorf("Mode(7) of (4,2):(2,1): %v", err)
	}
}

// valuesOf is l.Values() for tests of layouts known to be listable (it panics otherwise).
func valuesOf(l Layout) []int {
	v, err := l.Values()
	if err != nil {
		panic(err)
	}
	return v
}

// TestProbe17MakeLayoutOfAndValues: MakeLayoutOf of valid modes whose product passes 2^62
// is an error (its Size wrapped to 0 and Values listed nothing), and Values refuses a layout
// of more than MaxValues values (it asked for hundreds of GB: a fatal out-of-memory).
func TestProbe17MakeLayoutOfAndValues(t *testing.T) {
	big := MustParse("4611686018427387904:0")
	if _, err := MakeLayoutOf(big, MustParse("4:0")); err == nil || !strings.Contains(err.Error(), "overflow") && !strings.Contains(err.Error(), "out of range") {
		t.Errorf("MakeLayoutOf(2^62:0, 4:0): %v, want an overflow error", err)
	}
	if l, err := MakeLayoutOf(MustParse("4:1"), MustParse("8:4")); err != nil || l.String() != "(4,8):(1,4)" {
		t.Errorf("MakeLayoutOf(4:1, 8:4) = %v, %v", l, err)
	}
	if _, err := MustParse("(65536,65536,16):(1,65536,0)").Values(); err == nil || !strings.Contains(err.Error(), "at most 2147483648") {
		t.Errorf("Values of 2^36 elements: %v, want a refusal", err)
	}
	if v, err := MustParse("(2,2):(2,1)").Values(); err != nil || fmt.Sprint(v) != "[0 2 1 3]" {
		t.Errorf("Values((2,2):(2,1)) = %v, %v", v, err)
	}
}
