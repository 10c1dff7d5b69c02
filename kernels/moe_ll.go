package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
)

// The MoE low-latency mode (issue #26; docs/moe.md, "Low-latency mode"): one kernel per
// dispatch and one per combine, fixed buffers sized by the most tokens a GPU sends per call
// (maxT), no host-side counts and no host epoch, so both can be captured in a CUDA graph and
// called back to back.
//
// Dispatch: each GPU pushes each token once to every GPU holding one of its experts (its
// token buffer slot s*maxT+t, of the call's parity), and every token's ids to every GPU
// (-1 past the call's tokens); each block then adds 1 to a counter per source on every GPU
// (red.release.sys). A GPU waits (ld.acquire.sys) until each source's counter holds every
// block of the call, then lays its received pairs out in the masked layout: local expert j's
// rows at j*rows + [0, Counts[j]), rows = ngpus*maxT, by source GPU, then token (one row per
// distinct (token, expert): a token that names an expert twice sends it one row), and copies
// the rows from its token buffer. Combine: each GPU pushes its tokens' weights to the GPUs
// holding their experts (a counter per source), each expert GPU sums per received token its
// pairs' weighted rows (f32, k order, rounded once) and pushes that row back (a counter per
// source), and each GPU sums its tokens' rows over GPUs in order (f32, rounded once more):
// the normal mode's numbers.
//
// Calls: block b keeps its call count in a word of its GPU's state (read at the start,
// stored +1 at the end); the counters grow by the grid per call, so a wait compares with
// (calls+1)*grid (serial numbers: they wrap). Buffers written by other GPUs come in two
// parities (the call count's low bit): a GPU can be at most one call ahead of another,
// because a call ends only after every GPU's blocks of that call have signalled.

// The low-latency MoE families.
const (
	FamilyMoELLDispatch Family = "moe_ll_dispatch"
	FamilyMoELLCombine  Family = "moe_ll_combine"
)

// The words of a GPU's low-latency state (MoELLStateWords u32, zero at allocation): per
// block its dispatch calls (MoELLDispatchSeq + b) and combine calls (MoELLCombineSeq + b),
// then per source GPU s the counters its blocks add to: the dispatch's (MoELLSigTokens + s),
// the combine's weights (MoELLSigWeights + s) and partial rows (MoELLSigParts + s).
const (
	MoELLDispatchSeq = 0
	MoELLCombineSeq  = CollMaxBlocks
	MoELLSigTokens   = 2 * CollMaxBlocks
	MoELLSigWeights  = MoELLSigTokens + CollMaxGPUs
	MoELLSigParts    = MoELLSigWeights + CollMaxGPUs
	MoELLStateWords  = MoELLSigParts + CollMaxGPUs
)

// MoELLMaxTopK is the most experts per token the low-latency combine takes (a slot's rows and
// weights sit in shared memory).
const MoELLMaxTopK = 64

// The 16-byte vectors a thread has in flight per iteration: in the sends and the combine's
// loops (hidden 7168 is 896 vectors: one iteration of 256 threads), and in the dispatch's
// local copy (several rows per block).
const (
	llUnroll     = 4
	llCopyUnroll = 8
)

func init() {
	for _, f := range []Family{FamilyMoELLDispatch, FamilyMoELLCombine} {
		collFamilies[f] = struct {
			multimem bool
			barriers int
		}{false, 0}
		graphVariants[f] = true // the epoch lives on the device: capturable as it is
	}
	register(&Spec{Name: string(FamilyMoELLDispatch), Family: FamilyMoELLDispatch,
		Doc:    "MoE low-latency dispatch: each token once per destination GPU and every token's ids, a counter per source, then the masked layout (expert-major, rows per source) built locally; one kernel, graph-capturable",
		DTypes: []dsl.Type{dsl.BF16}, New: MoELLDispatch})
	register(&Spec{Name: string(FamilyMoELLCombine), Family: FamilyMoELLCombine,
		Doc:    "MoE low-latency combine: weights to the expert GPUs, per received token the weighted sum (f32) pushed back as one row, summed over GPUs in order; one kernel, graph-capturable",
		DTypes: []dsl.Type{dsl.BF16}, New: MoELLCombine})
}

