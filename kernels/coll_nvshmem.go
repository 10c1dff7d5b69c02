package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
)

// Ring collectives over NVSHMEM's device API: every hop is one block-scope put_signal_nbi
// (the data, then a signal add ordered after it) to the next PE, and every PE waits on its
// own signal word. They run as one block of NVSHMEMThreads threads per PE, launched
// collectively; their buffers are symmetric; linking them needs NVSHMEM's device library.
//
// Each kernel starts with a block-scope barrier_all (every PE's destination buffers are free:
// the previous launch and its consumers are done) and ends with quiet (its own puts are
// complete). The signal word counts up forever: a launch adds ngpus-1 to every PE's word, and
// launch number epoch (0, 1, ...) waits for epoch*(ngpus-1) + step, so it never needs a reset.

// The NVSHMEM ring families.
const (
	FamilyNVSHMEMAllGatherRing     Family = "nvshmem_allgather_ring"
	FamilyNVSHMEMReduceScatterRing Family = "nvshmem_reducescatter_ring"
)

func init() {
	register(&Spec{
		Name:    string(FamilyNVSHMEMAllGatherRing),
		Doc:     "ring all-gather by put_signal_nbi (block) to the next PE and signal_wait_until: ngpus-1 hops, each forwarding the part that just arrived",
		DTypes:  nvshmemDTypes,
		Targets: nvshmemTargets,
		New:     NVSHMEMAllGatherRing,
	})
	for _, o := range collOps {
		op := o.op
		register(&Spec{
			Name:   string(FamilyNVSHMEMReduceScatterRing) + "_" + o.name,
			Family: FamilyNVSHMEMReduceScatterRing, Reduces: true, Op: op,
			Doc:     "ring reduce-scatter (" + o.name + ") by put_signal_nbi (block) of f32/s32 partial results to the next PE: ngpus-1 hops, each adding the local part",
			DTypes:  nvshmemDTypes,
			Targets: nvshmemTargets,
			New:     func(k *dsl.Kernel, dt dsl.Type) { NVSHMEMReduceScatterRing(k, dt, op) },
		})
	}
}

// ringWait makes thread 0 wait until the local signal word reaches target, then releases
// the block.
func ringWait(k *dsl.Kernel, sig dsl.Ptr, target dsl.Value) {
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() { nvshmem.SignalWaitUntil(k, sig, nvshmem.CmpGE, target) })
	k.SyncThreads()
}

// ringEnd completes this PE's puts (quiet, from thread 0 after the block's last put).
func ringEnd(k *dsl.Kernel) {
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() { nvshmem.Quiet(k) })
	k.SyncThreads()
}

// NVSHMEMAllGatherRingArgs are nvshmem_allgather_ring's parameters: symmetric buffers, the
// signal word, the part size n and the launch's number epoch.
type NVSHMEMAllGatherRingArgs struct {
	Dst, Src dsl.Ptr   // ngpus*n and n elements of dt
	Sig      dsl.Ptr   `kgen:"u64"`
	N        dsl.Value `kgen:"u32"`
	Epoch    dsl.Value `kgen:"u64"`
}

// NVSHMEMAllGatherRing writes the n elements of src on every PE p to dst[p*n : p*n+n] on
// every PE: after a barrier_all, PE me copies its part into its own dst and puts it to the
// next PE; at hop s (1..ngpus-2) it waits for the part (me-s) mod ngpus to arrive from the
// previous PE and forwards it; finally it waits for the last part. put_signal orders each
// part's data before its signal, so the wait makes the part readable.
func NVSHMEMAllGatherRing(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[NVSHMEMAllGatherRingArgs](k, dt)
	dst, src, sig, n, epoch := a.Dst, a.Src, a.Sig, a.N, a.Epoch
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	next := me.Add(1).Rem(np)
	hops := np.Sub(1).To(dsl.U64)
	base := epoch.Mul(hops)
	nvshmem.BarrierAll(k, nvshmem.Block)
	part := func(p dsl.Value) dsl.Ptr { return dst.At(p.To(dsl.U32).Mul(n)) }
	mine := part(me)
	k.For(k.ThreadIdx(dsl.X), n, k.BlockDim(dsl.X), func(i dsl.Value) { k.Store(mine.At(i), k.Load(src.At(i))) })
	k.If(np.Gt(1), func() {
		nvshmem.PutSignalNBI(k, nvshmem.Block, nvshmem.SpanOf(mine, n), nvshmem.SpanOf(src, n), sig, uint64(1), nvshmem.SignalAdd, next)
	})
	k.For(k.Const(dsl.I32, 1), np.Sub(1), 1, func(s dsl.Value) {
		ringWait(k, sig, base.Add(s.To(dsl.U64)))
		p := part(me.Sub(s).Add(np).Rem(np))
		nvshmem.PutSignalNBI(k, nvshmem.Block, nvshmem.SpanOf(p, n), nvshmem.SpanOf(p, n), sig, uint64(1), nvshmem.SignalAdd, next)
	})
	ringWait(k, sig, base.Add(hops))
	ringEnd(k)
}

