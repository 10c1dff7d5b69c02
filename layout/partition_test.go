package layout

import "testing"

// TestPartitionCxx pins local_partition, local_tile and tile_to_shape
// against answers printed by C++ CuTe (CUTLASS 4.2 headers, g++ on the
// host: tensors over a null pointer, offset = data() - nullptr).
func TestPartitionCxx(t *testing.T) {
	P := func(s string) Layout { return Must(Parse(s)) }
	type want struct {
		layout string
		off    int
	}
	check := func(name string, l Layout, off int, err error, w want) {
		t.Helper()
		if err != nil || l.String() != w.layout || off != w.off {
			t.Errorf("%s = %v, %d, %v; want %s, %d", name, l, off, err, w.layout, w.off)
		}
	}
	l, off, err := LocalPartition(P("(8,8):(1,8)"), P("(4,2):(2,1)"), 3)
	check("local_partition", l, off, err, want{"(2,4):(4,16)", 9})
	l, off, err = LocalTile(P("(128,64):(64,1)"), Modes{Tile(32), Tile(8)}, Ints(1, 2))
	check("local_tile", l, off, err, want{"(32,8):(64,1)", 2064})
	l, off, err = LocalTile(P("(128,64):(64,1)"), Modes{Tile(32), Tile(8)}, Tuple(Int(1), Hole))
	check("local_tile with _", l, off, err, want{"(32,8,8):(64,1,8)", 2048})
	for i, o := range map[int]int{0: 0, 5: 26, 11: 74} {
		l, off, err = LocalPartition(P("(12,(4,6)):(24,(1,4))"), P("((2,2),3):((3,6),1)"), i)
		check("local_partition nested", l, off, err, want{"(3,8):(96,3)", o})
		parts, err := PartitionParts(P("(12,(4,6)):(24,(1,4))"), P("((2,2),3):((3,6),1)"))
		if err != nil {
			t.Fatal(err)
		}
		crd, _ := P("((2,2),3):((3,6),1)").FlatCoord(i)
		if v, _ := parts.Offset.Eval(crd); v != o || parts.Layout.String() != "(3,8):(96,3)" {
			t.Errorf("PartitionParts: %v, offset %d at %v, want %d", parts.Layout, v, crd, o)
		}
	}
	tts, err := TileToShape(P("(2,3):(1,2)"), Ints(8, 9))
	if err != nil || tts.String() != "((2,4),(3,3)):((1,6),(2,24))" {
		t.Errorf("tile_to_shape = %v, %v", tts, err)
	}
	tp, err := TileParts(P("(128,64):(64,1)"), Modes{Tile(32), Tile(8)})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := tp.Offset.Eval(Ints(1, 2)); v != 2064 || tp.Layout.String() != "(32,8):(64,1)" {
		t.Errorf("TileParts = %v, offset %d", tp, v)
	}
}
