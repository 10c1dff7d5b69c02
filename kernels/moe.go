package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// Expert-parallel MoE dispatch and combine within one node, through peer pointers (issue
// #26, normal mode, bf16 tokens; docs/moe.md). A token crosses to a GPU once, however many
// of its top-k experts live there (DeepEP's way).
//
// A dispatch is four launches on every GPU: moe_dispatch_count (every GPU's per-expert row
// counts and per-GPU token counts to every GPU), moe_dispatch_layout (local: where each
// expert's rows and each GPU's tokens start), moe_dispatch_send (each token once per other
// destination GPU into that GPU's token buffer, with its rows' metadata, by peer stores; its
// local pairs' rows straight into the receive buffer) and moe_dispatch_expand (local:
// token-buffer rows copied to the expert-major receive buffer).
// A combine is moe_combine: each expert GPU sums, per received token, its local experts'
// weighted outputs (f32, k order, rounded to dt once) and pushes that one row to the token's
// GPU, which sums the rows of the GPUs in GPU order (f32, rounded once more). Stream order
// between the launches of one GPU makes a kernel's results visible to the next one of that
// GPU; the p2p barriers (signal pads) order the GPUs among themselves.
//
// Layout: GPU d owns experts [d*el, d*el+el) (el = e/ngpus). Its token buffer holds the
// tokens it received, by source GPU, then by token (the slots of its own tokens unwritten); its receive buffer holds the rows of
// local expert j at [offsets[j], offsets[j]+counts[j]), expert-major; inside an expert, by
// source GPU, then by (token, k) of the source. src[row] is the source of a row:
// rank*pairs + t*kk + k.

// The MoE families.
const (
	FamilyMoEDispatchCount  Family = "moe_dispatch_count"
	FamilyMoEDispatchLayout Family = "moe_dispatch_layout"
	FamilyMoEDispatchSend   Family = "moe_dispatch_send"
	FamilyMoEDispatchExpand Family = "moe_dispatch_expand"
	FamilyMoECombine        Family = "moe_combine"
)

// MoENone marks a row or slot that holds nothing (id -1, a bad id, another GPU's expert, or
// a row past the capacity).
const MoENone = 0xFFFFFFFF

// MoEStatusWords is the length of the dispatch status (MoEDispatchLayoutArgs.Status).
const MoEStatusWords = 6

func init() {
	for f, n := range map[Family]int{FamilyMoEDispatchCount: 1, FamilyMoEDispatchLayout: 0,
		FamilyMoEDispatchSend: 1, FamilyMoEDispatchExpand: 0, FamilyMoECombine: 2} {
		collFamilies[f] = struct {
			multimem bool
			barriers int
		}{false, n}
	}
	none := []ptx.Target{} // not pinned in golden/
	register(&Spec{Name: string(FamilyMoEDispatchCount), Family: FamilyMoEDispatchCount, Golden: none,
		Doc:    "MoE dispatch, phase 1: per-expert row counts, per-GPU token counts and positions, stored into every GPU's count matrix; 1 barrier",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchCount})
	register(&Spec{Name: string(FamilyMoEDispatchLayout), Family: FamilyMoEDispatchLayout, Golden: none,
		Doc:    "MoE dispatch, phase 2 (local): each expert's first row and each GPU's first token slot for this GPU, local counts and offsets, status",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchLayout})
	register(&Spec{Name: string(FamilyMoEDispatchSend), Family: FamilyMoEDispatchSend, Golden: none,
		Doc:    "MoE dispatch, phase 3: each token once per destination GPU into its token buffer (bulk copies on sm_90+, 16-byte peer stores before), with its rows' metadata; 1 barrier",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchSend})
	register(&Spec{Name: string(FamilyMoEDispatchExpand), Family: FamilyMoEDispatchExpand, Golden: none,
		Doc:    "MoE dispatch, phase 4 (local): token-buffer rows copied into the expert-major receive buffer",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchExpand})
	register(&Spec{Name: string(FamilyMoECombine), Family: FamilyMoECombine, Golden: none,
		Doc:    "MoE combine: per received token, the local experts' weighted sum (f32) pushed as one row to its GPU, then summed there over GPUs in order; 2 barriers",
		DTypes: []dsl.Type{dsl.BF16}, New: MoECombine})
}