// MoELLDispatchArgs are moe_ll_dispatch's parameters. X holds Tokens (<= MaxT) tokens [Tokens,
// H] (dt), Ids their expert ids [Tokens, K] (-1: none). Recv gets the masked layout [EL*rows,
// H], rows = NGPUs*MaxT; Counts (EL words) each local expert's rows; Src per row its source
// rank*MaxT*K + t*K + k (the first k naming the expert); SlotRows per token slot s*MaxT+t and
// k the row of its pair here (MoENone: not here); TMask this GPU's tokens' destination GPUs;
// RowSlot per row its token slot (scratch); Status word 0 the ids outside [-1, E) of every
// GPU. Tok ([2][NGPUs*MaxT, H] of dt), TokIds ([2][NGPUs*MaxT, K]) and State
// (MoELLStateWords) are every GPU's.
type MoELLDispatchArgs struct {
	X, Recv                                dsl.Ptr // of dt
	Ids                                    dsl.Ptr `kgen:"s32"`
	Counts, Src, SlotRows, TMask, RowSlot  dsl.Ptr `kgen:"u32"`
	Status                                 dsl.Ptr `kgen:"u32"`
	Tok                                    dsl.PeerTable
	TokIds                                 dsl.PeerTable `kgen:"s32"`
	State                                  dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Tokens, MaxT, K, H, E, EL dsl.Value     `kgen:"u32"`
}

// llSignal adds 1 to counter word of every GPU's state (after a bar.sync: the block's
// earlier stores are ordered before it; thread g < ngpus releases to GPU g), then waits until
// this GPU's counter of every source reaches target (acquire), and a bar.sync passes the
// acquired view to the block.
func llSignal(k *dsl.Kernel, state dsl.PeerTable, rank, ngpus dsl.Value, word int, target dsl.Value) {
	tid := k.ThreadIdx(dsl.X)
	k.SyncThreads()
	k.If(tid.Lt(ngpus), func() {
		k.Reduce(dsl.AtomAdd, state.Peer(tid).At(rank.Add(uint32(word))), k.Const(dsl.U32, 1), dsl.Release(dsl.System))
		k.WaitUntil(state.Peer(rank).At(tid.Add(uint32(word))), dsl.GeWrap, target, dsl.Acquire(dsl.System))
	})
	k.SyncThreads()
}

// llVecs runs body over the 16-byte vectors [0, n) of a block's work, u vectors per thread
// per iteration (vectors v0 + i*blockDim, i < u): body gets their indices, clamped to n-1 so
// that every load is in bounds, and ok[i], whether vector i is real (store only those). The
// u loads of an iteration are independent, so a thread has u in flight, not one.
func llVecs(k *dsl.Kernel, n dsl.Value, u int, body func(vs, ok []dsl.Value)) {
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	last := n.Sub(uint32(1))
	k.For(tid, n, nt.Mul(uint32(u)), func(v0 dsl.Value) {
		vs, ok := make([]dsl.Value, u), make([]dsl.Value, u)
		for i := range vs {
			v := v0.Add(nt.Mul(uint32(i)))
			vs[i], ok[i] = v.Min(last), v.Lt(n)
		}
		body(vs, ok)
	})
}

// llEach runs body over [0, n) in runtime steps of u: body gets u indices (clamped to n-1,
// so loads through them are in bounds) and whether each is real. A body that loads all u
// first and uses them after has u loads in flight (a runtime loop of one load per trip
// waits out a memory latency per trip).
func llEach(k *dsl.Kernel, from, n, step dsl.Value, u int, body func(is, ok []dsl.Value)) {
	last := n.Sub(uint32(1))
	k.For(from, n, step.Mul(uint32(u)), func(i0 dsl.Value) {
		is, ok := make([]dsl.Value, u), make([]dsl.Value, u)
		for j := range is {
			i := i0.Add(step.Mul(uint32(j)))
			is[j], ok[j] = i.Min(last), i.Lt(n)
		}
		body(is, ok)
	})
}

