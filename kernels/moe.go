package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// Expert-parallel MoE dispatch and combine within one node, through peer pointers (issue
// #26, normal mode, bf16 tokens; docs/moe.md). A dispatch is three launches on every GPU:
// moe_dispatch_count (every GPU's per-expert counts to every GPU), moe_dispatch_layout (local:
// where each expert's rows start on their GPU) and moe_dispatch_send (the rows, by peer
// stores); a combine is moe_combine (each source GPU pulls its tokens' expert outputs and sums
// them, weighted, in k order). Stream order between the launches of one GPU is what makes a
// kernel's results visible to the next one of that GPU; the p2p barriers (signal pads) order
// the GPUs among themselves.
//
// Layout: GPU d owns experts [d*el, d*el+el) (el = e/ngpus). Its receive buffer holds the
// rows of local expert j at [offsets[j], offsets[j]+counts[j]), expert-major; inside an
// expert, by source GPU, then by (token, k) of the source. src[row] is the source of a row:
// rank*pairs + t*kk + k. A token routed twice to experts of one GPU is sent twice.

// The MoE families.
const (
	FamilyMoEDispatchCount  Family = "moe_dispatch_count"
	FamilyMoEDispatchLayout Family = "moe_dispatch_layout"
	FamilyMoEDispatchSend   Family = "moe_dispatch_send"
	FamilyMoECombine        Family = "moe_combine"
)

// MoENone is the route of a (token, k) pair that goes nowhere (id -1, a bad id, or a row
// past the capacity).
const MoENone = 0xFFFFFFFF

func init() {
	collFamilies[FamilyMoEDispatchCount] = struct {
		multimem bool
		barriers int
	}{false, 1}
	collFamilies[FamilyMoEDispatchLayout] = struct {
		multimem bool
		barriers int
	}{false, 0}
	collFamilies[FamilyMoEDispatchSend] = struct {
		multimem bool
		barriers int
	}{false, 1}
	collFamilies[FamilyMoECombine] = struct {
		multimem bool
		barriers int
	}{false, 2}
	none := []ptx.Target{} // not pinned in golden/
	register(&Spec{Name: string(FamilyMoEDispatchCount), Family: FamilyMoEDispatchCount, Golden: none,
		Doc:    "MoE dispatch, phase 1: per-expert counts and each pair's position, stored into every GPU's count matrix; 1 barrier",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchCount})
	register(&Spec{Name: string(FamilyMoEDispatchLayout), Family: FamilyMoEDispatchLayout, Golden: none,
		Doc:    "MoE dispatch, phase 2 (local): each expert's first row for this GPU, local counts and offsets, status",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchLayout})
	register(&Spec{Name: string(FamilyMoEDispatchSend), Family: FamilyMoEDispatchSend, Golden: none,
		Doc:    "MoE dispatch, phase 3: every (token, k) row into its expert GPU's receive buffer by 16-byte peer stores; 1 barrier",
		DTypes: []dsl.Type{dsl.BF16}, New: MoEDispatchSend})
	register(&Spec{Name: string(FamilyMoECombine), Family: FamilyMoECombine, Golden: none,
		Doc:    "MoE combine: each token pulls its k expert outputs by peer loads and sums them weighted in f32; 2 barriers",
		DTypes: []dsl.Type{dsl.BF16}, New: MoECombine})
}

// MoEDispatchCountArgs are moe_dispatch_count's parameters. Ids holds pairs = tokens*k
// expert ids (-1: none), split into chunks of Chunk pairs, chunk b to block b (launch
// ceil(pairs/Chunk) blocks, the same on every GPU); Pos gets each pair's position among its
// chunk's pairs of its expert; Cnt is every GPU's count matrix of CollMaxGPUs x blocks rows
// of e+1 words (row (g, b), written by GPU g's block b: chunk b's count per expert, then its
// number of bad ids).
type MoEDispatchCountArgs struct {
	Ids                                 dsl.Ptr       `kgen:"s32"`
	Pos                                 dsl.Ptr       `kgen:"u32"`
	Cnt                                 dsl.PeerTable `kgen:"u32"`
	Pads                                dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Pairs, Chunk, E, Epoch dsl.Value     `kgen:"u32"`
}

// moeColumn is the count column of an expert id: the id for 0..e-1, e for a bad id (below
// -1 or from e), MoENone for -1.
func moeColumn(k *dsl.Kernel, id, e dsl.Value) dsl.Value {
	u := id.Bitcast(dsl.U32)
	return k.Select(u.Add(uint32(1)).Gt(e), e, u)
}