// MoEDispatchCountArgs are moe_dispatch_count's parameters. Ids holds tokens*k expert ids
// (-1: none); the tokens are split into chunks of Chunk tokens, chunk b to block b (launch
// ceil(tokens/Chunk) blocks, the same on every GPU). Pos gets each pair's position among its
// chunk's pairs of its expert; TMask each token's destination GPUs (bit d: an expert of GPU
// d, ngpus <= 32); TPos[t*ngpus+d] the token's position among its chunk's tokens bound for
// GPU d. Cnt is every GPU's count matrix of CollMaxGPUs x chunks rows of e+1+ngpus words
// (row (g, b), written by GPU g's block b: chunk b's rows per expert, its bad ids, its
// tokens per destination GPU).
type MoEDispatchCountArgs struct {
	Ids                                         dsl.Ptr       `kgen:"s32"`
	Pos, TPos, TMask                            dsl.Ptr       `kgen:"u32"`
	Cnt                                         dsl.PeerTable `kgen:"u32"`
	Pads                                        dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Tokens, K, Chunk, E, EL, Epoch dsl.Value     `kgen:"u32"`
}

// moeColumn is the count column of an expert id: the id for 0..e-1, e for a bad id (below
// -1 or from e), MoENone for -1.
func moeColumn(k *dsl.Kernel, id, e dsl.Value) dsl.Value {
	u := id.Bitcast(dsl.U32)
	return k.Select(u.Add(uint32(1)).Gt(e), e, u)
}

// moeBit reports whether bit d of mask is set.
func moeBit(mask, d dsl.Value) dsl.Value {
	return mask.Shr(d).And(uint32(1)).Ne(uint32(0))
}

