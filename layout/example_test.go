package layout_test

import (
	"fmt"
	"os"

	"github.com/kgen-dev/kgen/layout"
)

func ExampleParse() {
	l, err := layout.Parse("(4,(2,3)):(1,(4,8))")
	if err != nil {
		panic(err)
	}
	fmt.Println(l, l.Size(), l.Cosize(), l.Rank(), l.Depth())
	c, _ := layout.Idx2Crd(layout.Int(13), l.Shape(), nil)
	v, _ := l.Eval(c)
	fmt.Println(c, v, l.Value(13))
	m, _ := layout.MakeLayout(layout.Ints(4, 1, 2))
	r, _ := layout.RowMajor(layout.Ints(4, 8))
	fmt.Println(m, r)
	// Output:
	// (4,(2,3)):(1,(4,8)) 24 24 2 2
	// (1,(1,1)) 13 13
	// (4,1,2):(1,0,4) (4,8):(8,1)
}

func ExampleComposition() {
	a := layout.MustParse("(6,2):(8,2)")
	b := layout.MustParse("(4,3):(3,1)")
	c, err := layout.Composition(a, b)
	fmt.Println(c, err)
	// By mode: 3:1 on mode 0, leave mode 1 alone.
	d, _ := layout.Composition(layout.MustParse("(12,(4,8)):(59,(13,1))"), layout.Modes{layout.Tile(3), nil})
	fmt.Println(d)
	// Output:
	// ((2,2),3):((24,2),8) <nil>
	// (3,(4,8)):(59,(13,1))
}

func ExampleComplement() {
	a := layout.MustParse("(2,2):(1,6)")
	c, _ := layout.ComplementTo(a, layout.Int(24))
	fmt.Println(c)
	// Output:
	// (3,2):(2,12)
}

func ExampleLogicalDivide() {
	a := layout.MustParse("(4,2,3):(2,1,8)")
	d, _ := layout.LogicalDivide(a, layout.MustParse("4:2"))
	fmt.Println(d)
	// Output:
	// ((2,2),(2,3)):((4,1),(2,8))
}

func ExampleZippedDivide() {
	// A 128x64 row-major tensor cut into 32x8 tiles: ((tile),(tiles)).
	a := layout.MustParse("(128,64):(64,1)")
	z, _ := layout.ZippedDivide(a, layout.Modes{layout.Tile(32), layout.Tile(8)})
	fmt.Println(z)
	t, off, _ := layout.LocalTile(a, layout.Modes{layout.Tile(32), layout.Tile(8)}, layout.Ints(1, 2))
	fmt.Println(t, off)
	// Output:
	// ((32,8),(4,8)):((64,1),(2048,8))
	// (32,8):(64,1) 2064
}

func ExampleLocalPartition() {
	// 8x8 tile, 4x2 threads (row-major thread ids): each thread gets 2x4.
	a := layout.MustParse("(8,8):(1,8)")
	thr := layout.MustParse("(4,2):(2,1)")
	p, off, _ := layout.LocalPartition(a, thr, 3)
	fmt.Println(p, off)
	parts, _ := layout.PartitionParts(a, thr)
	crd, _ := thr.FlatCoord(3)
	o, _ := parts.Offset.Eval(crd)
	fmt.Println(parts.Layout, crd, o)
	// Output:
	// (2,4):(4,16) 9
	// (2,4):(4,16) (1,1) 9
}

func ExampleMakeLayoutTV() {
	thr := layout.MustParse("(4,2):(2,1)") // 8 threads, row-major
	val := layout.MustParse("(2,2):(1,2)") // 2x2 values each
	tiler, tv, _ := layout.MakeLayoutTV(thr, val)
	fmt.Println(tiler, tv)
	layout.PrintTV(os.Stdout, tv, tiler)
	// Output:
	// (8,4) ((2,4),(2,2)):((16,2),(1,8))
	// ((2,4),(2,2)):((16,2),(1,8)) over (8,4)
	// +----+----+----+----+
	// |T0V0|T0V2|T1V0|T1V2|
	// +----+----+----+----+
	// |T0V1|T0V3|T1V1|T1V3|
	// +----+----+----+----+
	// |T2V0|T2V2|T3V0|T3V2|
	// +----+----+----+----+
	// |T2V1|T2V3|T3V1|T3V3|
	// +----+----+----+----+
	// |T4V0|T4V2|T5V0|T5V2|
	// +----+----+----+----+
	// |T4V1|T4V3|T5V1|T5V3|
	// +----+----+----+----+
	// |T6V0|T6V2|T7V0|T7V2|
	// +----+----+----+----+
	// |T6V1|T6V3|T7V1|T7V3|
	// +----+----+----+----+
}

func ExampleSwizzle() {
	sw, _ := layout.NewSwizzle(3, 3, 3)
	sl := layout.ComposedLayout{Outer: sw, Offset: 0, Inner: layout.MustParse("(8,64):(64,1)")}
	v, _ := sl.Eval(layout.Ints(1, 8))
	fmt.Println(sl, sw.Apply(72), v)
	// Output:
	// Sw<3,3,3> o 0 o (8,64):(64,1) 64 64
}

func ExamplePrintLayout() {
	layout.PrintLayout(os.Stdout, layout.MustParse("(2,4):(4,1)"))
	// Output:
	// (2,4):(4,1)
	//       0   1   2   3
	//     +---+---+---+---+
	//  0  | 0 | 1 | 2 | 3 |
	//     +---+---+---+---+
	//  1  | 4 | 5 | 6 | 7 |
	//     +---+---+---+---+
}
