package launch

import "github.com/kgen-dev/kgen/jit"

// Host twins of the collective kernels' parameter structs (kernels.P2POneShotArgs, ...).
// A collective's element type is chosen at run time, so its pointers are jit.AnyPtr: the
// launch checks each one's element type against what the kernel declared (load the module
// with jit.Source.Params) and names the field when they differ. Tables of peer addresses
// (dsl.PeerTable) point to u64; the barrier pads and flags to u32.

// P2POneShot launches p2p_allreduce_1shot.
type P2POneShot struct {
	Ins, Out, Pads        jit.AnyPtr
	Rank, NGPUs, N, Epoch uint32
}

// P2PTwoShot launches p2p_allreduce_2shot.
type P2PTwoShot struct {
	Ins, Outs, Pads       jit.AnyPtr
	Rank, NGPUs, N, Epoch uint32
}

// P2PLamport launches p2p_allreduce_lamport.
type P2PLamport struct {
	In, Out, Lbufs                     jit.AnyPtr
	Cap, Nclear, Rank, NGPUs, N, Epoch uint32
}

// P2PReduceScatter launches p2p_reducescatter.
type P2PReduceScatter struct {
	In, Out, Scratch, Pads jit.AnyPtr
	Rank, NGPUs, N, Epoch  uint32
}

// P2PAllGather launches p2p_allgather.
type P2PAllGather struct {
	In, Outs, Pads        jit.AnyPtr
	Rank, NGPUs, N, Epoch uint32
}

// P2PBroadcast launches p2p_broadcast.
type P2PBroadcast struct {
	In, Outs, Pads              jit.AnyPtr
	Root, Rank, NGPUs, N, Epoch uint32
}

// P2PBarrier launches p2p_barrier.
type P2PBarrier struct {
	Pads               jit.AnyPtr
	Rank, NGPUs, Epoch uint32
}

// MMOneShot launches mm_allreduce_1shot (and _fp8).
type MMOneShot struct {
	InMC, Out, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch       uint32
}

// MMTwoShot launches mm_allreduce_2shot (and _fp8).
type MMTwoShot struct {
	InMC, OutMC, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch         uint32
}

// MMPush launches mm_allreduce_push.
type MMPush struct {
	In, Out, ScratchMC, ScratchUC, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch                           uint32
}

// MMReduceScatter launches mm_reducescatter (and _fp8).
type MMReduceScatter struct {
	InMC, Out, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch       uint32
}

// MMAllGather launches mm_allgather.
type MMAllGather struct {
	In, OutMC, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch       uint32
}

// MMBroadcast launches mm_broadcast.
type MMBroadcast struct {
	In, OutMC, FlagsMC, FlagsUC jit.AnyPtr
	Root, Rank, NGPUs, N, Epoch uint32
}

// MMBarrier launches mm_barrier.
type MMBarrier struct {
	FlagsMC, FlagsUC jit.AnyPtr
	NGPUs, Epoch     uint32
}

// NVSHMEMAllGatherRing launches nvshmem_allgather_ring.
type NVSHMEMAllGatherRing struct {
	Dst, Src, Sig jit.AnyPtr
	N             uint32
	Epoch         uint64
}

// NVSHMEMReduceScatterRing launches nvshmem_reducescatter_ring (Scratch points to b32).
type NVSHMEMReduceScatterRing struct {
	Out, In, Scratch, Sig jit.AnyPtr
	M                     uint32
	Epoch                 uint64
}

// NVSHMEMRingSignal launches nvshmem_ring_signal.
type NVSHMEMRingSignal struct {
	Dst, Src, Sig jit.AnyPtr
	N             uint32
	Epoch         uint64
}

// NVSHMEMCopy launches nvshmem_alltoall_put and nvshmem_ring_get.
type NVSHMEMCopy struct {
	Dst, Src jit.AnyPtr
	N        uint32
}