// MoEDispatchCount: block b first computes the destination mask of each of chunk b's tokens
// (a bar.sync), then thread c (and c + the block size, ...) takes count column c: for an
// expert (or the bad ids), it scans the chunk's pairs in order, numbering those of its
// expert (Pos); for GPU d, it scans the chunk's tokens in order, numbering those bound for d
// (TPos). Each column's count goes into row (rank, b) of every GPU's count matrix; a closing
// barrier makes the counts visible to every GPU's next launch. It needs no opening barrier:
// the previous dispatch's readers of a GPU's count matrix (its moe_dispatch_layout) finished
// before that GPU reached the previous moe_dispatch_send's barrier, which this GPU passed.
// The closing barrier is also what frees every GPU's token and receive buffers and slot
// metadata for moe_dispatch_send: a GPU reaches it only after its work before the dispatch
// (its expand, the experts reading its rows, its combine) is done.
func MoEDispatchCount(k *dsl.Kernel, _ dsl.Type) {
	a := dsl.Params[MoEDispatchCountArgs](k, dsl.U32)
	cnts := peerTable(k, a.Cnt.Table(), a.NGPUs)
	b := k.BlockIdx(dsl.X)
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	lo := b.Mul(a.Chunk).Min(a.Tokens)
	hi := lo.Add(a.Chunk).Min(a.Tokens)
	k.For(lo.Add(tid), hi, nt, func(t dsl.Value) {
		m := k.Var(dsl.U32, uint32(0))
		k.For(k.Const(dsl.U32, 0), a.K, uint32(1), func(kk dsl.Value) {
			col := moeColumn(k, k.Load(a.Ids.At(t.Mul(a.K).Add(kk))), a.E)
			k.If(col.Lt(a.E), func() { k.Set(m, m.Or(k.Const(dsl.U32, 1).Shl(col.Div(a.EL)))) })
		})
		k.Store(a.TMask.At(t), m)
	})
	k.SyncThreads()
	e1 := a.E.Add(uint32(1))
	w := e1.Add(a.NGPUs)
	row := a.Rank.Mul(k.GridDim(dsl.X)).Add(b).Mul(w)
	k.For(tid, w, nt, func(c dsl.Value) {
		n := k.Var(dsl.U32, uint32(0))
		k.If(c.Lt(e1), func() {
			k.For(lo.Mul(a.K), hi.Mul(a.K), uint32(1), func(i dsl.Value) {
				col := moeColumn(k, k.Load(a.Ids.At(i)), a.E)
				k.If(col.Eq(c), func() {
					k.If(c.Lt(a.E), func() { k.Store(a.Pos.At(i), n) })
					k.Set(n, n.Add(uint32(1)))
				})
			})
		}).Else(func() {
			d := c.Sub(e1)
			k.For(lo, hi, uint32(1), func(t dsl.Value) {
				k.If(moeBit(k.Load(a.TMask.At(t)), d), func() {
					k.Store(a.TPos.At(t.Mul(a.NGPUs).Add(d)), n)
					k.Set(n, n.Add(uint32(1)))
				})
			})
		})
		forPeers(k, a.NGPUs, func(p int) { k.Store(ptrAt(k, cnts[p], dsl.U32).At(row.Add(c)), n) })
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
}

// MoEDispatchLayoutArgs are moe_dispatch_layout's parameters (one block of CollThreads):
// Cnt is this GPU's count matrix (every GPU's rows filled by moe_dispatch_count's Chunks
// blocks); Tot gets every GPU's total per column (ngpus x (e+1+ngpus) words); RowStart, per
// chunk, e+ngpus words: for expert c the row of its GPU where this GPU's rows of that chunk
// start, then for GPU d the slot of d's token buffer where this GPU's tokens of that chunk
// start. Counts and Offsets (el and el+1 words) get this GPU's received rows per local expert
// and where they start; Status MoEStatusWords words: the bad ids of every GPU, the most rows
// any GPU receives, the tokens this GPU receives (its token buffer's rows), the tokens it
// sends to other GPUs, and the first slot and number of its own tokens' slots in its token
// buffer (unwritten: the expand skips them).
type MoEDispatchLayoutArgs struct {
	Cnt, Tot, RowStart, Counts, Offsets, Status dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, Chunks, E, EL                  dsl.Value `kgen:"u32"`
}

// MoEDispatchLayout computes the layout from the count matrix (local loads only, one block:
// the totals, a bar.sync, then the starts).
func MoEDispatchLayout(k *dsl.Kernel, _ dsl.Type) {
	a := dsl.Params[MoEDispatchLayoutArgs](k, dsl.U32)
	e1 := a.E.Add(uint32(1))
	w := e1.Add(a.NGPUs)
	rs := a.E.Add(a.NGPUs)
	zero := k.Const(dsl.U32, 0)
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	// Totals: Tot[s][c] = the sum over chunks of Cnt[s][chunk][c].
	k.For(tid, a.NGPUs.Mul(w), nt, func(q dsl.Value) {
		s, c := q.Div(w), q.Rem(w)
		t := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.Chunks, uint32(1), func(b dsl.Value) {
			k.Set(t, t.Add(k.Load(a.Cnt.At(s.Mul(a.Chunks).Add(b).Mul(w).Add(c)))))
		})
		k.Store(a.Tot.At(q), t)
	})
	k.SyncThreads()
	tot := func(s, c dsl.Value) dsl.Value { return k.Load(a.Tot.At(s.Mul(w).Add(c))) }
	// expertTotal is the rows every GPU sends to expert e.
	expertTotal := func(e dsl.Value) dsl.Value {
		t := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.NGPUs, uint32(1), func(s dsl.Value) { k.Set(t, t.Add(tot(s, e))) })
		return t
	}
	// base is the first row of local expert j on GPU d.
	base := func(d, j dsl.Value) dsl.Value {
		b := k.Var(dsl.U32, uint32(0))
		k.For(zero, j, uint32(1), func(jj dsl.Value) { k.Set(b, b.Add(expertTotal(d.Mul(a.EL).Add(jj)))) })
		return b
	}
	// Column c < e: expert c's rows; column e+d: GPU d's token slots. Count column cc.
	k.For(tid, rs, nt, func(c dsl.Value) {
		r := k.Var(dsl.U32, uint32(0))
		cc := k.Var(dsl.U32, c)
		k.If(c.Lt(a.E), func() { k.Set(r, base(c.Div(a.EL), c.Rem(a.EL))) }).Else(func() { k.Set(cc, c.Add(uint32(1))) })
		k.For(zero, a.Rank, uint32(1), func(s dsl.Value) { k.Set(r, r.Add(tot(s, cc))) })
		k.For(zero, a.Chunks, uint32(1), func(b dsl.Value) {
			k.Store(a.RowStart.At(b.Mul(rs).Add(c)), r)
			k.Set(r, r.Add(k.Load(a.Cnt.At(a.Rank.Mul(a.Chunks).Add(b).Mul(w).Add(cc)))))
		})
	})
	k.For(tid, a.EL.Add(uint32(1)), nt, func(j dsl.Value) {
		k.Store(a.Offsets.At(j), base(a.Rank, j))
		k.If(j.Lt(a.EL), func() { k.Store(a.Counts.At(j), expertTotal(a.Rank.Mul(a.EL).Add(j))) })
	})
	k.If(tid.Eq(0), func() {
		bad := k.Var(dsl.U32, uint32(0))
		recv := k.Var(dsl.U32, uint32(0))
		sent := k.Var(dsl.U32, uint32(0))
		own := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.NGPUs, uint32(1), func(s dsl.Value) {
			k.Set(bad, bad.Add(tot(s, a.E)))
			k.If(s.Eq(a.Rank), func() { k.Set(own, recv) })
			k.Set(recv, recv.Add(tot(s, e1.Add(a.Rank))))
			k.If(s.Ne(a.Rank), func() { k.Set(sent, sent.Add(tot(a.Rank, e1.Add(s)))) })
		})
		most := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.NGPUs, uint32(1), func(d dsl.Value) { k.Set(most, most.Max(base(d, a.EL))) })
		k.Store(a.Status.At(0), bad)
		k.Store(a.Status.At(1), most)
		k.Store(a.Status.At(2), recv)
		k.Store(a.Status.At(3), sent)
		k.Store(a.Status.At(4), own)
		k.Store(a.Status.At(5), tot(a.Rank, e1.Add(a.Rank)))
	})
}

