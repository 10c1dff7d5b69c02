package collectives

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// family is a collective kernel family: one algorithm, built per reduction and element type.
type family int

// The kernel families.
const (
	mmAllReduce1Shot family = iota
	mmAllReduce2Shot
	mmAllReducePush
	mmReduceScatter
	mmAllGather
	mmBroadcast
	mmBarrier
	p2pAllReduce1Shot
	p2pAllReduce2Shot
	p2pAllReduceLamport
	p2pReduceScatter
	p2pAllGather
	p2pBroadcast
	p2pBarrier
)

// families describes each family: its registry name without the reduction, whether it
// synchronises through the multimem flags (else the peer-to-peer signal pads), whether it
// reduces (its kernels are built per reduction) and how many cross-GPU barriers a launch
// takes (the epoch advance).
var families = [...]struct {
	base     string
	multimem bool
	reduces  bool
	barriers uint32
}{
	mmAllReduce1Shot:    {"mm_allreduce_1shot", true, true, 2},
	mmAllReduce2Shot:    {"mm_allreduce_2shot", true, true, 2},
	mmAllReducePush:     {"mm_allreduce_push", true, true, 2},
	mmReduceScatter:     {"mm_reducescatter", true, true, 2},
	mmAllGather:         {"mm_allgather", true, false, 2},
	mmBroadcast:         {"mm_broadcast", true, false, 2},
	mmBarrier:           {"mm_barrier", true, false, 1},
	p2pAllReduce1Shot:   {"p2p_allreduce_1shot", false, true, 2},
	p2pAllReduce2Shot:   {"p2p_allreduce_2shot", false, true, 2},
	p2pAllReduceLamport: {"p2p_allreduce_lamport", false, true, 0},
	p2pReduceScatter:    {"p2p_reducescatter", false, true, 2},
	p2pAllGather:        {"p2p_allgather", false, false, 2},
	p2pBroadcast:        {"p2p_broadcast", false, false, 2},
	p2pBarrier:          {"p2p_barrier", false, false, 1},
}

// kernel is a collective kernel's typed identity: family, reduction (for the reducing
// families) and element type.
type kernel struct {
	fam family
	op  Op
	dt  dsl.Type
}

// name is the kernel's registry name: the family's base, "_fp8" for the fp8 multimem
// reductions (kernels of their own: their targets differ), and the reduction.
func (k kernel) name() string {
	f := families[k.fam]
	if !f.reduces {
		return f.base
	}
	if f.multimem && isFP8(k.dt) {
		return f.base + "_fp8_" + kernels.OpName(k.op)
	}
	return f.base + "_" + kernels.OpName(k.op)
}

// The kernels' arguments, one struct per signature: field InMC fills parameter in_mc (see
// jit.Function.LaunchArgs). Pointers are jit.AnyPtr (the element type is the caller's,
// checked at launch against what the kernel declared); tables of peer addresses point to
// u64.

type p2pOneShotArgs struct {
	Ins, Out, Pads        jit.AnyPtr
	Rank, NGPUs, N, Epoch uint32
}

type p2pTwoShotArgs struct {
	Ins, Outs, Pads       jit.AnyPtr
	Rank, NGPUs, N, Epoch uint32
}

type p2pLamportArgs struct {
	In, Out, Lbufs                     jit.AnyPtr
	Cap, Nclear, Rank, NGPUs, N, Epoch uint32
}

type p2pReduceScatterArgs struct {
	In, Out, Scratch, Pads jit.AnyPtr
	Rank, NGPUs, N, Epoch  uint32
}

type p2pAllGatherArgs struct {
	In, Outs, Pads        jit.AnyPtr
	Rank, NGPUs, N, Epoch uint32
}

type p2pBroadcastArgs struct {
	In, Outs, Pads              jit.AnyPtr
	Root, Rank, NGPUs, N, Epoch uint32
}

type p2pBarrierArgs struct {
	Pads               jit.AnyPtr
	Rank, NGPUs, Epoch uint32
}

type mmOneShotArgs struct {
	InMC, Out, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch       uint32
}

type mmTwoShotArgs struct {
	InMC, OutMC, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch         uint32
}

type mmPushArgs struct {
	In, Out, ScratchMC, ScratchUC, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch                           uint32
}

type mmReduceScatterArgs struct {
	InMC, Out, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch       uint32
}

type mmAllGatherArgs struct {
	In, OutMC, FlagsMC, FlagsUC jit.AnyPtr
	Rank, NGPUs, N, Epoch       uint32
}

type mmBroadcastArgs struct {
	In, OutMC, FlagsMC, FlagsUC jit.AnyPtr
	Root, Rank, NGPUs, N, Epoch uint32
}

type mmBarrierArgs struct {
	FlagsMC, FlagsUC jit.AnyPtr
	NGPUs, Epoch     uint32
}
