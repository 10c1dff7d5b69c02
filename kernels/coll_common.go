package kernels

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// Geometry and limits shared by the collective kernels (coll_*.go) and their host API
// (package collectives).
const (
	// CollThreads is the block size every collective kernel is launched with.
	CollThreads = 256
	// CollMaxGPUs is the largest number of GPUs a collective kernel handles: peer tables
	// hold CollMaxGPUs entries and the reductions unroll over them.
	CollMaxGPUs = 8
	// Push4MaxGPUs is the largest number of GPUs p2p_allreduce_push4 handles: it loads and
	// reduces at most that many sources, so half the general kernel's registers.
	Push4MaxGPUs = 4
	// CollMaxBlocks is the largest grid of a collective kernel that uses a barrier: a set of
	// signal pads (p2p) or flags (multimem) holds CollMaxBlocks slots per block index.
	CollMaxBlocks = 256
	// PadWords is the number of u32 words of one GPU's p2p signal pads: a slot per block and
	// source GPU.
	PadWords = CollMaxBlocks * CollMaxGPUs
	// FlagWords is the number of u32 words of one GPU's multimem barrier flags: a slot per
	// block.
	FlagWords = CollMaxBlocks
	// LamportSlots is the number of rotating slots of the Lamport all-reduce buffer.
	LamportSlots = 3
	// LamportEpochWrap is where the Lamport all-reduce's epoch wraps to 0: 2^32-1, the
	// largest multiple of LamportSlots below 2^32, so epoch%3 rotates through 0,1,2 across
	// the wrap (a u32 wrapping at 2^32 would not: 2^32 mod 3 = 1 puts two launches in a row
	// on slot 0).
	LamportEpochWrap = 1<<32 - 1
)

// The collective families (coll_p2p.go, coll_mm.go): the reducing ones have a kernel per
// reduction op (ID.Op); the fp8 multimem reductions are families of their own (their targets
// differ).
const (
	FamilyP2PAllReduce1Shot    Family = "p2p_allreduce_1shot"
	FamilyP2PAllReduce2Shot    Family = "p2p_allreduce_2shot"
	FamilyP2PAllReduceLamport  Family = "p2p_allreduce_lamport"
	FamilyP2PAllReducePush     Family = "p2p_allreduce_push"
	FamilyP2PAllReducePush4    Family = "p2p_allreduce_push4"
	FamilyP2PReduceScatter     Family = "p2p_reducescatter"
	FamilyP2PReduceScatterPull Family = "p2p_reducescatter_pull"
	FamilyP2PAllGather         Family = "p2p_allgather"
	FamilyP2PBroadcast         Family = "p2p_broadcast"
	FamilyP2PBarrier           Family = "p2p_barrier"
	FamilyMMAllReduce1Shot     Family = "mm_allreduce_1shot"
	FamilyMMAllReduce2Shot     Family = "mm_allreduce_2shot"
	FamilyMMAllReducePush      Family = "mm_allreduce_push"
	FamilyMMReduceScatter      Family = "mm_reducescatter"
	FamilyMMAllReduce1ShotFP8  Family = "mm_allreduce_1shot_fp8"
	FamilyMMAllReduce2ShotFP8  Family = "mm_allreduce_2shot_fp8"
	FamilyMMReduceScatterFP8   Family = "mm_reducescatter_fp8"
	FamilyMMAllGather          Family = "mm_allgather"
	FamilyMMBroadcast          Family = "mm_broadcast"
	FamilyMMBarrier            Family = "mm_barrier"
)

// collFamilies says, per collective family, whether it synchronises through the multimem
// flags (else through the peer-to-peer signal pads) and how many cross-GPU barriers a launch
// completes on them.
var collFamilies = map[Family]struct {
	multimem bool
	barriers int
}{
	FamilyP2PAllReduce1Shot: {false, 2}, FamilyP2PAllReduce2Shot: {false, 2}, FamilyP2PAllReduceLamport: {false, 0}, FamilyP2PAllReducePush: {false, 2}, FamilyP2PAllReducePush4: {false, 2},
	FamilyP2PReduceScatter: {false, 2}, FamilyP2PReduceScatterPull: {false, 2}, FamilyP2PAllGather: {false, 2}, FamilyP2PBroadcast: {false, 2}, FamilyP2PBarrier: {false, 1},
	FamilyMMAllReduce1Shot: {true, 2}, FamilyMMAllReduce2Shot: {true, 2}, FamilyMMAllReducePush: {true, 2}, FamilyMMReduceScatter: {true, 2},
	FamilyMMAllReduce1ShotFP8: {true, 2}, FamilyMMAllReduce2ShotFP8: {true, 2}, FamilyMMReduceScatterFP8: {true, 2},
	FamilyMMAllGather: {true, 2}, FamilyMMBroadcast: {true, 2}, FamilyMMBarrier: {true, 1},
}

