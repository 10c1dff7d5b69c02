package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// The normal-mode MoE's row movement on sm_90+ (docs/moe.md, "Bulk row copies"): each warp
// of a block moves whole rows (or pieces of them, when a row does not fit its stages)
// through its own ring of shared-memory stages with bulk copies (cp.async.bulk): one lane
// bulk-loads a piece into a stage (completing on the stage's mbarrier) up to
// MoEStages-1 pieces ahead, and the lanes bulk-store each landed piece to its
// destinations (peer GPUs' token buffers through peer pointers, this GPU's receive
// buffer). The TMA unit, not the SM's load/store pipes, carries the bytes, so a few blocks
// keep NVLink busy. Targets before sm_90 keep the register path (16-byte loads and
// stores from every thread).

const (
	// MoEWarps is the warps of a block of the MoE kernels (CollThreads threads), each with
	// its own ring of stages.
	MoEWarps = CollThreads / 32
	// MoEStages is the stages of a warp's ring (send and expand; the combine's loads).
	MoEStages = 4
	// MoECombineVectors is the 16-byte vectors a lane sums per piece in the combine (its
	// f32 accumulators: 8 per vector), so a combine piece is at most 32*16*MoECombineVectors
	// bytes (4 KiB).
	MoECombineVectors = 8
	// MoESharedBudget is the dynamic shared memory the bulk paths size their stages to
	// (below the 227 KiB of an sm_90 block; one block per SM).
	MoESharedBudget = 192 << 10
	// MoECombineMaxTopK is the largest TopK of the combine's bulk path (its lanes hold one
	// pair each); larger ones take the register path on every target.
	MoECombineMaxTopK = 32
)

// MoEBulk reports whether the normal-mode MoE kernels built for t move rows with bulk
// copies (sm_90 and later), and so take dynamic shared memory (MoESendShared,
// MoECombineShared) and a piece size.
func MoEBulk(t ptx.Target) bool { return t.SM() >= 90 }

// MoEPieceBytes splits a row of rowBytes (a multiple of 16) into the fewest pieces of at
// most maxPiece bytes (a multiple of 16), of equal size rounded up to 16 bytes: the Piece
// argument of moe_dispatch_send, moe_dispatch_expand and moe_combine. A row of no bytes
// (rowBytes <= 0) takes one piece of 16 bytes, the smallest.
func MoEPieceBytes(rowBytes, maxPiece int) int {
	maxPiece &^= 15
	if maxPiece < 16 {
		maxPiece = 16
	}
	if rowBytes < 1 {
		return 16
	}
	n := ceilDiv(rowBytes, maxPiece)
	return ceilDiv(ceilDiv(rowBytes, n), 16) * 16
}

// MoESendMaxPiece and MoECombineMaxPiece are the largest pieces the budget allows: send and
// expand keep MoEStages pieces per warp, the combine MoEStages loaded pieces and two
// outgoing partials per warp, each at most MoECombineVectors vectors a lane.
const (
	MoESendMaxPiece    = MoESharedBudget / (MoEWarps * MoEStages) &^ 15
	MoECombineMaxPiece = min(32*16*MoECombineVectors, MoESharedBudget/(MoEWarps*(MoEStages+2))&^15)
)

// MoESendShared is the dynamic shared memory of moe_dispatch_send and moe_dispatch_expand
// with pieces of piece bytes (bulk targets; 0 elsewhere). The product saturates at
// math.MaxInt (more than any block has) and a negative piece gives 0.
func MoESendShared(piece int) int { return int(satMul(MoEWarps, MoEStages, piece)) }

// MoECombineShared is moe_combine's dynamic shared memory with pieces of piece bytes,
// saturating as MoESendShared.
func MoECombineShared(piece int) int { return int(satMul(MoEWarps, MoEStages+2, piece)) }

// moeRing is a warp's ring of stages in dynamic shared memory, each with its mbarrier.
type moeRing struct {
	k          *dsl.Kernel
	dt         dsl.Type
	smem       dsl.Ptr // the block's dynamic shared memory, of dt
	bars       dsl.Mbarriers
	warp, lane dsl.Value
	per        int       // stages of a warp's region (its ring, then any other stages)
	elems      dsl.Value // a piece's elements
}

