package kernels

import (
	"fmt"
	"math"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// The fused GEMMs on the sm_90a path: gemm_sm90's body (a TMA producer warpgroup, wgmma
// consumer warpgroups, persistent blocks) with hooks (gemmSM90Hooks) that add the tile
// signals of the sm_80 kernels (fused.go) with the same protocols. The differences, all
// from warp specialization and TMA (docs/collectives.md):
//   - the producer's elected thread acquires a peer's row tile before loading it with TMA
//     and then fences the async proxy (fence.proxy.async.global): TMA reads through the
//     async proxy what the peer wrote through the generic proxy;
//   - the consumer warpgroups signal among themselves with a named barrier (id 1) where the
//     sm_80 kernels use bar.sync, and their first thread (thread 128) sets or waits for the
//     signals;
//   - ag_gemm's pushes run in the producer warpgroup's three idle warps (named barrier 2);
//   - ag_gemm's Gathered buffer holds each GPU's rows padded to whole row tiles
//     (AGGemmSM90GatheredRows), so that no TMA box of one slice reads another's rows.
// Blocks are persistent (grid FusedSM90Grid, at most one per SM) and must all be resident:
// a block waits for pushes or partials of blocks of other GPUs.

// The sm_90a fused families.
const (
	FamilyAGGemmSM90 Family = "ag_gemm_sm90"
	FamilyGemmRSSM90 Family = "gemm_rs_sm90"
	FamilyGemmARSM90 Family = "gemm_ar_sm90"
	// FamilyGemmARMCSM90 is gemm_ar_sm90 over NVLink SHARP: multimem.ld_reduce of the
	// partials, multimem.st of the sums.
	FamilyGemmARMCSM90 Family = "gemm_ar_mc_sm90"
)

// AGGemmSM90Args are ag_gemm_sm90's parameters (tensors of the input type): the tensor maps
// of this GPU's rows of A ((K, M/NGPUs)), of the Gathered buffer ((K,
// AGGemmSM90GatheredRows)) and of B ((N, K)), with GemmSM90Config's boxes and swizzle; A
// itself (pushed to the peers), every GPU's Gathered buffer and signal slots.
type AGGemmSM90Args struct {
	TmA, TmG, TmB               dsl.TensorMap
	A                           dsl.Ptr
	Gathered                    dsl.PeerTable
	Signals                     dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, M, N, K, Epoch dsl.Value     `kgen:"u32"`
}

// GemmRSSM90Args are gemm_rs_sm90's and gemm_ar_sm90's parameters: the tensor maps of A ((K,
// M): this GPU's K slice of every row) and B ((N, K)), every GPU's f32 scratch (NGPUs x
// M/NGPUs x N) and signal slots.
type GemmRSSM90Args struct {
	TmA, TmB                    dsl.TensorMap
	Scratch                     dsl.PeerTable `kgen:"f32"`
	Signals                     dsl.PeerTable `kgen:"u32"`
	Rank, NGPUs, M, N, K, Epoch dsl.Value     `kgen:"u32"`
}

// GemmARMCSM90Args are gemm_ar_mc_sm90's parameters: the tensor maps of A ((K, M): this GPU's
// K slice of every row) and B ((N, K)); this GPU's f32 scratch (M x N partials) and its
// multicast address; every GPU's signal slots (GemmARSM90SignalWords) and their multicast
// address.
type GemmARMCSM90Args struct {
	TmA, TmB                    dsl.TensorMap
	Scratch, ScratchMC          dsl.Ptr       `kgen:"f32"`
	Signals                     dsl.PeerTable `kgen:"u32"`
	SignalsMC                   dsl.Ptr       `kgen:"u32"`
	Rank, NGPUs, M, N, K, Epoch dsl.Value     `kgen:"u32"`
}

// FusedOutMC is gemm_ar_mc_sm90's output parameter (the output type), after its arguments:
// this GPU's M x N D and D's multicast address.
type FusedOutMC struct {
	D, DMC dsl.Ptr
}

// FusedSM90Name is the entry name of sm_90a fused family f built with cfg: gemm_sm90's name
// with the family's prefix (ag_gemm_sm90_bf16_bf16_128x128x64_4s).
func FusedSM90Name(f Family, cfg GemmSM90Config) string {
	return strings.TrimSuffix(string(f), "_sm90") + strings.TrimPrefix(cfg.Name(), "gemm")
}

// FusedSM90Tiles returns the output tiles of a fused launch for an M x N output over ngpus
// GPUs: the tiles of every GPU's M/ngpus-row slice.
// Like the signal-word counts and AGGemmSM90GatheredRows below, it saturates at math.MaxInt
// and is 0 for a negative extent: never a wrapped or negative count.
func FusedSM90Tiles(cfg GemmSM90Config, m, n, ngpus int) int {
	return satInt(ngpus, ceilDiv(perGPU(m, ngpus), cfg.BM()), ceilDiv(n, cfg.BN))
}

// FusedSM90Grid returns the persistent blocks of a fused launch on GPUs of sms
// multiprocessors: one per SM, at most one per tile; every GPU launches the same grid.
func FusedSM90Grid(cfg GemmSM90Config, m, n, ngpus, sms int) int {
	return max(1, min(FusedSM90Tiles(cfg, m, n, ngpus), sms))
}

// AGGemmSM90GatheredRows is the row count of ag_gemm_sm90's Gathered buffer: each GPU's
// M/ngpus rows padded to whole BM-row tiles.
func AGGemmSM90GatheredRows(cfg GemmSM90Config, m, ngpus int) int {
	return satInt(ngpus, ceilDiv(perGPU(m, ngpus), cfg.BM()), cfg.BM())
}

// AGGemmSM90SignalWords is the number of u32 signal slots ag_gemm_sm90 needs on every GPU: a
// ready slot per (source GPU, row tile) and a consumed counter per (consumer GPU, row tile).
func AGGemmSM90SignalWords(cfg GemmSM90Config, m, ngpus int) int {
	return satInt(2, CollMaxGPUs, ceilDiv(perGPU(m, ngpus), cfg.BM()))
}

// GemmRSSM90SignalWords is the number of u32 signal slots gemm_rs_sm90 needs on every GPU: a
// ready slot per (own tile, source GPU) and a free slot per (owner GPU, tile).
func GemmRSSM90SignalWords(cfg GemmSM90Config, m, n, ngpus int) int {
	return satInt(2, CollMaxGPUs, ceilDiv(perGPU(m, ngpus), cfg.BM()), ceilDiv(n, cfg.BN))
}

// GemmARSM90SignalWords is the number of u32 signal slots gemm_ar_sm90 needs on every GPU:
// gemm_rs_sm90's, a done slot per (owner GPU, tile) and an arrived slot per GPU.
func GemmARSM90SignalWords(cfg GemmSM90Config, m, n, ngpus int) int {
	return min(satInt(3, CollMaxGPUs, ceilDiv(perGPU(m, ngpus), cfg.BM()), ceilDiv(n, cfg.BN)), math.MaxInt-CollMaxGPUs) + CollMaxGPUs
}

func init() {
	register(&Spec{
		Name:    string(FamilyAGGemmSM90),
		Doc:     "all-gather + GEMM on sm_90a: gemm_sm90 whose producer warpgroup's idle warps push this GPU's row tiles to every peer (release signals) and whose TMA producer acquires each peer's row tile (then fence.proxy.async.global) before loading it; K, N multiples of 8",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { AGGemmSM90(k, DefaultGemmSM90Config(dt)) },
	})
	register(&Spec{
		Name:    string(FamilyGemmRSSM90),
		Doc:     "GEMM + reduce-scatter on sm_90a: gemm_sm90 whose consumers store each tile's f32 partial into its owner's scratch (release signal); the owner sums the partials in rank order from its registers and the scratch; K, N multiples of 8",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmRSSM90(k, DefaultGemmSM90Config(dt)) },
	})
	register(&Spec{
		Name:    string(FamilyGemmARSM90),
		Doc:     "GEMM + all-reduce on sm_90a: gemm_rs_sm90 whose owners store each summed tile into every GPU's D (peer stores, release done signals) and wait for every other owner's same tile; K, N multiples of 8",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmARSM90(k, DefaultGemmSM90Config(dt)) },
	})
	register(&Spec{
		Name:    string(FamilyGemmARMCSM90),
		Doc:     "GEMM + all-reduce on sm_90a over NVLink SHARP: each GPU keeps its f32 partial of every tile in its own scratch (release signal to the owner); the owner multimem.ld_reduces the partials through the scratch's multicast address and multimem.st's the sum into every GPU's D (multimem.red.release done counters); K, N multiples of 8",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmARMCSM90(k, DefaultGemmSM90Config(dt)) },
	})
}

