package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/layout"
)

// PartitionByTV splits a tile over threads by a thread-value layout, as CuTe's tiled copies
// do with the result of layout.MakeLayoutTV (CuTe DSL's make_layout_tv):
//
//	tiler, tv, err := layout.MakeLayoutTV(thrLayout, valLayout)
//	tS := gS.PartitionByTV(tiler, tv, tid)
//
// tiler gives one extent per mode of the tensor (each mode must be a multiple of it); tv
// maps (thread, value) to the colexicographic index of an element in that tile. The tensor
// is divided into tiles (ZippedDivide), and thread tid keeps, in every tile, the values
// tv(tid, v). The result has modes (V, rest_0, ..., rest_r-1): CuTe's (CPY, CPY_M, CPY_N),
// the values of one tile, then the tiles along each mode. Like LocalPartition, the result keeps
// its elements' coordinates, so Copy predicates partial tiles and Coord reports them.
//
// For a thread layout thr and a compact value layout of extents val, LocalPartition(thr, tid,
// val...) gives each thread the same elements; within one tile in the same order (over
// several tiles LocalPartition interleaves the tile modes with the value modes, mode by mode).
func (t Tensor) PartitionByTV(tiler layout.IntTuple, tv layout.Layout, tid Value) Tensor {
	if t.k != nil {
		defer t.k.hold()()
	}
	k := t.k
	if !t.ok("PartitionByTV") {
		return t
	}
	ext := tiler.Leaves()
	if tiler.Depth() > 1 || len(ext) != len(t.modes) {
		k.errorf("PartitionByTV: tensor has rank %d; tiler %v must give one extent per mode", len(t.modes), tiler)
		return t
	}
	if tv.Rank() != 2 {
		k.errorf("PartitionByTV: the thread-value layout %v must have two modes, (thread, value)", tv)
		return t
	}
	if !k.own(tid, "PartitionByTV") {
		return t
	}
	if !isInt(tid.t) {
		k.errorf("PartitionByTV: thread index is %s, not an integer", tid.t)
		return t
	}
	size := 1
	var tile []leaf
	rests := make([][]leaf, len(t.modes))
	for m := range t.modes {
		if n := modeSize(t.modes[m]); ext[m] <= 0 || n != 0 && n%ext[m] != 0 {
			k.errorf("PartitionByTV: mode %d of extent %d is not a multiple of the tiler's %d", m, n, ext[m])
			return t
		}
		tl, rest, err := splitMode(t.modes[m], ext[m])
		if err != nil {
			k.errorf("PartitionByTV: mode %d: %v", m, err)
			return t
		}
		tile = append(tile, tl...)
		rests[m] = rest
		size *= ext[m]
	}
	if c := tv.Cosize(); c > size {
		k.errorf("PartitionByTV: the thread-value layout %v reaches index %d; the tile %v has %d elements", tv, c-1, tiler, size)
		return t
	}
	thrMode, _ := tv.Mode(0)
	valMode, _ := tv.Mode(1)

	var vals []leaf
	vs, vd := valMode.FlatShape(), valMode.FlatStride()
	for i := range vs {
		ls, err := composeLeaves(tile, vs[i], vd[i])
		if err != nil {
			k.errorf("PartitionByTV: value mode %d of %v: %v", i, tv, err)
			return t
		}
		vals = append(vals, ls...)
	}
	u := t.clone()
	u.modes = [][]leaf{dropUnit(vals)}
	if len(u.modes[0]) == 0 {
		u.modes[0] = []leaf{{shape: 1, mode: 0, cstride: 1}}
	}
	for m, r := range rests {
		if r = dropUnit(r); len(r) == 0 {
			r = []leaf{{shape: 1, mode: m, cstride: 1}}
		}
		u.modes = append(u.modes, r)
	}

	// Move to the thread's values: tid's colexicographic coordinate over the thread mode's
	// leaves, each leaf a stride in the tile's index space.
	if !tid.IsConst() && !k.fits32(tid, "PartitionByTV", "thread index") {
		return t
	}
	id := tid.To(I32)
	ts, td := thrMode.FlatShape(), thrMode.FlatStride()
	div := int64(1)
	for i := range ts {
		n := int64(ts[i])
		if n == 1 || td[i] == 0 {
			div *= n
			continue
		}
		var c coord
		if id.IsConst() {
			c = coord{c: (constInt(id) / div) % n}
		} else {
			c = coord{dyn: k.imod(k.idiv(id, div), n)}
		}
		div *= n
		ls, err := composeLeaves(tile, ts[i], td[i])
		if err != nil {
			k.errorf("PartitionByTV: thread mode %d of %v: %v", i, tv, err)
			return t
		}
		u.advance(ls, c)
	}
	return u
}

// composeLeaves returns the leaves of tile composed with the layout s:d (CuTe's composition
// of the tile with one mode of a thread-value layout): element j of the result is element
// j*d of the tile, colexicographically.
func composeLeaves(tile []leaf, s, d int) ([]leaf, error) {
	if s == 1 {
		return nil, nil
	}
	if d == 0 { // a broadcast: every j is element 0
		return []leaf{{shape: s, mode: 0}}, nil
	}
	rest := append([]leaf(nil), tile...)
	for need := d; need > 1; {
		if len(rest) == 0 {
			return nil, fmt.Errorf("stride %d runs past the tile", d)
		}
		l := rest[0]
		switch {
		case l.shape == 1:
			rest = rest[1:]
		case need%l.shape == 0:
			need /= l.shape
			rest = rest[1:]
		case l.shape%need == 0:
			rest[0] = leaf{shape: l.shape / need, stride: mulStride(l.stride, int64(need)), mode: l.mode, cstride: l.cstride * need}
			need = 1
		default:
			return nil, fmt.Errorf("stride %d does not divide the tile's extents (leaf of extent %d)", d, l.shape)
		}
	}
	out, _, err := splitMode(rest, s)
	if err != nil {
		return nil, fmt.Errorf("%d values at stride %d: %v", s, d, err)
	}
	return out, nil
}