// blockScan returns v's exclusive prefix sum over the block's threads in thread order and
// the block's total (u32; a one-dimensional block of whole warps). It contains barriers:
// every thread of the block calls it.
func blockScan(k *dsl.Kernel, v dsl.Value) (excl, total dsl.Value) {
	sh := k.SharedArray(dsl.U32, 32)
	lane, warp := k.LaneID(), k.WarpID()
	incl := k.Var(dsl.U32, v)
	for d := 1; d < 32; d <<= 1 {
		y := k.ShuffleUp(incl, uint32(d))
		k.If(lane.Ge(uint32(d)), func() { k.Set(incl, incl.Add(y)) })
	}
	k.If(lane.Eq(31), func() { k.Store(sh.At(warp), incl) })
	k.SyncThreads()
	pre, tot := k.Var(dsl.U32, uint32(0)), k.Var(dsl.U32, uint32(0))
	k.For(k.Const(dsl.U32, 0), k.BlockDim(dsl.X).Shr(5), uint32(1), func(w dsl.Value) {
		s := k.Load(sh.At(w))
		k.If(w.Lt(warp), func() { k.Set(pre, pre.Add(s)) })
		k.Set(tot, tot.Add(s))
	})
	k.SyncThreads() // sh is free for the next call
	return pre.Add(incl).Sub(v), tot
}