// newMoERing allocates MoEWarps*MoEStages mbarriers, initialises them (thread 0, then a
// bar.sync) and views the dynamic shared memory as per stages of piece bytes per warp.
func newMoERing(k *dsl.Kernel, dt dsl.Type, piece dsl.Value, per int) *moeRing {
	r := &moeRing{k: k, dt: dt, smem: k.DynamicShared(dt, 16), bars: k.Mbarriers(MoEWarps * MoEStages),
		warp: k.WarpID(), lane: k.LaneID(), per: per, elems: piece.Div(uint32(dt.Bytes()))}
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		for i := 0; i < MoEWarps*MoEStages; i++ {
			r.bars.At(i).Init(1)
		}
	})
	k.SyncThreads()
	return r
}

// stage is stage i (a U32 Value) of this warp's region.
func (r *moeRing) stage(i dsl.Value) dsl.Ptr {
	return r.smem.At(r.warp.Mul(uint32(r.per)).Add(i).Mul(r.elems))
}

// bar is the mbarrier of ring stage i.
func (r *moeRing) bar(i dsl.Value) dsl.Mbarrier {
	return r.bars.At(r.warp.Mul(uint32(MoEStages)).Add(i))
}

// wait waits for slot n (the n-th piece loaded into the ring: stage n mod MoEStages, its
// (n / MoEStages)-th phase) and returns its stage.
func (r *moeRing) wait(n dsl.Value) dsl.Value {
	st := n.Rem(uint32(MoEStages))
	r.bar(st).Wait(n.Div(uint32(MoEStages)).And(uint32(1)))
	return st
}

// load has lane 0 bulk-load size bytes at src into slot n's stage.
func (r *moeRing) load(n dsl.Value, src dsl.Ptr, size dsl.Value) {
	r.k.If(r.lane.Eq(uint32(0)), func() {
		st := n.Rem(uint32(MoEStages))
		b := r.bar(st)
		b.ArriveExpectTx(size)
		r.k.BulkLoad(r.stage(st), src, size, b)
	})
}

// moeSpan is warp gw's contiguous share [lo, hi) of n items over tw warps.
func moeSpan(k *dsl.Kernel, n, gw, tw dsl.Value) (lo, hi dsl.Value) {
	per := n.Add(tw).Sub(uint32(1)).Div(tw)
	lo = gw.Mul(per).Min(n)
	return lo, lo.Add(per).Min(n)
}

// moePieces returns the pieces of a row of rb bytes in pieces of piece bytes, and a function
// giving piece p's byte offset and size.
func moePieces(rb, piece dsl.Value) (dsl.Value, func(p dsl.Value) (off, size dsl.Value)) {
	np := rb.Add(piece).Sub(uint32(1)).Div(piece)
	return np, func(p dsl.Value) (dsl.Value, dsl.Value) {
		off := p.Mul(piece)
		return off, piece.Min(rb.Sub(off))
	}
}