// fusedSM90Begin checks cfg and the target and sets ShiftDivision and the launch bounds, as
// GemmSM90 does.
func fusedSM90Begin(k *dsl.Kernel, cfg GemmSM90Config, what string) bool {
	if err := cfg.Check(); err != nil {
		k.Errorf("%s: %v", what, err)
		return false
	}
	if cfg.FP8() { // gemm_sm90's fp8 B is N x K; the fused kernels' hosts build K x N maps
		k.Errorf("%s: %s inputs: the fused sm_90a kernels take f16 or bf16", what, cfg.In)
		return false
	}
	if k.Target() != ptx.SM90a {
		k.Errorf("%s: wgmma and setmaxnreg need sm_90a; the kernel targets %s", what, k.Target())
		return false
	}
	if cfg.ShiftDivision {
		k.SetShiftDivision(true)
	}
	k.LaunchBounds(cfg.Threads(), 1)
	return true
}

// fusedSM90Order hands a fused kernel's tiles out to persistent blocks: ngpus runs of the
// tilesM x tilesN tiles of one GPU's row slice, run j covering slice (rank + first + j) mod
// ngpus, each in the TileScheduler's grouped order. The order is the same on every GPU (only
// the slices differ), so the tile at a position waits only for tiles at earlier positions of
// other GPUs (docs/collectives.md). Its ForEach passes m = j*tilesM + bm.
type fusedSM90Order struct {
	k                                  *dsl.Kernel
	sched                              dsl.TileScheduler
	rank, ngpus, tilesM, tilesN, first dsl.Value
}

