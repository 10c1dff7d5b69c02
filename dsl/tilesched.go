package dsl

// TileScheduler hands out the output tiles of a tilesM x tilesN grid to persistent blocks
// (CuTe's StaticPersistentTileScheduler): block b takes linear tiles b, b + gridDim.x, ...
// in grouped order, group tile rows at a time down each column of tiles (Triton's grouped
// ordering), so that tiles running together share rows of A and columns of B in L2.
type TileScheduler struct {
	k              *Kernel
	tilesM, tilesN Value // U32 (tilesM counts clusters of clusterM tile rows)
	group          int
	clusterM       int // tile rows per cluster (MakeClusterTileScheduler; 0: no clusters)
}

// MakeTileScheduler schedules tilesM x tilesN tiles (U32 Values or Go ints) in groups of
// group tile rows (1: row after row of tiles).
func (k *Kernel) MakeTileScheduler(tilesM, tilesN any, group int) TileScheduler {
	if !k.live() {
		return TileScheduler{}
	}
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
	if k == nil {
		return Value{}, Value{} // the zero TileScheduler
	}
	defer k.hold()()
	perGroup := s.tilesN.Mul(uint32(s.group))
	gid := t.Div(perGroup)
	first := gid.Mul(uint32(s.group))
	size := s.tilesM.Sub(first).Min(uint32(s.group))
	in := t.Rem(perGroup)
	return first.Add(in.Rem(size)), in.Div(size)
}

// MakeClusterTileScheduler schedules tilesM x tilesN tiles to clusters of clusterM blocks
// along X (CuTe's persistent scheduler over cluster shapes): each cluster takes a column of
// clusterM adjacent tile rows at a time, as MakeTileScheduler hands out tiles (groups of
// group such columns), and its block of rank r (%cluster_ctarank) the tile in row
// clusterM*m + r. Every block of a cluster runs the same number of tiles, also where the
// last row of tiles has fewer than clusterM rows: a block past the last row gets a tile
// row of tilesM or more, which it must treat as empty (its loads zero-filled, its stores
// predicated away) while taking part in the cluster's shared loads. Launch a grid of a
// multiple of clusterM blocks with clusters of (clusterM, 1, 1).
func (k *Kernel) MakeClusterTileScheduler(tilesM, tilesN any, group, clusterM int) TileScheduler {
	if !k.live() {
		return TileScheduler{}
	}
	defer k.hold()()
	if clusterM < 1 || clusterM > 16 {
		k.errorf("MakeClusterTileScheduler: clusters of %d blocks; want 1 to 16", clusterM)
		return TileScheduler{k: k}
	}
	m, ok := k.val(tilesM, U32, "MakeClusterTileScheduler")
	if !ok {
		return TileScheduler{k: k}
	}
	s := k.MakeTileScheduler(m.Add(uint32(clusterM-1)).Div(uint32(clusterM)), tilesN, group)
	s.clusterM = clusterM
	return s
}

// ForEach runs body(m, n) at run time for each of the calling block's tiles.
func (s TileScheduler) ForEach(body func(m, n Value)) {
	k := s.k
	if k == nil {
		return // the zero TileScheduler: nothing to record an error on
	}
	if s.tilesM.k == nil {
		k.errorf("TileScheduler.ForEach: the scheduler failed to build (see MakeTileScheduler's error)")
		return
	}
	if body == nil {
		k.errorf("TileScheduler.ForEach: the body function is nil")
		return
	}
	defer k.hold()()
	if s.clusterM > 0 {
		rank := k.BlockRankInCluster()
		k.For(k.ClusterIdx(X), s.tilesM.Mul(s.tilesN), k.ClusterGridDim(X), func(t Value) {
			m, n := s.Tile(t)
			body(m.Mul(uint32(s.clusterM)).Add(rank), n)
		})
		return
	}
	k.For(k.BlockIdx(X), s.tilesM.Mul(s.tilesN), k.GridDim(X), func(t Value) {
		m, n := s.Tile(t)
		body(m, n)
	})
}
