package kernels

import (
	"fmt"
	"math"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// GEMMs fused with their communication, on the sm_80 path (mma.sync, cp.async) and peer
// pointers: ag_gemm (all-gather of A, then D = A*B) and gemm_rs (D = A*B over a K slice per
// GPU, reduce-scattered by rows). Both are the gemm's main loop and epilogue (gemm.go) with
// tile signals (fused_sync.go) around them; docs/collectives.md gives the protocols and why
// they are correct. A and B are row-major, M x K and K x N; every GPU launches the same
// grid (FusedGrid) of cfg.Threads() threads with cfg.SharedBytes() (FusedSharedBytes) of
// dynamic shared memory at once.

// The fused families.
const (
	FamilyAGGemm Family = "ag_gemm"
	FamilyGemmRS Family = "gemm_rs"
	FamilyGemmAR Family = "gemm_ar"
)

// AGGemmArgs are ag_gemm's parameters (A, B and Gathered of the input type).
type AGGemmArgs struct {
	A                           dsl.Ptr       // this GPU's M/NGPUs x K rows of A
	B                           dsl.Ptr       // K x N
	Gathered                    dsl.PeerTable // every GPU's M x K buffer receiving the other GPUs' rows
	Signals                     dsl.PeerTable `kgen:"u32"` // every GPU's AGGemmSignalWords signal slots
	Rank, NGPUs, M, N, K, Epoch dsl.Value     `kgen:"u32"`
}

// GemmRSArgs are gemm_rs's parameters (A and B of the input type).
type GemmRSArgs struct {
	A                           dsl.Ptr       // M x K: this GPU's K slice of every row
	B                           dsl.Ptr       // K x N: this GPU's K slice of B
	Scratch                     dsl.PeerTable `kgen:"f32"` // every GPU's NGPUs x M/NGPUs x N f32 partials
	Signals                     dsl.PeerTable `kgen:"u32"` // every GPU's GemmRSSignalWords signal slots
	Rank, NGPUs, M, N, K, Epoch dsl.Value     `kgen:"u32"`
}

// FusedOutTable is gemm_ar's output parameter (the output type), after GemmRSArgs: every
// GPU's M x N D, each written by the owners of its row slices.
type FusedOutTable struct {
	D dsl.PeerTable
}

// FusedOut is the fused kernels' output parameter (the output type), after their arguments:
// ag_gemm's M x N D, gemm_rs's M/NGPUs x N rows owned by this GPU.
type FusedOut struct {
	D dsl.Ptr
}

// DefaultFusedConfig is the registry's configuration of the fused kernels: the gemm's
// (DefaultGemmConfig), out = in.
func DefaultFusedConfig(dt dsl.Type) GemmConfig { return DefaultGemmConfig(dt) }

// FusedName is the entry name of fused family f built with cfg: the gemm's name with f in
// place of "gemm".
func FusedName(f Family, cfg GemmConfig) string {
	return string(f) + strings.TrimPrefix(cfg.Name(), "gemm")
}

// FusedCheck reports a configuration the fused kernels cannot build: the gemm's limits, A
// and B row-major, and (gemm_rs) an f32 epilogue into the scratch.
func FusedCheck(cfg GemmConfig) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.A != RowMajor || cfg.B != RowMajor {
		return fmt.Errorf("fused gemm: A %s-major and B %s-major (want both row-major)", cfg.A, cfg.B)
	}
	partial := cfg
	partial.Out = dsl.F32
	return partial.Check()
}

// FusedCheckShape reports an M x N x K problem over g GPUs that the fused GEMMs (ag_gemm,
// gemm_rs, gemm_ar, gemm_ar_mc and their sm_90a forms) cannot run: every extent positive,
// and M*max(N, K)*g below 2^31, since their element offsets into A, the gathered A, D and
// the g-slot scratch are 32-bit (signed in the mma.sync kernels).
func FusedCheckShape(m, n, k, g int) error {
	switch {
	case m <= 0 || n <= 0 || k <= 0 || g <= 0:
		return fmt.Errorf("fused gemm: shape %dx%dx%d over %d GPUs: every extent and the GPU count must be positive", m, n, k, g)
	case m > MaxGemmExtent || n > MaxGemmExtent || k > MaxGemmExtent || satMul(m, max(n, k), g) >= 1<<31:
		return fmt.Errorf("fused gemm: shape %dx%dx%d over %d GPUs: M*max(N,K)*GPUs must be below 2^31 (the fused kernels' element offsets are 32-bit signed)", m, n, k, g)
	}
	return nil
}