func newFusedSM90Order(k *dsl.Kernel, rank, ngpus, tilesM, tilesN dsl.Value, first uint32) fusedSM90Order {
	return fusedSM90Order{k: k, sched: k.MakeTileScheduler(tilesM, tilesN, 8), rank: rank, ngpus: ngpus, tilesM: tilesM, tilesN: tilesN, first: k.Const(dsl.U32, first)}
}

// ForEach runs body(m, n) for each of the calling block's tiles.
func (o fusedSM90Order) ForEach(body func(m, n dsl.Value)) { o.forRuns(o.ngpus, body) }

// forRuns is ForEach over the first runs runs.
func (o fusedSM90Order) forRuns(runs dsl.Value, body func(m, n dsl.Value)) {
	k := o.k
	per := o.tilesM.Mul(o.tilesN)
	k.For(k.BlockIdx(dsl.X), runs.Mul(per), k.GridDim(dsl.X), func(t dsl.Value) {
		bm, bn := o.sched.Tile(t.Rem(per))
		body(t.Div(per).Mul(o.tilesM).Add(bm), bn)
	})
}

// tile returns the GPU slice and its row tile of ForEach's m.
func (o fusedSM90Order) tile(m dsl.Value) (slice, bm dsl.Value) {
	return o.rank.Add(o.first).Add(m.Div(o.tilesM)).Rem(o.ngpus), m.Rem(o.tilesM)
}

// sm90Row is called once for each row of warpgroup thread t's accumulators inside the
// tile, with at = row*n + col of the row's first pair (even); it returns the function called
// for each of that row's pairs of adjacent accumulators (values i and i+1) inside N, at
// element offset at + off (off a constant: addresses built once a row take it as an
// immediate).
type sm90Row func(at dsl.Value) func(off, i int)

// sm90Pairs runs row over the rows of warpgroup thread t (0..127) below rows and their
// pairs with columns below n, the warpgroup's 64 x BN tile starting at (row0, col0): wgmma's
// D fragment, as gemmSM90Epilogue stores it. N is even, so a pair is inside N or outside.
func sm90Pairs(k *dsl.Kernel, cfg GemmSM90Config, t, row0, col0, rows, n dsl.Value, row sm90Row) {
	r := row0.Add(t.Shr(uint32(5)).Mul(uint32(16))).Add(t.And(uint32(31)).Shr(uint32(2)))
	c := col0.Add(t.And(uint32(3)).Mul(uint32(2)))
	for half := 0; half < 2; half++ {
		rh := r.Add(uint32(8 * half))
		k.If(rh.Lt(rows), func() {
			pair := row(k.Assume(rh.Mul(n).Add(c), 2))
			for j := 0; j < cfg.BN/8; j++ {
				k.If(c.Add(uint32(8*j)).Lt(n), func() { pair(8*j, 4*j+2*half) })
			}
		})
	}
}

// storePairs is the sm90Row that stores the pairs of vals, converted to p's element type,
// at p[at + off] (2-element vectors).
func storePairs(k *dsl.Kernel, p dsl.Ptr, vals []dsl.Value) sm90Row {
	return func(at dsl.Value) func(off, i int) {
		d := p.At(at)
		return func(off, i int) {
			k.StoreVec(d.At(off), []dsl.Value{vals[i].To(p.Elem()), vals[i+1].To(p.Elem())})
		}
	}
}

// The signal operations of warp-specialized code: unlike TileSignals' methods, no bar.sync
// (the roles synchronize with named barriers) and no choice of thread (the caller's).

// setOn stores v into slot of GPU peer (st.release.sys; relaxed when unordered).
func (s TileSignals) setOn(peer, slot, v any) { s.store(s.pads.Peer(peer).At(slot), v) }

