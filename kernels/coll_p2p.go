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

// collScalars declares the scalar parameters rank, ngpus, n and epoch.
func collScalars(k *dsl.Kernel) (rank, ngpus, n, epoch dsl.Value) {
	return k.Param("rank", dsl.U32), k.Param("ngpus", dsl.U32), k.Param("n", dsl.U32), k.Param("epoch", dsl.U32)
}

// peerReduce loads w elements at index i from every GPU's buffer (addrs, the first ngpus
// used) and returns their reduction by op in the accumulator type. All loads are issued
// before the first combine, so the peers' latencies overlap.
func peerReduce(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, addrs []dsl.Value, ngpus, i dsl.Value, w int) []dsl.Value {
	vals := make([][]dsl.Value, len(addrs))
	for p := range addrs {
		vals[p] = make([]dsl.Value, w)
		for j := range vals[p] {
			vals[p][j] = k.Var(dt, 0)
		}
		load := func() {
			got := loadN(k, ptrAt(k, addrs[p], dt), i, w)
			for j := range got {
				k.Set(vals[p][j], got[j])
			}
		}
		if p == 0 {
			load()
		} else {
			k.If(ngpus.Gt(uint32(p)), load)
		}
	}
	at := accType(dt)
	acc := make([]dsl.Value, w)
	for j := range acc {
		acc[j] = vals[0][j].To(at)
		for p := 1; p < len(addrs); p++ {
			acc[j] = k.Select(ngpus.Gt(uint32(p)), combine(op, acc[j], vals[p][j].To(at)), acc[j])
		}
	}
	return acc
}

// toType converts accumulators back to dt.
func toType(vals []dsl.Value, dt dsl.Type) []dsl.Value {
	out := make([]dsl.Value, len(vals))
	for j, v := range vals {
		out[j] = v.To(dt)
	}
	return out
}

// storeGuarded stores vals to p[i..i+len) where the index is below hi, one by one unless
// the group is a whole vector (w == vec).
func storeGuarded(k *dsl.Kernel, p dsl.Ptr, i, hi dsl.Value, vals []dsl.Value, vec int) {
	if len(vals) == vec {
		storeN(k, p, i, vals)
		return
	}
	for j, v := range vals {
		k.If(i.Add(uint32(j)).Lt(hi), func() { k.Store(p.At(i.Add(uint32(j))), v) })
	}
}

// P2PAllReduceOneShot writes out = op over GPUs g of ins[g][0:n] on every GPU: a barrier
// (every peer's input is ready), then each thread loads its 128-bit vectors from all ngpus
// inputs through peer pointers, reduces them in f32 (i32 for integers) and stores its own
// output; a second barrier keeps the inputs alive until every GPU has read them. out must
// not alias this GPU's input (peers are still reading it): the host API stages in-place
// calls through a scratch buffer.
// Params: ins (table), out, pads (table), rank, ngpus, n, epoch.
func P2PAllReduceOneShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	ins := k.PtrParam("ins", dsl.U64)
	out := k.PtrParam("out", dt)
	pads := k.PtrParam("pads", dsl.U64)
	rank, ngpus, n, epoch := collScalars(k)
	addrs := peerTable(k, ins, ngpus)
	vec := vecOf(dt)
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(1), ordered)
	eachVec(k, k.Const(dsl.U32, 0), n, vec, 1, func(i dsl.Value, w int) {
		storeN(k, out, i, toType(peerReduce(k, dt, op, addrs, ngpus, i, w), dt))
	})
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(2), ordered)
}

// twoShotSlice returns GPU rank's slice [lo, hi) of n elements split into ngpus slices of
// whole vectors (the last slices shorter or empty).
func twoShotSlice(k *dsl.Kernel, rank, ngpus, n dsl.Value, vec int) (lo, hi dsl.Value) {
	per := n.Add(ngpus).Sub(1).Div(ngpus)
	size := per.Add(uint32(vec - 1)).Div(uint32(vec)).Mul(uint32(vec))
	lo = rank.Mul(size).Min(n)
	hi = lo.Add(size).Min(n)
	return lo, hi
}

