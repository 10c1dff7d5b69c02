package layout

// Divides, products, slicing and partitioning.

func logicalDivide(a Layout, t Tiler) Layout {
	switch t := t.(type) {
	case nil:
		return a
	case Modes:
		if len(t) > a.Rank() {
			fail(ErrRank, "logical_divide: tiler has %d modes, layout %v has %d", len(t), a, a.Rank())
		}
		return byModes(a, t, logicalDivide)
	case Tile:
		return logicalDivideLayout(a, tileLayout(t))
	case Layout:
		return logicalDivideLayout(a, t)
	}
	fail(ErrInvalid, "unknown tiler %T", t)
	return Layout{}
}

func logicalDivideLayout(a, t Layout) Layout {
	c := complementTo(t, coalesce(a).shape)
	tc := makeLayout(t, c)
	return composeWith(a, tc.shape, tc.stride)
}

// byModes applies f to mode i of a and t[i], keeping the modes of a beyond
// len(t).
func byModes(a Layout, t Modes, f func(Layout, Tiler) Layout) Layout {
	r := a.Rank()
	modes := make([]Layout, r)
	for i := 0; i < r; i++ {
		if i < len(t) {
			modes[i] = f(a.mode(i), t[i])
		} else {
			modes[i] = a.mode(i)
		}
	}
	return makeLayout(modes...)
}

// zip2By is CuTe's zip2_by: following the profile of the tiler, gather the
// rank-2 results of the divide/product into ((tiles...),(rests...,others)).
func zip2By(x IntTuple, guide Tiler) IntTuple {
	if g, ok := guide.(Modes); ok {
		if x.kind != kindTuple || len(x.elems) < len(g) {
			fail(ErrRank, "tiler has more modes than %v", x)
		}
		first := make([]IntTuple, len(g))
		second := make([]IntTuple, 0, len(x.elems))
		for i := range g {
			p := zip2By(x.elems[i], g[i])
			first[i] = p.elems[0]
			second = append(second, p.elems[1])
		}
		second = append(second, x.elems[len(g):]...)
		return tup([]IntTuple{tup(first), tup(second)})
	}
	if x.kind != kindTuple || len(x.elems) != 2 {
		fail(ErrRank, "mode %v is not rank 2 (a _ tiler mode needs a rank-2 mode)", x)
	}
	return x
}

func tileUnzip(l Layout, t Tiler) Layout {
	return mk(zip2By(l.shape, t), zip2By(l.stride, t))
}

// unpack returns the modes of x as a list the way CuTe's
// layout(repeat<rank(x)>(_)) splices them: a tuple of rank != 1 is spliced,
// anything else is kept as one mode.
func unpack(dst []IntTuple, x IntTuple) []IntTuple {
	if x.kind == kindTuple && len(x.elems) != 1 {
		return append(dst, x.elems...)
	}
	return append(dst, x)
}

func tiledOf(z Layout) Layout {
	s := []IntTuple{z.shape.elems[0]}
	d := []IntTuple{z.stride.elems[0]}
	return mk(tup(unpack(s, z.shape.elems[1])), tup(unpack(d, z.stride.elems[1])))
}

func flatOf(z Layout) Layout {
	s := unpack(unpack(nil, z.shape.elems[0]), z.shape.elems[1])
	d := unpack(unpack(nil, z.stride.elems[0]), z.stride.elems[1])
	return mk(tup(s), tup(d))
}

// LogicalDivide splits every mode of a by the tiler into (tile, rest):
// a Layout tiler T gives a ∘ (T, complement(T, shape(a))); a by-mode tiler
// divides mode by mode and keeps the modes it does not cover.
func LogicalDivide(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return logicalDivide(a, t), nil
}

// ZippedDivide is LogicalDivide with the tiles gathered in mode 0 and the
// rests in mode 1: ((tile...),(rest...)).
func ZippedDivide(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return tileUnzip(logicalDivide(a, t), t), nil
}