// MoELLDispatch sends, receives and lays out one call's tokens (see the file comment).
// Block b sends tokens b, b+grid, ...; every block then waits for every source's counter;
// local expert j's layout is a scan over the token slots in order (source, then token) done
// by each block of expert j's group (blocks j, j+EL, ...; block b takes experts b, b+grid,
// ... when the grid is smaller than EL), which copies its share of the rows (row i of the
// expert by block i mod the group's size). The group's first block writes Counts, Src and
// SlotRows of expert j's pairs; block 0 writes SlotRows of the pairs of no local expert and
// the status.
func MoELLDispatch(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoELLDispatchArgs](k, dt)
	const vec = 8
	hv := a.H.Div(uint32(vec))
	zero := k.Const(dsl.U32, 0)
	b, nb := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	st := a.State.Peer(a.Rank)
	calls := k.Load(st.At(b.Add(uint32(MoELLDispatchSeq))))
	slots := a.NGPUs.Mul(a.MaxT)
	base := calls.And(uint32(1)).Mul(slots) // this call's parity: its first slot
	mine := base.Add(a.Rank.Mul(a.MaxT))    // this GPU's first slot on every GPU
	toks := peerTable(k, a.Tok.Table(), a.NGPUs)

	// Send: token t's ids to every GPU (-1 past Tokens), its row once to every GPU of its mask.
	k.For(b, a.MaxT, nb, func(t dsl.Value) {
		m := k.Var(dsl.U32, uint32(0))
		k.If(t.Lt(a.Tokens), func() {
			one := k.Const(dsl.U32, 1)
			llEach(k, zero, a.K, one, llUnroll, func(kks, ok []dsl.Value) {
				cols := make([]dsl.Value, len(kks))
				for i, kk := range kks {
					cols[i] = moeColumn(k, k.Load(a.Ids.At(t.Mul(a.K).Add(kk))), a.E)
				}
				for i, col := range cols {
					k.Set(m, m.Or(k.Select(ok[i].And(col.Lt(a.E)), one.Shl(col.Div(a.EL)), zero)))
				}
			})
			k.If(tid.Eq(0), func() { k.Store(a.TMask.At(t), m) })
		})
		k.For(tid, a.NGPUs.Mul(a.K), nt, func(q dsl.Value) {
			d, kk := q.Div(a.K), q.Rem(a.K)
			id := k.Var(dsl.I32, int32(-1))
			k.If(t.Lt(a.Tokens), func() { k.Set(id, k.Load(a.Ids.At(t.Mul(a.K).Add(kk)))) })
			k.Store(a.TokIds.Peer(d).At(mine.Add(t).Mul(a.K).Add(kk)), id)
		})
		k.If(m.Ne(uint32(0)), func() {
			llVecs(k, hv, llUnroll, func(vs, ok []dsl.Value) {
				xs := make([]dsl.Tensor, len(vs))
				for i, v := range vs {
					xs[i] = loadN(k, a.X, t.Mul(a.H).Add(v.Mul(uint32(vec))), vec)
				}
				forPeers(k, a.NGPUs, func(p int) {
					k.If(m.And(uint32(1)<<p).Ne(uint32(0)), func() {
						for i, v := range vs {
							k.If(ok[i], func() { storeN(k, ptrAt(k, toks[p], dt), mine.Add(t).Mul(a.H).Add(v.Mul(uint32(vec))), xs[i]) })
						}
					})
				})
			})
		})
	})
	llSignal(k, a.State, a.Rank, a.NGPUs, MoELLSigTokens, calls.Add(uint32(1)).Mul(nb))

	// Lay out and copy: local expert j's rows in slot order.
	ids := a.TokIds.Peer(a.Rank)
	tok := a.Tok.Peer(a.Rank)
	rows := slots
	j0 := b.Rem(a.EL)
	gi := b.Div(a.EL)                                   // this block's place in its group
	ng := nb.Sub(j0).Add(a.EL).Sub(uint32(1)).Div(a.EL) // the group's blocks
	k.For(j0, a.EL, nb, func(j dsl.Value) {
		eg := a.Rank.Mul(a.EL).Add(j).Bitcast(dsl.I32)
		first := j.Mul(rows)
		n := k.Var(dsl.U32, uint32(0))
		k.For(zero, slots, nt, func(c0 dsl.Value) {
			q := c0.Add(tid)
			kf := k.Var(dsl.U32, uint32(MoENone)) // the first k naming expert j
			k.If(q.Lt(slots), func() {
				llEach(k, zero, a.K, k.Const(dsl.U32, 1), llUnroll, func(kks, ok []dsl.Value) {
					vs := make([]dsl.Value, len(kks))
					for i, kk := range kks {
						vs[i] = k.Load(ids.At(base.Add(q).Mul(a.K).Add(kk)))
					}
					for i, kk := range kks {
						k.Set(kf, k.Select(kf.Eq(uint32(MoENone)).And(ok[i]).And(vs[i].Eq(eg)), kk, kf))
					}
				})
			})
			f := k.Select(kf.Ne(uint32(MoENone)), k.Const(dsl.U32, 1), zero)
			excl, tot := blockScan(k, f)
			k.If(kf.Ne(uint32(MoENone)), func() {
				row := n.Add(excl)
				k.If(row.Rem(ng).Eq(gi), func() { k.Store(a.RowSlot.At(first.Add(row)), q) })
				k.If(gi.Eq(0), func() {
					k.Store(a.Src.At(first.Add(row)), q.Mul(a.K).Add(kf)) // q = s*MaxT + t
					llEach(k, kf, a.K, k.Const(dsl.U32, 1), llUnroll, func(kks, ok []dsl.Value) {
						vs := make([]dsl.Value, len(kks))
						for i, kk := range kks {
							vs[i] = k.Load(ids.At(base.Add(q).Mul(a.K).Add(kk)))
						}
						for i, kk := range kks {
							k.If(ok[i].And(vs[i].Eq(eg)), func() { k.Store(a.SlotRows.At(q.Mul(a.K).Add(kk)), first.Add(row)) })
						}
					})
				})
			})
			k.Set(n, n.Add(tot))
		})
		k.If(gi.Eq(0).And(tid.Eq(0)), func() { k.Store(a.Counts.At(j), n) })
		k.SyncThreads() // RowSlot of this block's rows
		// This block's rows gi, gi+ng, ... below n, flattened with their vectors.
		mrows := n.Add(ng).Sub(uint32(1)).Sub(gi).Div(ng)
		k.If(n.Gt(gi), func() {
			llVecs(k, mrows.Mul(hv), llCopyUnroll, func(vs, ok []dsl.Value) {
				dst, xs := make([]dsl.Value, len(vs)), make([]dsl.Tensor, len(vs))
				for i, v := range vs {
					row := first.Add(gi.Add(v.Div(hv).Mul(ng)))
					col := v.Rem(hv).Mul(uint32(vec))
					dst[i] = row.Mul(a.H).Add(col)
					xs[i] = loadN(k, tok, base.Add(k.Load(a.RowSlot.At(row))).Mul(a.H).Add(col), vec)
				}
				for i := range vs {
					k.If(ok[i], func() { storeN(k, a.Recv, dst[i], xs[i]) })
				}
			})
		})
	})
	// Block 0: the pairs of no local expert, and the ids outside [-1, E) of every GPU.
	k.If(b.Eq(0), func() {
		lo := a.Rank.Mul(a.EL)
		bad := k.Var(dsl.U32, uint32(0))
		llEach(k, tid, slots.Mul(a.K), nt, llCopyUnroll, func(is, ok []dsl.Value) {
			cols := make([]dsl.Value, len(is))
			for j, i := range is {
				cols[j] = moeColumn(k, k.Load(ids.At(base.Mul(a.K).Add(i))), a.E)
			}
			for j, i := range is {
				col := cols[j]
				k.Set(bad, bad.Add(k.Select(ok[j].And(col.Eq(a.E)), k.Const(dsl.U32, 1), zero)))
				k.If(ok[j].And(col.Lt(lo).Or(col.Ge(lo.Add(a.EL)))), func() { k.Store(a.SlotRows.At(i), uint32(MoENone)) })
			}
		})
		tot := k.BlockReduce(bad, dsl.Sum)
		k.If(tid.Eq(0), func() { k.Store(a.Status.At(0), tot) })
	})
	k.SyncThreads()
	k.If(tid.Eq(0), func() { k.Store(st.At(b.Add(uint32(MoELLDispatchSeq))), calls.Add(uint32(1))) })
}