// P2PAllReduceTwoShot writes outs[g][0:n] = op over GPUs of ins[.][0:n] on every GPU g, in
// two phases per element and no barrier between them: GPU r reduces its slice (1/ngpus of
// the vectors) by loading it from every peer's input (reduce-scatter), then stores the
// result into every peer's output (all-gather). A barrier first (inputs ready, outputs free)
// and one last (every peer's stores have landed). outs may equal ins (in place): GPU r only
// reads and writes slice r. Params: ins, outs (tables), pads (table), rank, ngpus, n, epoch.
func P2PAllReduceTwoShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	ins := k.PtrParam("ins", dsl.U64)
	outs := k.PtrParam("outs", dsl.U64)
	pads := k.PtrParam("pads", dsl.U64)
	rank, ngpus, n, epoch := collScalars(k)
	inAddrs := peerTable(k, ins, ngpus)
	outAddrs := peerTable(k, outs, ngpus)
	vec := vecOf(dt)
	lo, hi := twoShotSlice(k, rank, ngpus, n, vec)
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(1), ordered)
	eachVec(k, lo, hi, vec, 1, func(i dsl.Value, w int) {
		res := toType(peerReduce(k, dt, op, inAddrs, ngpus, i, w), dt)
		for p := range outAddrs {
			k.If(ngpus.Gt(uint32(p)), func() { storeN(k, ptrAt(k, outAddrs[p], dt), i, res) })
		}
	})
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(2), ordered)
}

