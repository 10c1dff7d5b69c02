package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
)

// Peer-to-peer collectives: plain loads and stores through NVLink peer pointers (every
// GPU's buffer mapped into every other GPU's address space, nvshmem_ptr), no multicast. They
// run on any GPU with peer access (sm_80 and later) and are the fallback when NVLink SHARP
// multicast is unavailable. See docs/collectives.md for the memory-ordering arguments.
//
// Common parameters: tables (ins, outs, pads, lbufs) are device arrays of CollMaxGPUs u64
// addresses, entry g being GPU g's buffer as this GPU reaches it; rank is this GPU's index,
// ngpus the number of GPUs (1..CollMaxGPUs), n the element count, epoch the number of
// barriers this pad set has completed before the launch (the host adds CollBarriers(family)
// after each launch). Launch the same grid (at most CollMaxBlocks blocks of CollThreads
// threads) on every GPU at once.

func init() {
	defer registerP2PGraph()
	for _, o := range collOps {
		op := o.op
		register(&Spec{
			Name:   string(FamilyP2PAllReduce1Shot) + "_" + o.name,
			Family: FamilyP2PAllReduce1Shot, Reduces: true, Op: op,
			Doc:    "one-shot pull all-reduce (" + o.name + "): every GPU reads every peer's input through peer pointers, reduces in f32/i32, writes its own output; 2 barriers",
			DTypes: collDTypes,
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PAllReduceOneShot(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyP2PAllReduce2Shot) + "_" + o.name,
			Family: FamilyP2PAllReduce2Shot, Reduces: true, Op: op,
			Doc:    "two-shot all-reduce (" + o.name + "): reduce-scatter by peer loads of a 1/N slice, all-gather by peer stores; in place or not; 2 barriers",
			DTypes: collDTypes,
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PAllReduceTwoShot(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyP2PAllReducePush) + "_" + o.name,
			Family: FamilyP2PAllReducePush, Reduces: true, Op: op,
			Doc:    "push all-reduce (" + o.name + "): GPU r stores slice g of its input into GPU g's scratch, then reduces its slice locally and stores it into every GPU's output; peer stores only; 2 barriers",
			DTypes: collDTypes,
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PAllReducePush(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyP2PAllReducePush4) + "_" + o.name,
			Family: FamilyP2PAllReducePush4, Reduces: true, Op: op, MaxGPUs: Push4MaxGPUs,
			Doc:    "push all-reduce (" + o.name + ") for at most 4 GPUs: p2p_allreduce_push's code unrolled over 4 sources, not 8, so that two blocks of 256 threads fit an SM (.minnctapersm 2); wrong results on more GPUs",
			DTypes: collDTypes,
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PAllReducePush4(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyP2PAllReduceLamport) + "_" + o.name,
			Family: FamilyP2PAllReduceLamport, Reduces: true, Op: op,
			Doc:    "one-shot Lamport all-reduce (" + o.name + "): push to every peer's slot, poll own slots until no -0.0 sentinel is left; 3 rotating slots, no barrier",
			DTypes: []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PAllReduceLamport(k, dt, op) },
		})
	}
	for _, o := range collOps {
		op := o.op
		register(&Spec{
			Name:   string(FamilyP2PReduceScatterPull) + "_" + o.name,
			Family: FamilyP2PReduceScatterPull, Reduces: true, Op: op,
			Doc:    "reduce-scatter (" + o.name + ") by peer loads: GPU r reads part r of every GPU's input through peer pointers and reduces it in registers (the two-shot all-reduce's first half); 2 barriers",
			DTypes: collDTypes,
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PReduceScatterPull(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyP2PReduceScatter) + "_" + o.name,
			Family: FamilyP2PReduceScatter, Reduces: true, Op: op,
			Doc:    "reduce-scatter (" + o.name + ") by peer stores: GPU r pushes part g of its input into GPU g's scratch, then each GPU reduces its scratch locally; 2 barriers",
			DTypes: collDTypes,
			New:    func(k *dsl.Kernel, dt dsl.Type) { P2PReduceScatter(k, dt, op) },
		})
	}
	register(&Spec{
		Name:   string(FamilyP2PAllGather),
		Family: FamilyP2PAllGather,
		Doc:    "all-gather by peer stores: GPU r writes its n elements to [r*n, r*n+n) of every GPU's output; 128-bit when n allows; 2 barriers",
		DTypes: collDTypes,
		New:    P2PAllGather,
	})
	register(&Spec{
		Name:   string(FamilyP2PBroadcast),
		Family: FamilyP2PBroadcast,
		Doc:    "broadcast by peer stores: the root writes its n elements into every GPU's output; 128-bit vectors; 2 barriers",
		DTypes: collDTypes,
		New:    P2PBroadcast,
	})
	register(&Spec{
		Name:   string(FamilyP2PBarrier),
		Family: FamilyP2PBarrier,
		Doc:    "cross-GPU barrier through per-block signal pads (st.release.sys to each peer, ld.acquire.sys spin on own pad); epoch-based, no reset",
		DTypes: []dsl.Type{dsl.U32},
		New:    func(k *dsl.Kernel, _ dsl.Type) { P2PBarrier(k) },
	})
}

