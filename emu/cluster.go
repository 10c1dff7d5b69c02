package emu

import (
	"fmt"
	"math/bits"
)

// Thread-block clusters (sm_90). A launch with Launch.Cluster set groups its blocks into
// clusters of that shape; the blocks of a cluster start together and share their shared
// memory: a shared::cluster address names a block of the cluster by rank in bits 24-28
// (rank + 1; 0 means the block itself) above the shared offset, as mapa makes it, and
// every shared access (ld/st/atom.shared::cluster, mbarrier arrives, TMA destinations)
// resolves it to that block's memory. barrier.cluster.arrive/wait synchronise all the
// cluster's threads. Without Launch.Cluster every block is a cluster of one, as before.

// clusterRankShift is where a shared::cluster address keeps its block's rank + 1.
const (
	clusterRankShift = 24
	clusterRankMask  = 0x1f
	clusterOffMask   = 1<<clusterRankShift - 1
)

// cluster is one cluster's blocks (by rank) and its barrier.
type cluster struct {
	blocks  []*block
	arrived int    // threads arrived in the current barrier phase
	phase   uint32 // completed barrier phases
	// when lane ln of a warp arrived: the phase number it arrived in, plus 1 (0: not arrived)
	arrivedIn map[*warp]*[32]uint32
	perBlock  map[*block]int // arrivals in the current phase, per block
}

// clusterSpan resolves n bytes at a shared::cluster address with a rank.
func (w *warp) clusterSpan(off uint64, n int) ([]byte, *memFault) {
	rank := int(off>>clusterRankShift&clusterRankMask) - 1
	o := off & clusterOffMask
	if off>>clusterRankShift > clusterRankMask {
		return nil, faultf(KindBadAddress, "%#x is not a shared-memory address", off)
	}
	c := w.b.cl
	size := 1
	if c != nil {
		size = len(c.blocks)
	}
	if rank >= size {
		return nil, faultf(KindBadAddress, "shared::cluster address %#x names block rank %d of a cluster of %d", off, rank, size)
	}
	p := w.b
	if c != nil {
		p = c.blocks[rank]
	}
	if p == w.b {
		return w.sharedSpan(o, n)
	}
	if p.done {
		return nil, faultf(KindBadAddress, "shared::cluster address %#x: block rank %d of the cluster has exited (its shared memory is gone)", off, rank)
	}
	if o+uint64(n) > uint64(len(p.shared)) || o+uint64(n) < o {
		return nil, faultf(KindOutOfBounds, "%d bytes at shared offset %#x of cluster block rank %d: the block has %d bytes of shared memory", n, o, rank, len(p.shared))
	}
	return p.shared[o : o+uint64(n) : o+uint64(n)], nil
}

// mapaFn: mapa{.shared::cluster} d, a, rank: a's offset in block rank's shared memory.
func mapaFn(generic bool) laneFn {
	return func(a, r, _, _ uint64) uint64 {
		if generic {
			if region(a) != regionShared {
				return a
			}
			return regionShared<<regionShift | (r&clusterRankMask+1)<<clusterRankShift | a&clusterOffMask
		}
		return (r&clusterRankMask+1)<<clusterRankShift | a&clusterOffMask
	}
}

// getctarankFn: getctarank d, a (b: the thread's own rank): the rank a names.
func getctarankFn(a, own, _, _ uint64) uint64 {
	if region(a) == regionShared {
		a &= offMask
	}
	if r := a >> clusterRankShift & clusterRankMask; r != 0 {
		return r - 1
	}
	return own
}

// execClusterArrive: barrier.cluster.arrive by the lanes m.
func execClusterArrive(w *warp, in *dinst, m uint32) {
	c := w.b.cl
	if c == nil {
		return
	}
	rec := c.arrivedIn[w]
	if rec == nil {
		rec = new([32]uint32)
		c.arrivedIn[w] = rec
	}
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if rec[ln] == c.phase+1 {
			w.fault(in, ln, KindBarrier, "barrier.cluster.arrive twice in one phase (no barrier.cluster.wait between)")
			return
		}
		rec[ln] = c.phase + 1
	}
	c.arrived += bits.OnesCount32(m)
	c.perBlock[w.b] += bits.OnesCount32(m)
	if c.arrived >= len(c.blocks)*w.l.nthreads {
		c.arrived = 0
		c.phase++
		clear(c.perBlock)
	}
	w.l.progressed()
}

// clusterWait: barrier.cluster.wait; lanes whose phase has not completed stay at the
// instruction (the warp yields and polls again).
func (w *warp) clusterWait(in *dinst, pc int32, g, m uint32) bool {
	w.setPC(g&^m, pc+1)
	c := w.b.cl
	if c == nil {
		w.setPC(m, pc+1)
		return false
	}
	rec := c.arrivedIn[w]
	var done uint32
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if rec == nil || rec[ln] == 0 {
			w.fault(in, ln, KindBarrier, "barrier.cluster.wait without a barrier.cluster.arrive before it")
			return true
		}
		if rec[ln] <= c.phase { // arrived in a phase that has completed
			done |= 1 << ln
			rec[ln] = 0
		}
	}
	w.setPC(done, pc+1)
	w.setPC(m&^done, pc)
	if done != m {
		if n := c.exitedUnarrived(); n > 0 {
			w.fault(in, bits.TrailingZeros32(m&^done), KindDeadlock, fmt.Sprintf("barrier.cluster.wait can never complete: %d thread(s) of the cluster exited without arriving (%d of %d arrived)", n, c.arrived, len(c.blocks)*w.l.nthreads))
			return true
		}
		w.spin = true
		return true
	}
	return false
}