// TiledDivide is ZippedDivide with the rest modes unpacked:
// ((tile...),rest0,rest1,...).
func TiledDivide(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return tiledOf(tileUnzip(logicalDivide(a, t), t)), nil
}

// FlatDivide is ZippedDivide with both modes unpacked:
// (tile0,tile1,...,rest0,rest1,...).
func FlatDivide(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return flatOf(tileUnzip(logicalDivide(a, t), t)), nil
}

func logicalProduct(a Layout, t Tiler) Layout {
	switch t := t.(type) {
	case nil:
		return a
	case Modes:
		if len(t) > a.Rank() {
			fail(ErrRank, "logical_product: tiler has %d modes, layout %v has %d", len(t), a, a.Rank())
		}
		return byModes(a, t, logicalProduct)
	case Tile:
		return logicalProductLayout(a, tileLayout(t))
	case Layout:
		return logicalProductLayout(a, t)
	}
	fail(ErrInvalid, "unknown tiler %T", t)
	return Layout{}
}

func logicalProductLayout(a, t Layout) Layout {
	c := complementTo(a, Int(mul(product(a.shape), t.cosize())))
	return makeLayout(a, composeWith(c, t.shape, t.stride))
}

// LogicalProduct repeats the block a over the tiler: (a, complement(a) ∘ t)
// for a Layout tiler; a by-mode tiler works mode by mode.
func LogicalProduct(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return logicalProduct(a, t), nil
}

// ZippedProduct is LogicalProduct gathered as ((block...),(repeats...)).
func ZippedProduct(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return tileUnzip(logicalProduct(a, t), t), nil
}

// TiledProduct is ZippedProduct with the repeat modes unpacked.
func TiledProduct(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return tiledOf(tileUnzip(logicalProduct(a, t), t)), nil
}

// FlatProduct is ZippedProduct with both modes unpacked.
func FlatProduct(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return flatOf(tileUnzip(logicalProduct(a, t), t)), nil
}

// appendRank pads l with 1:0 modes up to rank r (CuTe's append<R>).
func appendRank(l Layout, r int) Layout {
	if l.Rank() >= r {
		return l
	}
	s := make([]IntTuple, 0, r)
	d := make([]IntTuple, 0, r)
	if l.shape.kind == kindTuple {
		s, d = append(s, l.shape.elems...), append(d, l.stride.elems...)
	} else {
		s, d = append(s, l.shape), append(d, l.stride)
	}
	for len(s) < r {
		s, d = append(s, Int(1)), append(d, Int(0))
	}
	return mk(tup(s), tup(d))
}

// zipTuples is CuTe's zip(a, b): ((a0,b0),(a1,b1),...).
func zipTuples(a, b IntTuple) IntTuple {
	if a.kind != kindTuple {
		return tup([]IntTuple{tup([]IntTuple{a, b})})
	}
	out := make([]IntTuple, len(a.elems))
	for i := range a.elems {
		out[i] = tup([]IntTuple{a.elems[i], b.At(i)})
	}
	return tup(out)
}

func rankedProduct(a, b Layout, raked bool) Layout {
	r := max(a.Rank(), b.Rank())
	p := logicalProductLayout(appendRank(a, r), appendRank(b, r))
	x, y := p.mode(0), p.mode(1)
	if raked {
		x, y = y, x
	}
	if x.shape.kind == kindTuple && (y.shape.kind != kindTuple || len(x.shape.elems) != len(y.shape.elems)) {
		fail(ErrRank, "product: ranks of %v and %v do not match", x, y)
	}
	return mk(zipTuples(x.shape, y.shape), zipTuples(x.stride, y.stride))
}

// BlockedProduct repeats the block a over the layout b, mode by mode:
// mode i of the result is (a_i, b_i) (CuTe's blocked_product).
func BlockedProduct(a, b Layout) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkLayoutArg("block", a)
	checkLayoutArg("layout", b)
	return rankedProduct(a, b, false), nil
}