// reducePeers returns, as a fragment of the accumulator type, the reduction by op of w
// elements from each of the first ngpus of CollMaxGPUs sources. load(p, dst) loads source
// p's w elements into the fragment of variables dst; it runs for p = 0, and under ngpus > p
// for the others. Every source is loaded before the first combine, so the loads' latencies
// overlap.
func reducePeers(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, ngpus dsl.Value, w int, load func(p int, dst dsl.Tensor)) dsl.Tensor {
	return reducePeersUpTo(k, CollMaxGPUs, dt, op, ngpus, w, load)
}

// reducePeersUpTo is reducePeers over at most maxG sources (a kernel built for at most
// maxG GPUs): the code, and the registers, of maxG sources.
func reducePeersUpTo(k *dsl.Kernel, maxG int, dt dsl.Type, op dsl.ReduceOp, ngpus dsl.Value, w int, load func(p int, dst dsl.Tensor)) dsl.Tensor {
	return combinePeers(k, dt, op, ngpus, loadPeersUpTo(k, maxG, dt, ngpus, w, load))
}

// loadPeersUpTo is reducePeersUpTo's first half: the maxG sources' fragments, loaded.
func loadPeersUpTo(k *dsl.Kernel, maxG int, dt dsl.Type, ngpus dsl.Value, w int, load func(p int, dst dsl.Tensor)) []dsl.Tensor {
	vals := make([]dsl.Tensor, maxG)
	for p := range vals {
		vals[p] = regs(k, dt, w)
		if p == 0 {
			load(p, vals[p])
		} else {
			k.If(ngpus.Gt(uint32(p)), func() { load(p, vals[p]) })
		}
	}
	return vals
}

// combinePeers is reducePeers' second half: op over the first ngpus fragments of vals (one
// per source the kernel is built for), in the accumulator type.
func combinePeers(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, ngpus dsl.Value, vals []dsl.Tensor) dsl.Tensor {
	at := accType(dt)
	acc := vals[0].To(at)
	for p := 1; p < len(vals); p++ {
		in := ngpus.Gt(uint32(p))
		acc = acc.Zip(vals[p].To(at), func(a, b dsl.Value) dsl.Value { return k.Select(in, combine(op, a, b), a) })
	}
	return acc
}

// eachVecReduce runs, over the elements [lo, hi) (lo a multiple of vec), finish(i, w, sum)
// with sum the reduction by op of the w elements at i of every source (load(p, i, dst)
// loads source p's; the kernel is built for at most maxG sources, CollMaxGPUs but in
// p2p_allreduce_push4): whole vectors two per thread and iteration (v and v + the grid's
// threads), both vectors' loads issued before either is combined, so a thread keeps twice
// the peer loads in flight; then the tail element by element. On 4 x H100 a thread with
// one vector's loads in flight left NVLink reads short of the stores' bandwidth.
func eachVecReduce(k *dsl.Kernel, maxG int, dt dsl.Type, op dsl.ReduceOp, ngpus, lo, hi dsl.Value, vec int,
	load func(p int, i dsl.Value, dst dsl.Tensor), finish func(i dsl.Value, w int, sum dsl.Tensor)) {
	nv := hi.Sub(lo).Div(uint32(vec))
	at := func(v dsl.Value) dsl.Value { return k.Assume(lo.Add(v.Mul(uint32(vec))), vec) }
	stride := k.GridStride(dsl.X)
	k.For(k.GlobalThreadIdx(dsl.X), nv, stride.Mul(2), func(v dsl.Value) {
		v1 := v.Add(stride)
		has1 := v1.Lt(nv)
		i0, i1 := at(v), at(v1)
		vals0 := loadPeersUpTo(k, maxG, dt, ngpus, vec, func(p int, dst dsl.Tensor) { load(p, i0, dst) })
		vals1 := make([]dsl.Tensor, maxG)
		for p := range vals1 {
			vals1[p] = regs(k, dt, vec)
		}
		k.If(has1, func() {
			for p := range vals1 {
				if p == 0 {
					load(p, i1, vals1[p])
				} else {
					k.If(ngpus.Gt(uint32(p)), func() { load(p, i1, vals1[p]) })
				}
			}
		})
		finish(i0, vec, combinePeers(k, dt, op, ngpus, vals0))
		k.If(has1, func() { finish(i1, vec, combinePeers(k, dt, op, ngpus, vals1)) })
	})
	tail := lo.Add(nv.Mul(uint32(vec)))
	gridLoop(k, hi.Sub(tail), func(j dsl.Value) {
		i := tail.Add(j)
		finish(i, 1, reducePeersUpTo(k, maxG, dt, op, ngpus, 1, func(p int, dst dsl.Tensor) { load(p, i, dst) }))
	})
}

