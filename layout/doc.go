// Package layout is CuTe's layout algebra on static integers, conformant
// with C++ CuTe (CUTLASS 4.2 headers).
//
// An IntTuple is an integer or a tuple of IntTuples; a Layout is a pair of
// congruent IntTuples Shape:Stride and the function from coordinates to
// indices they define. Values print and parse in CuTe's notation:
//
//	l, _ := layout.Parse("(4,(2,3)):(1,(4,8))")
//	l.String()   // "(4,(2,3)):(1,(4,8))"
//	l.Value(13)  // 13: L(13), colexicographic
//
// The algebra keeps CuTe's names: Coalesce, Filter, Composition, Complement,
// RightInverse, LeftInverse, LogicalDivide/ZippedDivide/TiledDivide/
// FlatDivide, LogicalProduct/ZippedProduct/TiledProduct/FlatProduct,
// BlockedProduct, RakedProduct, TileToShape, MakeLayoutTV, MaxCommonVector,
// SliceAndOffset, LocalTile and LocalPartition. The second argument of
// composition, the divides and the products is a Tiler: a Layout, Tile(n)
// (the layout n:1), nil (CuTe's "_": leave the mode alone) or Modes{...}
// (one tiler per mode).
//
// Every operation that can fail returns an error (wrapping ErrInvalid,
// ErrRank, ErrDivisibility, ErrNotInjective or ErrOverflow) where C++ CuTe
// would refuse to compile: incongruent shapes, tilers that break CuTe's
// divisibility conditions, complements of non-injective layouts, integer
// overflow. No function panics on bad input (Must and MustParse are the
// exceptions, for tests and constants).
//
// For code generation with dynamic coordinates, the structure is public:
// IntTuple.IsInt/Int/Len/At, Layout.FlatShape/FlatStride, Crd2Idx,
// Idx2Crd, Layout.FlatCoord, and TileParts/PartitionParts return the
// per-part layout plus the layout that maps a coordinate to the part's
// offset.
//
// Swizzle and ComposedLayout (Outer(Offset + Inner(c))) model swizzled
// shared-memory layouts; ParseSwizzle and ParseComposed read what their
// String methods print ("Sw<3,0,3> o 0 o (8,8):(8,1)"). PrintLayout,
// WriteSVG, WriteTVSVG and PrintTV render layouts for the kgen CLI.
//
// See docs/layout.md for a guide and the recorded differences between
// pycute and C++ CuTe (this package follows C++).
package layout
