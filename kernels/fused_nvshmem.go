package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
)

// FamilyAGGemmNVSHMEM is ag_gemm over NVSHMEM's put_signal, for GPUs without peer access.
const FamilyAGGemmNVSHMEM Family = "ag_gemm_nvshmem"

// AGGemmNVSHMEMArgs are ag_gemm_nvshmem's parameters (A, B and Gathered of the input type).
// Gathered and Signals are symmetric (NVSHMEM) buffers, passed as this PE's addresses; the
// PE and the number of PEs come from NVSHMEM.
type AGGemmNVSHMEMArgs struct {
	A        dsl.Ptr   // this PE's M/n_pes x K rows of A
	B        dsl.Ptr   // K x N
	Gathered dsl.Ptr   // symmetric M x K buffer receiving the other PEs' rows
	Signals  dsl.Ptr   `kgen:"u64"` // symmetric, AGGemmSignalWords u64 signal words
	M, N, K  dsl.Value `kgen:"u32"`
	Epoch    dsl.Value `kgen:"u64"`
}

func init() {
	register(&Spec{
		Name:    string(FamilyAGGemmNVSHMEM),
		Doc:     "all-gather + GEMM without peer access: ag_gemm whose row tiles go to the peers by block-scope put_signal (signal set after the data) and whose consumers wait with signal_wait_until and return their consumed counts with signal_op add",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: nvshmemTargets,
		New:     func(k *dsl.Kernel, dt dsl.Type) { AGGemmNVSHMEM(k, DefaultFusedConfig(dt)) },
	})
}

// AGGemmNVSHMEM writes ag_gemm_nvshmem for cfg into k: ag_gemm's tiles and order, with
// NVSHMEM in place of peer pointers. The pusher of row tile i, for each peer p in turn, waits
// (signal_wait_until, thread 0) until p's consumed count for the tile reaches Epoch*tilesN,
// then puts the rows into p's Gathered with a block-scope put_signal that sets p's ready
// word to Epoch+1 after the data. A consumer waits for its ready word (signal_wait_until),
// runs the main loop from Gathered and adds 1 to the source's consumed word (signal_op)
// after a bar.sync and a fence.acq_rel.sys, so that its reads are done first. Signals are
// u64 and never wrap. Launch it collectively (every PE's grid at once).
func AGGemmNVSHMEM(k *dsl.Kernel, cfg GemmConfig) {
	if err := FusedCheck(cfg); err != nil {
		k.Errorf("ag_gemm_nvshmem: %v", err)
		return
	}
	if cfg.MinBlocks > 0 {
		k.LaunchBounds(cfg.Threads(), cfg.MinBlocks)
	}
	a := dsl.Params[AGGemmNVSHMEMArgs](k, cfg.In)
	o := dsl.Params[FusedOut](k, cfg.Out)
	if cfg.Aligned {
		k.Assume(a.N, 8)
		k.Assume(a.K, 8)
	}
	BM, BN := cfg.BM, cfg.BN
	tid := k.ThreadIdx(dsl.X)
	rank, ngpus := nvshmem.MyPE(k).To(dsl.U32), nvshmem.NPEs(k).To(dsl.U32)
	rows := a.M.Div(ngpus)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	slice, bm, bn := fusedTile(k, rank, ngpus, tilesM, tilesN, k.Const(dsl.U32, 0))
	ready := func(src dsl.Value) dsl.Ptr { return a.Signals.At(src.Mul(tilesM).Add(bm)) }
	consumed := func(dst dsl.Value) dsl.Ptr {
		return a.Signals.At(tilesM.Mul(uint32(CollMaxGPUs)).Add(dst.Mul(tilesM)).Add(bm))
	}
	local := slice.Eq(rank)
	target := a.Epoch.Add(uint64(1))

	k.If(local.And(bn.Eq(0)), func() {
		r0 := bm.Mul(uint32(BM))
		n := rowOff(k, cfg, rows.Sub(r0).Min(uint32(BM)), a.K)
		src := a.A.At(rowOff(k, cfg, r0, a.K))
		dst := a.Gathered.At(rowOff(k, cfg, rank.Mul(rows).Add(r0), a.K))
		k.For(k.Const(dsl.U32, 1), ngpus, k.Const(dsl.U32, 1), func(j dsl.Value) {
			p := rank.Add(j).Rem(ngpus) // the next PEs first
			k.If(tid.Eq(0), func() {
				nvshmem.SignalWaitUntil(k, consumed(p), nvshmem.CmpGE, a.Epoch.Mul(tilesN.To(dsl.U64)))
			})
			k.SyncThreads()
			nvshmem.PutSignal(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), ready(rank), target, nvshmem.SignalSet, p.To(dsl.I32))
		})
	})
	k.If(slice.Ne(rank), func() {
		k.If(tid.Eq(0), func() { nvshmem.SignalWaitUntil(k, ready(slice), nvshmem.CmpGE, target) })
		k.SyncThreads()
	})

	base := k.SelectPtr(local, a.A, a.Gathered.At(rowOff(k, cfg, slice.Mul(rows), a.K)))
	gA := k.MakeTensorDyn(base, []any{rows, a.K}, []any{a.K, 1})
	gB := k.MakeTensorDyn(a.B, []any{a.N, a.K}, []any{1, a.N})
	gD := k.MakeTensorDyn(o.D.At(rowOff(k, cfg, slice.Mul(rows), a.N)), []any{rows, a.N}, []any{a.N, 1}).LocalTile([]int{BM, BN}, bm.To(dsl.I32), bn.To(dsl.I32))
	main := gemmMainloop(k, cfg, gA, gB, gD, a.K, bm.To(dsl.I32), bn.To(dsl.I32), tid)
	k.If(slice.Ne(rank), func() {
		k.SyncThreads()
		k.If(tid.Eq(0), func() {
			k.Fence(dsl.FenceAcqRel, dsl.System)
			nvshmem.Signal(k, consumed(rank), uint64(1), nvshmem.SignalAdd, slice.To(dsl.I32))
		})
	})
	gemmEpilogue(k, cfg, main, gD, func() dsl.Tensor { return main.acc }, nil)
}
