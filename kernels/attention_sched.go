package kernels

import (
	"container/heap"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
)

// AttentionSchedule is the order in which the sm_90a attention's work tiles (a query tile of
// one batch and head) are numbered and, with Persistent, how its blocks take them.
type AttentionSchedule int

const (
	// AttentionStrided (the zero value) numbers the tiles query tile fastest, then heads,
	// then batches (causal: a head's longest tile first); Persistent block b walks tiles b,
	// b + gridDim, .... Causal tiles of unequal length strided over the blocks in this order
	// leave some blocks far more work than others (a third slower at 16k tokens on an
	// H200).
	AttentionStrided AttentionSchedule = iota
	// AttentionLPT numbers the tiles longest first across every (batch, head): tile t is
	// query tile tilesM-1 - t/(batch*heads) of (batch, head) pair t%(batch*heads)
	// (longest-processing-time first). A Persistent block walks them in a snake: in round r
	// (tiles r*gridDim ... r*gridDim + gridDim-1) block b takes the b-th tile, reversed in
	// odd rounds (gridDim-1-b), so that the block that took a round's longest tile takes
	// the next round's shortest. Without Persistent the grid is in this order (the GPU's
	// block scheduler hands the next block to whichever SM is free: about longest first).
	// A round's tiles are of as many heads as blocks, so K and V are read from DRAM again
	// and again (d 128 causal 1k on an H200: 654 MB where one block a tile read 201); the
	// L2 sections of AttentionDynamic broke the snake's balance here (d 128 4k 578 -> 507
	// TFLOP/s).
	AttentionLPT
	// AttentionDynamic is Persistent only: block b's first tile b and then whatever tile a
	// counter in global memory hands out next (AttentionSchedArgs), so that a block takes
	// the next tile when it is ready for it. The producer thread takes the tile and passes
	// its index to the consumer warpgroups through shared memory. The order is
	// AttentionLPT's within sections of (batch, head) pairs whose K and V fit in the L2
	// cache together (attnL2KVBytes): section s holds the n pairs from s*n on (fewer in the
	// last), and its i-th tile is query tile tilesM-1 - i/n of pair s*n + i%n. On an H200
	// the sections took d 128 causal from 375 / 590 / 688 TFLOP/s at 1k / 4k / 16k tokens
	// to 443 / 628 / 702 (docs/attention.md).
	AttentionDynamic
)

// String returns "strided", "lpt" or "dynamic".
func (s AttentionSchedule) String() string {
	switch s {
	case AttentionStrided:
		return "strided"
	case AttentionLPT:
		return "lpt"
	case AttentionDynamic:
		return "dynamic"
	}
	return fmt.Sprintf("AttentionSchedule(%d)", int(s))
}