// exitedUnarrived counts the cluster's threads that exited without arriving in the current
// phase: while there are any, the phase cannot complete.
func (c *cluster) exitedUnarrived() int {
	n := 0
	for _, b := range c.blocks {
		if b.done { // all its threads exited; those that arrived in this phase are counted
			n += b.nthreads - c.perBlock[b]
			continue
		}
		for _, w := range b.warps {
			if w == nil {
				continue
			}
			rec := c.arrivedIn[w]
			for x := w.exists &^ w.live; x != 0; x &= x - 1 {
				if rec == nil || rec[bits.TrailingZeros32(x)] != c.phase+1 {
					n++
				}
			}
		}
	}
	return n
}

// clusterOf returns the block index (within a GPU's grid, x fastest) of position j when
// blocks are ordered cluster by cluster (members consecutive, rank order).
func (l *launch) clusterOf(j int) (id [3]int, rank int) {
	cd := l.cdim
	cs := cd.size()
	ci, r := j/cs, j%cs
	ng := [3]int{l.grid.X / cd.X, l.grid.Y / cd.Y, l.grid.Z / cd.Z}
	cc := [3]int{ci % ng[0], ci / ng[0] % ng[1], ci / (ng[0] * ng[1])}
	rc := [3]int{r % cd.X, r / cd.X % cd.Y, r / (cd.X * cd.Y)}
	return [3]int{cc[0]*cd.X + rc[0], cc[1]*cd.Y + rc[1], cc[2]*cd.Z + rc[2]}, r
}

// checkCluster validates a launch's cluster shape.
func checkCluster(grid, cd Dim3) string {
	dim := func(d Dim3) string { return fmt.Sprintf("(%d,%d,%d)", d.X, d.Y, d.Z) }
	if cd.X < 1 || cd.Y < 1 || cd.Z < 1 {
		return fmt.Sprintf("cluster %s must be positive", dim(cd))
	}
	if grid.X%cd.X != 0 || grid.Y%cd.Y != 0 || grid.Z%cd.Z != 0 {
		return fmt.Sprintf("grid %s is not a whole number of clusters %s", dim(grid), dim(cd))
	}
	if cd.size() > 16 {
		return fmt.Sprintf("cluster %s of %d blocks: at most 16 (8 portable)", dim(cd), cd.size())
	}
	return ""
}

// clusterSpecial computes a cluster special register of a block.
func (l *launch) clusterSpecial(b *block, kind, dim uint8) uint64 {
	cd := [3]int{l.cdim.X, l.cdim.Y, l.cdim.Z}
	switch kind {
	case isClusterCtaid:
		return uint64(b.id[dim] % cd[dim])
	case isClusterid:
		return uint64(b.id[dim] / cd[dim])
	case isClusterRank:
		return uint64(b.rank)
	}
	return 0
}

// ctaRanks returns the shared::cluster rank prefixes (rank + 1 above clusterRankShift) of the
// blocks a multicast's ctaMask names; false after a fault.
func (w *warp) ctaRanks(in *dinst, ln int, mask uint64) ([]uint64, bool) {
	size := 1
	if w.b.cl != nil {
		size = len(w.b.cl.blocks)
	}
	if mask == 0 || mask>>size != 0 {
		w.fault(in, ln, KindBadAddress, fmt.Sprintf("ctaMask %#x names no block or blocks outside the cluster of %d", mask, size))
		return nil, false
	}
	var out []uint64
	for r := uint64(0); r < uint64(size); r++ {
		if mask>>r&1 != 0 {
			out = append(out, (r+1)<<clusterRankShift)
		}
	}
	return out, true
}

// sharedOff returns the shared offset a shared(::cluster) operand's address names, without
// the generic window.
func (w *warp) sharedOff(in *dinst, ln int) uint64 {
	a := w.ea(in, ln)
	if region(a) == regionShared {
		a &= offMask
	}
	return a & clusterOffMask
}

// multicastCopy writes data at dst's offset in every block lane ln's ctaMask (in.c) names and
// completes len(data) transaction bytes on the mbarrier at bar's offset in each.
func (w *warp) multicastCopy(in *dinst, ln int, data []byte, dst, bar *dinst) bool {
	ranks, ok := w.ctaRanks(in, ln, w.r[in.c+int32(ln)]&0xffff)
	if !ok {
		return false
	}
	doff, boff := w.sharedOff(dst, ln), w.sharedOff(bar, ln)
	for _, p := range ranks {
		db, f := w.sharedSpan(p|doff, len(data))
		if f != nil {
			w.memFault(in, ln, f)
			return false
		}
		copy(db, data)
		if !w.completeTxAt(in, ln, p|boff, len(data)) {
			return false
		}
	}
	return true
}
