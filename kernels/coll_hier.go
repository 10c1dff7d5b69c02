package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
	"math"
)

// Hierarchical collectives, for GPUs spread over several NVLink domains (nodes): Nodes
// nodes of NGPUs GPUs each, global rank = Node*NGPUs + Rank (Rank is the GPU's index in its
// node). Inside a node they move data through peer pointers (node-local peer tables, p2p
// signal pads); between nodes through NVSHMEM block-scope put_signal, each GPU talking only
// to the GPUs of the same index on the other nodes (its "rail": one NIC per GPU index).
//
// The data is cut into Nodes*NGPUs shards of Shard elements, shard r = x*NGPUs + l owned by
// global rank r (node x, GPU l); only the first Total elements exist (the last shards may be
// short or empty). Block b of every GPU handles the same sub-range of every shard (the
// shard split into GridDim ranges, whole 128-bit vectors when Shard allows), so every
// barrier and signal is per block and no block waits for another block of its own GPU.
//
// The rail signals are u64 words set (not added) to SigEpoch+1, one word per phase, source
// node and block: a wait is for the word to reach the launch's number, which a later launch
// only raises, so the words never need a reset and never wrap. The rail receive areas come
// in two parities (SigEpoch&1): a rail peer can run at most one launch ahead (each launch
// waits for a rail message from every peer), so a launch's puts never overwrite data the
// previous launch is still reading. See docs/collectives.md, "Hierarchical collectives".

// The hierarchical families.
const (
	FamilyHierAllReduce     Family = "hier_allreduce"
	FamilyHierReduceScatter Family = "hier_reducescatter"
	FamilyHierAllGather     Family = "hier_allgather"
)

const (
	// HierMaxNodes is the largest number of nodes the hierarchical kernels handle (the
	// signal words hold a slot per source node).
	HierMaxNodes = 32
	// HierSigWords is the number of u64 signal words of one GPU's hierarchical signal set:
	// per phase (reduce-scatter, all-gather), source node and block.
	HierSigWords = 2 * HierMaxNodes * CollMaxBlocks
)

// The rail phases, each with its own signal words.
const (
	hierPhaseRS = 0 // partial sums of the shards, to their owners
	hierPhaseAG = 1 // finished shards (all-reduce) or parts (all-gather), to every node
)

// HierScratchWords returns the 4-byte words of scratch (symmetric) a hierarchical kernel
// needs on every GPU for nodes nodes and shards of shard elements: two parities of one
// receive slot per node, and one send slot per node. The product saturates at math.MaxInt
// (no allocation holds it); a negative count gives 0.
func HierScratchWords(nodes, shard int) int { return int(satMul(3, nodes, shard)) }

// HierShard returns the shard size of a hierarchical all-reduce of n elements of dt over
// gpus GPUs: n/gpus rounded up to whole 128-bit vectors, so every shard is aligned. It is 0
// for a GPU count below 1 or an element type of no size (no panic: the host's checks refuse
// them), and saturates at the largest whole number of vectors rather than wrap.
func HierShard(dt dsl.Type, n, gpus int) int {
	if gpus < 1 || dt.Bytes() < 1 || dt.Bytes() > 16 {
		return 0
	}
	vec := vecOf(dt)
	q := ceilDiv(ceilDiv(n, gpus), vec)
	if q > math.MaxInt/vec {
		return math.MaxInt / vec * vec
	}
	return max(q*vec, vec)
}

