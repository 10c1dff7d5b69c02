package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// FamilyGemmARMC is gemm_ar over NVLink SHARP on the mma.sync path: each GPU keeps its f32
// partials in its own scratch, owners multimem.ld_reduce them and multimem.st the sums.
const FamilyGemmARMC Family = "gemm_ar_mc"

// GemmARMCArgs are gemm_ar_mc's parameters (A and B of the input type): this GPU's f32
// scratch (M x N partials) and its multicast address, every GPU's signal slots
// (GemmARSignalWords) and their multicast address.
type GemmARMCArgs struct {
	A                           dsl.Ptr       // M x K: this GPU's K slice of every row
	B                           dsl.Ptr       // K x N: this GPU's K slice of B
	Scratch, ScratchMC          dsl.Ptr       `kgen:"f32"`
	Signals                     dsl.PeerTable `kgen:"u32"`
	SignalsMC                   dsl.Ptr       `kgen:"u32"`
	Rank, NGPUs, M, N, K, Epoch dsl.Value     `kgen:"u32"`
}

func init() {
	register(&Spec{
		Name:    string(FamilyGemmARMC),
		Doc:     "GEMM + all-reduce over NVLink SHARP (aligned: N, K multiples of 8): each GPU keeps its f32 partial of every tile in its own scratch (release signal to the owner); the owner multimem.ld_reduces the partials and multimem.st's the sum into every GPU's D (multimem.red.release done counters); sm_80 mma.sync main loop, multimem needs sm_90",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: mmTargets,
		Golden:  []ptx.Target{ptx.SM90},
		New: func(k *dsl.Kernel, dt dsl.Type) {
			cfg := DefaultFusedConfig(dt)
			cfg.Aligned = true
			GemmARMC(k, cfg)
		},
	})
}

// GemmARMC writes gemm_ar_mc for cfg (Aligned: N and K multiples of 8) into k: the sum over
// GPUs of A_g*B_g into every GPU's D through multicast addresses, blocks in gemm_rs's order
// (FusedGrid, owners rank+1, ..., this GPU's last). Block 0 first sets the arrived slots as
// gemm_ar does. A block of another GPU's tile waits for the free slot, stores its f32
// partial into this GPU's scratch at the tile's place (the gemm epilogue), fences the alias
// proxy and sets the owner's ready slot (bar.sync, st.release.sys). An owner's block stores
// its partial the same way, fences, waits for every GPU's ready and arrived slots (acquire,
// bar.sync), fences again, multimem.ld_reduces each 4-element f32 vector of the tile
// through the scratch's multicast address and multimem.st's it (in the output type) into
// D's multicast address; then bar.sync, free slots set (release), thread 0 adds one to the
// tile's done counter on every GPU (multimem.red.release), fences and waits until every
// owner has added its one. On one GPU the tile goes to D with no signal. Targets sm_90 or
// later (multimem).
func GemmARMC(k *dsl.Kernel, cfg GemmConfig) { gemmARMC(k, cfg, ordered) }

// GemmARMCUnordered is GemmARMC with relaxed instead of release signals and without the
// writers' alias fence: a deliberately broken variant for the weak-memory tests.
func GemmARMCUnordered(k *dsl.Kernel, cfg GemmConfig) { gemmARMC(k, cfg, unordered) }