// addOn adds v to slot of GPU peer (red.release.sys; relaxed when unordered).
func (s TileSignals) addOn(peer, slot, v any) {
	p := s.pads.Peer(peer).At(slot)
	if s.ord == ordered {
		s.k.Reduce(dsl.AtomAdd, p, v, dsl.Release(dsl.System))
	} else {
		s.k.Reduce(dsl.AtomAdd, p, v, dsl.Relaxed(dsl.System))
	}
}

// waitFor spins until this GPU's slot reaches v (dsl.GeWrap, ld.acquire.sys).
func (s TileSignals) waitFor(slot, v any) {
	s.k.WaitUntil(s.pads.Peer(s.rank).At(slot), dsl.GeWrap, v, dsl.Acquire(dsl.System))
}

// AGGemmSM90 writes ag_gemm_sm90 for cfg into k: D (M x N) = A (M x K, rows gathered from
// every GPU) times B (K x N), GPU r holding rows [r*M/NGPUs, (r+1)*M/NGPUs) of A, with
// ag_gemm's protocol. Tiles come in runs of one slice, this GPU's first. Warps 1-3 of the
// producer warpgroup take the block's tiles of this GPU's slice in column 0: they wait until
// every peer's consumers are done with the previous launch's copy of the row tile (the
// consumed counter), copy its rows into every peer's Gathered, meet at named barrier 2 and
// set the peers' ready slot (release). The producer's elected thread, on a peer's row tile,
// waits for its ready slot (acquire), fences the async proxy and loads the tile from the
// Gathered map (its own slice from A's map). Each consumer warpgroup, its K steps of a peer's
// tile done, adds one to the source's consumed counter (release), then stores the tile. On
// one GPU nothing is pushed or awaited. M must be a multiple of NGPUs, K and N of 8.
func AGGemmSM90(k *dsl.Kernel, cfg GemmSM90Config) { agGemmSM90(k, cfg, ordered) }

// AGGemmSM90Unordered is AGGemmSM90 with relaxed instead of release signals: a deliberately
// broken variant for the weak-memory tests.
func AGGemmSM90Unordered(k *dsl.Kernel, cfg GemmSM90Config) { agGemmSM90(k, cfg, unordered) }

func agGemmSM90(k *dsl.Kernel, cfg GemmSM90Config, ord barrierOrder) {
	if !fusedSM90Begin(k, cfg, "ag_gemm_sm90") {
		return
	}
	a := dsl.Params[AGGemmSM90Args](k, cfg.In)
	o := dsl.Params[FusedOut](k, cfg.Out)
	k.Assume(a.N, 8)
	k.Assume(a.K, 8)
	BM, BN := cfg.BM(), cfg.BN
	sig := NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	sig.ord = ord
	rows := a.M.Div(a.NGPUs)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	order := newFusedSM90Order(k, a.Rank, a.NGPUs, tilesM, tilesN, 0)
	ready := func(src, bm dsl.Value) dsl.Value { return src.Mul(tilesM).Add(bm) }
	consumed := func(dst, bm dsl.Value) dsl.Value {
		return tilesM.Mul(uint32(CollMaxGPUs)).Add(dst.Mul(tilesM)).Add(bm)
	}
	// Each consumer warpgroup of each of the tilesN blocks on a row tile adds one a launch.
	perLaunch := tilesN.Mul(uint32(cfg.Consumers))
	mapA := k.Var(dsl.U64, a.TmA.Addr())

	h := gemmSM90Hooks{tiles: order, mapA: k.TensorMapAt(mapA)}
	h.load = func(m, n dsl.Value) dsl.Value {
		slice, bm := order.tile(m)
		local := slice.Eq(a.Rank)
		k.If(local.Not(), func() {
			sig.waitFor(ready(slice, bm), sig.Target())
			// The peer's rows were written through the generic proxy; TMA reads them through
			// the async proxy (docs/facts.md).
			k.FenceProxyAsyncGlobal()
		})
		k.Set(mapA, k.Select(local, a.TmA.Addr(), a.TmG.Addr()))
		r0 := bm.Mul(uint32(BM))
		return k.Select(local, r0, slice.Mul(tilesM).Mul(uint32(BM)).Add(r0))
	}
	h.producer = func(tid dsl.Value) {
		k.If(tid.Ge(uint32(32)).And(a.NGPUs.Gt(1)), func() {
			pt := tid.Sub(uint32(32))
			const pushers, vec = 96, 8 // 16-byte accesses of 16-bit elements
			pushBar := k.NamedBarrierFor("ag_gemm pushers (producer warps 1-3)", pushers)
			order.forRuns(k.Const(dsl.U32, 1), func(m, n dsl.Value) {
				k.If(n.Eq(0), func() {
					_, bm := order.tile(m)
					k.If(pt.Lt(a.NGPUs).And(pt.Ne(a.Rank)), func() {
						sig.waitFor(consumed(pt, bm), a.Epoch.Mul(perLaunch))
					})
					pushBar.Sync()
					r0 := bm.Mul(uint32(BM))
					cnt := k.Assume(rows.Sub(r0).Min(uint32(BM)).Mul(a.K), vec)
					src := a.A.At(k.Assume(r0.Mul(a.K), vec))
					k.For(k.Const(dsl.U32, 0), a.NGPUs, k.Const(dsl.U32, 1), func(p dsl.Value) {
						k.If(p.Ne(a.Rank), func() {
							dst := a.Gathered.Peer(p).At(k.Assume(a.Rank.Mul(tilesM).Mul(uint32(BM)).Add(r0).Mul(a.K), vec))
							k.For(pt.Mul(uint32(vec)), cnt, uint32(pushers*vec), func(i dsl.Value) {
								storeN(k, dst, i, loadN(k, src, i, vec))
							})
						})
					})
					pushBar.Sync()
					k.If(pt.Lt(a.NGPUs).And(pt.Ne(a.Rank)), func() { sig.setOn(pt, ready(a.Rank, bm), sig.Target()) })
				})
			})
		})
	}
	h.epilogue = func(acc dsl.Tensor, t, wg, m, n dsl.Value) {
		slice, bm := order.tile(m)
		// Every K step of the tile has landed (the full barriers this warpgroup waited on):
		// the peer's rows are read.
		k.If(slice.Ne(a.Rank).And(t.Eq(0)), func() {
			k.FenceProxyAsyncGlobal()
			sig.addOn(slice, consumed(a.Rank, bm), uint32(1))
		})
		d := o.D.At(k.Assume(slice.Mul(rows).Mul(a.N), 8))
		vals := acc.Values()
		sm90Pairs(k, cfg, t, bm.Mul(uint32(BM)).Add(wg.Mul(uint32(64))), n.Mul(uint32(BN)), rows, a.N, storePairs(k, d, vals))
	}
	gemmSM90Body(k, cfg, GemmSM90Args{TmB: a.TmB, M: a.M, N: a.N, K: a.K}, GemmOut{}, h)
}