// MoEDispatchCount: in block b, thread c (and c + the block size, ...; c <= e) scans chunk
// b's pairs in order, numbering those of column c (Pos, for experts) and storing the count
// into row (rank, b) of every GPU's count matrix; a closing barrier makes the counts visible
// to every GPU's next launch. It needs no opening barrier: the previous dispatch's readers of
// a GPU's count matrix (its moe_dispatch_layout) finished before that GPU reached the
// previous moe_dispatch_send's barrier, which this GPU passed. The closing barrier is also
// what frees every GPU's receive buffer for moe_dispatch_send: a GPU reaches it only after
// its work before the dispatch (the experts reading its rows, its combine reading the
// peers') is done.
func MoEDispatchCount(k *dsl.Kernel, _ dsl.Type) {
	a := dsl.Params[MoEDispatchCountArgs](k, dsl.U32)
	cnts := peerTable(k, a.Cnt.Table(), a.NGPUs)
	b := k.BlockIdx(dsl.X)
	lo := b.Mul(a.Chunk).Min(a.Pairs)
	hi := lo.Add(a.Chunk).Min(a.Pairs)
	w := a.E.Add(uint32(1))
	row := a.Rank.Mul(k.GridDim(dsl.X)).Add(b).Mul(w)
	k.For(k.ThreadIdx(dsl.X), w, k.BlockDim(dsl.X), func(c dsl.Value) {
		n := k.Var(dsl.U32, uint32(0))
		k.For(lo, hi, uint32(1), func(i dsl.Value) {
			col := moeColumn(k, k.Load(a.Ids.At(i)), a.E)
			k.If(col.Eq(c), func() {
				k.If(c.Lt(a.E), func() { k.Store(a.Pos.At(i), n) })
				k.Set(n, n.Add(uint32(1)))
			})
		})
		forPeers(k, a.NGPUs, func(p int) { k.Store(ptrAt(k, cnts[p], dsl.U32).At(row.Add(c)), n) })
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
}

// MoEDispatchLayoutArgs are moe_dispatch_layout's parameters (one block of CollThreads):
// Cnt is this GPU's count matrix (every GPU's rows filled by moe_dispatch_count's Chunks
// blocks); Tot gets every GPU's total per column (ngpus x (e+1) words); RowStart, per chunk
// and expert (Chunks x e words), the row of the expert's GPU where this GPU's rows of that
// chunk start; Counts and Offsets (el and el+1 words) this GPU's received rows per local
// expert and where they start; Status two words: the bad ids of every GPU, and the most rows
// any GPU receives.
type MoEDispatchLayoutArgs struct {
	Cnt, Tot, RowStart, Counts, Offsets, Status dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, Chunks, E, EL                  dsl.Value `kgen:"u32"`
}

// MoEDispatchLayout computes the layout from the count matrix (local loads only, one block:
// the totals, a bar.sync, then the starts).
func MoEDispatchLayout(k *dsl.Kernel, _ dsl.Type) {
	a := dsl.Params[MoEDispatchLayoutArgs](k, dsl.U32)
	w := a.E.Add(uint32(1))
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
	k.For(tid, a.E, nt, func(e dsl.Value) {
		r := k.Var(dsl.U32, base(e.Div(a.EL), e.Rem(a.EL)))
		k.For(zero, a.Rank, uint32(1), func(s dsl.Value) { k.Set(r, r.Add(tot(s, e))) })
		k.For(zero, a.Chunks, uint32(1), func(b dsl.Value) {
			k.Store(a.RowStart.At(b.Mul(a.E).Add(e)), r)
			k.Set(r, r.Add(k.Load(a.Cnt.At(a.Rank.Mul(a.Chunks).Add(b).Mul(w).Add(e)))))
		})
	})
	k.For(tid, a.EL.Add(uint32(1)), nt, func(j dsl.Value) {
		k.Store(a.Offsets.At(j), base(a.Rank, j))
		k.If(j.Lt(a.EL), func() { k.Store(a.Counts.At(j), expertTotal(a.Rank.Mul(a.EL).Add(j))) })
	})
	k.If(tid.Eq(0), func() {
		bad := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.NGPUs, uint32(1), func(s dsl.Value) { k.Set(bad, bad.Add(tot(s, a.E))) })
		most := k.Var(dsl.U32, uint32(0))
		k.For(zero, a.NGPUs, uint32(1), func(d dsl.Value) { k.Set(most, most.Max(base(d, a.EL))) })
		k.Store(a.Status.At(0), bad)
		k.Store(a.Status.At(1), most)
	})
}

// MoEDispatchSendArgs are moe_dispatch_send's parameters: X the tokens [pairs/kk, h] (bf16),
// Ids, Pos, Chunk and RowStart as above, Recv every GPU's receive buffer [cap, h], Src every GPU's
// source index per row, Route this GPU's route per pair (GPU in [0, pairs), row in [pairs,
// 2*pairs); MoENone when the pair goes nowhere).
type MoEDispatchSendArgs struct {
	X                                                  dsl.Ptr
	Ids                                                dsl.Ptr       `kgen:"s32"`
	Pos, RowStart, Route                               dsl.Ptr       `kgen:"u32"`
	Recv                                               dsl.PeerTable // of dt
	Src                                                dsl.PeerTable `kgen:"u32"`
	Pads                                               dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Pairs, Chunk, K, H, E, EL, Cap, Epoch dsl.Value     `kgen:"u32"`
}

// MoEDispatchSend copies every pair's token row (16-byte vectors, h a multiple of 8) into
// row RowStart[chunk][e] + Pos[pair] of its expert's GPU, rows from cap on never written (the
// layout's status reports them); a closing barrier makes every GPU's stores visible to the
// next launch of each GPU.
func MoEDispatchSend(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoEDispatchSendArgs](k, dt)
	const vec = 8
	hv := a.H.Div(uint32(vec))
	gridLoop(k, a.Pairs.Mul(hv), func(q dsl.Value) {
		i, v := q.Div(hv), q.Rem(hv)
		col := moeColumn(k, k.Load(a.Ids.At(i)), a.E)
		d := col.Div(a.EL)
		row := k.Var(dsl.U32, uint32(MoENone))
		k.If(col.Lt(a.E), func() { k.Set(row, k.Load(a.RowStart.At(i.Div(a.Chunk).Mul(a.E).Add(col))).Add(k.Load(a.Pos.At(i)))) })
		ok := row.Lt(a.Cap)
		k.If(ok, func() {
			t := i.Div(a.K)
			x := loadN(k, a.X, t.Mul(a.H).Add(v.Mul(uint32(vec))), vec)
			storeN(k, a.Recv.Peer(d), row.Mul(a.H).Add(v.Mul(uint32(vec))), x)
		})
		k.If(v.Eq(0), func() {
			k.If(ok, func() {
				k.Store(a.Src.Peer(d).At(row), a.Rank.Mul(a.Pairs).Add(i))
				k.Store(a.Route.At(i), d)
				k.Store(a.Route.At(a.Pairs.Add(i)), row)
			}).Else(func() {
				k.Store(a.Route.At(i), uint32(MoENone))
				k.Store(a.Route.At(a.Pairs.Add(i)), uint32(MoENone))
			})
		})
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
}

// MoECombineArgs are moe_combine's parameters: Y every GPU's expert outputs [cap, h] in its
// receive buffer's row order, Route this GPU's routes (moe_dispatch_send), Weights [pairs]
// (f32), Out this GPU's tokens [pairs/kk, h].
type MoECombineArgs struct {
	Y                               dsl.PeerTable // of dt
	Route                           dsl.Ptr       `kgen:"u32"`
	Weights                         dsl.Ptr       `kgen:"f32"`
	Out                             dsl.Ptr
	Pads                            dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Pairs, K, H, Epoch dsl.Value     `kgen:"u32"`
}

// MoECombine: a barrier (every GPU's Y is written), then out[t] = sum over k in order of
// weight[t,k] * Y(route of (t,k)), 8 columns a thread, peer loads, f32 accumulation, one
// rounding to dt; a closing barrier keeps every Y alive until all GPUs have read it.
func MoECombine(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MoECombineArgs](k, dt)
	const vec = 8
	hv := a.H.Div(uint32(vec))
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
	gridLoop(k, a.Pairs.Div(a.K).Mul(hv), func(q dsl.Value) {
		t, v := q.Div(hv), q.Rem(hv)
		col := v.Mul(uint32(vec))
		acc := regs(k, dsl.F32, vec)
		k.For(k.Const(dsl.U32, 0), a.K, uint32(1), func(kk dsl.Value) {
			i := t.Mul(a.K).Add(kk)
			d := k.Load(a.Route.At(i))
			k.If(d.Ne(uint32(MoENone)), func() {
				row := k.Load(a.Route.At(a.Pairs.Add(i)))
				wt := k.Load(a.Weights.At(i))
				y := loadN(k, a.Y.Peer(d), row.Mul(a.H).Add(col), vec)
				for j := 0; j < vec; j++ {
					k.Set(acc.Get(j), acc.Get(j).Add(wt.Mul(y.Get(j).To(dsl.F32))))
				}
			})
		})
		storeN(k, a.Out, t.Mul(a.H).Add(col), acc.To(dt))
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
}