// MoEDispatchSendArgs are moe_dispatch_send's parameters: X the tokens [tokens, h] (dt);
// Recv this GPU's receive buffer [cap, h];
// Ids, Pos, TPos, TMask, Chunk and RowStart as above; Tok every GPU's token buffer
// [ngpus*tokens, h]; SlotIdx every GPU's slot of token t of GPU s at s*tokens+t (MoENone:
// not sent there);
// SlotRows every GPU's receive-buffer row of each slot's pair k ([ngpus*tokens, k],
// MoENone: not on that GPU or past the capacity); SlotOf and Src every GPU's token slot and
// source (rank*pairs + t*k + k) of each receive-buffer row; Route this GPU's slot of token t
// on GPU d at t*ngpus+d (for the combine).
type MoEDispatchSendArgs struct {
	X, Recv                                             dsl.Ptr       // of dt
	Ids                                                 dsl.Ptr       `kgen:"s32"`
	Pos, TPos, TMask, RowStart, Route                   dsl.Ptr       `kgen:"u32"`
	Tok                                                 dsl.PeerTable // of dt
	SlotIdx, SlotRows, SlotOf, Src                      dsl.PeerTable `kgen:"u32"`
	Pads                                                dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Tokens, Chunk, K, H, E, EL, Cap, Epoch dsl.Value     `kgen:"u32"`
	// Piece is the bytes of a row piece on bulk targets (MoEBulk: MoEPieceBytes, at most
	// MoESendMaxPiece; the launch gives MoESendShared(Piece) bytes of dynamic shared
	// memory); unused elsewhere.
	Piece dsl.Value `kgen:"u32"`
}

// MoEDispatchSend stores each token once into the token buffer of every other GPU its mask
// names (h a multiple of 8; the row loaded once: bulk copies through each warp's shared
// stages on sm_90+, moeSendRowsBulk; 16-byte vectors before) and directly into this
// GPU's receive-buffer rows of its local pairs (the expand skips those: their SlotOf is
// MoENone), the slots' metadata (every token's slot on every GPU, and per pair its
// receive-buffer row or MoENone; this GPU's own tokens keep a slot, whose row is not
// written, for the combine), and per received row its slot and source; rows from cap on are
// not written (the layout's status reports them). A closing barrier makes every GPU's stores
// visible to the next launch of each GPU.
func MoEDispatchSend(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoEDispatchSendArgs](k, dt)
	rs := a.E.Add(a.NGPUs)
	var toks []dsl.Value
	if !MoEBulk(k.Target()) {
		toks = peerTable(k, a.Tok.Table(), a.NGPUs)
	}
	slotOn := func(t, d dsl.Value) dsl.Value {
		return k.Load(a.RowStart.At(t.Div(a.Chunk).Mul(rs).Add(a.E).Add(d))).Add(k.Load(a.TPos.At(t.Mul(a.NGPUs).Add(d))))
	}
	// The rows: one load, one store per other destination GPU, and one into this GPU's
	// receive buffer per local pair (no token-buffer round trip for this GPU's own tokens):
	// bulk copies through shared memory on sm_90+, 16-byte register copies elsewhere.
	if MoEBulk(k.Target()) {
		moeSendRowsBulk(k, dt, a, slotOn)
	} else {
		moeSendRowsRegs(k, dt, a, toks, slotOn)
	}
	moeSendMeta(k, a, slotOn)
}