// moeSendRowsBulk is moe_dispatch_send's row movement on bulk targets. Warp gw of the grid
// takes a contiguous run of tokens, each in pieces: lane 0 bulk-loads the pieces of its
// tokens MoEStages-1 ahead; at each landed piece, lane p (p < ngpus, not this GPU, in the
// token's mask) bulk-stores it into GPU p's token buffer at the token's slot, and lane j
// into this GPU's receive row of the token's pair j (j, j+32, ...: pairs of a local
// expert below the capacity). Each lane commits one bulk group per piece (empty or not),
// waits until all but the last have been read before lane 0 reloads a stage, and waits for
// all of its stores before the kernel's closing barrier.
func moeSendRowsBulk(k *dsl.Kernel, dt dsl.Type, a MoEDispatchSendArgs, slotOn func(t, d dsl.Value) dsl.Value) {
	r := newMoERing(k, dt, a.Piece, MoEStages)
	lane := r.lane
	rs := a.E.Add(a.NGPUs)
	gw := k.BlockIdx(dsl.X).Mul(uint32(MoEWarps)).Add(r.warp)
	tw := k.GridDim(dsl.X).Mul(uint32(MoEWarps))
	lo, hi := moeSpan(k, a.Tokens, gw, tw)
	np, piece := moePieces(a.H.Mul(uint32(dt.Bytes())), a.Piece)
	n := hi.Sub(lo).Mul(np) // this warp's slots
	eb := uint32(dt.Bytes())
	issue := func(s dsl.Value) {
		t, p := lo.Add(s.Div(np)), s.Rem(np)
		off, size := piece(p)
		r.load(s, a.X.At(t.Mul(a.H).Add(off.Div(eb))), size)
	}
	for i := 0; i < MoEStages-1; i++ {
		s := k.Const(dsl.U32, i)
		k.If(s.Lt(n), func() { issue(s) })
	}
	// localRow is the receive row of pair kk of token t when it is a local pair below cap.
	localRow := func(t, kk dsl.Value) dsl.Value {
		row := k.Var(dsl.U32, uint32(MoENone))
		i := t.Mul(a.K).Add(kk)
		c := moeColumn(k, k.Load(a.Ids.At(i)), a.E)
		k.If(c.Lt(a.E).And(c.Div(a.EL).Eq(a.Rank)), func() {
			r := k.Load(a.RowStart.At(t.Div(a.Chunk).Mul(rs).Add(c))).Add(k.Load(a.Pos.At(i)))
			k.If(r.Lt(a.Cap), func() { k.Set(row, r) })
		})
		return row
	}
	peerSlot := k.Var(dsl.U32, uint32(MoENone)) // this lane's peer's slot of the token
	ownRow := k.Var(dsl.U32, uint32(MoENone))   // this lane's pair's receive row
	k.For(k.Const(dsl.U32, 0), n, uint32(1), func(s dsl.Value) {
		t, p := lo.Add(s.Div(np)), s.Rem(np)
		k.If(p.Eq(uint32(0)), func() {
			m := k.Load(a.TMask.At(t))
			k.Set(peerSlot, uint32(MoENone))
			k.If(lane.Lt(a.NGPUs).And(lane.Ne(a.Rank)).And(moeBit(m, lane)), func() { k.Set(peerSlot, slotOn(t, lane)) })
			k.Set(ownRow, uint32(MoENone))
			k.If(lane.Lt(a.K).And(moeBit(m, a.Rank)), func() { k.Set(ownRow, localRow(t, lane)) })
		})
		off, size := piece(p)
		eoff := off.Div(eb)
		st := r.wait(s)
		src := r.stage(st)
		k.If(peerSlot.Ne(uint32(MoENone)), func() {
			k.BulkStore(a.Tok.Peer(lane).At(peerSlot.Mul(a.H).Add(eoff)), src, size)
		})
		k.If(ownRow.Ne(uint32(MoENone)), func() { k.BulkStore(a.Recv.At(ownRow.Mul(a.H).Add(eoff)), src, size) })
		// Pairs past the first 32: their rows again at each piece (rare: TopK > 32).
		k.For(lane.Add(uint32(32)), a.K, uint32(32), func(kk dsl.Value) {
			row := localRow(t, kk)
			k.If(row.Ne(uint32(MoENone)), func() { k.BulkStore(a.Recv.At(row.Mul(a.H).Add(eoff)), src, size) })
		})
		k.BulkCommit()
		next := s.Add(uint32(MoEStages - 1))
		k.If(next.Lt(n), func() {
			k.BulkWait(1, true) // slot s-1's stores have read the stage slot next reuses
			k.SyncWarp()
			issue(next)
		})
	})
	k.BulkWait(0, false) // every store written before the closing barrier publishes them
}