// loadFrom returns a load for reducePeers: source p's elements at index i(p) of ptr(p).
func loadFrom(k *dsl.Kernel, ptr func(p int) dsl.Ptr, i func(p int) dsl.Value) func(p int, dst dsl.Tensor) {
	return func(p int, dst dsl.Tensor) { loadTo(k, ptr(p), i(p), dst) }
}

// storeGuarded stores the fragment f to p[i..i+size) where the index is below hi, one by one
// unless the fragment is a whole vector (vec elements).
func storeGuarded(k *dsl.Kernel, p dsl.Ptr, i, hi dsl.Value, f dsl.Tensor, vec int) {
	if f.Size() == vec {
		storeN(k, p, i, f)
		return
	}
	for j, v := range f.Values() {
		k.If(i.Add(uint32(j)).Lt(hi), func() { k.Store(p.At(i.Add(uint32(j))), v) })
	}
}

// P2POneShotArgs are p2p_allreduce_1shot's parameters.
type P2POneShotArgs struct {
	Ins                   dsl.PeerTable // every GPU's input, of dt
	Out                   dsl.Ptr       // this GPU's output, of dt
	Pads                  dsl.PeerTable `kgen:"u32"` // every GPU's signal pads
	Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PAllReduceOneShot writes out = op over GPUs g of ins[g][0:n] on every GPU: a barrier
// (every peer's input is ready), then each thread loads its 128-bit vectors from all ngpus
// inputs through peer pointers, reduces them in f32 (i32 for integers) and stores its own
// output; a second barrier keeps the inputs alive until every GPU has read them. out must
// not alias this GPU's input (peers are still reading it): the host API stages in-place
// calls through a scratch buffer.
func P2PAllReduceOneShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pAllReduceOneShot(k, dt, op, false)
}

func p2pAllReduceOneShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[P2POneShotArgs](k, dt)
	ins := peerTable(k, a.Ins.Table(), a.NGPUs)
	ew, epoch := p2pEpoch(k, graph, a.Pads, a.Rank, a.Epoch)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(1), ordered)
	eachVec(k, k.Const(dsl.U32, 0), a.N, vecOf(dt), 1, func(i dsl.Value, w int) {
		sum := reducePeers(k, dt, op, a.NGPUs, w, loadFrom(k, func(p int) dsl.Ptr { return ptrAt(k, ins[p], dt) }, func(int) dsl.Value { return i }))
		storeN(k, a.Out, i, sum.To(dt))
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(2), ordered)
	ew.end(k, epoch.Add(2))
}

// p2pEpoch returns a p2p kernel's epoch source and base epoch: the argument arg, or (graph)
// this block's word at EpochWordP2P of this GPU's pads.
func p2pEpoch(k *dsl.Kernel, graph bool, pads dsl.PeerTable, rank, arg dsl.Value) (epochWords, dsl.Value) {
	ew := hostEpoch
	if graph {
		ew = deviceEpoch(k, pads.Peer(rank), EpochWordP2P)
	}
	return ew, ew.start(k, arg)
}

// twoShotSlice returns GPU rank's slice [lo, hi) of n elements split into ngpus slices of
// whole vectors (the last slices shorter or empty).
func twoShotSlice(k *dsl.Kernel, rank, ngpus, n dsl.Value, vec int) (lo, hi dsl.Value) {
	size := twoShotSize(n, ngpus, vec)
	lo = rank.Mul(size).Min(n)
	hi = lo.Add(size).Min(n)
	return lo, hi
}

// twoShotSize is twoShotSlice's slice length: ceil(n/ngpus) rounded up to whole vectors.
func twoShotSize(n, ngpus dsl.Value, vec int) dsl.Value {
	per := n.Add(ngpus).Sub(1).Div(ngpus)
	return per.Add(uint32(vec - 1)).Div(uint32(vec)).Mul(uint32(vec))
}

// P2PTwoShotArgs are p2p_allreduce_2shot's parameters.
type P2PTwoShotArgs struct {
	Ins, Outs             dsl.PeerTable // every GPU's input and output, of dt
	Pads                  dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PAllReduceTwoShot writes outs[g][0:n] = op over GPUs of ins[.][0:n] on every GPU g, in
// two phases per element and no barrier between them: GPU r reduces its slice (1/ngpus of
// the vectors) by loading it from every peer's input (reduce-scatter), then stores the
// result into every peer's output (all-gather). A barrier first (inputs ready, outputs free)
// and one last (every peer's stores have landed). outs may equal ins (in place): GPU r only
// reads and writes slice r.
func P2PAllReduceTwoShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pAllReduceTwoShot(k, dt, op, false)
}