// CollBarriers returns how many barriers a launch of a kernel of collective family f
// completes on its pad or flag set (the host adds it to the set's epoch after the launch),
// and whether the set is the multimem flags (else the p2p signal pads). ok is false for a
// family that is not a collective of coll_p2p.go or coll_mm.go.
func CollBarriers(f Family) (barriers int, multimem, ok bool) {
	c, ok := collFamilies[f]
	return c.barriers, c.multimem, ok
}

// CollOp is the reduction of a collective: Sum, Min or Max.
type CollOp = dsl.ReduceOp

// collOps are the reductions the collective kernels are built for, by name suffix.
var collOps = []struct {
	name string
	op   dsl.ReduceOp
}{{"sum", dsl.Sum}, {"min", dsl.Min}, {"max", dsl.Max}}

// collDTypes are the element types of the reducing collectives.
var collDTypes = []dsl.Type{dsl.F32, dsl.F16, dsl.BF16, dsl.I32}

// OpName returns the kernel-name suffix of a collective reduction ("sum", "min", "max"), or
// "" for the operators the collectives do not support.
func OpName(op dsl.ReduceOp) string {
	for _, o := range collOps {
		if o.op == op {
			return o.name
		}
	}
	return ""
}

// vecOf returns the number of elements of dt in 16 bytes (one 128-bit access).
func vecOf(dt dsl.Type) int { return 16 / max(dt.Bytes(), 1) } // a type of no size: Params records the error

// accType is the type a reduction of dt accumulates in: f32 for floats, dt for integers.
func accType(dt dsl.Type) dsl.Type {
	if dt.IsFloat() {
		return dsl.F32
	}
	return dt
}

// combine applies op.
func combine(op dsl.ReduceOp, a, b dsl.Value) dsl.Value {
	switch op {
	case dsl.Min:
		return a.Min(b)
	case dsl.Max:
		return a.Max(b)
	}
	return a.Add(b)
}

// negZero returns -0.0 of type t (the identity of a float sum that keeps -0 + -0 = -0).
func negZero(k *dsl.Kernel, t dsl.Type) dsl.Value { return k.Const(t, math.Copysign(0, -1)) }

// gridLoop runs body(i) for every i in [0, count) (U32), spread over the grid's threads in
// grid-stride order: thread g takes g, g + gridThreads, ... The assignment of indices to
// blocks is the same on every GPU of a collective launch (same grid), which the per-block
// barriers rely on.
func gridLoop(k *dsl.Kernel, count dsl.Value, body func(i dsl.Value)) {
	k.For(k.GlobalThreadIdx(dsl.X), count, k.GridStride(dsl.X), body)
}

// eachVec runs body over the elements [lo, hi) (U32): whole vectors of vec elements first,
// body(i, vec) with i = lo + a multiple of vec, then the tail in units of unit elements,
// body(i, unit), where the last unit may reach past hi (the body guards what it stores).
// lo must be a multiple of vec for the vector accesses to be aligned.
func eachVec(k *dsl.Kernel, lo, hi dsl.Value, vec, unit int, body func(i dsl.Value, w int)) {
	span := hi.Sub(lo)
	nv := span.Div(uint32(vec))
	gridLoop(k, nv, func(v dsl.Value) {
		body(k.Assume(lo.Add(v.Mul(uint32(vec))), vec), vec)
	})
	if vec == unit {
		return
	}
	tail := lo.Add(nv.Mul(uint32(vec)))
	nt := hi.Sub(tail).Add(uint32(unit - 1)).Div(uint32(unit))
	gridLoop(k, nt, func(j dsl.Value) {
		body(tail.Add(j.Mul(uint32(unit))), unit)
	})
}

// vecTile views w consecutive elements at p[i] as a tensor (i is a multiple of w, so a
// 16-byte-aligned p gives aligned vector accesses).
func vecTile(k *dsl.Kernel, p dsl.Ptr, i dsl.Value, w int) dsl.Tensor {
	return k.MakeTensor(p.At(k.Assume(i, w)), layout.Must(layout.MakeLayout(layout.Int(w))))
}

// loadN loads w consecutive elements at p[i] into a register fragment: one 128-bit access
// when w fills 16 bytes.
func loadN(k *dsl.Kernel, p dsl.Ptr, i dsl.Value, w int, opts ...dsl.MemOption) dsl.Tensor {
	if w == 1 {
		return k.FragmentOf(k.Load(p.At(i), opts...))
	}
	t := vecTile(k, p, i, w)
	f := k.Fragment(p.Elem(), t)
	k.Copy(t, f, opts...)
	return f
}