// MoELLCombineArgs are moe_ll_combine's parameters: Y this GPU's expert outputs in Recv's
// rows (masked layout, dt); Weights this GPU's [Tokens, K] (f32); SlotRows and TMask as the
// last dispatch left them; Out this GPU's [Tokens, H] (dt). W ([2][NGPUs*MaxT, K] f32), Part
// ([2][NGPUs*MaxT, H] of dt) and State are every GPU's.
type MoELLCombineArgs struct {
	Y, Out                          dsl.Ptr       // of dt
	Weights                         dsl.Ptr       `kgen:"f32"`
	SlotRows, TMask                 dsl.Ptr       `kgen:"u32"`
	W                               dsl.PeerTable `kgen:"f32"`
	Part                            dsl.PeerTable
	State                           dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Tokens, MaxT, K, H dsl.Value     `kgen:"u32"`
}

// MoELLCombine: block b pushes the weights of tokens b, b+grid, ... to the GPUs of their
// masks; after every source's weights (a counter per source), it sums for received slots b,
// b+grid, ... the slot's pairs' weighted rows in k order (f32, rounded to dt once) and pushes
// the row to the slot's GPU; after every GPU's rows (a counter per source), out[t] = the sum
// over GPUs d in order (those of t's mask) of d's row for t, f32, rounded once.
func MoELLCombine(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoELLCombineArgs](k, dt)
	const vec = 8
	hv := a.H.Div(uint32(vec))
	zero := k.Const(dsl.U32, 0)
	b, nb := k.BlockIdx(dsl.X), k.GridDim(dsl.X)
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	st := a.State.Peer(a.Rank)
	calls := k.Load(st.At(b.Add(uint32(MoELLCombineSeq))))
	slots := a.NGPUs.Mul(a.MaxT)
	base := calls.And(uint32(1)).Mul(slots)
	mine := base.Add(a.Rank.Mul(a.MaxT))
	target := calls.Add(uint32(1)).Mul(nb)

	k.For(b, a.Tokens, nb, func(t dsl.Value) {
		m := k.Load(a.TMask.At(t))
		k.For(tid, a.NGPUs.Mul(a.K), nt, func(q dsl.Value) {
			d, kk := q.Div(a.K), q.Rem(a.K)
			k.If(moeBit(m, d), func() {
				k.Store(a.W.Peer(d).At(mine.Add(t).Mul(a.K).Add(kk)), k.Load(a.Weights.At(t.Mul(a.K).Add(kk))))
			})
		})
	})
	llSignal(k, a.State, a.Rank, a.NGPUs, MoELLSigWeights, target)

	w := a.W.Peer(a.Rank)
	shRows, shW := k.SharedArray(dsl.U32, MoELLMaxTopK), k.SharedArray(dsl.F32, MoELLMaxTopK)
	k.For(b, slots, nb, func(q dsl.Value) {
		k.SyncThreads()            // the last slot's readers are done with shRows and shW
		k.If(tid.Lt(a.K), func() { // the slot's rows and weights, one load each, in parallel
			k.Store(shRows.At(tid), k.Load(a.SlotRows.At(q.Mul(a.K).Add(tid))))
			k.Store(shW.At(tid), k.Load(w.At(base.Add(q).Mul(a.K).Add(tid))))
		})
		k.SyncThreads()
		has := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.K, uint32(1), func(kk dsl.Value) {
			k.If(k.Load(shRows.At(kk)).Ne(uint32(MoENone)), func() { k.Set(has, uint32(1)) })
		})
		k.If(has.Ne(uint32(0)), func() {
			s, t := q.Div(a.MaxT), q.Rem(a.MaxT)
			part := a.Part.Peer(s)
			llVecs(k, hv, llUnroll, func(vs, ok []dsl.Value) {
				accs := make([]dsl.Tensor, len(vs))
				for i := range accs {
					accs[i] = regs(k, dsl.F32, vec)
				}
				k.For(zero, a.K, uint32(1), func(kk dsl.Value) {
					row := k.Load(shRows.At(kk))
					k.If(row.Ne(uint32(MoENone)), func() {
						wt := k.Load(shW.At(kk))
						ys := make([]dsl.Tensor, len(vs))
						for i, v := range vs {
							ys[i] = loadN(k, a.Y, row.Mul(a.H).Add(v.Mul(uint32(vec))), vec)
						}
						for i := range vs {
							for j := 0; j < vec; j++ {
								k.Set(accs[i].Get(j), accs[i].Get(j).Add(wt.Mul(ys[i].Get(j).To(dsl.F32))))
							}
						}
					})
				})
				for i, v := range vs {
					k.If(ok[i], func() { storeN(k, part, mine.Add(t).Mul(a.H).Add(v.Mul(uint32(vec))), accs[i].To(dt)) })
				}
			})
		})
	})
	llSignal(k, a.State, a.Rank, a.NGPUs, MoELLSigParts, target)

	part := a.Part.Peer(a.Rank)
	k.For(b, a.Tokens, nb, func(t dsl.Value) {
		m := k.Load(a.TMask.At(t))
		llVecs(k, hv, llUnroll, func(vs, ok []dsl.Value) {
			accs := make([]dsl.Tensor, len(vs))
			for i := range accs {
				accs[i] = regs(k, dsl.F32, vec)
			}
			k.For(zero, a.NGPUs, uint32(1), func(d dsl.Value) {
				k.If(moeBit(m, d), func() {
					ps := make([]dsl.Tensor, len(vs))
					for i, v := range vs {
						ps[i] = loadN(k, part, base.Add(d.Mul(a.MaxT)).Add(t).Mul(a.H).Add(v.Mul(uint32(vec))), vec)
					}
					for i := range vs {
						for j := 0; j < vec; j++ {
							k.Set(accs[i].Get(j), accs[i].Get(j).Add(ps[i].Get(j).To(dsl.F32)))
						}
					}
				})
			})
			for i, v := range vs {
				k.If(ok[i], func() { storeN(k, a.Out, t.Mul(a.H).Add(v.Mul(uint32(vec))), accs[i].To(dt)) })
			}
		})
	})
	k.SyncThreads()
	k.If(tid.Eq(0), func() { k.Store(st.At(b.Add(uint32(MoELLCombineSeq))), calls.Add(uint32(1))) })
}