func p2pAllReduceTwoShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[P2PTwoShotArgs](k, dt)
	ins := peerTable(k, a.Ins.Table(), a.NGPUs)
	outs := peerTable(k, a.Outs.Table(), a.NGPUs)
	vec := vecOf(dt)
	lo, hi := twoShotSlice(k, a.Rank, a.NGPUs, a.N, vec)
	ew, epoch := p2pEpoch(k, graph, a.Pads, a.Rank, a.Epoch)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(1), ordered)
	eachVecReduce(k, CollMaxGPUs, dt, op, a.NGPUs, lo, hi, vec,
		func(p int, i dsl.Value, dst dsl.Tensor) { loadTo(k, ptrAt(k, ins[p], dt), i, dst) },
		func(i dsl.Value, _ int, sum dsl.Tensor) {
			res := sum.To(dt)
			forPeers(k, a.NGPUs, func(p int) { storeN(k, ptrAt(k, outs[p], dt), i, res) })
		})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(2), ordered)
	ew.end(k, epoch.Add(2))
}

// forPeers runs body(p) for every GPU p < ngpus (of CollMaxGPUs, each under ngpus > p).
func forPeers(k *dsl.Kernel, ngpus dsl.Value, body func(p int)) {
	forPeersUpTo(k, CollMaxGPUs, ngpus, body)
}

// forPeersUpTo is forPeers in a kernel built for at most maxG GPUs: body for p < maxG.
func forPeersUpTo(k *dsl.Kernel, maxG int, ngpus dsl.Value, body func(p int)) {
	for p := 0; p < maxG; p++ {
		k.If(ngpus.Gt(uint32(p)), func() { body(p) })
	}
}

// isSentinel reports whether x is -0.0, the Lamport "not written yet" marker: its bits are
// the sign bit alone (data never holds -0.0: senders turn it into +0.0). An integer compare,
// cheaper than a float test through 1/x on every polled element.
func isSentinel(x dsl.Value) dsl.Value {
	switch x.Type().Bits() {
	case 16:
		return x.Bitcast(dsl.U16).Eq(uint16(0x8000))
	case 64:
		return x.Bitcast(dsl.U64).Eq(uint64(1) << 63)
	}
	return x.Bitcast(dsl.U32).Eq(uint32(0x80000000))
}

// P2PLamportArgs are p2p_allreduce_lamport's parameters.
type P2PLamportArgs struct {
	In, Out                            dsl.Ptr       // this GPU's input and output, of dt
	Lbufs                              dsl.PeerTable // every GPU's Lamport buffer, of dt
	Cap, Nclear, Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PAllReduceLamport writes out = op over GPUs of in[0:n] with no barrier, Lamport style:
// the buffer lbufs[g] of every GPU holds LamportSlots slots of CollMaxGPUs regions of cap
// elements, all -0.0 initially. Launch number epoch uses slot epoch%3: GPU r stores its input
// (with -0.0 turned into +0.0) into region r of that slot on every GPU, then polls the
// regions of its own copy with relaxed.sys loads until no element is -0.0, reduces and
// writes out. Finally it resets to -0.0 the first nclear elements (the previous launch's n)
// of every region of slot (epoch+2)%3, the slot of the previous launch, which no peer writes
// again before launch epoch+2, i.e. after this kernel has ended. Data is its own flag, so
// each value is ordered by itself; the stores need no release and the loads no acquire.
// Needs n <= cap. The host advances epoch with NextLamportEpoch, which wraps it at
// LamportEpochWrap (a multiple of 3), so the slots rotate across the wrap.
//
// The buffer must be filled with -0.0 on every GPU before any GPU launches this kernel
// (a barrier between the fill and the first launch): a peer's push that lands before the
// owner's fill is wiped by it, and the owner then polls forever.
func P2PAllReduceLamport(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pAllReduceLamport(k, dt, op, false)
}

// LamportStateWords is the number of u32 words the graph variant of the Lamport all-reduce
// keeps after the slots of a GPU's Lamport buffer (at byte LamportSlots*CollMaxGPUs*cap*size,
// all zero initially): block b's epoch at 2b, the n of its previous launch at 2b+1.
const LamportStateWords = 2 * CollMaxBlocks

// p2pAllReduceLamport is the Lamport all-reduce; graph takes the epoch and the clear count
// from this block's state words (LamportStateWords) instead of the arguments, and advances
// them on the device, so that a CUDA graph can replay it. Every launch of the graph variant
// on a buffer must use the same grid (each block keeps its own epoch, and element i goes to
// the same block whatever n is).
func p2pAllReduceLamport(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[P2PLamportArgs](k, dt)
	lbufs := peerTable(k, a.Lbufs.Table(), a.NGPUs)
	own := a.Lbufs.Peer(a.Rank)
	vec := vecOf(dt)
	epoch, nclear := a.Epoch, a.Nclear
	var state dsl.Ptr
	if graph {
		slots := k.Assume(a.Cap, vec).Mul(uint32(LamportSlots * CollMaxGPUs * dt.Bytes() / 4))
		state = own.As(dsl.U32).At(slots).At(k.BlockIdx(dsl.X).Mul(2))
		epoch, nclear = k.Load(state), k.Load(state.At(1))
	}
	slot := epoch.Rem(uint32(LamportSlots))
	prev := slot.Add(uint32(LamportSlots - 1)).Rem(uint32(LamportSlots)) // from slot: epoch+2 may wrap
	region := func(s, src dsl.Value) dsl.Value {
		return k.Assume(s.Mul(uint32(CollMaxGPUs)).Add(src).Mul(k.Assume(a.Cap, vec)), vec)
	}
	zero := k.Const(dt, 0.0)
	// Push: every GPU's region [slot][rank].
	mine := region(slot, a.Rank)
	eachVec(k, k.Const(dsl.U32, 0), a.N, vec, 1, func(i dsl.Value, w int) {
		v := loadN(k, a.In, i, w).Map(func(x dsl.Value) dsl.Value { return x.Add(zero) })
		forPeers(k, a.NGPUs, func(p int) { storeN(k, ptrAt(k, lbufs[p], dt), mine.Add(i), v, dsl.Relaxed(dsl.System)) })
	})
	// Poll and reduce: region p of this GPU's slot is GPU p's input once no element is -0.0.
	eachVec(k, k.Const(dsl.U32, 0), a.N, vec, 1, func(i dsl.Value, w int) {
		sum := reducePeers(k, dt, op, a.NGPUs, w, func(p int, dst dsl.Tensor) {
			idx := region(slot, k.Const(dsl.U32, uint32(p))).Add(i)
			k.While(func() dsl.Value {
				loadTo(k, own, idx, dst, dsl.Relaxed(dsl.System))
				pending := k.Const(dsl.Bool, false)
				for _, x := range dst.Values() {
					pending = pending.Or(isSentinel(x))
				}
				return pending
			}, func() {})
		})
		storeN(k, a.Out, i, sum.To(dt))
	})
	// Reset the previous launch's slot.
	sentinel := func(w int) dsl.Tensor {
		vs := make([]dsl.Value, w)
		for j := range vs {
			vs[j] = negZero(k, dt)
		}
		return k.FragmentOf(vs...)
	}
	eachVec(k, k.Const(dsl.U32, 0), nclear, vec, 1, func(i dsl.Value, w int) {
		forPeers(k, a.NGPUs, func(p int) {
			storeN(k, own, region(prev, k.Const(dsl.U32, uint32(p))).Add(i), sentinel(w))
		})
	})
	if graph {
		// Every thread of the block has read the state; thread 0 advances it for the next launch.
		k.SyncThreads()
		k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
			k.Store(state, k.Select(epoch.Eq(uint32(LamportEpochWrap-1)), uint32(0), epoch.Add(1)))
			k.Store(state.At(1), a.N)
		})
	}
}

