package layout

import (
	"io"
	"runtime/debug"
	"testing"
)

// TestNoPanicOnOddValues calls the exported API with zero values, holes,
// empty tuples and invalid layouts: errors are fine, panics are not.
func TestNoPanicOnOddValues(t *testing.T) {
	tuples := []IntTuple{{}, Hole, Tuple(), Tuple(Hole), Ints(0, 2), Ints(-3, 2), Tuple(Tuple()), Int(1 << 61)}
	// Layouts a user can build: valid ones, the zero Layout, and modes
	// gathered with MakeLayoutOf (returned with its error).
	gather := func(ms ...Layout) Layout { l, _ := MakeLayoutOf(ms...); return l }
	layouts := []Layout{{}, gather(), gather(Layout{}, Must(Parse("3:1"))),
		gather(gather()), Must(Parse("(4,8):(8,1)")), Must(Parse("1:0"))}
	tilers := []Tiler{nil, Tile(0), Tile(-1), Tile(4), Modes{}, Modes{nil, nil, nil}, Modes{Tile(2)}, Layout{}}
	for _, a := range layouts {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic on %#v: %v\n%s", a, r, debug.Stack())
				}
			}()
			_ = a.String()
			a.Size()
			a.Cosize()
			a.Value(5)
			a.Flatten()
			a.Mode(3)
			a.Select(0, 2)
			a.GroupModes(0, 1)
			a.FlatCoord(3)
			Coalesce(a)
			Filter(a)
			Complement(a)
			RightInverse(a)
			LeftInverse(a)
			PrintLayout(io.Discard, a)
			WriteSVG(io.Discard, a)
			WriteTVSVG(io.Discard, a, Ints(2, 2))
			PrintTV(io.Discard, a, Ints(2, 2))
			(ComposedLayout{Inner: a}).Value(3)
			(ComposedLayout{Inner: a}).Eval(Int(3))
			for _, x := range tuples {
				a.Eval(x)
				CoalesceProfile(a, x)
				FilterProfile(a, x)
				ComplementTo(a, x)
				SliceAndOffset(x, a)
				TileToShape(a, x)
				LocalTile(a, Modes{Tile(2)}, x)
				Crd2Idx(x, a.shape, &a.stride)
				Idx2Crd(x, a.shape, &a.stride)
			}
			for _, b := range layouts {
				MaxCommonVector(a, b)
				BlockedProduct(a, b)
				RakedProduct(a, b)
				MakeLayoutTV(a, b)
				LocalPartition(a, b, 3)
				PartitionParts(a, b)
			}
			for _, tl := range tilers {
				Composition(a, tl)
				LogicalDivide(a, tl)
				ZippedDivide(a, tl)
				TiledDivide(a, tl)
				FlatDivide(a, tl)
				LogicalProduct(a, tl)
				ZippedProduct(a, tl)
				TiledProduct(a, tl)
				FlatProduct(a, tl)
				TileParts(a, tl)
			}
		}()
	}
	for _, x := range tuples {
		for _, y := range tuples {
			Product(x)
			Max(x)
			InnerProduct(x, y)
			PrefixProduct(x, y)
			ShapeDiv(x, y)
			Slice(x, y)
			Crd2Idx(x, y, nil)
			Idx2Crd(x, y, nil)
			New(x, y)
			MakeLayout(x)
			RowMajor(x)
		}
	}
}