// fusedTiles returns the tile counts of one GPU's M/NGPUs x N slice.
func fusedTiles(cfg GemmConfig, rows, n int) (tilesM, tilesN int) {
	return ceilDiv(rows, cfg.BM), ceilDiv(n, cfg.BN)
}

// FusedGrid returns the blocks of a fused launch for an M x N output over ngpus GPUs: the
// tiles of every GPU's M/ngpus-row slice.
// Like the signal-word counts below, it saturates at math.MaxInt and is 0 for a negative
// extent (FusedCheckShape refuses both): never a wrapped or negative count.
func FusedGrid(cfg GemmConfig, m, n, ngpus int) int {
	tm, tn := fusedTiles(cfg, perGPU(m, ngpus), n)
	return satInt(ngpus, tm, tn)
}

// AGGemmSignalWords is the number of u32 signal slots ag_gemm needs on every GPU: a ready
// slot per (source GPU, row tile) and a consumed counter per (consumer GPU, row tile).
func AGGemmSignalWords(cfg GemmConfig, m, ngpus int) int {
	return satInt(2, CollMaxGPUs, ceilDiv(perGPU(m, ngpus), cfg.BM))
}

// GemmRSSignalWords is the number of u32 signal slots gemm_rs needs on every GPU: a ready
// slot per (own tile, source GPU) and a free slot per (owner GPU, tile).
func GemmRSSignalWords(cfg GemmConfig, m, n, ngpus int) int {
	tm, tn := fusedTiles(cfg, perGPU(m, ngpus), n)
	return satInt(2, CollMaxGPUs, tm, tn)
}

// GemmARSignalWords is the number of u32 signal slots gemm_ar needs on every GPU:
// gemm_rs's, a done slot per (owner GPU, tile) and an arrived slot per GPU.
func GemmARSignalWords(cfg GemmConfig, m, n, ngpus int) int {
	tm, tn := fusedTiles(cfg, perGPU(m, ngpus), n)
	return min(satInt(3, CollMaxGPUs, tm, tn), math.MaxInt-CollMaxGPUs) + CollMaxGPUs
}

func init() {
	register(&Spec{
		Name:    string(FamilyGemmAR),
		Doc:     "GEMM + all-reduce: gemm_rs whose owners store each summed tile into every GPU's D (peer stores, release done signals) and wait for every other owner's same tile; sm_80 mma.sync main loop",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmAR(k, DefaultFusedConfig(dt)) },
	})
	register(&Spec{
		Name:    string(FamilyAGGemm),
		Doc:     "all-gather + GEMM: each GPU pushes its M/N rows of A to every peer tile by tile (release signals) while computing its own tiles, then consumes each peer's row tile as its signal arrives; sm_80 mma.sync main loop",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { AGGemm(k, DefaultFusedConfig(dt)) },
	})
	register(&Spec{
		Name:    string(FamilyGemmRS),
		Doc:     "GEMM + reduce-scatter: each GPU's partial of every output tile goes to the owner's scratch (peer stores, release signal); the owner sums the partials in rank order; sm_80 mma.sync main loop",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmRS(k, DefaultFusedConfig(dt)) },
	})
}

// rowOff returns the element offset of row r of a matrix with ld columns, declared a
// multiple of 8 when cfg is aligned (ld is then a multiple of 8), so that vector accesses
// from it stay 16-byte aligned.
func rowOff(k *dsl.Kernel, cfg GemmConfig, r, ld dsl.Value) dsl.Value {
	off := r.Mul(ld)
	if cfg.Aligned {
		k.Assume(off, 8)
	}
	return off
}

// fusedTile maps the block index to (slice, bm, bn): blocks come in ngpus runs of tilesM x
// tilesN tiles, run j covering the rows of slice (rank + first + j) mod ngpus, each run in
// the plain gemm's grouped order (gemmBlock: 8 tile rows per column, for L2 reuse), the same
// on every GPU.
func fusedTile(k *dsl.Kernel, rank, ngpus, tilesM, tilesN, first dsl.Value) (slice, bm, bn dsl.Value) {
	b := k.BlockIdx(dsl.X)
	per := tilesM.Mul(tilesN)
	j := b.Div(per)
	slice = rank.Add(first).Add(j).Rem(ngpus)
	bm, bn = groupedTile(b.Rem(per), tilesM, tilesN, dsl.U32)
	return slice, bm, bn
}