// P2PAllGatherArgs are p2p_allgather's parameters.
type P2PAllGatherArgs struct {
	In                    dsl.Ptr       // this GPU's part, of dt
	Outs                  dsl.PeerTable // every GPU's output, of dt
	Pads                  dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PAllGather writes in[0:n] of GPU r to outs[g][r*n : r*n+n] on every GPU g with peer
// stores: 128-bit vectors when n is a multiple of the vector width (so every GPU's part is
// aligned), element by element otherwise. A barrier first (every output free) and one last
// (every peer's stores have landed).
func P2PAllGather(k *dsl.Kernel, dt dsl.Type) {
	p2pAllGather(k, dt, ordered, false)
}

// P2PAllGatherUnordered is P2PAllGather with its barriers' release stores made relaxed: a
// deliberately wrong kernel whose peer stores may land after the signal. The weak-memory
// tests use it to prove they catch a missing release; never use it for data.
func P2PAllGatherUnordered(k *dsl.Kernel, dt dsl.Type) {
	p2pAllGather(k, dt, unordered, false)
}

func p2pAllGather(k *dsl.Kernel, dt dsl.Type, ord barrierOrder, graph bool) {
	a := dsl.Params[P2PAllGatherArgs](k, dt)
	outs := peerTable(k, a.Outs.Table(), a.NGPUs)
	vec := vecOf(dt)
	base := a.Rank.Mul(a.N)
	ew, epoch := p2pEpoch(k, graph, a.Pads, a.Rank, a.Epoch)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(1), ord)
	copyTo := func(i dsl.Value, w int) {
		v := loadN(k, a.In, i, w)
		dst := base.Add(i)
		forPeers(k, a.NGPUs, func(p int) { storeN(k, ptrAt(k, outs[p], dt), dst, v) })
	}
	zero := k.Const(dsl.U32, 0)
	k.If(a.N.Rem(uint32(vec)).Eq(0), func() {
		eachVec(k, zero, a.N, vec, 1, copyTo) // r*n and i are multiples of vec: aligned
	}).Else(func() {
		eachVec(k, zero, a.N, 1, 1, copyTo)
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(2), ord)
	ew.end(k, epoch.Add(2))
}

// P2PReduceScatterArgs are p2p_reducescatter's parameters: n is the part size (in holds
// ngpus parts of n elements, out one).
type P2PReduceScatterArgs struct {
	In, Out               dsl.Ptr       // of dt
	Scratch               dsl.PeerTable // every GPU's scratch, of dt
	Pads                  dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PReduceScatter writes out[0:m] = op over GPUs of in[rank*m : rank*m+m] on every GPU
// (in holds ngpus parts of m = n elements). A barrier (every GPU's scratch is free: its last
// reader, the previous launch, is done), then GPU r stores part g of its input into region r
// of GPU g's scratch (peer stores, 128-bit when m allows), a second barrier (every push has
// landed: the release of each signal orders the pushes before it, the acquire spin orders
// the local reads after it), then each GPU reduces its ngpus regions locally into out.
// scratch holds CollMaxGPUs regions of m elements on every GPU.
func P2PReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pReduceScatter(k, dt, op, ordered, false)
}

// P2PReduceScatterUnordered is P2PReduceScatter with the release of its barriers' signals
// made relaxed: a deliberately wrong kernel whose local reduction may read scratch before
// the peers' pushes land. The weak-memory tests use it to prove they catch a missing
// release; never use it for data.
func P2PReduceScatterUnordered(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pReduceScatter(k, dt, op, unordered, false)
}

func p2pReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, ord barrierOrder, graph bool) {
	a := dsl.Params[P2PReduceScatterArgs](k, dt)
	m := a.N
	scratch := peerTable(k, a.Scratch.Table(), a.NGPUs)
	own := a.Scratch.Peer(a.Rank)
	vec := vecOf(dt)
	zero := k.Const(dsl.U32, 0)
	ew, epoch := p2pEpoch(k, graph, a.Pads, a.Rank, a.Epoch)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(1), ord)
	push := func(i dsl.Value, w int) {
		forPeers(k, a.NGPUs, func(p int) {
			v := loadN(k, a.In, m.Mul(uint32(p)).Add(i), w)
			storeN(k, ptrAt(k, scratch[p], dt), a.Rank.Mul(m).Add(i), v)
		})
	}
	aligned := m.Rem(uint32(vec)).Eq(0)
	k.If(aligned, func() { eachVec(k, zero, m, vec, 1, push) }).Else(func() { eachVec(k, zero, m, 1, 1, push) })
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(2), ord)
	ew.end(k, epoch.Add(2))
	reduce := func(i dsl.Value, w int) {
		region := func(p int) dsl.Value {
			if p == 0 {
				return i
			}
			return m.Mul(uint32(p)).Add(i)
		}
		sum := reducePeers(k, dt, op, a.NGPUs, w, loadFrom(k, func(int) dsl.Ptr { return own }, region))
		storeN(k, a.Out, i, sum.To(dt))
	}
	k.If(aligned, func() { eachVec(k, zero, m, vec, 1, reduce) }).Else(func() { eachVec(k, zero, m, 1, 1, reduce) })
}