// moeExpandBulk is moe_dispatch_expand on bulk targets, per token slot rather than per row:
// warp gw takes a contiguous run of the token buffer's slots of other GPUs' tokens (this
// GPU's own are skipped: their rows are in place); lane 0 bulk-loads each piece of the
// slot's token once, and lane j bulk-stores it into the receive row of the slot's pair j
// (pairs past 32: the lanes loop), so a token with several local pairs is read once.
func moeExpandBulk(k *dsl.Kernel, dt dsl.Type, a MoEDispatchExpandArgs) {
	k.FenceProxyAsyncGlobal() // the token buffer came from other GPUs (their bulk stores, then a barrier)
	r := newMoERing(k, dt, a.Piece, MoEStages)
	lane := r.lane
	ownLo, ownN := k.Load(a.Status.At(4)), k.Load(a.Status.At(5))
	others := k.Load(a.Status.At(2)).Sub(ownN) // slots of other GPUs' tokens
	slotAt := func(i dsl.Value) dsl.Value { return k.Select(i.Lt(ownLo), i, i.Add(ownN)) }
	gw := k.BlockIdx(dsl.X).Mul(uint32(MoEWarps)).Add(r.warp)
	tw := k.GridDim(dsl.X).Mul(uint32(MoEWarps))
	lo, hi := moeSpan(k, others, gw, tw)
	np, piece := moePieces(a.H.Mul(uint32(dt.Bytes())), a.Piece)
	n := hi.Sub(lo).Mul(np)
	eb := uint32(dt.Bytes())
	issue := func(s dsl.Value) {
		slot, p := slotAt(lo.Add(s.Div(np))), s.Rem(np)
		off, size := piece(p)
		r.load(s, a.Tok.At(slot.Mul(a.H).Add(off.Div(eb))), size)
	}
	for i := 0; i < MoEStages-1; i++ {
		s := k.Const(dsl.U32, i)
		k.If(s.Lt(n), func() { issue(s) })
	}
	rowOf := func(slot, kk dsl.Value) dsl.Value { return k.Load(a.SlotRows.At(slot.Mul(a.K).Add(kk))) }
	row := k.Var(dsl.U32, uint32(MoENone)) // this lane's pair's receive row
	k.For(k.Const(dsl.U32, 0), n, uint32(1), func(s dsl.Value) {
		slot, p := slotAt(lo.Add(s.Div(np))), s.Rem(np)
		k.If(p.Eq(uint32(0)), func() {
			k.Set(row, uint32(MoENone))
			k.If(lane.Lt(a.K), func() { k.Set(row, rowOf(slot, lane)) })
		})
		off, size := piece(p)
		eoff := off.Div(eb)
		src := r.stage(r.wait(s))
		k.If(row.Ne(uint32(MoENone)), func() { k.BulkStore(a.Recv.At(row.Mul(a.H).Add(eoff)), src, size) })
		k.For(lane.Add(uint32(32)), a.K, uint32(32), func(kk dsl.Value) {
			rw := rowOf(slot, kk)
			k.If(rw.Ne(uint32(MoENone)), func() { k.BulkStore(a.Recv.At(rw.Mul(a.H).Add(eoff)), src, size) })
		})
		k.BulkCommit()
		next := s.Add(uint32(MoEStages - 1))
		k.If(next.Lt(n), func() {
			k.BulkWait(1, true) // slot s-1's stores have read the stage slot next reuses
			k.SyncWarp()
			issue(next)
		})
	})
	k.BulkWait(0, false)
}

// moeSum is a phase of the combine on bulk targets: per position of this block, a sum of
// up to 32 weighted rows of src (f32, in lane order, rounded to dt once) into one row.
type moeSum struct {
	positions dsl.Value // this block's positions, split into contiguous runs over its warps
	// rows returns, for position q, whether it has an output row (warp-uniform) and this
	// lane's row of src (MoENone: none); weight, this lane's weight (called when ok).
	rows   func(q dsl.Value) (ok, row dsl.Value)
	weight func(q dsl.Value) dsl.Value
	src    dsl.Ptr
	dst    func(q dsl.Value) dsl.Ptr // the output row of position q
}