// AGGemm writes ag_gemm for cfg into k: D (M x N) = A (M x K, rows gathered from every GPU)
// times B (K x N). GPU r holds rows [r*M/NGPUs, (r+1)*M/NGPUs) of A. Blocks cover every
// slice's tiles, this GPU's slice first. A block on row tile i of its own slice with bn = 0
// first pushes rows tile i to every peer's Gathered (after the peer's consumed counter says
// it is done with the previous launch's copy) and sets the peers' ready slot with a
// release; a block on another GPU's slice waits for that slot (acquire), runs the main loop
// from Gathered and adds one to the source's consumed counter (release). On one GPU there
// is no pusher: the plain gemm's work. M must be a multiple of NGPUs, N and K multiples of 8
// when cfg.Aligned.
func AGGemm(k *dsl.Kernel, cfg GemmConfig) { agGemm(k, cfg, ordered) }

// AGGemmUnordered is AGGemm with relaxed instead of release signals: a deliberately broken
// variant for the weak-memory tests.
func AGGemmUnordered(k *dsl.Kernel, cfg GemmConfig) { agGemm(k, cfg, unordered) }

func agGemm(k *dsl.Kernel, cfg GemmConfig, ord barrierOrder) {
	if err := FusedCheck(cfg); err != nil {
		k.Errorf("ag_gemm: %v", err)
		return
	}
	if cfg.MinBlocks > 0 {
		k.LaunchBounds(cfg.Threads(), cfg.MinBlocks)
	}
	a := dsl.Params[AGGemmArgs](k, cfg.In)
	o := dsl.Params[FusedOut](k, cfg.Out)
	if cfg.Aligned {
		k.Assume(a.N, 8)
		k.Assume(a.K, 8)
	}
	BM, BN := cfg.BM, cfg.BN
	sig := NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	sig.ord = ord
	tid := k.ThreadIdx(dsl.X)
	rows := a.M.Div(a.NGPUs)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	slice, bm, bn := fusedTile(k, a.Rank, a.NGPUs, tilesM, tilesN, k.Const(dsl.U32, 0))
	ready := func(src dsl.Value) dsl.Value { return src.Mul(tilesM).Add(bm) }
	consumed := func(dst dsl.Value) dsl.Value { return tilesM.Mul(uint32(CollMaxGPUs)).Add(dst.Mul(tilesM)).Add(bm) }
	local := slice.Eq(a.Rank)

	// The pusher of row tile bm: wait until every peer consumed the previous launch's copy
	// (each of its tilesN blocks on the tile added one), push, signal. One GPU has no peers:
	// no pusher (its bar.syncs would be the only cost over the plain gemm).
	k.If(local.And(bn.Eq(0)).And(a.NGPUs.Gt(1)), func() {
		sig.WaitPeers(a.NGPUs, consumed, a.Epoch.Mul(tilesN))
		r0 := bm.Mul(uint32(BM))
		n := rowOff(k, cfg, rows.Sub(r0).Min(uint32(BM)), a.K)
		src := a.A.At(rowOff(k, cfg, r0, a.K))
		vec := 1
		if cfg.Aligned {
			vec = 16 / cfg.In.Bytes()
		}
		k.For(k.Const(dsl.U32, 0), a.NGPUs, k.Const(dsl.U32, 1), func(p dsl.Value) {
			k.If(p.Ne(a.Rank), func() {
				dst := a.Gathered.Peer(p).At(rowOff(k, cfg, a.Rank.Mul(rows).Add(r0), a.K))
				k.For(tid.Mul(uint32(vec)), n, uint32(cfg.Threads()*vec), func(i dsl.Value) {
					storeN(k, dst, i, loadN(k, src, i, vec))
				})
			})
		})
		sig.SetPeers(a.NGPUs, ready(a.Rank), sig.Target())
	})
	// A peer's row tile: wait for its push.
	k.If(slice.Ne(a.Rank), func() { sig.Wait(ready(slice), sig.Target()) })

	base := k.SelectPtr(local, a.A, a.Gathered.Peer(a.Rank).At(rowOff(k, cfg, slice.Mul(rows), a.K)))
	gA := k.MakeTensorDyn(base, []any{rows, a.K}, []any{a.K, 1})
	gB := k.MakeTensorDyn(a.B, []any{a.N, a.K}, []any{1, a.N})
	gD := k.MakeTensorDyn(o.D.At(rowOff(k, cfg, slice.Mul(rows), a.N)), []any{rows, a.N}, []any{a.N, 1}).LocalTile([]int{BM, BN}, bm.To(dsl.I32), bn.To(dsl.I32))
	main := gemmMainloop(k, cfg, gA, gB, gD, a.K, bm.To(dsl.I32), bn.To(dsl.I32), tid)
	// Every thread's reads of the peer's tile are done (the drains): release it.
	k.If(slice.Ne(a.Rank), func() { sig.Add(slice, consumed(a.Rank), uint32(1)) })
	gemmEpilogue(k, cfg, main, gD, func() dsl.Tensor { return main.acc }, nil)
}