func init() {
	for _, o := range collOps {
		op := o.op
		register(&Spec{
			Name:   string(FamilyHierAllReduce) + "_" + o.name,
			Family: FamilyHierAllReduce, Reduces: true, Op: op,
			Doc:     "hierarchical all-reduce (" + o.name + "): in-node reduce-scatter by peer loads, partial sums (f32/s32) to the same GPU index of every node by put_signal, the owner reduces its shard in node order and puts it back to every node, in-node all-gather by peer stores; 2 barriers",
			DTypes:  collDTypes,
			Targets: nvshmemTargets,
			New:     func(k *dsl.Kernel, dt dsl.Type) { HierAllReduce(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyHierReduceScatter) + "_" + o.name,
			Family: FamilyHierReduceScatter, Reduces: true, Op: op,
			Doc:     "hierarchical reduce-scatter (" + o.name + "): in-node reduction by peer loads of the parts owned by this GPU index on every node, partial sums (f32/s32) to their owners by put_signal, reduced there in node order; 2 barriers",
			DTypes:  collDTypes,
			Targets: nvshmemTargets,
			New:     func(k *dsl.Kernel, dt dsl.Type) { HierReduceScatter(k, dt, op) },
		})
	}
	register(&Spec{
		Name:    string(FamilyHierAllGather),
		Family:  FamilyHierAllGather,
		Doc:     "hierarchical all-gather: each GPU puts its part to the same GPU index of every node (put_signal), then stores the parts it holds into every GPU of its node by peer stores; 2 barriers",
		DTypes:  collDTypes,
		Targets: nvshmemTargets,
		New:     HierAllGather,
	})
	collFamilies[FamilyHierAllReduce] = struct {
		multimem bool
		barriers int
	}{false, 2}
	collFamilies[FamilyHierReduceScatter] = collFamilies[FamilyHierAllReduce]
	collFamilies[FamilyHierAllGather] = collFamilies[FamilyHierAllReduce]
}

// HierArgs are the hierarchical kernels' parameters (one struct for the three families).
// In and Out are this GPU's buffers (Out symmetric: the all-reduce puts finished shards into
// it); Ins and Outs are node-local tables (entry l: GPU l of this node's buffer); Scratch
// (HierScratchWords) and Sig (HierSigWords) are symmetric, passed as this GPU's addresses;
// Pads the node-local table of the p2p signal pads, Epoch their epoch; SigEpoch counts the
// hierarchical launches made before on Sig (the same count on every GPU).
//
// All-reduce: In and Out hold Total elements (Out may be In), Shard = HierShard. Reduce-
// scatter: In holds Nodes*NGPUs parts of Shard elements, Out one, Total = Nodes*NGPUs*Shard;
// Ins is read. All-gather: In holds Shard elements, Out Nodes*NGPUs parts of Shard, Total as
// reduce-scatter; Outs is written.
type HierArgs struct {
	In, Out                                       dsl.Ptr       // of dt
	Ins, Outs                                     dsl.PeerTable // of dt, node-local
	Scratch                                       dsl.Ptr       `kgen:"b32"`
	Sig                                           dsl.Ptr       `kgen:"u64"`
	Pads                                          dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Node, Nodes, Shard, Total, Epoch dsl.Value     `kgen:"u32"`
	SigEpoch                                      dsl.Value     `kgen:"u64"`
}

// hier is one hierarchical kernel being built, with vector width vec (1: element by element).
type hier struct {
	k      *dsl.Kernel
	a      HierArgs
	dt, at dsl.Type
	vec    int
	lo, hi dsl.Value // this block's range in every shard
	par    dsl.Value // the receive slots' parity, u32
	target dsl.Value // SigEpoch+1: the value this launch's signals carry
}

func newHier(k *dsl.Kernel, a HierArgs, dt dsl.Type, vec int) *hier {
	nb := k.GridDim(dsl.X)
	q := a.Shard.Add(nb.Sub(1)).Div(nb)
	if vec > 1 {
		q = q.Add(uint32(vec - 1)).Div(uint32(vec)).Mul(uint32(vec))
	}
	lo := k.BlockIdx(dsl.X).Mul(q).Min(a.Shard)
	return &hier{k: k, a: a, dt: dt, at: accType(dt), vec: vec, lo: lo, hi: lo.Add(q).Min(a.Shard),
		par: a.SigEpoch.And(uint64(1)).To(dsl.U32), target: a.SigEpoch.Add(uint64(1))}
}

// end is where this block's range of shard r ends: hi, cut at Total (never below lo).
func (h *hier) end(r dsl.Value) dsl.Value {
	k, a := h.k, h.a
	start := r.Mul(a.Shard)
	valid := k.Select(a.Total.Gt(start), a.Total.Sub(start).Min(a.Shard), k.Const(dsl.U32, 0))
	return h.hi.Min(valid).Max(h.lo)
}

// each runs body over [lo, hi) with the block's threads: whole vectors first (i a multiple
// of vec), then single elements.
func (h *hier) each(lo, hi dsl.Value, body func(i dsl.Value, w int)) {
	k := h.k
	tid, step := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	if h.vec == 1 {
		k.For(tid, hi.Sub(lo), step, func(j dsl.Value) { body(lo.Add(j), 1) })
		return
	}
	nv := hi.Sub(lo).Div(uint32(h.vec))
	k.For(tid, nv, step, func(v dsl.Value) { body(k.Assume(lo.Add(v.Mul(uint32(h.vec))), h.vec), h.vec) })
	tail := lo.Add(nv.Mul(uint32(h.vec)))
	k.For(tid, hi.Sub(tail), step, func(j dsl.Value) { body(tail.Add(j), 1) })
}

// slot returns scratch as a pointer to t and the index of element i of slot s (slots of
// Shard 4-byte words: receive slot of parity p and node x is p*Nodes + x, send slot of node
// x is 2*Nodes + x).
func (h *hier) slot(s, i dsl.Value, t dsl.Type) (dsl.Ptr, dsl.Value) {
	idx := s.Mul(h.a.Shard).Mul(uint32(4 / max(t.Bytes(), 1))).Add(i)
	if h.vec > 1 {
		idx = h.k.Assume(idx, h.vec)
	}
	return h.a.Scratch.As(t), idx
}

func (h *hier) recv(x dsl.Value) dsl.Value { return h.par.Mul(h.a.Nodes).Add(x) }
func (h *hier) send(x dsl.Value) dsl.Value { return h.a.Nodes.Mul(2).Add(x) }

// sig is the signal word of phase ph from node x for this block.
func (h *hier) sig(ph int, x dsl.Value) dsl.Ptr {
	return h.a.Sig.At(x.Add(uint32(ph * HierMaxNodes)).Mul(uint32(CollMaxBlocks)).Add(h.k.BlockIdx(dsl.X)))
}

// railPE is the PE of GPU Rank on node x.
func (h *hier) railPE(x dsl.Value) dsl.Value { return x.Mul(h.a.NGPUs).Add(h.a.Rank).To(dsl.I32) }

// eachNode runs body(x) for every node x at run time (other: only the other nodes).
func (h *hier) eachNode(other bool, body func(x dsl.Value)) {
	k := h.k
	k.For(k.Const(dsl.U32, 0), h.a.Nodes, 1, func(x dsl.Value) {
		if other {
			k.If(x.Ne(h.a.Node), func() { body(x) })
		} else {
			body(x)
		}
	})
}

// put sends cnt elements of t from src (this GPU) to dst on GPU Rank of node x with one
// block-scope put_signal that sets x's word of phase ph from this node to target.
func (h *hier) put(ph int, x dsl.Value, dst, src dsl.Ptr, cnt dsl.Value) {
	nvshmem.PutSignal(h.k, nvshmem.Block, nvshmem.SpanOf(dst, cnt), nvshmem.SpanOf(src, cnt),
		h.sig(ph, h.a.Node), h.target, nvshmem.SignalSet, h.railPE(x))
}

// wait returns once every other node's signal of phase ph has reached target (thread x
// waits for node x, acquiring what its put_signal delivered), then releases the block.
func (h *hier) wait(ph int) {
	k, a := h.k, h.a
	tid := k.ThreadIdx(dsl.X)
	k.If(tid.Lt(a.Nodes).And(tid.Ne(a.Node)), func() {
		nvshmem.SignalWaitUntil(k, h.sig(ph, tid), nvshmem.CmpGE, h.target)
	})
	k.SyncThreads()
}

// quiet completes this block's puts (thread 0, after every thread's last access).
func (h *hier) quiet() {
	h.k.SyncThreads()
	h.k.If(h.k.ThreadIdx(dsl.X).Eq(0), func() { nvshmem.Quiet(h.k) })
}

// reduceNode reduces, in this node, the shards this GPU index owns on every node (x*NGPUs +
// Rank for each x) over the node's GPUs' inputs (peer loads), into accumulators: the own
// node's into its receive slot, the others' into their send slots; then puts each other
// node's partial into that node's receive slot of this node (phase RS).
func (h *hier) reduceNode(op dsl.ReduceOp) {
	k, a := h.k, h.a
	ins := peerTable(k, a.Ins.Table(), a.NGPUs)
	h.eachNode(false, func(x dsl.Value) {
		r := x.Mul(a.NGPUs).Add(a.Rank)
		s := k.Select(x.Eq(a.Node), h.recv(x), h.send(x))
		h.each(h.lo, h.end(r), func(i dsl.Value, w int) {
			g := r.Mul(a.Shard).Add(i)
			acc := reducePeers(k, h.dt, op, a.NGPUs, w, func(p int, dst dsl.Tensor) { loadTo(k, ptrAt(k, ins[p], h.dt), g, dst) })
			p, j := h.slot(s, i, h.at)
			storeN(k, p, j, acc)
		})
	})
	k.SyncThreads()
	h.eachNode(true, func(x dsl.Value) {
		r := x.Mul(a.NGPUs).Add(a.Rank)
		dp, di := h.slot(h.recv(a.Node), h.lo, h.at)
		sp, si := h.slot(h.send(x), h.lo, h.at)
		h.put(hierPhaseRS, x, dp.At(di), sp.At(si), h.end(r).Sub(h.lo))
	})
}

// reduceRail reduces this GPU's shard over the nodes' partials (receive slots, in node
// order, so the result does not depend on timing) and stores it, rounded once to dt, at
// out[base + i]. It first waits for the partials (phase RS).
func (h *hier) reduceRail(op dsl.ReduceOp, out dsl.Ptr, base dsl.Value) {
	k, a := h.k, h.a
	h.wait(hierPhaseRS)
	me := a.Node.Mul(a.NGPUs).Add(a.Rank)
	h.each(h.lo, h.end(me), func(i dsl.Value, w int) {
		acc, tmp := regs(k, h.at, w), regs(k, h.at, w)
		p, j := h.slot(h.recv(k.Const(dsl.U32, 0)), i, h.at)
		loadTo(k, p, j, acc)
		k.For(k.Const(dsl.U32, 1), a.Nodes, 1, func(x dsl.Value) {
			p, j := h.slot(h.recv(x), i, h.at)
			loadTo(k, p, j, tmp)
			for e := range w {
				acc.Set(e, combine(op, acc.Get(e), tmp.Get(e)))
			}
		})
		oi := base.Add(i)
		if w > 1 {
			oi = k.Assume(oi, w)
		}
		storeN(k, out, oi, acc.To(h.dt))
	})
}

// HierAllReduce writes op over every GPU of in into out on every GPU (see HierArgs):
// barrier (every node GPU's input ready, outputs free); reduceNode; barrier-free wait for
// the other nodes' partials of this GPU's shard and its reduction into out; put of the
// shard into out of the same GPU index on every other node (phase AG); wait for theirs;
// peer stores of the Nodes shards this GPU holds into every GPU of the node; quiet;
// barrier (every store has landed). In place is safe: a shard of a GPU's input is read only
// by its node's GPU of the shard's index, before anything writes it.
func HierAllReduce(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	a := dsl.Params[HierArgs](k, dt)
	h := newHier(k, a, dt, vecOf(dt)) // the host keeps Shard a whole number of vectors
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
	h.reduceNode(op)
	me := a.Node.Mul(a.NGPUs).Add(a.Rank)
	h.reduceRail(op, a.Out, me.Mul(a.Shard))
	k.SyncThreads()
	h.eachNode(true, func(x dsl.Value) {
		at := a.Out.At(k.Assume(me.Mul(a.Shard).Add(h.lo), h.vec))
		h.put(hierPhaseAG, x, at, at, h.end(me).Sub(h.lo))
	})
	h.wait(hierPhaseAG)
	outs := peerTable(k, a.Outs.Table(), a.NGPUs)
	h.eachNode(false, func(x dsl.Value) {
		r := x.Mul(a.NGPUs).Add(a.Rank)
		h.each(h.lo, h.end(r), func(i dsl.Value, w int) {
			g := r.Mul(a.Shard).Add(i)
			v := loadN(k, a.Out, g, w)
			forPeers(k, a.NGPUs, func(p int) {
				k.If(a.Rank.Ne(uint32(p)), func() { storeN(k, ptrAt(k, outs[p], dt), g, v) })
			})
		})
	})
	h.quiet()
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
}

// HierReduceScatter writes into out of global rank r op over every GPU of part r of in (see
// HierArgs): barrier (inputs ready); reduceNode; barrier (the node's GPUs are done reading
// this GPU's input); wait for the other nodes' partials and reduce them into out; quiet.
func HierReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	a := dsl.Params[HierArgs](k, dt)
	body := func(vec int) {
		h := newHier(k, a, dt, vec)
		p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
		h.reduceNode(op)
		p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
		h.reduceRail(op, a.Out, k.Const(dsl.U32, 0))
		h.quiet()
	}
	vec := vecOf(dt)
	k.If(a.Shard.Rem(uint32(vec)).Eq(0), func() { body(vec) }).Else(func() { body(1) })
}