// GemmRSSM90 writes gemm_rs_sm90 for cfg into k: gemm_rs's protocol (GemmRS) on the sm_90a
// gemm. Tiles come in runs of one owner's slice, owners rank+1, rank+2, ..., this GPU's
// last. On another GPU's tile the consumers' thread 128 waits for the free slot (the owner
// has summed the previous launch's partials), the consumers store their f32 accumulators
// into slot rank of the owner's scratch, meet at named barrier 1 and thread 128 sets the
// owner's ready slot (release). On an own tile thread 128+g waits for GPU g's ready slot
// (acquire), the consumers meet, and each thread sums its accumulator pairs with the peers'
// partials in rank order into D; after a barrier threads 128+g set GPU g's free slot. On
// one GPU the tiles go to D with no signal. M must be a multiple of NGPUs, K and N of 8.
func GemmRSSM90(k *dsl.Kernel, cfg GemmSM90Config) { gemmRSSM90(k, cfg, ordered, false) }

// GemmRSSM90Unordered is GemmRSSM90 with relaxed instead of release signals: a deliberately
// broken variant for the weak-memory tests.
func GemmRSSM90Unordered(k *dsl.Kernel, cfg GemmSM90Config) { gemmRSSM90(k, cfg, unordered, false) }

// GemmARSM90 writes gemm_ar_sm90 for cfg into k: gemm_ar's protocol (GemmAR) on the sm_90a
// gemm. Warp 1 of block 0's producer warpgroup sets this GPU's arrived slot on every peer at
// the start; an owner's consumers, after waiting for the partials, wait for every GPU's
// arrived slot, store the summed tile into every GPU's D, set their done slot on every peer
// and wait for the done slots of the same tile of every other owner.
func GemmARSM90(k *dsl.Kernel, cfg GemmSM90Config) { gemmRSSM90(k, cfg, ordered, true) }

// GemmARSM90Unordered is GemmARSM90 with relaxed instead of release signals: a deliberately
// broken variant for the weak-memory tests.
func GemmARSM90Unordered(k *dsl.Kernel, cfg GemmSM90Config) { gemmRSSM90(k, cfg, unordered, true) }