// P2PReduceScatterPullArgs are p2p_reducescatter_pull's parameters: n is the part size
// (every GPU's input holds ngpus parts of n elements, out one).
type P2PReduceScatterPullArgs struct {
	Ins                   dsl.PeerTable // every GPU's input, of dt
	Out                   dsl.Ptr       // this GPU's part, of dt
	Pads                  dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PReduceScatterPull writes out[0:m] = op over GPUs of ins[g][rank*m : rank*m+m] (m = n):
// the two-shot all-reduce's first half. A barrier (every GPU's input is written), then each
// thread loads its vectors of part rank from every GPU's input through peer pointers,
// reduces them in f32 (i32 for integers) and stores out; a last barrier keeps the inputs
// alive until every GPU has read its part. No scratch and no second pass over memory: the
// NVLink traffic is the peers' loads alone (p2p_reducescatter pushes into scratch, then
// reads it again to reduce).
func P2PReduceScatterPull(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pReduceScatterPull(k, dt, op, false)
}

func p2pReduceScatterPull(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[P2PReduceScatterPullArgs](k, dt)
	ins := peerTable(k, a.Ins.Table(), a.NGPUs)
	m := a.N
	vec := vecOf(dt)
	zero := k.Const(dsl.U32, 0)
	base := a.Rank.Mul(m)
	ew, epoch := p2pEpoch(k, graph, a.Pads, a.Rank, a.Epoch)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(1), ordered)
	load := func(p int, i dsl.Value, dst dsl.Tensor) { loadTo(k, ptrAt(k, ins[p], dt), base.Add(i), dst) }
	finish := func(i dsl.Value, _ int, sum dsl.Tensor) { storeN(k, a.Out, i, sum.To(dt)) }
	// rank*m + i is a multiple of the vector width only when m is.
	k.If(m.Rem(uint32(vec)).Eq(0), func() { eachVecReduce(k, CollMaxGPUs, dt, op, a.NGPUs, zero, m, vec, load, finish) }).
		Else(func() { eachVecReduce(k, CollMaxGPUs, dt, op, a.NGPUs, zero, m, 1, load, finish) })
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(2), ordered)
	ew.end(k, epoch.Add(2))
}