// ParseAttentionSchedule returns the schedule String names.
func ParseAttentionSchedule(name string) (AttentionSchedule, error) {
	for _, s := range []AttentionSchedule{AttentionStrided, AttentionLPT, AttentionDynamic} {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("attention schedule %s: want strided, lpt or dynamic", excerpt.Quote(name))
}

// AttentionSchedArgs is the parameter AttentionDynamic adds after the others (after
// AttentionVarLenArgs with VarLen): Sched points to AttentionSchedWords u32 words of global
// memory, zero before the first launch. Word 0 counts the takes (a block's first tile is its
// blockIdx, each later one gridDim plus the count it took), word 1 the blocks that have
// taken their last; the last block sets both back to zero, so launches back to back on one
// stream (and replays of a captured graph) need no memset between them.
// Launches that may run at once (other streams) need a buffer each; a launch that does not
// complete (an error, an abort) leaves the words to be zeroed again.
type AttentionSchedArgs struct {
	Sched dsl.Ptr `kgen:"u32"`
}

// AttentionSchedWords is the u32 words of AttentionSchedArgs.Sched.
const AttentionSchedWords = 2

// attnL2KVBytes is the K and V bytes one section of AttentionDynamic's order may read:
// FlashAttention-3's budget, within the 50 MB L2 cache of an H100 or H200, the rest for
// Q, O and the other sections' tails.
const attnL2KVBytes = 32 << 20

// attnSectionKeys is the keys of one K/V head whose K and V rows (keyBytes bytes a key)
// fit in attnL2KVBytes: at least 1.
func attnSectionKeys(keyBytes int) int { return max(attnL2KVBytes/max(keyBytes, 1), 1) }

// attnSectionPairs is the (batch, head) pairs of a section of AttentionDynamic's order: the
// K/V heads (seqK keys each, group query heads sharing one) of which sectionKeys keys fit,
// at least one, times group, at most pairs (the host's copy of attnTileMap's).
func attnSectionPairs(pairs, group, seqK, sectionKeys int) int {
	fit := max(sectionKeys/max(seqK, 1), 1)
	return min(min(fit, ceilDiv(pairs, group))*group, pairs)
}

// attnTileMap maps work tile t (U32) of schedule s to (query tile, batch*heads + head, head,
// batch, K/V head): attentionTile's mapping for AttentionStrided, longest first across the
// pairs for AttentionLPT, and within sections of pairs for AttentionDynamic, sectionKeys
// (attnSectionKeys) keys of a K/V head's K and V fitting in a section's budget.
func attnTileMap(k *dsl.Kernel, a AttentionArgs, bm int, causal bool, s AttentionSchedule, sectionKeys int, t dsl.Value) (mt, bh, h, b, hkv dsl.Value) {
	if s == AttentionStrided {
		return attentionTile(k, a, bm, causal, t)
	}
	tilesM := a.SeqQ.Add(uint32(bm - 1)).Div(uint32(bm))
	pairs := a.Batch.Mul(a.Heads)
	group := a.Heads.Div(a.KVHeads)
	// attnSectionPairs; CheckShape keeps pairs*tilesM below 2^31, so n*group and n*tilesM
	// stay below 2^32.
	n := pairs // AttentionLPT: one section
	if s == AttentionDynamic {
		fit := k.Const(dsl.U32, uint32(min(sectionKeys, 1<<31))).Div(a.SeqK.Max(uint32(1))).Max(uint32(1))
		n = fit.Min(pairs.Add(group).Sub(uint32(1)).Div(group)).Mul(group).Min(pairs)
	}
	secTiles := n.Mul(tilesM)
	sec := t.Div(secTiles)
	i := t.Sub(sec.Mul(secTiles))
	first := sec.Mul(n)
	n = n.Min(pairs.Sub(first)) // the last section's pairs
	mt = tilesM.Sub(uint32(1)).Sub(i.Div(n))
	bh = first.Add(i.Rem(n))
	h, b = bh.Rem(a.Heads), bh.Div(a.Heads)
	return mt, bh, h, b, h.Div(group)
}

// attnStaticWalk runs visit(t) at run time for each work tile t (U32) below tiles that the
// calling block takes under a static schedule: b, b + gridDim, ... (AttentionStrided), or
// the snake of AttentionLPT (the b-th tile of even rounds of gridDim tiles, the
// (gridDim-1-b)-th of odd ones).
func attnStaticWalk(k *dsl.Kernel, s AttentionSchedule, tiles dsl.Value, visit func(t dsl.Value)) {
	blk, grid := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	if s == AttentionStrided {
		k.For(blk, tiles, grid, visit)
		return
	}
	off := k.Var(dsl.U32, blk) // the block's place in this round
	last := grid.Sub(uint32(1))
	k.For(k.Const(dsl.U32, 0), tiles, grid, func(round dsl.Value) {
		t := round.Add(off)
		k.If(t.Lt(tiles), func() { visit(t) })
		k.Set(off, last.Sub(off))
	})
}

// attnTileRing passes the dynamic schedule's tile indices from the producer thread to the
// consumer warpgroups through shared memory: per slot a u32 and two mbarriers, full (the
// producer's one arrival, whose release orders its store of the slot before it) and empty
// (an arrival of every consumer thread after its load of the slot). The slot accesses are
// .relaxed.cta: the mbarriers order them.
type attnTileRing struct {
	k           *dsl.Kernel
	slots       dsl.Ptr // u32 in shared memory
	full, empty dsl.Mbarriers
	n           int
}

// attnNoTile is what the producer passes on through the ring after the block's last tile
// (CheckShape keeps tile counts below 2^31).
const attnNoTile = 1<<32 - 1

// attnTileSlots is the dynamic schedule's tile ring: the producer may publish a tile while
// the consumers have yet to read the one before.
const attnTileSlots = 2

// makeAttnTileRing allocates the ring for consumers threads and initialises its barriers
// from thread 0 (the caller makes them visible: a SyncThreads before any use).
func makeAttnTileRing(k *dsl.Kernel, consumers int) attnTileRing {
	r := attnTileRing{k: k, slots: k.SharedArray(dsl.U32, attnTileSlots), full: k.Mbarriers(attnTileSlots), empty: k.Mbarriers(attnTileSlots), n: attnTileSlots}
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		for i := range r.n {
			r.full.At(i).Init(1)
			r.empty.At(i).Init(consumers)
		}
	})
	return r
}

// attnRingPos is a position in an attnTileRing: the slot and the parity of the phase to
// wait for (U32 variables).
type attnRingPos struct{ slot, phase dsl.Value }

// pos returns the start: slot 0, and the parity the producer (1: every slot starts empty) or
// the consumers (0) wait for.
func (r attnTileRing) pos(producer bool) attnRingPos {
	phase := 0
	if producer {
		phase = 1
	}
	return attnRingPos{slot: r.k.Var(dsl.U32, 0), phase: r.k.Var(dsl.U32, phase)}
}

// advance moves p to the next slot, flipping the phase after the last.
func (r attnTileRing) advance(p attnRingPos) {
	k := r.k
	next := p.slot.Add(uint32(1))
	wrap := next.Eq(uint32(r.n))
	k.Set(p.slot, k.Select(wrap, uint32(0), next))
	k.Set(p.phase, k.Select(wrap, p.phase.Xor(uint32(1)), p.phase))
}