// loadTo loads consecutive elements at p[i] into dst, a fragment of variables (regs).
func loadTo(k *dsl.Kernel, p dsl.Ptr, i dsl.Value, dst dsl.Tensor, opts ...dsl.MemOption) {
	if dst.Size() == 1 {
		dst.Set(0, k.Load(p.At(i), opts...))
		return
	}
	k.Copy(vecTile(k, p, i, dst.Size()), dst, opts...)
}

// storeN stores the fragment f to consecutive elements at p[i] (one vector access when it
// fills 16 bytes).
func storeN(k *dsl.Kernel, p dsl.Ptr, i dsl.Value, f dsl.Tensor, opts ...dsl.MemOption) {
	if f.Size() == 1 {
		k.Store(p.At(i), f.Get(0), opts...)
		return
	}
	k.Copy(f, vecTile(k, p, i, f.Size()), opts...)
}

// regs returns a fragment of w variables of dt, zero.
func regs(k *dsl.Kernel, dt dsl.Type, w int) dsl.Tensor {
	vs := make([]dsl.Value, w)
	for j := range vs {
		vs[j] = k.Var(dt, 0)
	}
	return k.FragmentOf(vs...)
}

// peerTable loads the first ngpus entries of a table of CollMaxGPUs device addresses (one
// per GPU) into variables; entries past ngpus stay 0 and are never used.
func peerTable(k *dsl.Kernel, tbl dsl.Ptr, ngpus dsl.Value) []dsl.Value {
	return peerTableUpTo(k, CollMaxGPUs, tbl, ngpus)
}

// peerTableUpTo is peerTable for a kernel built for at most maxG GPUs: the first maxG
// entries, each loaded under ngpus > p.
func peerTableUpTo(k *dsl.Kernel, maxG int, tbl dsl.Ptr, ngpus dsl.Value) []dsl.Value {
	out := make([]dsl.Value, maxG)
	for p := range out {
		out[p] = k.Var(dsl.U64, uint64(0))
		k.If(ngpus.Gt(uint32(p)), func() { k.Set(out[p], k.Load(tbl.At(p))) })
	}
	return out
}

// ptrAt makes a global pointer to elem values from an address value.
func ptrAt(k *dsl.Kernel, addr dsl.Value, elem dsl.Type) dsl.Ptr {
	return k.PtrFrom(addr, elem, ptx.SpaceGlobal)
}

// barrierOrder says how a barrier orders memory: Ordered is the correct form; Unordered
// drops the release (a deliberately broken variant for the weak-memory tests).
type barrierOrder int

const (
	ordered barrierOrder = iota
	unordered
)

// p2pBarrier synchronizes block b of every GPU through signal pads in plain peer memory.
// Each GPU holds PadWords u32 slots, slot [b*CollMaxGPUs + src] written only by GPU src's
// block b; padTbl is the table of every GPU's pad address. After a bar.sync (so the block's
// earlier accesses are ordered before what follows), thread t < ngpus stores target to GPU
// t's slot [b][rank] with st.release.sys, then spins with ld.acquire.sys on its own slot
// [b][t] until it reaches target; a final bar.sync passes the acquired view to the whole
// block. target grows by one per barrier (the host keeps the epoch), so the pads never need
// resetting.
func p2pBarrier(k *dsl.Kernel, pads dsl.PeerTable, rank, ngpus, target dsl.Value, ord barrierOrder) {
	tid, b := k.ThreadIdx(dsl.X), k.BlockIdx(dsl.X)
	k.SyncThreads()
	k.If(tid.Lt(ngpus), func() {
		slot := b.Mul(uint32(CollMaxGPUs))
		remote := pads.Peer(tid).At(slot.Add(rank))
		if ord == ordered {
			k.Store(remote, target, dsl.Release(dsl.System))
		} else {
			k.Store(remote, target, dsl.Relaxed(dsl.System))
		}
		mine := pads.Peer(rank)
		k.WaitUntil(mine.At(slot.Add(tid)), dsl.GeWrap, target, dsl.Acquire(dsl.System))
	})
	k.SyncThreads()
}

// mmBarrier synchronizes block b of every GPU through one u32 flag per block in symmetric
// memory: thread 0 adds 1 to the flag on every GPU at once with multimem.red.release.sys
// (after a bar.sync, ordering the block's earlier accesses, multimem stores included, before
// it), emits fence.proxy.alias (the flag is then read through its unicast alias), and spins
// with ld.acquire.sys on the local copy until it reaches target*ngpus; a bar.sync releases
// the block. The flag counts up forever: target is the barrier's epoch (the host counts
// them), so no reset is ever needed.
func mmBarrier(k *dsl.Kernel, flagsMC, flagsUC dsl.Ptr, ngpus, target dsl.Value) {
	tid, b := k.ThreadIdx(dsl.X), k.BlockIdx(dsl.X)
	k.SyncThreads()
	k.If(tid.Eq(0), func() {
		k.MultimemReduce(flagsMC.At(b), dsl.Sum, []dsl.Value{k.Const(dsl.U32, 1)}, dsl.Release(dsl.System))
		k.FenceProxyAlias()
		k.WaitUntil(flagsUC.At(b), dsl.GeWrap, target.Mul(ngpus), dsl.Acquire(dsl.System))
	})
	k.SyncThreads()
}