// moeSumRows runs a moeSum on the warp's ring (per = MoEStages+2: the loaded pieces, then two
// outgoing ones). Per piece of a position's row, the warp sums weight * row over the lanes
// holding a row, in lane order (lane l of the warp owns the piece's vectors l, l+32, ...);
// the rows' pieces are bulk-loaded into the ring MoEStages ahead by a producer cursor that
// walks the same (position, piece, lane) sequence, and the sum, rounded to dt, goes to one
// of two outgoing stages, from which lane 0 bulk-stores it to dst. slots counts the ring's
// slots across phases (the mbarriers' phases continue).
func moeSumRows(k *dsl.Kernel, dt dsl.Type, r *moeRing, slots dsl.Value, h, piece dsl.Value, sum moeSum) {
	const vec = 8
	lane := r.lane
	lane0 := lane.Eq(uint32(0))
	lo, hi := moeSpan(k, sum.positions, r.warp, k.Const(dsl.U32, MoEWarps))
	np, pieceAt := moePieces(h.Mul(uint32(dt.Bytes())), piece)
	items := hi.Sub(lo).Mul(np) // (position, piece)
	eb := uint32(dt.Bytes())
	info := func(q, row, mask dsl.Value) dsl.Value {
		ok, rw := sum.rows(q)
		k.Set(row, k.Select(ok, rw, uint32(MoENone)))
		k.Set(mask, k.Ballot(row.Ne(uint32(MoENone))))
		return ok
	}
	// The producer: its cursor (item pi, lane pk), the rows and mask of pi's position.
	pi, pk := k.Var(dsl.U32, uint32(0)), k.Var(dsl.U32, uint32(0))
	prow, pmask := k.Var(dsl.U32, uint32(MoENone)), k.Var(dsl.U32, uint32(0))
	pn := k.Var(dsl.U32, slots) // slots issued
	k.If(items.Gt(uint32(0)), func() { info(lo, prow, pmask) })
	produce := func() {
		// Find the next (item, lane) holding a row from the cursor; issue its load, step past it.
		k.While(func() dsl.Value { return pi.Lt(items).And(pk.Ge(uint32(32)).Or(moeBit(pmask, pk).Not())) }, func() {
			k.Set(pk, pk.Add(uint32(1)))
			k.If(pk.Ge(uint32(32)), func() {
				k.Set(pk, uint32(0))
				k.Set(pi, pi.Add(uint32(1)))
				k.If(pi.Lt(items).And(pi.Rem(np).Eq(uint32(0))), func() { info(lo.Add(pi.Div(np)), prow, pmask) })
			})
		})
		k.If(pi.Lt(items), func() {
			row := k.ShuffleIdx(prow, pk)
			off, size := pieceAt(pi.Rem(np))
			r.load(pn, sum.src.At(row.Mul(h).Add(off.Div(eb))), size)
			k.Set(pn, pn.Add(uint32(1)))
			k.Set(pk, pk.Add(uint32(1)))
		})
	}
	for i := 0; i < MoEStages; i++ {
		produce()
	}
	cn := k.Var(dsl.U32, slots)     // slots consumed
	co := k.Var(dsl.U32, uint32(0)) // pieces stored
	cok, crow, cmask := k.Var(dsl.Bool, false), k.Var(dsl.U32, uint32(MoENone)), k.Var(dsl.U32, uint32(0))
	cw := k.Var(dsl.F32, float32(0))
	zero := k.Const(dsl.U32, 0)
	k.For(zero, items, uint32(1), func(it dsl.Value) {
		q, p := lo.Add(it.Div(np)), it.Rem(np)
		k.If(p.Eq(uint32(0)), func() {
			k.Set(cok, info(q, crow, cmask))
			k.If(crow.Ne(uint32(MoENone)), func() { k.Set(cw, sum.weight(q)) })
		})
		k.If(cok, func() {
			off, size := pieceAt(p)
			nv := size.Div(uint32(16)) // vectors in the piece
			accs := make([]dsl.Tensor, MoECombineVectors)
			for v := range accs {
				accs[v] = regs(k, dsl.F32, vec)
			}
			k.For(zero, uint32(32), uint32(1), func(kk dsl.Value) {
				k.If(moeBit(cmask, kk), func() {
					wt := k.ShuffleIdx(cw, kk)
					y := r.stage(r.wait(cn))
					for v := 0; v < MoECombineVectors; v++ {
						j := lane.Add(uint32(32 * v))
						k.If(j.Lt(nv), func() {
							x := loadN(k, y, j.Mul(uint32(vec)), vec)
							for e := 0; e < vec; e++ {
								k.Set(accs[v].Get(e), accs[v].Get(e).Add(wt.Mul(x.Get(e).To(dsl.F32))))
							}
						})
					}
					k.SyncWarp() // every lane has read the stage: the producer may refill it
					k.Set(cn, cn.Add(uint32(1)))
					produce()
				})
			})
			// The sum into outgoing stage co mod 2, once its last store has read it.
			out := r.stage(k.Const(dsl.U32, MoEStages).Add(co.And(uint32(1))))
			k.If(lane0, func() { k.BulkWait(1, true) })
			k.SyncWarp()
			for v := 0; v < MoECombineVectors; v++ {
				j := lane.Add(uint32(32 * v))
				k.If(j.Lt(nv), func() { storeN(k, out, j.Mul(uint32(vec)), accs[v].To(dt)) })
			}
			k.FenceProxyAsync() // the lanes' shared stores before the bulk store reads them
			k.SyncWarp()
			k.If(lane0, func() {
				k.BulkStore(sum.dst(q).At(off.Div(eb)), out, size)
				k.BulkCommit()
			})
			k.Set(co, co.Add(uint32(1)))
		})
	})
	k.If(lane0, func() { k.BulkWait(0, false) }) // every row written before what follows publishes it
	k.Set(slots, cn)
}

