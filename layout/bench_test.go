package layout

import "testing"

var (
	benchA    = Must(Parse("(128,64):(64,1)"))
	benchTile = Must(Parse("(32,8):(1,32)"))
	benchSink Layout
)

// BenchmarkCompositionLayout composes a row-major 128x64 tensor with a
// column-major 32x8 tile layout.
func BenchmarkCompositionLayout(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := Composition(benchA, benchTile)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = r
	}
}

// BenchmarkCompositionModes composes the 128x64 tensor with the by-mode
// tiler (32,8).
func BenchmarkCompositionModes(b *testing.B) {
	t := Modes{Tile(32), Tile(8)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := Composition(benchA, t)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = r
	}
}

// BenchmarkLogicalDivide splits the 128x64 tensor into (32,8) tiles.
func BenchmarkLogicalDivide(b *testing.B) {
	t := Modes{Tile(32), Tile(8)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := LogicalDivide(benchA, t)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = r
	}
}

// BenchmarkZippedDivideLayoutTiler divides the tensor by a 2-D layout tiler.
func BenchmarkZippedDivideLayoutTiler(b *testing.B) {
	t := Modes{Must(Parse("(8,4):(4,1)")), Must(Parse("8:1"))}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := ZippedDivide(benchA, t)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = r
	}
}

// BenchmarkMakeLayoutTV builds a 32-thread x 8-value TV layout and composes
// a 32x8 tile of the tensor with it (what a copy partitioner does).
func BenchmarkMakeLayoutTV(b *testing.B) {
	thr := Must(Parse("(8,4):(4,1)"))
	val := Must(Parse("(4,2):(1,4)"))
	tile := Must(Parse("(32,8):(64,1)"))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, tv, err := MakeLayoutTV(thr, val)
		if err != nil {
			b.Fatal(err)
		}
		r, err := Composition(tile, tv)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = r
	}
}