// put publishes t at the producer's p once the consumers have read the slot's last value.
func (r attnTileRing) put(p attnRingPos, t dsl.Value) {
	r.empty.At(p.slot).Wait(p.phase)
	r.k.Store(r.slots.At(p.slot), t, dsl.Relaxed(dsl.CTA))
	r.full.At(p.slot).Arrive()
	r.advance(p)
}

// get waits for the tile at the consumers' p, reads it and frees the slot (every consumer
// thread calls it).
func (r attnTileRing) get(p attnRingPos) dsl.Value {
	r.full.At(p.slot).Wait(p.phase)
	t := r.k.Load(r.slots.At(p.slot), dsl.Relaxed(dsl.CTA))
	r.empty.At(p.slot).Arrive()
	r.advance(p)
	return t
}

// The cost model (host side): the work of a tile is the key tiles it walks, as the kernel
// counts them (causal: up to its last row's diagonal).

// attnKeyTiles returns the key tiles query tile mt walks (AttentionSM90's nKV).
func (c AttentionSM90Config) attnKeyTiles(mt, seqQ, seqK int) int {
	n := ceilDiv(seqK, c.BN)
	if !c.Causal {
		return n
	}
	last := min((mt+1)*c.BM(), seqQ) - 1 + seqK - seqQ
	if last < 0 {
		return 0
	}
	return min(n, last/c.BN+1)
}

// attnHostTile is attnTileMap on the host: work tile t's query tile and (batch, head) pair,
// section pairs a section (AttentionDynamic: attnSectionPairs; AttentionLPT: pairs).
func (c AttentionSM90Config) attnHostTile(t, tilesM, pairs, section int) (mt, bh int) {
	if c.Schedule == AttentionStrided {
		mt = t % tilesM
		if c.Causal {
			mt = tilesM - 1 - mt
		}
		return mt, t / tilesM
	}
	sec := t / (section * tilesM)
	i, first := t%(section*tilesM), sec*section
	n := min(section, pairs-first)
	return tilesM - 1 - i/n, first + i%n
}

// attnSectionKeys is attnSectionKeys of c's K and V rows.
func (c AttentionSM90Config) attnSectionKeys() int {
	return attnSectionKeys(2 * c.HeadDim * c.In.Bytes())
}

// attnHostWalk is attnStaticWalk on the host: the work tiles block b of grid takes.
func (c AttentionSM90Config) attnHostWalk(b, grid, tiles int) []int {
	var out []int
	for r := 0; r*grid < tiles; r++ {
		t := r*grid + b
		if c.Schedule != AttentionStrided && r%2 == 1 {
			t = r*grid + grid - 1 - b
		}
		if t < tiles {
			out = append(out, t)
		}
	}
	return out
}

// ModelKeyTiles is the cost model of a launch on sms SMs (one block an SM): per SM the key
// tiles of the work tiles it runs (a tile's cost: the key tiles it walks; causal tiles
// differ). A Persistent static schedule runs each block's walk; AttentionDynamic, and a grid
// of one block a tile, hand the tiles in their order to whichever SM frees first (the
// counter, and the GPU's block scheduler, about do). Dense problems only (VarLen tiles cost
// what their sequences give; AttentionDynamic's sections as if each query head had its own
// K/V head); nil for an empty one, for a configuration Check refuses and for
// a shape CheckShape refuses (which bounds the work tiles, so the model's time and memory).
func (c AttentionSM90Config) ModelKeyTiles(batch, heads, seqQ, seqK, sms int) []int {
	if sms < 1 || c.Check() != nil || c.CheckShape(batch, heads, 1, seqQ, seqK) != nil {
		return nil
	}
	tiles := c.Grid(batch, heads, seqQ)
	if tiles == 0 {
		return nil
	}
	tilesM := ceilDiv(seqQ, c.BM())
	section := batch * heads
	if c.Schedule == AttentionDynamic {
		section = attnSectionPairs(section, 1, seqK, c.attnSectionKeys())
	}
	cost := func(t int) int {
		mt, _ := c.attnHostTile(t, tilesM, batch*heads, section)
		return c.attnKeyTiles(mt, seqQ, seqK)
	}
	grid := min(tiles, sms)
	sum := make([]int, grid)
	if c.Persistent && c.Schedule != AttentionDynamic {
		for b := range sum {
			for _, t := range c.attnHostWalk(b, grid, tiles) {
				sum[b] += cost(t)
			}
		}
		return sum
	}
	free := make(smHeap, grid) // (time the SM frees, SM), earliest first
	for i := range free {
		free[i] = [2]int{0, i}
	}
	for t := range tiles {
		sum[free[0][1]] += cost(t)
		free[0][0] += cost(t)
		heap.Fix(&free, 0)
	}
	return sum
}

// smHeap orders SMs by the time they free, then by index.
type smHeap [][2]int

func (h smHeap) Len() int { return len(h) }
func (h smHeap) Less(i, j int) bool {
	return h[i][0] < h[j][0] || h[i][0] == h[j][0] && h[i][1] < h[j][1]
}
func (h smHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *smHeap) Push(x any)   { *h = append(*h, x.([2]int)) }
func (h *smHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