// moeSendRowsRegs is moe_dispatch_send's row movement before sm_90: every thread loads
// 16-byte vectors of a row and stores them to each destination.
func moeSendRowsRegs(k *dsl.Kernel, dt dsl.Type, a MoEDispatchSendArgs, toks []dsl.Value, slotOn func(t, d dsl.Value) dsl.Value) {
	const vec = 8
	hv := a.H.Div(uint32(vec))
	rs := a.E.Add(a.NGPUs)
	gridLoop(k, a.Tokens.Mul(hv), func(q dsl.Value) {
		t, v := q.Div(hv), q.Rem(hv)
		m := k.Load(a.TMask.At(t))
		k.If(m.Ne(uint32(0)), func() {
			col := v.Mul(uint32(vec))
			x := loadN(k, a.X, t.Mul(a.H).Add(col), vec)
			forPeers(k, a.NGPUs, func(p int) {
				k.If(m.And(uint32(1)<<p).Ne(uint32(0)).And(a.Rank.Ne(uint32(p))), func() {
					d := k.Const(dsl.U32, p)
					storeN(k, ptrAt(k, toks[p], dt), slotOn(t, d).Mul(a.H).Add(col), x)
				})
			})
			k.If(moeBit(m, a.Rank), func() {
				k.For(k.Const(dsl.U32, 0), a.K, uint32(1), func(kk dsl.Value) {
					i := t.Mul(a.K).Add(kk)
					c := moeColumn(k, k.Load(a.Ids.At(i)), a.E)
					k.If(c.Lt(a.E).And(c.Div(a.EL).Eq(a.Rank)), func() {
						r := k.Load(a.RowStart.At(t.Div(a.Chunk).Mul(rs).Add(c))).Add(k.Load(a.Pos.At(i)))
						k.If(r.Lt(a.Cap), func() { storeN(k, a.Recv, r.Mul(a.H).Add(col), x) })
					})
				})
			})
		})
	})
}