// GemmRS writes gemm_rs for cfg into k: GPU r computes the partial A_r*B_r (its K slice) of
// every output tile and stores it (f32) into slot r of the tile's owner's Scratch, the owner
// of rows [o*M/NGPUs, (o+1)*M/NGPUs) being GPU o, then sets the owner's ready slot with a
// release; the owner's block stages its own partial in shared memory, waits for every
// peer's slot (acquire), sums the partials in rank order into D (its rows) and sets every
// source's free slot (release), which the next launch's sources wait for before storing. Blocks take the owners
// in the order rank+1, rank+2, ..., so each GPU's own tiles come last. On one GPU (a runtime
// branch; gemm_ar too) the tile goes to D through the plain gemm's epilogue, no signal or
// scratch touched. M must be a multiple of NGPUs, N and K multiples of 8 when cfg.Aligned.
func GemmRS(k *dsl.Kernel, cfg GemmConfig) { gemmRS(k, cfg, ordered, false) }

// GemmRSUnordered is GemmRS with relaxed instead of release signals: a deliberately broken
// variant for the weak-memory tests.
func GemmRSUnordered(k *dsl.Kernel, cfg GemmConfig) { gemmRS(k, cfg, unordered, false) }

// GemmAR writes gemm_ar for cfg into k: gemm_rs, then every GPU's D (M x N, a peer table)
// receives the whole sum. Block 0 of each GPU first sets its arrived slot on every peer
// (release): the GPU has started this launch, so what ran before it on that GPU is done
// with its D. An owner's block, after summing its tile, waits for every GPU's arrived slot
// (acquire), stores the tile into every GPU's D, sets its done slot on every peer (release)
// and waits for the done slots of tile t of every other owner (acquire), so that when a GPU's
// kernel ends its whole D has landed.
func GemmAR(k *dsl.Kernel, cfg GemmConfig) { gemmRS(k, cfg, ordered, true) }

// GemmARUnordered is GemmAR with relaxed instead of release signals: a deliberately broken
// variant for the weak-memory tests.
func GemmARUnordered(k *dsl.Kernel, cfg GemmConfig) { gemmRS(k, cfg, unordered, true) }