// NVSHMEMReduceScatterRingArgs are nvshmem_reducescatter_ring's parameters: scratch holds
// 32-bit accumulators (f32 for floats, s32 for integers).
type NVSHMEMReduceScatterRingArgs struct {
	Out, In dsl.Ptr   // m and ngpus*m elements of dt
	Scratch dsl.Ptr   `kgen:"b32"`
	Sig     dsl.Ptr   `kgen:"u64"`
	M       dsl.Value `kgen:"u32"`
	Epoch   dsl.Value `kgen:"u64"`
}

// NVSHMEMReduceScatterRing writes op over PEs of in[me*m : me*m+m] to out on every PE me (in
// holds ngpus parts of m elements). After a barrier_all, hop 0 sends part (me-1) mod ngpus,
// widened to f32 (s32 for integers), into slot 0 of the next PE's receive area; at hop s
// (1..ngpus-2) a PE waits for slot s-1, adds its own part (me-s-1) mod ngpus into its send
// slot s and puts that into slot s of the next PE; at the end it waits for slot ngpus-2, adds
// its own part me and writes out, rounded once to dt. Every slot is used once per launch, so
// no put overwrites data still being read.
// scratch holds 2*(CollMaxGPUs-1) slots of m accumulator values (receive, then send).
func NVSHMEMReduceScatterRing(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	at := accType(dt)
	a := dsl.Params[NVSHMEMReduceScatterRingArgs](k, dt)
	out, in, sig, m, epoch := a.Out, a.In, a.Sig, a.M, a.Epoch
	scratch := a.Scratch.As(at)
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	next := me.Add(1).Rem(np)
	hops := np.Sub(1).To(dsl.U64)
	base := epoch.Mul(hops)
	tid, step := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	recv := func(s dsl.Value) dsl.Ptr { return scratch.At(s.To(dsl.U32).Mul(m)) }
	send := func(s dsl.Value) dsl.Ptr {
		return scratch.At(s.To(dsl.U32).Add(uint32(CollMaxGPUs - 1)).Mul(m))
	}
	part := func(p dsl.Value) dsl.Ptr { return in.At(p.To(dsl.U32).Mul(m)) }
	nvshmem.BarrierAll(k, nvshmem.Block)
	k.If(np.Gt(1), func() {
		zero := k.Const(dsl.I32, 0)
		first := part(me.Add(np).Sub(1).Rem(np))
		k.For(tid, m, step, func(i dsl.Value) { k.Store(send(zero).At(i), k.Load(first.At(i)).To(at)) })
		k.SyncThreads()
		nvshmem.PutSignalNBI(k, nvshmem.Block, nvshmem.SpanOf(recv(zero), m), nvshmem.SpanOf(send(zero), m), sig, uint64(1), nvshmem.SignalAdd, next)
	})
	k.For(k.Const(dsl.I32, 1), np.Sub(1), 1, func(s dsl.Value) {
		ringWait(k, sig, base.Add(s.To(dsl.U64)))
		own := part(me.Sub(s).Sub(1).Add(np).Rem(np))
		got, dstSlot := recv(s.Sub(1)), send(s)
		k.For(tid, m, step, func(i dsl.Value) {
			k.Store(dstSlot.At(i), combine(op, k.Load(got.At(i)), k.Load(own.At(i)).To(at)))
		})
		k.SyncThreads()
		nvshmem.PutSignalNBI(k, nvshmem.Block, nvshmem.SpanOf(recv(s), m), nvshmem.SpanOf(dstSlot, m), sig, uint64(1), nvshmem.SignalAdd, next)
	})
	ringWait(k, sig, base.Add(hops))
	last := recv(np.Sub(2))
	mine := part(me)
	k.For(tid, m, step, func(i dsl.Value) {
		v := k.Var(at, k.Load(mine.At(i)).To(at))
		k.If(np.Gt(1), func() { k.Set(v, combine(op, k.Load(last.At(i)), v)) })
		k.Store(out.At(i), v.To(dt))
	})
	ringEnd(k)
}