// RakedProduct interleaves the repeats of a over b: mode i of the result is
// (b_i, a_i) (CuTe's raked_product).
func RakedProduct(a, b Layout) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkLayoutArg("block", a)
	checkLayoutArg("layout", b)
	return rankedProduct(a, b, true), nil
}

// TileToShape repeats the block over the target shape, column-major
// (CuTe's tile_to_shape): every mode of block must divide the target.
func TileToShape(block Layout, target IntTuple) (Layout, error) {
	var r Layout
	err := catch(func() {
		checkLayoutArg("tile_to_shape: block", block)
		checkExtents("tile_to_shape: target", target)
		R := target.Len()
		if block.Rank() > R {
			fail(ErrRank, "tile_to_shape: rank of %v exceeds rank of %v", block, target)
		}
		padded := appendRank(block, R)
		bs := productEach(padded.shape)
		ts := productEach(target)
		for i := 0; i < R; i++ {
			if bs.At(i).val <= 0 || ts.At(i).val%bs.At(i).val != 0 {
				fail(ErrDivisibility, "tile_to_shape: block %v does not divide %v", block, target)
			}
		}
		ps := ceilDiv(ts, bs)
		if ps.kind != kindTuple {
			ps = tup([]IntTuple{ps}) // C++ make_ordered_layout gives a rank-1 tuple
		}
		st, _ := compactMajor(ps, 1, true)
		r = rankedProduct(padded, mk(ps, st), false)
	})
	return r, err
}

// MakeLayoutTV builds a thread-value layout from a thread layout and a value
// layout, as CuTe DSL's make_layout_tv: it returns the tiler (the extent of
// each mode of raked_product(thr, val)) and the layout
// (thread, value) -> index in that tile.
func MakeLayoutTV(thr, val Layout) (IntTuple, Layout, error) {
	var tiler IntTuple
	var tv Layout
	err := catch(func() {
		checkLayoutArg("thread layout", thr)
		checkLayoutArg("value layout", val)
		mn := rankedProduct(thr, val, true)
		shape := Ints(product(thr.shape), product(val.shape))
		st, _ := compactMajor(shape, 1, true)
		tv = composition(rightInverse(mn), mk(shape, st))
		tiler = productEach(mn.shape)
	})
	return tiler, tv, err
}

// SliceAndOffset slices l at a coordinate with holes: the result keeps the
// modes under the holes (gathered as in CuTe's slice) and the offset is
// l(crd) with the holes taken as 0.
func SliceAndOffset(crd IntTuple, l Layout) (Layout, int, error) {
	var r Layout
	var off int
	err := catch(func() {
		r = mk(slice(crd, l.shape), slice(crd, l.stride))
		off = crd2idx(crd, l.shape, l.stride)
	})
	return r, off, err
}

// FlatCoord returns the flat coordinate of index idx in l (CuTe's
// get_flat_coord): the hierarchical coordinate idx2crd(idx, shape, stride)
// with each top-level mode folded to a colexicographic integer.
func (l Layout) FlatCoord(idx int) (result IntTuple, err error) {
	defer recoverErr(&err)
	return flatCoord(l, idx), nil
}

func flatCoord(l Layout, idx int) IntTuple {
	h := idx2crd(Int(idx), l.shape, l.stride)
	if l.shape.kind != kindTuple {
		return h
	}
	out := make([]IntTuple, len(l.shape.elems))
	for i, s := range l.shape.elems {
		st, _ := compactMajor(s, 1, true)
		out[i] = Int(crd2idx(h.elems[i], s, st))
	}
	return tup(out)
}

// Partition describes one part of a layout cut by LocalTile or
// LocalPartition as functions of the part's coordinate, for code that emits
// index arithmetic with a dynamic coordinate:
//
//	offset(coord) = Offset.Eval(coord)  // first index of the part
//	element i of the part is at offset(coord) + Layout.Value(i)
type Partition struct {
	Layout Layout // the layout of a part; the same for every coordinate
	Offset Layout // maps the part's coordinate to its offset
}

