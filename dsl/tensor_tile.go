package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/layout"
)

// splitMode divides the leaves of one mode by t (logical_divide by t:1): the first t
// elements' leaves, and the rest. Shapes must divide as CuTe requires.
func splitMode(m []leaf, t int) (tile, rest []leaf, err error) {
	if t <= 0 {
		return nil, nil, fmt.Errorf("tile extent %d must be positive", t)
	}
	n := t
	for i, l := range m {
		switch {
		case n == 1:
			rest = append(rest, m[i:]...)
			return tile, rest, nil
		case l.shape == 0:
			// A runtime extent: the tile takes n elements of it, the rest is runtime too.
			tile = append(tile, leaf{shape: n, stride: l.stride, mode: l.mode, cstride: l.cstride})
			rest = append(rest, leaf{shape: 0, stride: mulStride(l.stride, int64(n)), mode: l.mode, cstride: l.cstride * n})
			rest = append(rest, m[i+1:]...)
			return tile, rest, nil
		case n%l.shape == 0:
			tile = append(tile, l)
			n /= l.shape
		case l.shape%n == 0:
			tile = append(tile, leaf{shape: n, stride: l.stride, mode: l.mode, cstride: l.cstride})
			rest = append(rest, leaf{shape: l.shape / n, stride: mulStride(l.stride, int64(n)), mode: l.mode, cstride: l.cstride * n})
			rest = append(rest, m[i+1:]...)
			return tile, rest, nil
		default:
			return nil, nil, fmt.Errorf("tile extent %d does not divide the mode's shape (leaf of extent %d)", t, l.shape)
		}
	}
	if n != 1 {
		return nil, nil, fmt.Errorf("tile extent %d is larger than the mode", t)
	}
	return tile, rest, nil
}

func mulStride(s stride, f int64) stride { return stride{c: s.c * f, dyn: s.dyn} }

func modeSize(m []leaf) int {
	n := 1
	for _, l := range m {
		n *= l.shape
	}
	return n
}

// LocalTile returns the tile at coordinate coord of the tensor tiled by tile (one extent per
// mode): CuTe's local_tile(tensor, tile, coord). Coordinates are Go ints or integer Values.
func (t Tensor) LocalTile(tile []int, coord ...any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("LocalTile") {
		return t
	}
	if len(tile) != len(t.modes) || len(coord) != len(t.modes) {
		k.errorf("LocalTile: tensor has rank %d; got %d tile extents and %d coordinates", len(t.modes), len(tile), len(coord))
		return t
	}
	u := t.clone()
	for m := range t.modes {
		tl, rest, err := splitMode(t.modes[m], tile[m])
		if err != nil {
			k.errorf("LocalTile: mode %d: %v", m, err)
			return t
		}
		c, ok := k.coordOf(coord[m], "LocalTile")
		if !ok {
			return t
		}
		u.modes[m] = tl
		u.advance(rest, c)
	}
	return u
}

// ZippedDivide tiles the tensor by tile (one extent per mode) and returns a rank-2 tensor:
// mode 0 the tile (its modes grouped), mode 1 the tiles. Index mode 1 with a dynamic tile
// coordinate through Slice or Tile.
func (t Tensor) ZippedDivide(tile []int) Tensor {
	k := t.k
	if !t.ok("ZippedDivide") {
		return t
	}
	if len(tile) != len(t.modes) {
		k.errorf("ZippedDivide: tensor has rank %d; got %d tile extents", len(t.modes), len(tile))
		return t
	}
	var in, out []leaf
	for m := range t.modes {
		tl, rest, err := splitMode(t.modes[m], tile[m])
		if err != nil {
			k.errorf("ZippedDivide: mode %d: %v", m, err)
			return t
		}
		in = append(in, tl...)
		out = append(out, rest...)
	}
	u := t.clone()
	u.modes = [][]leaf{in, out}
	return u
}

// Tile selects tile i (a Go int or integer Value) of a ZippedDivide result: the tensor of
// its mode 0, moved to the tile's origin.
func (t Tensor) Tile(i any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("Tile") {
		return t
	}
	if len(t.modes) != 2 {
		k.errorf("Tile: want the rank-2 result of ZippedDivide, got rank %d", len(t.modes))
		return t
	}
	c, ok := k.coordOf(i, "Tile")
	if !ok {
		return t
	}
	u := t.clone()
	rest := u.modes[1]
	u.modes = [][]leaf{u.modes[0]}
	u.advance(rest, c)
	return u
}