func gemmRSSM90(k *dsl.Kernel, cfg GemmSM90Config, ord barrierOrder, allReduce bool) {
	what := "gemm_rs_sm90"
	if allReduce {
		what = "gemm_ar_sm90"
	}
	if !fusedSM90Begin(k, cfg, what) {
		return
	}
	a := dsl.Params[GemmRSSM90Args](k, cfg.In)
	var out FusedOut
	var outs FusedOutTable
	if allReduce {
		outs = dsl.Params[FusedOutTable](k, cfg.Out)
	} else {
		out = dsl.Params[FusedOut](k, cfg.Out)
	}
	k.Assume(a.N, 8)
	k.Assume(a.K, 8)
	BM, BN := cfg.BM(), cfg.BN
	consumers := 128 * cfg.Consumers
	consumerBar := k.NamedBarrierFor("consumer warpgroups", consumers)
	sig := NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	sig.ord = ord
	rows := a.M.Div(a.NGPUs)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	order := newFusedSM90Order(k, a.Rank, a.NGPUs, tilesM, tilesN, 1)
	tiles := tilesM.Mul(tilesN)
	slots := tiles.Mul(uint32(CollMaxGPUs))
	// gemm_rs's slots: ready[t][src], free[owner][t]; gemm_ar's after them: done[owner][t],
	// arrived[g].
	ready := func(tile, src dsl.Value) dsl.Value { return tile.Mul(uint32(CollMaxGPUs)).Add(src) }
	free := func(owner, tile dsl.Value) dsl.Value { return slots.Add(owner.Mul(tiles)).Add(tile) }
	done := func(owner, tile dsl.Value) dsl.Value { return slots.Mul(2).Add(owner.Mul(tiles)).Add(tile) }
	arrived := func(g dsl.Value) dsl.Value { return slots.Mul(3).Add(g) }
	part := func(p, src dsl.Value) dsl.Ptr { return a.Scratch.Peer(p).At(k.Assume(src.Mul(rows).Mul(a.N), 8)) }

	h := gemmSM90Hooks{tiles: order}
	h.load = func(m, n dsl.Value) dsl.Value {
		owner, bm := order.tile(m)
		return owner.Mul(rows).Add(bm.Mul(uint32(BM)))
	}
	if allReduce {
		h.producer = func(tid dsl.Value) {
			g := tid.Sub(uint32(32))
			k.If(k.BlockIdx(dsl.X).Eq(0).And(tid.Ge(uint32(32))).And(g.Lt(a.NGPUs)).And(g.Ne(a.Rank)), func() {
				sig.setOn(g, arrived(a.Rank), sig.Target())
			})
		}
	}
	h.epilogue = func(acc dsl.Tensor, t, wg, m, n dsl.Value) {
		owner, bm := order.tile(m)
		tile := n.Mul(tilesM).Add(bm)
		row0, col0 := bm.Mul(uint32(BM)).Add(wg.Mul(uint32(64))), n.Mul(uint32(BN))
		vals := acc.Values()
		ct := k.ThreadIdx(dsl.X).Sub(uint32(128)) // the thread among the consumers
		each := func(row sm90Row) { sm90Pairs(k, cfg, t, row0, col0, rows, a.N, row) }
		// The accumulators (on one GPU the tile; gemm_ar's owner, the sums) go to D: gemm_rs's
		// into this GPU's D; gemm_ar's into every GPU's, one GPU at a time, so that each
		// peer's D address is loaded from the table once a tile, not once a pair.
		toD := func() {
			if !allReduce {
				each(storePairs(k, out.D, vals))
				return
			}
			base := k.Assume(owner.Mul(rows).Mul(a.N), 8)
			k.For(k.Const(dsl.U32, 0), a.NGPUs, k.Const(dsl.U32, 1), func(p dsl.Value) {
				each(storePairs(k, outs.D.Peer(p).At(base), vals))
			})
		}
		waitPeers := func(slot func(g dsl.Value) dsl.Value) {
			k.If(ct.Lt(a.NGPUs).And(ct.Ne(a.Rank)), func() { sig.waitFor(slot(ct), sig.Target()) })
		}
		k.If(a.NGPUs.Eq(1), toD).Else(func() {
			k.If(owner.Ne(a.Rank), func() {
				k.If(ct.Eq(0), func() { sig.waitFor(free(owner, tile), a.Epoch) })
				consumerBar.Sync()
				dst := part(owner, a.Rank)
				each(storePairs(k, dst, vals))
				consumerBar.Sync()
				k.If(ct.Eq(0), func() { sig.setOn(owner, ready(tile, a.Rank), sig.Target()) })
			}).Else(func() {
				waitPeers(func(g dsl.Value) dsl.Value { return ready(tile, g) })
				if allReduce {
					waitPeers(arrived)
				}
				consumerBar.Sync()
				mine := a.Scratch.Peer(a.Rank)
				// Each pair's sum in rank order goes to D (gemm_rs) or replaces the accumulators
				// (gemm_ar; the next tile's first K step overwrites them), which toD then stores.
				rowsN := rows.Mul(a.N)
				each(func(at dsl.Value) func(off, i int) {
					src, d := mine.At(at), out.D.At(at)
					return func(off, i int) {
						s0, s1 := k.Var(dsl.F32, 0), k.Var(dsl.F32, 0)
						k.For(k.Const(dsl.U32, 0), a.NGPUs, k.Const(dsl.U32, 1), func(p dsl.Value) {
							k.If(p.Eq(a.Rank), func() {
								k.Set(s0, s0.Add(vals[i]))
								k.Set(s1, s1.Add(vals[i+1]))
							}).Else(func() {
								v := k.LoadVec(src.At(k.Assume(p.Mul(rowsN), 8)).At(off), 2)
								k.Set(s0, s0.Add(v[0]))
								k.Set(s1, s1.Add(v[1]))
							})
						})
						if !allReduce {
							k.StoreVec(d.At(off), []dsl.Value{s0.To(cfg.Out), s1.To(cfg.Out)})
							return
						}
						k.Set(vals[i], s0)
						k.Set(vals[i+1], s1)
					}
				})
				if allReduce {
					toD()
				}
				consumerBar.Sync()
				k.If(ct.Lt(a.NGPUs).And(ct.Ne(a.Rank)), func() { sig.setOn(ct, free(a.Rank, tile), sig.Target()) })
				if allReduce {
					k.If(ct.Lt(a.NGPUs).And(ct.Ne(a.Rank)), func() { sig.setOn(ct, done(a.Rank, tile), sig.Target()) })
					waitPeers(func(g dsl.Value) dsl.Value { return done(g, tile) })
				}
			})
		})
	}
	gemmSM90Body(k, cfg, GemmSM90Args{TmA: a.TmA, TmB: a.TmB, M: a.M, N: a.N, K: a.K}, GemmOut{}, h)
}