// TileParts cuts l into tiles (CuTe's local_tile with a dynamic
// coordinate): Layout is the tile, Offset maps a tile coordinate (one
// entry per mode of the tiler's rest) to the tile's first index.
func TileParts(l Layout, tiler Tiler) (Partition, error) {
	var p Partition
	err := catch(func() {
		z := tileUnzip(logicalDivide(l, tiler), tiler)
		p.Layout = flatFirst(z.mode(0))
		p.Offset = z.mode(1)
	})
	return p, err
}

// flatFirst returns the tile mode spliced as CuTe's layout(repeat<R0>(_))
// does: a rank-1 tuple stays wrapped.
func flatFirst(m Layout) Layout {
	if m.shape.kind == kindTuple && len(m.shape.elems) != 1 {
		return m
	}
	return mk(tup([]IntTuple{m.shape}), tup([]IntTuple{m.stride}))
}

// LocalTile returns the tile of l at coord and its offset (CuTe's local_tile
// on a layout): l is divided by the tiler and coord indexes the tiles. A
// tuple coord shorter than the rest keeps the remaining modes.
func LocalTile(l Layout, tiler Tiler, coord IntTuple) (Layout, int, error) {
	var r Layout
	var off int
	err := catch(func() {
		z := tileUnzip(logicalDivide(l, tiler), tiler)
		r0 := z.shape.elems[0].Len()
		c1 := coord
		if coord.kind == kindTuple {
			c1 = padHoles(coord, z.shape.elems[1].Len())
		}
		crd := tup([]IntTuple{repeatHole(r0), c1})
		r = mk(slice(crd, z.shape), slice(crd, z.stride))
		off = crd2idx(crd, z.shape, z.stride)
	})
	return r, off, err
}

// LocalPartition returns the part of l owned by thread idx of the thread
// layout thr and its offset (CuTe's local_partition on a layout): l is
// divided by the extents of thr's modes and the thread's flat coordinate
// selects the element within each tile. idx must be in [0, thr.Size()).
func LocalPartition(l Layout, thr Layout, idx int) (Layout, int, error) {
	var r Layout
	var off int
	err := catch(func() {
		if n := thr.Size(); idx < 0 || idx >= n {
			fail(ErrInvalid, "local partition: thread %d of a thread layout of %d threads (want 0 <= idx < %d)", idx, n, n)
		}
		tiler := TilerOf(productEach(thr.shape))
		z := tileUnzip(logicalDivide(l, tiler), tiler)
		coord := flatCoord(thr, idx)
		c0 := coord
		if coord.kind == kindTuple {
			c0 = padHoles(coord, z.shape.elems[0].Len())
		}
		crd := tup([]IntTuple{c0, repeatHole(z.shape.elems[1].Len())})
		r = mk(slice(crd, z.shape), slice(crd, z.stride))
		off = crd2idx(crd, z.shape, z.stride)
	})
	return r, off, err
}

// PartitionParts is LocalPartition with a dynamic thread: Layout is the part
// of every thread and Offset maps thr.FlatCoord(idx) to the thread's offset.
func PartitionParts(l Layout, thr Layout) (Partition, error) {
	var p Partition
	err := catch(func() {
		tiler := TilerOf(productEach(thr.shape))
		z := tileUnzip(logicalDivide(l, tiler), tiler)
		crd := tup([]IntTuple{Int(0), repeatHole(z.shape.elems[1].Len())})
		p.Layout = mk(slice(crd, z.shape), slice(crd, z.stride))
		p.Offset = z.mode(0)
	})
	return p, err
}

func repeatHole(n int) IntTuple {
	if n == 1 {
		return Hole
	}
	h := make([]IntTuple, n)
	for i := range h {
		h[i] = Hole
	}
	return tup(h)
}

func padHoles(c IntTuple, n int) IntTuple {
	if len(c.elems) >= n {
		return c
	}
	out := append(append([]IntTuple(nil), c.elems...), make([]IntTuple, n-len(c.elems))...)
	for i := len(c.elems); i < n; i++ {
		out[i] = Hole
	}
	return tup(out)
}