// P2PPushArgs are p2p_allreduce_push's parameters.
type P2PPushArgs struct {
	In                    dsl.Ptr       // this GPU's input, of dt
	Outs                  dsl.PeerTable // every GPU's output, of dt
	Scratch               dsl.PeerTable // every GPU's scratch: ngpus regions of a slice, of dt
	Pads                  dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PAllReducePush writes outs[g][0:n] = op over GPUs of their in[0:n] on every GPU g with
// peer stores only (NVLink writes outrun reads): n splits into ngpus slices of whole
// vectors (twoShotSlice); GPU r stores slice p of its input into region r of GPU p's
// scratch for every peer p, a barrier (block b's pushes have landed on every GPU: each GPU's
// block b covers the same elements of every slice in both phases), then reduces its slice
// from its own input and its scratch's regions and stores the sums into every GPU's output;
// a last barrier (every store has landed). No barrier first: the previous launch's last
// reader of a scratch region finished before that launch's last barrier, so stream order
// frees it; an output is only written after the first barrier, when its GPU has reached
// the launch. outs may equal in: GPU q reads slice p of its input before the first
// barrier, and only GPU p writes it, after. scratch holds ngpus regions of
// ceil(n/ngpus) (rounded up to a vector) elements on every GPU.
func P2PAllReducePush(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pAllReducePush(k, dt, op, false, CollMaxGPUs)
}

// P2PAllReducePush4 is P2PAllReducePush built for at most Push4MaxGPUs GPUs (ngpus <=
// 4; more compute wrong results): its peer tables, loads, reductions and stores unroll over
// 4 sources instead of CollMaxGPUs, which halves the registers that hold the peers'
// vectors, and it declares two blocks of CollThreads per SM (.minnctapersm 2: at most 128
// registers a thread), so that a grid of two blocks an SM keeps twice the loads in flight.
func P2PAllReducePush4(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pAllReducePush(k, dt, op, false, Push4MaxGPUs)
}

// p2pAllReducePush writes the push all-reduce (graph: the graph variant) for at most maxG
// GPUs.
func p2pAllReducePush(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool, maxG int) {
	if maxG < CollMaxGPUs {
		k.LaunchBounds(CollThreads, 2)
	}
	a := dsl.Params[P2PPushArgs](k, dt)
	outs := peerTableUpTo(k, maxG, a.Outs.Table(), a.NGPUs)
	scratch := peerTableUpTo(k, maxG, a.Scratch.Table(), a.NGPUs)
	own := a.Scratch.Peer(a.Rank)
	vec := vecOf(dt)
	zero := k.Const(dsl.U32, 0)
	size := twoShotSize(a.N, a.NGPUs, vec)
	slice := func(p dsl.Value) (lo, n dsl.Value) {
		lo = p.Mul(size).Min(a.N)
		return lo, lo.Add(size).Min(a.N).Sub(lo)
	}
	ew, epoch := p2pEpoch(k, graph, a.Pads, a.Rank, a.Epoch)
	// Phase 1: slice p of the input into region rank of GPU p's scratch, every peer's
	// vector j from the same thread (pushes to one peer at a time would all land on one GPU
	// at once: measured 1.4x slower on 4 GPUs), in eachVec's order over the slices (whole
	// vectors, then the tail element by element) so that block b pushes what block b
	// reduces in phase 2.
	region := a.Rank.Mul(size)
	los, ns := make([]dsl.Value, maxG), make([]dsl.Value, maxG)
	for p := range los {
		los[p], ns[p] = slice(k.Const(dsl.U32, p))
	}
	peers := func(body func(p int)) {
		forPeersUpTo(k, maxG, a.NGPUs, func(p int) { k.If(a.Rank.Ne(uint32(p)), func() { body(p) }) })
	}
	gridLoop(k, size.Div(uint32(vec)), func(v dsl.Value) {
		j := k.Assume(v.Mul(uint32(vec)), vec)
		peers(func(p int) {
			k.If(j.Add(uint32(vec)).Le(ns[p]), func() {
				storeN(k, ptrAt(k, scratch[p], dt), region.Add(j), loadN(k, a.In, los[p].Add(j), vec))
			})
		})
	})
	if vec > 1 {
		gridLoop(k, k.Const(dsl.U32, vec), func(t dsl.Value) {
			peers(func(p int) {
				j := ns[p].Div(uint32(vec)).Mul(uint32(vec)).Add(t)
				k.If(j.Lt(ns[p]), func() {
					k.Store(ptrAt(k, scratch[p], dt).At(region.Add(j)), k.Load(a.In.At(los[p].Add(j))))
				})
			})
		})
	}
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(1), ordered)
	// Phase 2: this GPU's slice, reduced, into every GPU's output (eachVecReduce: two
	// vectors' loads in flight a thread, vector v still on thread v mod the grid's threads).
	lo, n := slice(a.Rank)
	eachVecReduce(k, maxG, dt, op, a.NGPUs, zero, n, vec,
		func(p int, j dsl.Value, dst dsl.Tensor) {
			k.If(a.Rank.Eq(uint32(p)), func() { loadTo(k, a.In, lo.Add(j), dst) }).
				Else(func() { loadTo(k, own, size.Mul(uint32(p)).Add(j), dst) })
		},
		func(j dsl.Value, w int, sum dsl.Tensor) {
			res := sum.To(dt)
			forPeersUpTo(k, maxG, a.NGPUs, func(p int) { storeN(k, ptrAt(k, outs[p], dt), lo.Add(j), res) })
		})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, epoch.Add(2), ordered)
	ew.end(k, epoch.Add(2))
}