// NextLamportEpoch returns the Lamport all-reduce epoch after e: e+1, or 0 after
// LamportEpochWrap-1 (and for e >= LamportEpochWrap, which it never returns).
func NextLamportEpoch(e uint32) uint32 {
	if uint64(e)+1 >= LamportEpochWrap {
		return 0
	}
	return e + 1
}

// Graph variants: kernels that keep their barrier epoch on the device, so that a CUDA graph
// replaying them (which freezes every argument at capture) still advances it. They take the
// same parameters as the default kernel and ignore Epoch: block b reads its epoch from a
// word of this GPU's pad or flag set (EpochWordP2P + b of the pads, EpochWordMM + b of the
// flags), waits for epoch+1, epoch+2, ... and its thread 0 stores the last one back after
// its last barrier. A graph set must therefore hold CollMaxBlocks words more than PadWords
// or FlagWords, all zero initially, and must not be shared with the default kernels (whose
// epoch is the host's). See docs/collectives.md, "Collectives inside CUDA graphs".
const (
	// EpochWordP2P is the u32 index, in a GPU's pads, of block 0's epoch word (graph
	// variants of the p2p kernels).
	EpochWordP2P = PadWords
	// EpochWordMM is the u32 index, in a GPU's flags, of block 0's epoch word (graph
	// variants of the multimem kernels).
	EpochWordMM = FlagWords
	// GraphPadWords and GraphFlagWords size a graph pad or flag set: the slots and one
	// epoch word per block.
	GraphPadWords  = PadWords + CollMaxBlocks
	GraphFlagWords = FlagWords + CollMaxBlocks
)

// graphFamilies maps a collective family to its graph variant's; graphVariants holds the
// graph variants' families (IsGraphFamily runs on every collective call).
var (
	graphFamilies = map[Family]Family{}
	graphVariants = map[Family]bool{}
)

// GraphFamily returns the family of the graph variant (epoch on the device) of collective
// family f; ok is false when f has none.
func GraphFamily(f Family) (Family, bool) {
	g, ok := graphFamilies[f]
	return g, ok
}

// IsGraphFamily reports whether f is the family of a graph variant.
func IsGraphFamily(f Family) bool { return graphVariants[f] }

// registerGraph registers the graph variant of s (a collective Spec already registered):
// name and family with a "_graph" suffix, built by newGraph.
func registerGraph(s *Spec, newGraph func(k *dsl.Kernel, dt dsl.Type)) {
	g := *s
	fam := s.Family + "_graph"
	g.Name = string(fam)
	if s.Reduces {
		g.Name += "_" + OpName(s.Op)
	}
	g.Family = fam
	g.Doc = "graph variant (epoch kept on the device) of " + s.Name
	g.New = newGraph
	graphFamilies[s.Family] = fam
	graphVariants[fam] = true
	collFamilies[fam] = collFamilies[s.Family]
	register(&g)
}

// epochWords is where a kernel keeps its epoch: on the host (an argument) for the default
// kernels, on the device for the graph variants.
type epochWords struct {
	graph bool
	word  dsl.Ptr // this block's epoch word (graph variants)
}

// hostEpoch is the default kernels' epoch source.
var hostEpoch = epochWords{}

// deviceEpoch keeps block b's epoch in words[base + b].
func deviceEpoch(k *dsl.Kernel, words dsl.Ptr, base int) epochWords {
	return epochWords{graph: true, word: words.At(k.BlockIdx(dsl.X).Add(uint32(base)))}
}

// start returns the launch's base epoch: the argument arg, or this block's word (read by
// every thread before the first barrier's bar.sync, so before thread 0 rewrites it).
func (e epochWords) start(k *dsl.Kernel, arg dsl.Value) dsl.Value {
	if !e.graph {
		return arg
	}
	return k.Load(e.word)
}

// end stores last, the epoch of the launch's last barrier, into this block's word (thread
// 0, after every barrier): the next launch on the stream, a later kernel, reads it.
func (e epochWords) end(k *dsl.Kernel, last dsl.Value) {
	if !e.graph {
		return
	}
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() { k.Store(e.word, last) })
}