// HierAllGather writes in of global rank r into part r of out on every GPU (see HierArgs):
// put of in into the receive slot of this node on the same GPU index of every other node
// (phase AG); barrier (the node's outputs are free); wait for the other nodes' parts; peer
// stores of the Nodes parts this GPU holds into every GPU of the node (its own included);
// quiet; barrier (every store has landed).
func HierAllGather(k *dsl.Kernel, dt dsl.Type) { hierAllGather(k, dt, true) }

// HierAllGatherUnwaited is HierAllGather without the wait for the other nodes' parts: a
// deliberately wrong kernel that reads its receive slots before the puts land. The tests use
// it to prove that the emulated network catches a missing rail wait; never use it for data.
func HierAllGatherUnwaited(k *dsl.Kernel, dt dsl.Type) { hierAllGather(k, dt, false) }

func hierAllGather(k *dsl.Kernel, dt dsl.Type, wait bool) {
	a := dsl.Params[HierArgs](k, dt)
	body := func(vec int) {
		h := newHier(k, a, dt, vec)
		h.eachNode(true, func(x dsl.Value) {
			dp, di := h.slot(h.recv(a.Node), h.lo, dt)
			h.put(hierPhaseAG, x, dp.At(di), a.In.At(h.lo), h.hi.Sub(h.lo))
		})
		p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
		if wait {
			h.wait(hierPhaseAG)
		}
		outs := peerTable(k, a.Outs.Table(), a.NGPUs)
		h.eachNode(false, func(x dsl.Value) {
			r := x.Mul(a.NGPUs).Add(a.Rank)
			h.each(h.lo, h.hi, func(i dsl.Value, w int) {
				v := regs(k, dt, w)
				k.If(x.Eq(a.Node), func() { loadTo(k, a.In, i, v) }).Else(func() {
					p, j := h.slot(h.recv(x), i, dt)
					loadTo(k, p, j, v)
				})
				g := r.Mul(a.Shard).Add(i)
				if w > 1 {
					g = k.Assume(g, w)
				}
				forPeers(k, a.NGPUs, func(p int) { storeN(k, ptrAt(k, outs[p], dt), g, v) })
			})
		})
		h.quiet()
		p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
	}
	vec := vecOf(dt)
	k.If(a.Shard.Rem(uint32(vec)).Eq(0), func() { body(vec) }).Else(func() { body(1) })
}