func gemmARMC(k *dsl.Kernel, cfg GemmConfig, ord barrierOrder) {
	if err := FusedCheck(cfg); err != nil {
		k.Errorf("gemm_ar_mc: %v", err)
		return
	}
	if !cfg.Aligned {
		k.Errorf("gemm_ar_mc: needs the aligned configuration (N and K multiples of 8: multimem moves f16/bf16 in pairs)")
		return
	}
	if k.Target().SM() < 90 {
		k.Errorf("gemm_ar_mc: multimem needs sm_90 or later; the kernel targets %s", k.Target())
		return
	}
	if cfg.MinBlocks > 0 {
		k.LaunchBounds(cfg.Threads(), cfg.MinBlocks)
	}
	a := dsl.Params[GemmARMCArgs](k, cfg.In)
	o := dsl.Params[FusedOutMC](k, cfg.Out)
	k.Assume(a.N, 8)
	k.Assume(a.K, 8)
	BM, BN := cfg.BM, cfg.BN
	sig := NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	sig.ord = ord
	tid := k.ThreadIdx(dsl.X)
	rows := a.M.Div(a.NGPUs)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	owner, bm, bn := fusedTile(k, a.Rank, a.NGPUs, tilesM, tilesN, k.Const(dsl.U32, 1))
	tile := bn.Mul(tilesM).Add(bm)
	tiles := tilesM.Mul(tilesN)
	slots := tiles.Mul(uint32(CollMaxGPUs))
	ready := func(src dsl.Value) dsl.Value { return tile.Mul(uint32(CollMaxGPUs)).Add(src) }
	free := func(o dsl.Value) dsl.Value { return slots.Add(o.Mul(tiles)).Add(tile) }
	done := slots.Mul(2).Add(tile)
	arrived := func(g dsl.Value) dsl.Value { return slots.Mul(3).Add(g) }
	k.If(k.BlockIdx(dsl.X).Eq(0), func() { sig.SetPeers(a.NGPUs, arrived(a.Rank), sig.Target()) })

	base := rowOff(k, cfg, owner.Mul(rows), a.N) // the owner's rows of the scratch and of D
	gA := k.MakeTensorDyn(a.A.At(rowOff(k, cfg, owner.Mul(rows), a.K)), []any{rows, a.K}, []any{a.K, 1})
	gB := k.MakeTensorDyn(a.B, []any{a.N, a.K}, []any{1, a.N})
	gP := k.MakeTensorDyn(a.Scratch.At(base), []any{rows, a.N}, []any{a.N, 1}).LocalTile([]int{BM, BN}, bm.To(dsl.I32), bn.To(dsl.I32))
	main := gemmMainloop(k, cfg, gA, gB, gP, a.K, bm.To(dsl.I32), bn.To(dsl.I32), tid)
	partial := cfg
	partial.Out = dsl.F32
	k.If(a.NGPUs.Eq(1), func() {
		gD := k.MakeTensorDyn(o.D, []any{rows, a.N}, []any{a.N, 1}).LocalTile([]int{BM, BN}, bm.To(dsl.I32), bn.To(dsl.I32))
		gemmEpilogue(k, cfg, main, gD, func() dsl.Tensor { return main.acc }, nil)
	}).Else(func() {
		k.If(owner.Ne(a.Rank), func() {
			sig.Wait(free(owner), a.Epoch)
			gemmEpilogue(k, partial, main, gP, func() dsl.Tensor { return main.acc }, nil)
			// The owner reads the partial through the multicast alias. (The broken variant
			// drops this fence too: the emulator publishes stores at any fence.)
			if ord == ordered {
				k.FenceProxyAlias()
			}
			sig.Set(owner, ready(a.Rank), sig.Target())
		}).Else(func() {
			gemmEpilogue(k, partial, main, gP, func() dsl.Tensor { return main.acc }, nil)
			k.FenceProxyAlias()
			sig.WaitPeers(a.NGPUs, ready, sig.Target())
			sig.WaitPeers(a.NGPUs, arrived, sig.Target())
			k.FenceProxyAlias()
			const vec = 4
			cols := uint32(BN / vec)
			k.For(tid, uint32(BM*BN/vec), uint32(cfg.Threads()), func(i dsl.Value) {
				lr, lc := i.Div(cols), i.Rem(cols).Mul(uint32(vec))
				r, c := bm.Mul(uint32(BM)).Add(lr), bn.Mul(uint32(BN)).Add(lc)
				k.If(r.Lt(rows).And(c.Lt(a.N)), func() {
					at := k.Assume(base.Add(rowOff(k, cfg, r, a.N)).Add(c), vec)
					sum := mmLoadReduce(k, a.ScratchMC, dsl.F32, dsl.Sum, at, vec)
					mmStore(k, o.DMC, cfg.Out, at, sum.To(cfg.Out))
				})
			})
			sig.SetPeers(a.NGPUs, free(a.Rank), sig.Target())
			k.If(tid.Eq(0), func() {
				order := dsl.Release(dsl.System)
				if ord != ordered {
					order = dsl.Relaxed(dsl.System)
				}
				k.MultimemReduce(a.SignalsMC.At(done), dsl.Sum, []dsl.Value{k.Const(dsl.U32, 1)}, order)
				k.FenceProxyAlias()
				sig.waitFor(done, sig.Target().Mul(a.NGPUs))
			})
		})
	})
}