// isSentinel reports whether x is -0.0, the Lamport "not written yet" marker: zero, and 1/x
// negative (data never holds -0.0: senders turn it into +0.0).
func isSentinel(x dsl.Value) dsl.Value {
	f := x.To(dsl.F32)
	return f.Eq(float32(0)).And(f.Rcp().Lt(float32(0)))
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
// Needs n <= cap. Params: in, out, lbufs (table), cap, nclear, rank, ngpus, n, epoch.
func P2PAllReduceLamport(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	in := k.PtrParam("in", dt)
	out := k.PtrParam("out", dt)
	lbufs := k.PtrParam("lbufs", dsl.U64)
	capacity := k.Param("cap", dsl.U32)
	nclear := k.Param("nclear", dsl.U32)
	rank, ngpus, n, epoch := collScalars(k)
	addrs := peerTable(k, lbufs, ngpus)
	own := ptrAt(k, k.Load(lbufs.At(rank)), dt)
	vec := vecOf(dt)
	slot := epoch.Rem(uint32(LamportSlots))
	prev := epoch.Add(uint32(LamportSlots - 1)).Rem(uint32(LamportSlots))
	region := func(s, src dsl.Value) dsl.Value {
		return k.Assume(s.Mul(uint32(CollMaxGPUs)).Add(src).Mul(k.Assume(capacity, vec)), vec)
	}
	zero := k.Const(dt, 0.0)
	// Push: every GPU's region [slot][rank].
	mine := region(slot, rank)
	eachVec(k, k.Const(dsl.U32, 0), n, vec, 1, func(i dsl.Value, w int) {
		v := loadN(k, in, i, w)
		for j := range v {
			v[j] = v[j].Add(zero)
		}
		for p := range addrs {
			k.If(ngpus.Gt(uint32(p)), func() { storeN(k, ptrAt(k, addrs[p], dt), mine.Add(i), v, dsl.Relaxed(dsl.System)) })
		}
	})
	// Poll and reduce.
	at := accType(dt)
	eachVec(k, k.Const(dsl.U32, 0), n, vec, 1, func(i dsl.Value, w int) {
		vals := make([][]dsl.Value, CollMaxGPUs)
		for p := range vals {
			vals[p] = make([]dsl.Value, w)
			for j := range vals[p] {
				vals[p][j] = k.Var(dt, 0)
			}
			k.If(ngpus.Gt(uint32(p)), func() {
				idx := region(slot, k.Const(dsl.U32, uint32(p))).Add(i)
				k.While(func() dsl.Value {
					got := loadN(k, own, idx, w, dsl.Relaxed(dsl.System))
					pending := k.Const(dsl.Bool, false)
					for j := range got {
						k.Set(vals[p][j], got[j])
						pending = pending.Or(isSentinel(got[j]))
					}
					return pending
				}, func() {})
			})
		}
		acc := make([]dsl.Value, w)
		for j := range acc {
			acc[j] = vals[0][j].To(at)
			for p := 1; p < CollMaxGPUs; p++ {
				acc[j] = k.Select(ngpus.Gt(uint32(p)), combine(op, acc[j], vals[p][j].To(at)), acc[j])
			}
		}
		storeN(k, out, i, toType(acc, dt))
	})
	// Reset the previous launch's slot.
	sentinel := make([]dsl.Value, vec)
	for j := range sentinel {
		sentinel[j] = negZero(k, dt)
	}
	eachVec(k, k.Const(dsl.U32, 0), nclear, vec, 1, func(i dsl.Value, w int) {
		for p := 0; p < CollMaxGPUs; p++ {
			k.If(ngpus.Gt(uint32(p)), func() {
				storeN(k, own, region(prev, k.Const(dsl.U32, uint32(p))).Add(i), sentinel[:w])
			})
		}
	})
}

// P2PAllGather writes in[0:n] of GPU r to outs[g][r*n : r*n+n] on every GPU g with peer
// stores: 128-bit vectors when n is a multiple of the vector width (so every GPU's part is
// aligned), element by element otherwise. A barrier first (every output free) and one last
// (every peer's stores have landed). Params: in, outs (table), pads (table), rank, ngpus, n,
// epoch.
func P2PAllGather(k *dsl.Kernel, dt dsl.Type) {
	p2pAllGather(k, dt, ordered)
}

// P2PAllGatherUnordered is P2PAllGather with its barriers' release stores made relaxed: a
// deliberately wrong kernel whose peer stores may land after the signal. The weak-memory
// tests use it to prove they catch a missing release; never use it for data.
func P2PAllGatherUnordered(k *dsl.Kernel, dt dsl.Type) {
	p2pAllGather(k, dt, unordered)
}

func p2pAllGather(k *dsl.Kernel, dt dsl.Type, ord barrierOrder) {
	in := k.PtrParam("in", dt)
	outs := k.PtrParam("outs", dsl.U64)
	pads := k.PtrParam("pads", dsl.U64)
	rank, ngpus, n, epoch := collScalars(k)
	addrs := peerTable(k, outs, ngpus)
	vec := vecOf(dt)
	base := rank.Mul(n)
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(1), ord)
	copyTo := func(i dsl.Value, w int) {
		v := loadN(k, in, i, w)
		dst := base.Add(i)
		for p := range addrs {
			k.If(ngpus.Gt(uint32(p)), func() { storeN(k, ptrAt(k, addrs[p], dt), dst, v) })
		}
	}
	zero := k.Const(dsl.U32, 0)
	k.If(n.Rem(uint32(vec)).Eq(0), func() {
		eachVec(k, zero, n, vec, 1, copyTo) // r*n and i are multiples of vec: aligned
	}).Else(func() {
		eachVec(k, zero, n, 1, 1, copyTo)
	})
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(2), ord)
}

// P2PReduceScatter writes out[0:m] = op over GPUs of in[rank*m : rank*m+m] on every GPU
// (in holds ngpus parts of m elements). A barrier (every GPU's scratch is free: its last
// reader, the previous launch, is done), then GPU r stores part g of its input into region r
// of GPU g's scratch (peer stores, 128-bit when m allows), a second barrier (every push has
// landed: the release of each signal orders the pushes before it, the acquire spin orders
// the local reads after it), then each GPU reduces its ngpus regions locally into out.
// scratch holds CollMaxGPUs regions of m elements on every GPU.
// Params: in, out, scratch (table), pads (table), rank, ngpus, m, epoch.
func P2PReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pReduceScatter(k, dt, op, ordered)
}

// P2PReduceScatterUnordered is P2PReduceScatter with the release of its barriers' signals
// made relaxed: a deliberately wrong kernel whose local reduction may read scratch before
// the peers' pushes land. The weak-memory tests use it to prove they catch a missing
// release; never use it for data.
func P2PReduceScatterUnordered(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	p2pReduceScatter(k, dt, op, unordered)
}