// GemmARMCSM90 writes gemm_ar_mc_sm90 for cfg into k: the sum over GPUs of A_g*B_g into every
// GPU's D through multicast addresses (NVLink SHARP), tiles in gemm_rs_sm90's order. On
// another GPU's tile the consumers wait for the free slot (the owner's ld_reduce of the
// previous launch is done), store their f32 partial into this GPU's own scratch at the
// tile's place, fence the alias proxy, meet (named barrier 1) and thread 128 sets the
// owner's ready slot (release).
// On an own tile each consumer thread stores its partial the same way, threads 128+g wait
// for GPU g's ready and arrived slots (acquire), the consumers meet and fence the alias
// proxy (the scratch is read through its multicast address), then each thread
// multimem.ld_reduces the pairs it stored and multimem.st's the sums into D's multicast
// address; after a barrier threads 128+g set GPU g's free slot and thread 128 adds one to
// the tile's done counter on every GPU (multimem.red.release), then waits (fence.proxy.alias,
// acquire) until every owner has added its one. Block 0 sets the arrived slots as
// gemm_ar_sm90 does. On one GPU the tiles go to D with no signal.
func GemmARMCSM90(k *dsl.Kernel, cfg GemmSM90Config) { gemmARMCSM90(k, cfg, ordered) }

// GemmARMCSM90Unordered is GemmARMCSM90 with relaxed instead of release signals and without
// the writers' alias fence: a deliberately broken variant for the weak-memory tests.
func GemmARMCSM90Unordered(k *dsl.Kernel, cfg GemmSM90Config) { gemmARMCSM90(k, cfg, unordered) }

