package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/ptx"
)

// Kernels that move data between PEs with NVSHMEM's device API. Each runs as one block per
// PE (NVSHMEM's block-scope operations are called once per PE), launched collectively on
// every PE (nvshmemx_collective_launch, or emu's collective Launch); their buffers are
// symmetric. Linking them needs NVSHMEM's device library (nvshmem/devlib).

// NVSHMEMThreads is the block size of the NVSHMEM kernels.
const NVSHMEMThreads = 128

// nvshmemDTypes are the element types the NVSHMEM kernels are built for.
var nvshmemDTypes = []dsl.Type{dsl.F32, dsl.F16, dsl.BF16, dsl.I32}

// nvshmemTargets: NVSHMEM's device library needs sm_70 or newer; kgen's targets all are.
var nvshmemTargets = []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a}

func init() {
	register(&Spec{
		Name:    "nvshmem_ring_signal",
		Doc:     "ring exchange: dst on PE me+1 = src of PE me, by put_signal_nbi (block) and signal_wait_until",
		DTypes:  nvshmemDTypes,
		Targets: nvshmemTargets,
		New:     NVSHMEMRingSignal,
	})
	register(&Spec{
		Name:    "nvshmem_alltoall_put",
		Doc:     "all-to-all: block j of src on PE i lands in block i of dst on PE j, by put_nbi (block) and barrier_all",
		DTypes:  nvshmemDTypes,
		Targets: nvshmemTargets,
		New:     NVSHMEMAlltoallPut,
	})
	register(&Spec{
		Name:    "nvshmem_ring_get",
		Doc:     "get ring: dst on PE me = src of PE me-1, by get (block)",
		DTypes:  nvshmemDTypes,
		Targets: nvshmemTargets,
		New:     NVSHMEMRingGet,
	})
}

// NVSHMEMRingSignalArgs are nvshmem_ring_signal's parameters (symmetric buffers and signal).
type NVSHMEMRingSignalArgs struct {
	Dst, Src dsl.Ptr   // of dt
	Sig      dsl.Ptr   `kgen:"u64"`
	N        dsl.Value `kgen:"u32"`
	Epoch    dsl.Value `kgen:"u64"`
}

// NVSHMEMRingSignal sends n elements of src to dst on the next PE of the ring (me+1 mod
// n_pes) with one block-scope put_signal_nbi that adds 1 to the signal word sig there, then
// waits until its own sig reaches epoch (the number of exchanges so far, counting this one:
// launch it with epoch 1, 2, ... without resetting sig) and completes its send with quiet.
func NVSHMEMRingSignal(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[NVSHMEMRingSignalArgs](k, dt)
	dst, src, sig, n, epoch := a.Dst, a.Src, a.Sig, a.N, a.Epoch
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	next := me.Add(1).Rem(np)
	nvshmem.PutSignalNBI(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), sig, 1, nvshmem.SignalAdd, next)
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		nvshmem.SignalWaitUntil(k, sig, nvshmem.CmpGE, epoch)
		nvshmem.Quiet(k)
	})
	k.SyncThreads()
}

// NVSHMEMCopyArgs are the parameters of nvshmem_alltoall_put (symmetric buffers of n_pes*n
// elements) and nvshmem_ring_get (n elements, src symmetric).
type NVSHMEMCopyArgs struct {
	Dst, Src dsl.Ptr   // of dt
	N        dsl.Value `kgen:"u32"`
}

// NVSHMEMAlltoallPut sends block j (n elements) of src to block me of dst on PE j, for
// every PE j (itself included), with block-scope put_nbi, then completes and synchronises
// with a block-scope barrier_all.
func NVSHMEMAlltoallPut(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[NVSHMEMCopyArgs](k, dt)
	dst, src, n := a.Dst, a.Src, a.N
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	mine := dst.At(me.To(dsl.U32).Mul(n))
	k.For(0, np, 1, func(i dsl.Value) {
		j := me.Add(i).Rem(np) // start with the next PE, so that PEs do not all target PE 0 first
		nvshmem.PutNBI(k, nvshmem.Block, nvshmem.SpanOf(mine, n), nvshmem.SpanOf(src.At(j.To(dsl.U32).Mul(n)), n), j)
	})
	nvshmem.BarrierAll(k, nvshmem.Block)
}

// NVSHMEMRingGet reads n elements of src on the previous PE of the ring (me-1 mod n_pes)
// into the local dst with one block-scope get.
func NVSHMEMRingGet(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[NVSHMEMCopyArgs](k, dt)
	dst, src, n := a.Dst, a.Src, a.N
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	prev := me.Add(np).Sub(1).Rem(np)
	nvshmem.Get(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), prev)
}
