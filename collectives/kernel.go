package collectives

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// fp8Families are the fp8 multimem kernels' families, by the family of the other types.
var fp8Families = map[kernels.Family]kernels.Family{
	kernels.FamilyMMAllReduce1Shot: kernels.FamilyMMAllReduce1ShotFP8,
	kernels.FamilyMMAllReduce2Shot: kernels.FamilyMMAllReduce2ShotFP8,
	kernels.FamilyMMReduceScatter:  kernels.FamilyMMReduceScatterFP8,
}

// reduction is the identity of family fam's kernel reducing dt with op (the fp8 family's for
// fp8 element types).
func reduction(fam kernels.Family, op Op, dt dsl.Type) kernels.ID {
	if f, ok := fp8Families[fam]; ok && isFP8(dt) {
		fam = f
	}
	return kernels.ID{Family: fam, Op: op, DType: dt}
}

// name is the registry name of the kernel id ("" when there is none).
func name(id kernels.ID) string {
	s, err := kernels.Find(id)
	if err != nil {
		return ""
	}
	return s.Name
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