// moeCombinePushBulk is moe_combine's second phase on bulk targets (TopK <= 32): block b's
// positions (i, s), token t = b + i*grid of source GPU s (s fastest), each with a slot here:
// lane j holds pair j's receive row and weight; the partial goes to GPU s's Part row.
func moeCombinePushBulk(k *dsl.Kernel, dt dsl.Type, a MoECombineArgs, r *moeRing, slots dsl.Value) {
	k.FenceProxyAsyncGlobal() // y and the weights are read after the barrier's acquire
	b, nb := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	ntb := k.Select(b.Lt(a.Tokens), a.Tokens.Sub(b).Add(nb).Sub(uint32(1)).Div(nb), uint32(0)) // this block's tokens
	sw := a.SlotW.Peer(a.Rank)
	tokenOf := func(q dsl.Value) (t, s dsl.Value) { return b.Add(q.Div(a.NGPUs).Mul(nb)), q.Rem(a.NGPUs) }
	slotOf := func(q dsl.Value) dsl.Value {
		t, s := tokenOf(q)
		return k.Load(a.SlotIdx.At(s.Mul(a.Tokens).Add(t)))
	}
	moeSumRows(k, dt, r, slots, a.H, a.Piece, moeSum{
		positions: ntb.Mul(a.NGPUs),
		rows: func(q dsl.Value) (dsl.Value, dsl.Value) {
			slot := slotOf(q)
			ok := slot.Ne(uint32(MoENone))
			row := k.Var(dsl.U32, uint32(MoENone))
			k.If(ok.And(r.lane.Lt(a.K)), func() { k.Set(row, k.Load(a.SlotRows.At(slot.Mul(a.K).Add(r.lane)))) })
			return ok, row
		},
		weight: func(q dsl.Value) dsl.Value { return k.Load(sw.At(slotOf(q).Mul(a.K).Add(r.lane))) },
		src:    a.Y,
		dst: func(q dsl.Value) dsl.Ptr {
			t, s := tokenOf(q)
			return a.Part.Peer(s).At(a.Rank.Mul(a.Tokens).Add(t).Mul(a.H))
		},
	})
}

// moeCombineSumBulk is moe_combine's third phase on bulk targets: block b's tokens t = b +
// i*grid; lane d holds GPU d's partial row of t (when t's mask names d), weight 1; the sum
// goes to out[t].
func moeCombineSumBulk(k *dsl.Kernel, dt dsl.Type, a MoECombineArgs, r *moeRing, slots dsl.Value) {
	k.FenceProxyAsyncGlobal() // the partials came from other GPUs (bulk stores, then the barrier)
	b, nb := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	ntb := k.Select(b.Lt(a.Tokens), a.Tokens.Sub(b).Add(nb).Sub(uint32(1)).Div(nb), uint32(0))
	tokenOf := func(q dsl.Value) dsl.Value { return b.Add(q.Mul(nb)) }
	moeSumRows(k, dt, r, slots, a.H, a.Piece, moeSum{
		positions: ntb,
		rows: func(q dsl.Value) (dsl.Value, dsl.Value) {
			t := tokenOf(q)
			m := k.Load(a.TMask.At(t))
			on := r.lane.Lt(a.NGPUs).And(moeBit(m, r.lane))
			return k.Const(dsl.Bool, true), k.Select(on, r.lane.Mul(a.Tokens).Add(t), uint32(MoENone))
		},
		weight: func(dsl.Value) dsl.Value { return k.Const(dsl.F32, float32(1)) },
		src:    a.Part.Peer(a.Rank),
		dst:    func(q dsl.Value) dsl.Ptr { return a.Out.At(tokenOf(q).Mul(a.H)) },
	})
}
