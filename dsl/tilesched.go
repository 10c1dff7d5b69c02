package dsl

// TileScheduler hands out the output tiles of a tilesM x tilesN grid to persistent blocks
// (CuTe's StaticPersistentTileScheduler): block b takes linear tiles b, b + gridDim.x, ...
// in grouped order, group tile rows at a time down each column of tiles (Triton's grouped
// ordering), so that tiles running together share rows of A and columns of B in L2.
type TileScheduler struct {
	k              *Kernel
	tilesM, tilesN Value // U32
	group          int
}

// MakeTileScheduler schedules tilesM x tilesN tiles (U32 Values or Go ints) in groups of
// group tile rows (1: row after row of tiles).
func (k *Kernel) MakeTileScheduler(tilesM, tilesN any, group int) TileScheduler {
	defer k.hold()()
	s := TileScheduler{k: k, group: group}
	m, ok1 := k.val(tilesM, U32, "MakeTileScheduler")
	n, ok2 := k.val(tilesN, U32, "MakeTileScheduler")
	if !ok1 || !ok2 {
		return s
	}
	if group < 1 {
		k.errorf("MakeTileScheduler: group %d; want at least 1 tile row", group)
		return s
	}
	s.tilesM, s.tilesN = m, n
	return s
}

// Tile returns the tile coordinates (m, n) of linear tile t (a U32 Value).
func (s TileScheduler) Tile(t Value) (m, n Value) {
	k := s.k
	defer k.hold()()
	perGroup := s.tilesN.Mul(uint32(s.group))
	gid := t.Div(perGroup)
	first := gid.Mul(uint32(s.group))
	size := s.tilesM.Sub(first).Min(uint32(s.group))
	in := t.Rem(perGroup)
	return first.Add(in.Rem(size)), in.Div(size)
}

// ForEach runs body(m, n) at run time for each of the calling block's tiles.
func (s TileScheduler) ForEach(body func(m, n Value)) {
	k := s.k
	if s.tilesM.k == nil {
		k.errorf("TileScheduler.ForEach: the scheduler failed to build (see MakeTileScheduler's error)")
		return
	}
	defer k.hold()()
	k.For(k.BlockIdx(X), s.tilesM.Mul(s.tilesN), k.GridDim(X), func(t Value) {
		m, n := s.Tile(t)
		body(m, n)
	})
}