func gemmARMCSM90(k *dsl.Kernel, cfg GemmSM90Config, ord barrierOrder) {
	if !fusedSM90Begin(k, cfg, "gemm_ar_mc_sm90") {
		return
	}
	a := dsl.Params[GemmARMCSM90Args](k, cfg.In)
	o := dsl.Params[FusedOutMC](k, cfg.Out)
	k.Assume(a.N, 8)
	k.Assume(a.K, 8)
	BM, BN := cfg.BM(), cfg.BN
	consumers := 128 * cfg.Consumers
	consumerBar := k.NamedBarrierFor("consumer warpgroups", consumers)
	sig := NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	sig.ord = ord
	rows := a.M.Div(a.NGPUs)
	tilesM := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	tilesN := a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	order := newFusedSM90Order(k, a.Rank, a.NGPUs, tilesM, tilesN, 1)
	tiles := tilesM.Mul(tilesN)
	slots := tiles.Mul(uint32(CollMaxGPUs))
	// gemm_ar_sm90's layout: ready[t][src], free[owner][t], then a done counter per tile
	// (every owner adds one to every GPU's), arrived[g].
	ready := func(tile, src dsl.Value) dsl.Value { return tile.Mul(uint32(CollMaxGPUs)).Add(src) }
	free := func(owner, tile dsl.Value) dsl.Value { return slots.Add(owner.Mul(tiles)).Add(tile) }
	done := func(tile dsl.Value) dsl.Value { return slots.Mul(2).Add(tile) }
	arrived := func(g dsl.Value) dsl.Value { return slots.Mul(3).Add(g) }

	h := gemmSM90Hooks{tiles: order}
	h.load = func(m, n dsl.Value) dsl.Value {
		owner, bm := order.tile(m)
		return owner.Mul(rows).Add(bm.Mul(uint32(BM)))
	}
	h.producer = func(tid dsl.Value) {
		g := tid.Sub(uint32(32))
		k.If(k.BlockIdx(dsl.X).Eq(0).And(tid.Ge(uint32(32))).And(g.Lt(a.NGPUs)).And(g.Ne(a.Rank)), func() {
			sig.setOn(g, arrived(a.Rank), sig.Target())
		})
	}
	h.epilogue = func(acc dsl.Tensor, t, wg, m, n dsl.Value) {
		owner, bm := order.tile(m)
		tile := n.Mul(tilesM).Add(bm)
		row0, col0 := bm.Mul(uint32(BM)).Add(wg.Mul(uint32(64))), n.Mul(uint32(BN))
		vals := acc.Values()
		ct := k.ThreadIdx(dsl.X).Sub(uint32(128))
		// The owner's rows of the scratch and of D.
		base := k.Assume(owner.Mul(rows).Mul(a.N), 8)
		each := func(row sm90Row) { sm90Pairs(k, cfg, t, row0, col0, rows, a.N, row) }
		stage := func() {
			each(storePairs(k, a.Scratch.At(base), vals))
		}
		k.If(a.NGPUs.Eq(1), func() {
			each(storePairs(k, o.D, vals))
		}).Else(func() {
			k.If(owner.Ne(a.Rank), func() {
				k.If(ct.Eq(0), func() { sig.waitFor(free(owner, tile), a.Epoch) })
				consumerBar.Sync()
				stage()
				// The owner reads the partial through the multicast alias: the writers fence
				// the alias proxy too (the owner fences after its acquire). The broken variant
				// drops it (the emulator publishes stores at any fence).
				if ord == ordered {
					k.FenceProxyAlias()
				}
				consumerBar.Sync()
				k.If(ct.Eq(0), func() { sig.setOn(owner, ready(tile, a.Rank), sig.Target()) })
			}).Else(func() {
				stage()
				k.If(ct.Lt(a.NGPUs).And(ct.Ne(a.Rank)), func() {
					sig.waitFor(ready(tile, ct), sig.Target())
					sig.waitFor(arrived(ct), sig.Target())
				})
				consumerBar.Sync()
				// The partials were written through unicast addresses (this thread's own, the
				// peers' before their releases); ld_reduce reads them through the multicast one.
				k.FenceProxyAlias()
				each(func(at dsl.Value) func(off, i int) {
					s, d := a.ScratchMC.At(base).At(at), o.DMC.At(base).At(at)
					return func(off, i int) {
						sum := k.MultimemLoadReduce(s.At(off), dsl.Sum, 2)
						k.MultimemStore(d.At(off), []dsl.Value{sum[0].To(cfg.Out), sum[1].To(cfg.Out)})
					}
				})
				consumerBar.Sync()
				k.If(ct.Lt(a.NGPUs).And(ct.Ne(a.Rank)), func() { sig.setOn(ct, free(a.Rank, tile), sig.Target()) })
				k.If(ct.Eq(0), func() {
					order := dsl.Release(dsl.System)
					if ord != ordered {
						order = dsl.Relaxed(dsl.System)
					}
					k.MultimemReduce(a.SignalsMC.At(done(tile)), dsl.Sum, []dsl.Value{k.Const(dsl.U32, 1)}, order)
					k.FenceProxyAlias()
					sig.waitFor(done(tile), sig.Target().Mul(a.NGPUs))
				})
			})
		})
	}
	gemmSM90Body(k, cfg, GemmSM90Args{TmA: a.TmA, TmB: a.TmB, M: a.M, N: a.N, K: a.K}, GemmOut{}, h)
}

// fusedSM90Build builds family f (one of the sm_90a fused families) for cfg into k.
func fusedSM90Build(k *dsl.Kernel, f Family, cfg GemmSM90Config) error {
	switch f {
	case FamilyAGGemmSM90:
		AGGemmSM90(k, cfg)
	case FamilyGemmRSSM90:
		GemmRSSM90(k, cfg)
	case FamilyGemmARSM90:
		GemmARSM90(k, cfg)
	case FamilyGemmARMCSM90:
		GemmARMCSM90(k, cfg)
	default:
		return fmt.Errorf("kernels: %s is not an sm_90a fused family", excerpt.Quote(string(f)))
	}
	return nil
}