func p2pReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, ord barrierOrder) {
	in := k.PtrParam("in", dt)
	out := k.PtrParam("out", dt)
	scratch := k.PtrParam("scratch", dsl.U64)
	pads := k.PtrParam("pads", dsl.U64)
	rank, ngpus, m, epoch := collScalars(k)
	addrs := peerTable(k, scratch, ngpus)
	own := ptrAt(k, k.Load(scratch.At(rank)), dt)
	vec := vecOf(dt)
	zero := k.Const(dsl.U32, 0)
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(1), ord)
	push := func(i dsl.Value, w int) {
		for p := range addrs {
			k.If(ngpus.Gt(uint32(p)), func() {
				v := loadN(k, in, m.Mul(uint32(p)).Add(i), w)
				storeN(k, ptrAt(k, addrs[p], dt), rank.Mul(m).Add(i), v)
			})
		}
	}
	aligned := m.Rem(uint32(vec)).Eq(0)
	k.If(aligned, func() { eachVec(k, zero, m, vec, 1, push) }).Else(func() { eachVec(k, zero, m, 1, 1, push) })
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(2), ord)
	at := accType(dt)
	reduce := func(i dsl.Value, w int) {
		acc := make([]dsl.Value, w)
		for p := 0; p < CollMaxGPUs; p++ {
			var v []dsl.Value
			if p == 0 {
				v = loadN(k, own, i, w)
			} else {
				v = make([]dsl.Value, w)
				for j := range v {
					v[j] = k.Var(dt, 0)
				}
				k.If(ngpus.Gt(uint32(p)), func() {
					got := loadN(k, own, m.Mul(uint32(p)).Add(i), w)
					for j := range got {
						k.Set(v[j], got[j])
					}
				})
			}
			for j := range acc {
				if p == 0 {
					acc[j] = v[j].To(at)
					continue
				}
				acc[j] = k.Select(ngpus.Gt(uint32(p)), combine(op, acc[j], v[j].To(at)), acc[j])
			}
		}
		storeN(k, out, i, toType(acc, dt))
	}
	k.If(aligned, func() { eachVec(k, zero, m, vec, 1, reduce) }).Else(func() { eachVec(k, zero, m, 1, 1, reduce) })
}

// P2PBroadcast writes in[0:n] of GPU root into outs[g][0:n] of every GPU g with peer stores
// (128-bit vectors, single elements for the tail); the other GPUs only take part in the
// barriers (first: outputs free; last: the root's stores have landed). out may equal in.
// Params: in, outs (table), pads (table), root, rank, ngpus, n, epoch.
func P2PBroadcast(k *dsl.Kernel, dt dsl.Type) {
	in := k.PtrParam("in", dt)
	outs := k.PtrParam("outs", dsl.U64)
	pads := k.PtrParam("pads", dsl.U64)
	root := k.Param("root", dsl.U32)
	rank, ngpus, n, epoch := collScalars(k)
	addrs := peerTable(k, outs, ngpus)
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(1), ordered)
	k.If(rank.Eq(root), func() {
		eachVec(k, k.Const(dsl.U32, 0), n, vecOf(dt), 1, func(i dsl.Value, w int) {
			v := loadN(k, in, i, w)
			for p := range addrs {
				k.If(ngpus.Gt(uint32(p)), func() { storeN(k, ptrAt(k, addrs[p], dt), i, v) })
			}
		})
	})
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(2), ordered)
}

// P2PBarrier is a standalone cross-GPU barrier over the pad set (see p2pBarrier): it returns
// on every GPU once every GPU's block of the same index has arrived. Params: pads (table),
// rank, ngpus, epoch.
func P2PBarrier(k *dsl.Kernel) {
	pads := k.PtrParam("pads", dsl.U64)
	rank, ngpus, epoch := k.Param("rank", dsl.U32), k.Param("ngpus", dsl.U32), k.Param("epoch", dsl.U32)
	p2pBarrier(k, pads, rank, ngpus, epoch.Add(1), ordered)
}