func gemmRS(k *dsl.Kernel, cfg GemmConfig, ord barrierOrder, allReduce bool) {
	what := "gemm_rs"
	if allReduce {
		what = "gemm_ar"
	}
	if err := FusedCheck(cfg); err != nil {
		k.Errorf("%s: %v", what, err)
		return
	}
	if cfg.MinBlocks > 0 {
		k.LaunchBounds(cfg.Threads(), cfg.MinBlocks)
	}
	a := dsl.Params[GemmRSArgs](k, cfg.In)
	var out FusedOut
	var outs FusedOutTable
	if allReduce {
		outs = dsl.Params[FusedOutTable](k, cfg.Out)
	} else {
		out = dsl.Params[FusedOut](k, cfg.Out)
	}
	if cfg.Aligned {
		k.Assume(a.N, 8)
		k.Assume(a.K, 8)
	}
	BM, BN := cfg.BM, cfg.BN
	sig := NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	sig.ord = ord
	tid := k.ThreadIdx(dsl.X)
	rows := a.M.Div(a.NGPUs)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	owner, bm, bn := fusedTile(k, a.Rank, a.NGPUs, tilesM, tilesN, k.Const(dsl.U32, 1))
	tile := bn.Mul(tilesM).Add(bm)
	ready := func(src dsl.Value) dsl.Value { return tile.Mul(uint32(CollMaxGPUs)).Add(src) }
	free := tilesM.Mul(tilesN).Mul(uint32(CollMaxGPUs)).Add(owner.Mul(tilesM).Mul(tilesN)).Add(tile)
	part := func(p, src dsl.Value) dsl.Ptr { return a.Scratch.Peer(p).At(rowOff(k, cfg, src.Mul(rows), a.N)) }
	// gemm_ar's slots after gemm_rs's: done[o][t], then arrived[g].
	slots := tilesM.Mul(tilesN).Mul(uint32(CollMaxGPUs))
	done := func(o dsl.Value) dsl.Value { return slots.Mul(2).Add(o.Mul(tilesM).Mul(tilesN)).Add(tile) }
	arrived := func(g dsl.Value) dsl.Value { return slots.Mul(3).Add(g) }
	if allReduce {
		k.If(k.BlockIdx(dsl.X).Eq(0), func() { sig.SetPeers(a.NGPUs, arrived(a.Rank), sig.Target()) })
	}

	gA := k.MakeTensorDyn(a.A.At(rowOff(k, cfg, owner.Mul(rows), a.K)), []any{rows, a.K}, []any{a.K, 1})
	gB := k.MakeTensorDyn(a.B, []any{a.N, a.K}, []any{1, a.N})
	gP := k.MakeTensorDyn(part(owner, a.Rank), []any{rows, a.N}, []any{a.N, 1}).LocalTile([]int{BM, BN}, bm.To(dsl.I32), bn.To(dsl.I32))
	main := gemmMainloop(k, cfg, gA, gB, gP, a.K, bm.To(dsl.I32), bn.To(dsl.I32), tid)
	// One GPU: nothing to exchange or sum (every signal would be a no-op), so the tile goes
	// to D through the plain gemm's epilogue (16-byte stores), not the f32 staging and peer
	// sum below. A runtime branch: the same kernel serves every GPU count.
	k.If(a.NGPUs.Eq(1), func() {
		d := out.D
		if allReduce {
			d = outs.D.Peer(a.Rank)
		}
		gD := k.MakeTensorDyn(d, []any{rows, a.N}, []any{a.N, 1}).LocalTile([]int{BM, BN}, bm.To(dsl.I32), bn.To(dsl.I32))
		gemmEpilogue(k, cfg, main, gD, func() dsl.Tensor { return main.acc }, nil)
	}).Else(func() {
		// A peer's tile: once the owner has summed the previous launch's partials out of this
		// slot, store the partial there and signal.
		k.If(owner.Ne(a.Rank), func() {
			sig.Wait(free, a.Epoch)
			partial := cfg
			partial.Out = dsl.F32
			gemmEpilogue(k, partial, main, gP, func() dsl.Tensor { return main.acc }, nil)
			sig.Set(owner, ready(a.Rank), sig.Target())
		})

		// An own tile: the partial stays in shared memory (f32, rows padded by 8, as the
		// epilogue stages it); the peers' come from the scratch.
		sD := k.MakeTensor(main.smem.As(dsl.F32), layout.Must(layout.New(layout.Ints(BM, BN), layout.Ints(BN+8, 1))))
		k.If(owner.Eq(a.Rank), func() {
			k.Copy(main.acc, main.thr.PartitionC(sD))
			sig.WaitPeers(a.NGPUs, ready, sig.Target()) // ends with the bar.sync the staging needs
			if allReduce {
				sig.WaitPeers(a.NGPUs, arrived, sig.Target())
			}
			vec := 1
			if cfg.Aligned {
				vec = 4
			}
			cols := uint32(BN / vec)
			mine := a.Scratch.Peer(a.Rank)
			k.For(tid, uint32(BM*BN/vec), uint32(cfg.Threads()), func(i dsl.Value) {
				lr, lc := i.Div(cols), i.Rem(cols).Mul(uint32(vec))
				r, c := bm.Mul(uint32(BM)).Add(lr), bn.Mul(uint32(BN)).Add(lc)
				k.If(r.Lt(rows).And(c.Lt(a.N)), func() {
					at := rowOff(k, cfg, r, a.N).Add(c)
					sat := lr.Mul(uint32(BN + 8)).Add(lc)
					if cfg.Aligned {
						k.Assume(at, vec)
						k.Assume(sat, vec)
					}
					sum := reducePeers(k, dsl.F32, dsl.Sum, a.NGPUs, vec, func(p int, dst dsl.Tensor) {
						k.If(a.Rank.Eq(uint32(p)), func() {
							loadTo(k, main.smem.As(dsl.F32), sat, dst)
						}).Else(func() {
							loadTo(k, mine.At(rowOff(k, cfg, rows.Mul(uint32(p)), a.N)), at, dst)
						})
					})
					v := sum.To(cfg.Out)
					if !allReduce {
						storeN(k, out.D, at, v)
						return
					}
					at = rowOff(k, cfg, owner.Mul(rows), a.N).Add(at)
					if cfg.Aligned {
						k.Assume(at, vec)
					}
					k.For(k.Const(dsl.U32, 0), a.NGPUs, k.Const(dsl.U32, 1), func(p dsl.Value) {
						storeN(k, outs.D.Peer(p), at, v)
					})
				})
			})
			sig.SetPeers(a.NGPUs, free, sig.Target())
			if allReduce {
				sig.SetPeers(a.NGPUs, done(a.Rank), sig.Target())
				sig.WaitPeers(a.NGPUs, done, sig.Target())
			}
		})
	})
}