// moeSendMeta is moe_dispatch_send's metadata and closing barrier.
func moeSendMeta(k *dsl.Kernel, a MoEDispatchSendArgs, slotOn func(t, d dsl.Value) dsl.Value) {
	rs := a.E.Add(a.NGPUs)
	// Every token's slot on every GPU (MoENone: not sent there), and this GPU's routes.
	gridLoop(k, a.Tokens.Mul(a.NGPUs), func(q dsl.Value) {
		t, d := q.Div(a.NGPUs), q.Rem(a.NGPUs)
		slot := k.Var(dsl.U32, uint32(MoENone))
		k.If(moeBit(k.Load(a.TMask.At(t)), d), func() { k.Set(slot, slotOn(t, d)) })
		k.Store(a.SlotIdx.Peer(d).At(a.Rank.Mul(a.Tokens).Add(t)), slot)
		k.Store(a.Route.At(q), slot)
	})
	// The pairs: their row (or MoENone) in every destination slot of their token, and the
	// row's slot and source on their expert's GPU.
	gridLoop(k, a.Tokens.Mul(a.K), func(i dsl.Value) {
		t, kk := i.Div(a.K), i.Rem(a.K)
		col := moeColumn(k, k.Load(a.Ids.At(i)), a.E)
		row := k.Var(dsl.U32, uint32(MoENone))
		k.If(col.Lt(a.E), func() {
			r := k.Load(a.RowStart.At(t.Div(a.Chunk).Mul(rs).Add(col))).Add(k.Load(a.Pos.At(i)))
			k.If(r.Lt(a.Cap), func() { k.Set(row, r) })
		})
		dst := col.Div(a.EL) // meaningful only when row is set
		m := k.Load(a.TMask.At(t))
		k.For(k.Const(dsl.U32, 0), a.NGPUs, uint32(1), func(d dsl.Value) {
			k.If(moeBit(m, d), func() {
				slot := slotOn(t, d)
				mine := row.Ne(uint32(MoENone)).And(d.Eq(dst))
				k.Store(a.SlotRows.Peer(d).At(slot.Mul(a.K).Add(kk)), k.Select(mine, row, uint32(MoENone)))
				k.If(mine, func() {
					k.Store(a.SlotOf.Peer(d).At(row), k.Select(d.Eq(a.Rank), uint32(MoENone), slot))
					k.Store(a.Src.Peer(d).At(row), a.Rank.Mul(a.Tokens).Mul(a.K).Add(i))
				})
			})
		})
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
}

// MoEDispatchExpandArgs are moe_dispatch_expand's parameters (all this GPU's): Tok the
// token buffer, Recv the receive buffer [cap, h], SlotOf each row's token slot, Offsets
// (el+1 words: the last, the rows received); on bulk targets SlotRows (each slot's rows per
// pair, [slots, k]) and Status (moe_dispatch_layout's: the slots and this GPU's own) in
// their place.
type MoEDispatchExpandArgs struct {
	Tok, Recv                         dsl.Ptr   // of dt
	SlotOf, Offsets, SlotRows, Status dsl.Ptr   `kgen:"u32"`
	EL, H, Cap, K                     dsl.Value `kgen:"u32"`
	Piece                             dsl.Value `kgen:"u32"` // as MoEDispatchSendArgs.Piece
}

// MoEDispatchExpand copies, for each received row below cap from another GPU, its token's
// row from the token buffer (local loads and stores only: per token slot with bulk copies
// on sm_90+, moeExpandBulk; per row with 16-byte vectors before).
func MoEDispatchExpand(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoEDispatchExpandArgs](k, dt)
	if MoEBulk(k.Target()) {
		moeExpandBulk(k, dt, a)
		return
	}
	const vec = 8
	hv := a.H.Div(uint32(vec))
	n := k.Load(a.Offsets.At(a.EL)).Min(a.Cap)
	gridLoop(k, n.Mul(hv), func(q dsl.Value) {
		row, v := q.Div(hv), q.Rem(hv)
		col := v.Mul(uint32(vec))
		slot := k.Load(a.SlotOf.At(row))
		k.If(slot.Ne(uint32(MoENone)), func() {
			storeN(k, a.Recv, row.Mul(a.H).Add(col), loadN(k, a.Tok, slot.Mul(a.H).Add(col), vec))
		})
	})
}

// MoECombineArgs are moe_combine's parameters: Y this GPU's expert outputs [cap, h] in its
// receive buffer's row order; Weights this GPU's [tokens, k] (f32); TMask and Route this
// GPU's token masks and slots (moe_dispatch_count, moe_dispatch_send); SlotIdx and SlotRows
// this GPU's slot metadata; SlotW every GPU's weight per slot and k ([ngpus*tokens, k] f32);
// Part every GPU's partial rows [ngpus*tokens, h] (row d*tokens+t: GPU d's sum for token
// t); Out this GPU's tokens [tokens, h].
type MoECombineArgs struct {
	Y                                dsl.Ptr       // of dt
	Weights                          dsl.Ptr       `kgen:"f32"`
	TMask, Route, SlotIdx, SlotRows  dsl.Ptr       `kgen:"u32"`
	SlotW                            dsl.PeerTable `kgen:"f32"`
	Part                             dsl.PeerTable // of dt
	Out                              dsl.Ptr
	Pads                             dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Tokens, K, H, Epoch dsl.Value     `kgen:"u32"`
	// Piece is the bytes of a row piece on bulk targets (MoEPieceBytes, at most
	// MoECombineMaxPiece; the launch gives MoECombineShared(Piece) bytes of dynamic shared
	// memory); unused elsewhere.
	Piece dsl.Value `kgen:"u32"`
}

// MoECombine runs in three phases, each token t in block t mod (the grid) of every GPU (the
// p2p barriers order block b of every GPU, not a GPU's blocks among themselves): t's
// weights go to its slots on its destination GPUs; a barrier (every GPU's Y and weights are
// in place, every GPU's Part is free); then, per source GPU s in order and its token t
// received here, part = sum over k in order of weight * Y(row of k), f32, rounded to dt
// once, pushed to GPU s; a barrier (every part has landed); then out[t] = sum over GPUs d =
// 0..ngpus-1 in order (those of t's mask) of part(d, t), f32, rounded once. On sm_90+ both
// sums read their rows with bulk loads into each warp's shared stages and write them with
// bulk stores (moeSumRows; the second phase takes the register path when k > 32); before
// sm_90, 16-byte register loads and stores.
func MoECombine(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoECombineArgs](k, dt)
	const vec = 8
	hv := a.H.Div(uint32(vec))
	zero := k.Const(dsl.U32, 0)
	b, nb := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	tokens := func(body func(t dsl.Value)) { k.For(b, a.Tokens, nb, body) }
	tokens(func(t dsl.Value) {
		m := k.Load(a.TMask.At(t))
		k.For(tid, a.NGPUs.Mul(a.K), nt, func(q dsl.Value) {
			d, kk := q.Div(a.K), q.Rem(a.K)
			k.If(moeBit(m, d), func() {
				slot := k.Load(a.Route.At(t.Mul(a.NGPUs).Add(d)))
				k.Store(a.SlotW.Peer(d).At(slot.Mul(a.K).Add(kk)), k.Load(a.Weights.At(t.Mul(a.K).Add(kk))))
			})
		})
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
	if MoEBulk(k.Target()) {
		r := newMoERing(k, dt, a.Piece, MoEStages+2)
		slots := k.Var(dsl.U32, uint32(0)) // the ring's slots so far (its mbarriers' phases)
		k.If(a.K.Le(uint32(MoECombineMaxTopK)), func() { moeCombinePushBulk(k, dt, a, r, slots) }).
			Else(func() { moeCombinePushRegs(k, dt, a) })
		p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
		moeCombineSumBulk(k, dt, a, r, slots)
		return
	}
	moeCombinePushRegs(k, dt, a)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
	part := a.Part.Peer(a.Rank)
	tokens(func(t dsl.Value) {
		m := k.Load(a.TMask.At(t))
		k.For(tid, hv, nt, func(v dsl.Value) {
			col := v.Mul(uint32(vec))
			acc := regs(k, dsl.F32, vec)
			k.For(zero, a.NGPUs, uint32(1), func(d dsl.Value) {
				k.If(moeBit(m, d), func() {
					p := loadN(k, part, d.Mul(a.Tokens).Add(t).Mul(a.H).Add(col), vec)
					for j := 0; j < vec; j++ {
						k.Set(acc.Get(j), acc.Get(j).Add(p.Get(j).To(dsl.F32)))
					}
				})
			})
			storeN(k, a.Out, t.Mul(a.H).Add(col), acc.To(dt))
		})
	})
}

// moeCombinePushRegs is moe_combine's second phase with register copies (before sm_90, or
// TopK past MoECombineMaxTopK): each thread sums 16-byte vectors of the rows and stores the
// partial's vector to the token's GPU.
func moeCombinePushRegs(k *dsl.Kernel, dt dsl.Type, a MoECombineArgs) {
	const vec = 8
	hv := a.H.Div(uint32(vec))
	zero := k.Const(dsl.U32, 0)
	b, nb := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	sw := a.SlotW.Peer(a.Rank)
	k.For(b, a.Tokens, nb, func(t dsl.Value) {
		k.For(zero, a.NGPUs, uint32(1), func(s dsl.Value) {
			slot := k.Load(a.SlotIdx.At(s.Mul(a.Tokens).Add(t)))
			k.If(slot.Ne(uint32(MoENone)), func() {
				part := a.Part.Peer(s)
				k.For(tid, hv, nt, func(v dsl.Value) {
					col := v.Mul(uint32(vec))
					acc := regs(k, dsl.F32, vec)
					k.For(zero, a.K, uint32(1), func(kk dsl.Value) {
						row := k.Load(a.SlotRows.At(slot.Mul(a.K).Add(kk)))
						k.If(row.Ne(uint32(MoENone)), func() {
							wt := k.Load(sw.At(slot.Mul(a.K).Add(kk)))
							y := loadN(k, a.Y, row.Mul(a.H).Add(col), vec)
							for j := 0; j < vec; j++ {
								k.Set(acc.Get(j), acc.Get(j).Add(wt.Mul(y.Get(j).To(dsl.F32))))
							}
						})
					})
					storeN(k, part, a.Rank.Mul(a.Tokens).Add(t).Mul(a.H).Add(col), acc.To(dt))
				})
			})
		})
	})
}