// LocalPartition splits a tile over the threads of a block, mode by mode: CuTe's
// local_partition(tensor, thr, tid), where thr is the thread layout over the tile's modes
// (rank equal to the tensor's; thread tid sits at thr's coordinate of tid, as CuTe's
// get_flat_coord). val, when given, is the number of consecutive elements each thread owns
// per mode (one per mode; 1 when left out): each thread gets, per mode, blocks of val
// elements strided by thr*val, and the result has modes (val_m, rest_m). A 128-bit copy of
// f32 uses val 4 along the contiguous mode. PartitionByTV takes a thread-value layout instead.
func (t Tensor) LocalPartition(thr layout.Layout, tid Value, val ...int) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("LocalPartition") {
		return t
	}
	shape, st := thr.FlatShape(), thr.FlatStride()
	if len(val) == 0 {
		val = make([]int, len(shape))
		for i := range val {
			val[i] = 1
		}
	}
	if len(shape) != len(t.modes) || len(val) != len(t.modes) {
		k.errorf("LocalPartition: tensor has rank %d; thread layout %v has %d modes and val %d", len(t.modes), thr, len(shape), len(val))
		return t
	}
	if !k.own(tid, "LocalPartition") {
		return t
	}
	if !isInt(tid.t) {
		k.errorf("LocalPartition: thread index is %s, not an integer", tid.t)
		return t
	}
	if !tid.IsConst() && !k.fits32(tid, "LocalPartition", "thread index") {
		return t
	}
	id := tid.To(I32)
	u := t.clone()
	for m := range t.modes {
		v, n := val[m], shape[m]
		if v <= 0 {
			k.errorf("LocalPartition: val[%d] = %d must be positive", m, v)
			return t
		}
		size := modeSize(t.modes[m])
		if size == 0 || size%(n*v) != 0 {
			k.errorf("LocalPartition: mode %d of extent %d is not divisible by %d threads x %d values", m, size, n, v)
			return t
		}
		vals, rest, err := splitMode(t.modes[m], v)
		if err != nil {
			k.errorf("LocalPartition: mode %d: %v", m, err)
			return t
		}
		thrs, more, err := splitMode(rest, n)
		if err != nil {
			k.errorf("LocalPartition: mode %d: %v", m, err)
			return t
		}
		// The thread's coordinate along this mode: (tid / stride) % shape.
		var c coord
		switch {
		case n == 1:
		case tid.IsConst():
			c = coord{c: (constInt(id) / int64(st[m])) % int64(n)}
		default:
			c = coord{dyn: k.imod(k.idiv(id, int64(st[m])), int64(n))}
		}
		u.modes[m] = append(dropUnit(vals), more...)
		if len(u.modes[m]) == 0 {
			u.modes[m] = []leaf{{shape: 1, mode: m, cstride: 1}}
		}
		u.advance(thrs, c)
	}
	return u
}

func dropUnit(ls []leaf) []leaf {
	out := ls[:0:0]
	for _, l := range ls {
		if l.shape != 1 {
			out = append(out, l)
		}
	}
	return out
}

// Slice fixes mode m at coordinate c (a Go int or integer Value) and removes the mode.
func (t Tensor) Slice(m int, c any) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("Slice") {
		return t
	}
	if m < 0 || m >= len(t.modes) {
		k.errorf("Slice: mode %d out of range for rank %d", m, len(t.modes))
		return t
	}
	if t.IsFragment() {
		i, ok := c.(int)
		if !ok {
			k.errorf("Slice: a register fragment is sliced at a Go int (registers have no runtime index), got %T", c)
			return t
		}
		return t.fragSlice(m, i)
	}
	cc, ok := k.coordOf(c, "Slice")
	if !ok {
		return t
	}
	u := t.clone()
	ls := u.modes[m]
	u.modes = append(u.modes[:m:m], u.modes[m+1:]...)
	u.advance(ls, cc)
	return u
}