// P2PBroadcastArgs are p2p_broadcast's parameters.
type P2PBroadcastArgs struct {
	In                          dsl.Ptr       // the root's input, of dt
	Outs                        dsl.PeerTable // every GPU's output, of dt
	Pads                        dsl.PeerTable `kgen:"u32"`
	Root, Rank, NGPUs, N, Epoch dsl.Value     `kgen:"u32"`
}

// P2PBroadcast writes in[0:n] of GPU root into outs[g][0:n] of every GPU g with peer stores
// (128-bit vectors, single elements for the tail); the other GPUs only take part in the
// barriers (first: outputs free; last: the root's stores have landed). out may equal in.
func P2PBroadcast(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[P2PBroadcastArgs](k, dt)
	outs := peerTable(k, a.Outs.Table(), a.NGPUs)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
	k.If(a.Rank.Eq(a.Root), func() {
		eachVec(k, k.Const(dsl.U32, 0), a.N, vecOf(dt), 1, func(i dsl.Value, w int) {
			v := loadN(k, a.In, i, w)
			forPeers(k, a.NGPUs, func(p int) { storeN(k, ptrAt(k, outs[p], dt), i, v) })
		})
	})
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(2), ordered)
}

// P2PBarrierArgs are p2p_barrier's parameters.
type P2PBarrierArgs struct {
	Pads               dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, Epoch dsl.Value     `kgen:"u32"`
}

// P2PBarrier is a standalone cross-GPU barrier over the pad set (see p2pBarrier): it returns
// on every GPU once every GPU's block of the same index has arrived.
func P2PBarrier(k *dsl.Kernel) {
	a := dsl.Params[P2PBarrierArgs](k, dsl.U32)
	p2pBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch.Add(1), ordered)
}

// registerP2PGraph registers the graph variants (coll_common.go) of the p2p all-reduces,
// reduce-scatter and all-gather.
func registerP2PGraph() {
	for _, s := range All() {
		switch s.Family {
		case FamilyP2PAllReduce1Shot:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pAllReduceOneShot(k, dt, op, true) })
		case FamilyP2PAllReduce2Shot:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pAllReduceTwoShot(k, dt, op, true) })
		case FamilyP2PAllReducePush:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pAllReducePush(k, dt, op, true, CollMaxGPUs) })
		case FamilyP2PAllReducePush4:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pAllReducePush(k, dt, op, true, Push4MaxGPUs) })
		case FamilyP2PReduceScatter:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pReduceScatter(k, dt, op, ordered, true) })
		case FamilyP2PReduceScatterPull:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pReduceScatterPull(k, dt, op, true) })
		case FamilyP2PAllGather:
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pAllGather(k, dt, ordered, true) })
		case FamilyP2PAllReduceLamport:
			op := s.Op
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { p2pAllReduceLamport(k, dt, op, true) })
		}
	}
}

// SumSlotsArgs are sum_slots' parameters: slots holds nslots slots of n elements.
type SumSlotsArgs struct {
	Out, Slots dsl.Ptr   // of dt
	NSlots, N  dsl.Value `kgen:"u32"`
}

// SumSlots writes out[i] = the sum over s < nslots (at most CollMaxGPUs) of slots[s*n + i],
// accumulated in f32 (i32 for integers) and rounded once: the local reduction of a
// reduce-scatter whose parts arrived by copy (collectives' MatmulOverlap). Not a collective:
// no barrier, any grid.
func SumSlots(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[SumSlotsArgs](k, dt)
	vec := vecOf(dt)
	zero := k.Const(dsl.U32, 0)
	sum := func(i dsl.Value, w int) {
		s := reducePeers(k, dt, dsl.Sum, a.NSlots, w, func(p int, dst dsl.Tensor) {
			loadTo(k, a.Slots, a.N.Mul(uint32(p)).Add(i), dst)
		})
		storeN(k, a.Out, i, s.To(dt))
	}
	// slot s starts at s*n: vector aligned only when n is a multiple of the vector width.
	k.If(a.N.Rem(uint32(vec)).Eq(0), func() { eachVec(k, zero, a.N, vec, 1, sum) }).Else(func() { eachVec(k, zero, a.N, 1, 1, sum) })
}
