package kernels

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// GemmSM90Config selects one sm_90a gemm: D = alpha*A*B + beta*C with A (M x K, row-major)
// and B of In elements read by TMA, f32 accumulation on wgmma, C and D (M x N, row-major) of
// Out elements. B is K x N row-major (as Gemm takes it) for 16-bit inputs; for fp8 inputs
// (E4M3, E5M2), which wgmma reads only K-major, B is N x K row-major (B's columns stored
// contiguously, as torch._scaled_mm takes it), and alpha is the combined scale. A block is
// one producer warpgroup (one thread issues the TMA loads) and Consumers warpgroups (64 rows
// of the BM = 64*Consumers row tile each, wgmma m64nBNk16, k32 for fp8); Stages
// shared-memory stages of BK columns of K, one 128-byte swizzle row (BK = 64 16-bit or 128
// fp8 elements). Blocks are persistent: each takes output tiles from a TileScheduler. TMA
// needs 16-byte-aligned global strides (CheckShape).
//
// ClusterM 2 launches clusters of two blocks on adjacent row tiles of the same column of
// tiles: each loads its half of the shared B tile with .multicast::cluster into both
// blocks (MakeTMACopyMulticast, MakeTMAPipelineCluster). TMAStore writes D through a
// shared-memory tile and TMA stores (D's tensor map is a parameter, GemmSM90StoreArgs).
//
// PingPong changes the schedule (CUTLASS's KernelTmaWarpSpecializedPingpong): the two
// consumer warpgroups do not share a 128-row tile but each owns whole 64 x BN tiles, taking
// the block's tiles in turn, so that one's epilogue runs while the other's wgmmas do (see
// GemmSM90).
type GemmSM90Config struct {
	In, Out   dsl.Type
	BN        int // 64, 128 or 256
	Consumers int // consumer warpgroups: 1 or 2
	Stages    int
	ClusterM  int  // blocks per cluster along M: 0 or 1 (no clusters) or 2
	TMAStore  bool // the epilogue stores D with TMA from shared memory
	// PingPong gives each of the two consumer warpgroups its own 64 x BN tiles (BM 64),
	// alternating their mainloops; Consumers must be 2.
	PingPong bool
	// Epilogue adds the library's epilogue options (bias, activation, residual, fp8
	// scales; GemmEpilogueArgs after the other parameters). Zero: the plain epilogue.
	Epilogue Epilogue
	// Pieces makes the kernel signal per-piece completion for a copy engine or another
	// stream to consume while it runs (GemmSM90PieceArgs after GemmOut and the TMA store's
	// map: the counters, PieceRows and RowShift, a rotation of A's rows): the rows of D come
	// in pieces of PieceRows rows (a run-time parameter, a multiple of BM dividing M); the
	// persistent blocks take the tiles piece-major (every tile of rows
	// [0, PieceRows) first, in the usual grouped order within the piece, then the next piece)
	// and, once a consumer warpgroup's 64 x BN sub-tile of D is stored and visible at system
	// scope, that warpgroup adds 1 to the piece's u32 counter with release semantics
	// (red.release.sys). A piece is complete when its counter has grown by PieceSignals; the
	// counters are never reset by the kernel, so after the e-th launch on zeroed counters
	// piece p's counter is e*PieceSignals (a stream waits for it with cuStreamWaitValue32's
	// cyclic GEQ). Not with clusters or the fused kernels' hooks.
	Pieces bool
	// ShiftDivision builds the kernel's integer divisions and remainders by constants as
	// shifts and masks (dsl.Kernel.SetShiftDivision): ptxas compiles div and rem by an
	// immediate to a general sequence of about 30 instructions.
	ShiftDivision bool
}

// DefaultGemmSM90Config is the library's sm_90a gemm for large problems: 128x256x64 tiles
// (two consumer warpgroups of 64 x 256), 3 stages, out = in: the fastest measured at 8192^3
// on an H100 (3 stages beat 4 by 1-6% at every large shape; docs/bench.md). GemmSM90For
// picks per problem shape. For fp8 inputs out is bf16.
func DefaultGemmSM90Config(dt dsl.Type) GemmSM90Config {
	c := GemmSM90Config{In: dt, Out: dt, BN: 256, Consumers: 2, Stages: 3}
	if c.FP8() {
		c.Out = dsl.BF16
	}
	return c
}

// GemmSM90Candidates returns the configurations GemmSM90For chooses among for in and out:
// tiles 128x256 (3 stages, as DefaultGemmSM90Config, with the TMA-store epilogue where its
// tile fits beside them: 16-bit outputs), 128x128, 64x256, 64x128 and 64x64, the others
// with as many stages as fit in shared memory (at most 8). The TMA store measured 1.4-11.6%
// faster at 128x256 (bf16, M >= 1024) and 10-22% for e4m3, but 0.4-6% slower on the small
// tiles of M = 128 (docs/bench.md), so only 128x256 has it.
func GemmSM90Candidates(in, out dsl.Type) []GemmSM90Config {
	var cs []GemmSM90Config
	for _, t := range [][3]int{{2, 256, 3}, {2, 128, 8}, {1, 256, 8}, {1, 128, 8}, {1, 64, 8}} {
		c := GemmSM90Config{In: in, Out: out, BN: t[1], Consumers: t[0], Stages: t[2]}
		if t[1] == 256 && t[0] == 2 {
			c.TMAStore = true
			if c.Check() != nil {
				c.TMAStore = false
			}
		}
		for c.Stages > 2 && c.blockShared() > gemmSM90MaxShared {
			c.Stages--
		}
		cs = append(cs, c)
	}
	return cs
}

// WithEpilogue returns c with the epilogue e, as the library runs it: a non-zero epilogue on
// GemmSM90For's 64 x 64 tiles (one consumer, 16-bit input and output) takes the TMA store, whose
// whole-line stores hide the epilogue where the register store writes half of each 32-byte
// sector (an H200 at 128 x 4096 x 4096, GPU time: bias+SiLU 15.4 us against 16.4, the plain
// pick 15.1-15.4; docs/bench.md). Other tiles keep c's store.
func (c GemmSM90Config) WithEpilogue(e Epilogue) GemmSM90Config {
	c.Epilogue = e
	if e.IsZero() || c.TMAStore || c.BN != 64 || c.Consumers != 1 || c.Out.Bits() != 16 || c.In.Bits() != 16 {
		return c
	}
	t := c
	t.TMAStore = true
	for t.Stages > 2 && t.Check() != nil {
		t.Stages--
	}
	if t.Check() == nil {
		return t
	}
	return c
}

// GemmSM90For returns the configuration for an M x N x K problem on a GPU of sms
// multiprocessors: the candidate (GemmSM90Candidates) with the smallest estimated time of
// its busiest SM, waves * (K * per-K-step cycles + per-tile overhead), where waves =
// ceil(tiles / sms) and a K step of one tile costs the larger of its tensor-core cycles
// (BM*BN*2 flops at 4096 per cycle, 8192 for fp8, scaled down for one consumer warpgroup, which cannot
// overlap its epilogue or its wgmma issue) and its load cycles (the (BM+BN) input elements
// at 48 bytes per cycle, what an SM sustains from L2 when all load; docs/facts.md). Large
// problems get 128x256; skinny ones (M of a few hundred rows) smaller tiles that fill the
// SMs. Ties go to the earlier (larger) candidate.
//
// It returns an error, naming what is wrong, for an input or output type no candidate
// builds, a shape CheckShape refuses, or a multiprocessor count that is not positive.
func GemmSM90For(in, out dsl.Type, m, n, k, sms int) (GemmSM90Config, error) {
	if sms <= 0 {
		return GemmSM90Config{}, fmt.Errorf("GemmSM90For: %d multiprocessors: want a positive count (the device's)", sms)
	}
	best, bestCost := GemmSM90Config{}, 0.0
	var why error
	for _, c := range GemmSM90Candidates(in, out) {
		if err := c.Check(); err != nil {
			why = err
			continue
		}
		cost := c.Cycles(m, n, k, sms)
		if best.BN == 0 || cost < bestCost {
			best, bestCost = c, cost
		}
	}
	if best.BN == 0 {
		return GemmSM90Config{}, fmt.Errorf("GemmSM90For: no candidate for %s -> %s: %w", in, out, why)
	}
	if err := best.CheckShape(m, n, k); err != nil {
		return GemmSM90Config{}, err
	}
	return best, nil
}

// Cycles is GemmSM90For's estimate of the configuration's time on an M x N x K problem, in
// SM cycles of the busiest SM (see GemmSM90For): a model for choosing, not a prediction.
// It is a cost, so what cannot run costs +Inf: a configuration Check refuses, an extent
// m, n or k below 1, or fewer than 1 multiprocessor. A PingPong configuration is costed as
// a two-consumer one of 64-row tiles: the model sees its loads (B per 64 rows: load-bound
// at 64 x 256, 13.3 load cycles against 8 tensor-core cycles per K element of bf16) but not
// the epilogue it hides; GemmSM90Candidates holds none (on an H200 64 x 256 ping-pong ran
// at 0.70-0.74 of the cooperative kernel from 1024 rows: docs/bench.md).
func (c GemmSM90Config) Cycles(m, n, k, sms int) float64 {
	if m < 1 || n < 1 || k < 1 || sms < 1 || c.Check() != nil {
		return math.Inf(1)
	}
	// per element of K: tensor-core cycles (fp8 runs at twice the 16-bit rate) and load
	// cycles
	mma := float64(c.BM()*c.BN) * 2 / float64(4096*2/c.In.Bytes())
	if c.Consumers == 1 {
		mma /= 0.8
	}
	load := float64((c.BM()+c.BN)*c.In.Bytes()) / 48
	waves := ceilDiv(c.Tiles(m, n), sms)
	kSteps := ceilDiv(k, c.BK()) * c.BK()
	return float64(waves) * (float64(kSteps)*max(mma, load) + gemmSM90TileOverhead)
}

// gemmSM90TileOverhead is GemmSM90For's cost of one tile outside its K steps, in cycles: the
// first stage's latency and the epilogue.
const gemmSM90TileOverhead = 2000

// gemmSM90MaxShared is the most shared memory (static and dynamic) an sm_90 block may use.
const gemmSM90MaxShared = 227 << 10

// blockShared is the block's shared memory: SharedBytes (dynamic) and the static
// mbarriers, a full and an empty array of Stages 8-byte barriers, each 16-byte aligned
// (a configuration whose dynamic bytes alone reached the limit passed Check and failed at
// launch).
func (c GemmSM90Config) blockShared() int {
	return c.SharedBytes() + 2*((c.Stages*8+15)/16*16)
}

// BK returns the K step: one 128-byte swizzle row of In elements (64, or 128 for fp8).
func (c GemmSM90Config) BK() int { return 128 / max(c.In.Bytes(), 1) }

// FP8 reports fp8 inputs, whose B is N x K row-major (K-major; see GemmSM90Config).
func (c GemmSM90Config) FP8() bool { return c.In == dsl.E4M3 || c.In == dsl.E5M2 }

// BM returns the rows of an output tile: the block's 64*Consumers rows, or with PingPong
// one consumer warpgroup's 64.
func (c GemmSM90Config) BM() int {
	if c.PingPong {
		return 64
	}
	return 64 * c.Consumers
}

// Name is the kernel's entry name: gemm_sm90_<in>_<out>_<BM>x<BN>x<BK>_<stages>s, then
// _pingpong for the ping-pong schedule (BM is then one warpgroup's 64 rows), _c2 for
// clusters of 2, _tmastore for the TMA-store epilogue and _ep_<options> for a non-zero
// Epilogue (_ep_bias_silu).
func (c GemmSM90Config) Name() string {
	n := fmt.Sprintf("gemm_sm90_%s_%s_%dx%dx%d_%ds", c.In, c.Out, c.BM(), c.BN, c.BK(), c.Stages)
	if c.PingPong {
		n += "_pingpong"
	}
	if c.Cluster() > 1 {
		n += fmt.Sprintf("_c%d", c.Cluster())
	}
	if c.TMAStore {
		n += "_tmastore"
	}
	if c.Pieces {
		n += "_pieces"
	}
	if c.ShiftDivision {
		n += "_sdiv"
	}
	return n + c.Epilogue.suffix()
}

// Cluster returns the blocks per cluster (ClusterM, at least 1).
func (c GemmSM90Config) Cluster() int { return max(c.ClusterM, 1) }

// Threads returns the block size: the producer warpgroup and the consumers.
func (c GemmSM90Config) Threads() int { return 128 * (1 + c.Consumers) }

// SharedBytes returns the dynamic shared memory a block needs: the stages of A and B, and
// dsl.DynamicSharedTilePad to align them to 1024 bytes at run time.
func (c GemmSM90Config) SharedBytes() int {
	return c.Stages*(c.BM()+c.BN)*c.BK()*c.In.Bytes() + c.storeBytes() + c.epiBytes() + dsl.DynamicSharedTilePad
}

// epiBytes is where the TMA-store epilogue stages the Epilogue's per-column vectors (bias,
// scaleB) of a tile: BN f32 values each, per consumer warpgroup, after D's tile.
func (c GemmSM90Config) epiBytes() int {
	if !c.TMAStore {
		return 0
	}
	return c.Consumers * c.BN * 4 * c.Epilogue.keyedCols()
}

// storeBytes is the TMA-store epilogue's shared tiles: one 64 x BN tile of Out per
// consumer warpgroup (BM x BN without PingPong).
func (c GemmSM90Config) storeBytes() int {
	if !c.TMAStore {
		return 0
	}
	return 64 * c.Consumers * c.BN * max(c.Out.Bytes(), 1)
}

// Tiles returns the number of output tiles of an M x N problem; 0 for a configuration
// without tiles (BN or Consumers not positive: Check refuses it) or an empty problem.
func (c GemmSM90Config) Tiles(m, n int) int {
	if c.BN <= 0 || c.Consumers <= 0 || m <= 0 || n <= 0 {
		return 0
	}
	return ceilDiv(m, c.BM()) * ceilDiv(n, c.BN)
}

// Grid returns the number of persistent blocks for an M x N problem on a GPU of sms
// multiprocessors: one block per SM, at most one per tile; with clusters a multiple of the
// cluster size, at most one cluster per column of Cluster() row tiles.
//
// It returns 0 where Tiles does, or for sms < 1: no launch (the caller's checks,
// Check and CheckShape, say why).
func (c GemmSM90Config) Grid(m, n, sms int) int {
	if c.Tiles(m, n) == 0 || sms < 1 {
		return 0
	}
	cl := c.Cluster()
	units := ceilDiv(ceilDiv(m, c.BM()), cl) * ceilDiv(n, c.BN)
	return cl * max(1, min(units, sms/cl))
}

// TMABoxA and TMABoxB are the tensor maps' boxes (innermost dimension first) with
// SwizzleBytes: A's map is (K, M) of a row-major A; B's is (N, K) of a K x N row-major B, or
// (K, N) of an N x K row-major B for fp8 (TMADimsB).
func (c GemmSM90Config) TMABoxA() [2]int { return [2]int{c.BK(), c.BM()} }

// TMABoxB is B's box (see TMABoxA). With clusters each block loads 1/Cluster() of the B
// tile: whole 64-column boxes of a 16-bit B where there are enough, else boxes of fewer
// rows (MakeTMACopyMulticast).
func (c GemmSM90Config) TMABoxB() [2]int {
	cl := c.Cluster()
	if c.FP8() {
		return [2]int{c.BK(), c.BN / cl}
	}
	if (c.BN/64)%cl == 0 {
		return [2]int{64, c.BK()}
	}
	return [2]int{64, c.BK() / cl}
}

// TMABoxD is D's box for the TMA-store epilogue, innermost first (D's map is (N, M)): one
// 128-byte swizzle row of Out elements by 64 rows.
func (c GemmSM90Config) TMABoxD() [2]int { return [2]int{128 / max(c.Out.Bytes(), 1), 64} }

// TMADimsB returns B's tensor-map extents for an n x k problem, innermost first: (N, K), or
// (K, N) for fp8.
func (c GemmSM90Config) TMADimsB(n, k int) [2]int {
	if c.FP8() {
		return [2]int{k, n}
	}
	return [2]int{n, k}
}

// SwizzleBytes is the tensor maps' swizzle.
func (c GemmSM90Config) SwizzleBytes() int { return 128 }

// Check reports a configuration the kernel cannot build.
func (c GemmSM90Config) Check() error {
	switch {
	case c.In != dsl.F16 && c.In != dsl.BF16 && !c.FP8():
		return fmt.Errorf("gemm_sm90: input type %s (want f16, bf16, e4m3 or e5m2)", typeName(c.In))
	case c.Out != dsl.F16 && c.Out != dsl.BF16 && c.Out != dsl.F32:
		return fmt.Errorf("gemm_sm90: output type %s (want f16, bf16 or f32)", typeName(c.Out))
	case c.BN != 64 && c.BN != 128 && c.BN != 256:
		return fmt.Errorf("gemm_sm90: BN %d (want 64, 128 or 256)", c.BN)
	case c.Consumers != 1 && c.Consumers != 2:
		return fmt.Errorf("gemm_sm90: %d consumer warpgroups (want 1 or 2)", c.Consumers)
	case c.Stages < 2 || c.Stages > 8:
		return fmt.Errorf("gemm_sm90: %d stages (want 2..8)", c.Stages)
	case c.ClusterM < 0 || c.ClusterM > 2:
		return fmt.Errorf("gemm_sm90: ClusterM %d (want 0, 1 or 2)", c.ClusterM)
	case c.PingPong && c.Consumers != 2:
		return fmt.Errorf("gemm_sm90: PingPong alternates two consumer warpgroups; the configuration has %d", c.Consumers)
	case c.Pieces && c.Cluster() > 1:
		return fmt.Errorf("gemm_sm90: Pieces orders tiles piece-major with the gemm's own scheduler, which has no clusters (ClusterM %d; want 0 or 1)", c.ClusterM)
	case c.blockShared() > gemmSM90MaxShared:
		return fmt.Errorf("gemm_sm90: %d stages of %dx%d and %dx%d tiles (and %d bytes of epilogue tile, %d of barriers) need %d bytes of shared memory; an sm_90 block has at most %d",
			c.Stages, c.BM(), c.BK(), c.BN, c.BK(), c.storeBytes()+c.epiBytes(), c.blockShared()-c.SharedBytes(), c.blockShared(), gemmSM90MaxShared)
	}
	return c.Epilogue.check("gemm_sm90", c.FP8())
}

// CheckShape reports a problem the kernel cannot run: every extent in [1, MaxGemmExtent]
// (TMA's coordinates are signed 32-bit; the epilogue's offsets into C and D are 64-bit, so
// M*N may pass 2^32); TMA's global strides must be multiples of 16 bytes, so K (A's row
// length) and N (B's) must be multiples of 8; for fp8, K (A's and B's row length) must be a
// multiple of 16 and N of 8 (the epilogue's stores). A configuration Check refuses is
// refused first, with Check's error.
func (c GemmSM90Config) CheckShape(m, n, k int) error {
	if err := c.Check(); err != nil {
		return err
	}
	switch {
	case m <= 0 || n <= 0 || k <= 0:
		return fmt.Errorf("gemm_sm90: shape %dx%dx%d: every extent must be positive", m, n, k)
	case m > MaxGemmExtent || n > MaxGemmExtent || k > MaxGemmExtent:
		return fmt.Errorf("gemm_sm90: shape %dx%dx%d: every extent must be at most 2^31-1 (TMA's coordinates are 32-bit signed)", m, n, k)
	case c.FP8() && (k%16 != 0 || n%8 != 0):
		return fmt.Errorf("gemm_sm90: shape %dx%dx%d: K must be a multiple of 16 (TMA needs 16-byte-aligned row strides of the %s A and B) and N of 8", m, n, k, c.In)
	case k%8 != 0 || n%8 != 0:
		return fmt.Errorf("gemm_sm90: shape %dx%dx%d: K and N must be multiples of 8 (TMA needs 16-byte-aligned row strides of A and B)", m, n, k)
	}
	return nil
}

// CheckPieces reports a piece size the Pieces kernel cannot signal for an M-row problem:
// pieceRows must be positive, a multiple of BM (no tile straddles two pieces) and divide m
// (every piece has the same PieceSignals). A configuration without Pieces is refused.
func (c GemmSM90Config) CheckPieces(m, pieceRows int) error {
	switch {
	case !c.Pieces:
		return fmt.Errorf("gemm_sm90: CheckPieces: the configuration %s has no Pieces", c.Name())
	case pieceRows <= 0 || pieceRows%c.BM() != 0:
		return fmt.Errorf("gemm_sm90: %d rows a piece: want a positive multiple of the tile's %d rows", pieceRows, c.BM())
	case m%pieceRows != 0:
		return fmt.Errorf("gemm_sm90: M %d is not a multiple of the %d rows of a piece", m, pieceRows)
	}
	return nil
}

// NumPieces returns the number of pieces of an M-row problem (0 without Pieces or for a piece
// size CheckPieces refuses).
func (c GemmSM90Config) NumPieces(m, pieceRows int) int {
	if c.CheckPieces(m, pieceRows) != nil {
		return 0
	}
	return m / pieceRows
}

// PieceSignals returns how much one launch adds to each piece's counter for pieces of
// pieceRows rows of an N-column D: one per 64-row sub-tile of each of the piece's tiles
// (each consumer warpgroup signals its own rows), pieceRows/64 * ceil(N/BN), saturated at
// math.MaxInt (never a wrapped count).
func (c GemmSM90Config) PieceSignals(pieceRows, n int) int {
	if pieceRows <= 0 || n <= 0 || c.BN <= 0 {
		return 0
	}
	return satInt(pieceRows/64, ceilDiv(n, c.BN))
}

// GemmSM90PieceArgs are the Pieces kernel's parameters after GemmOut (and
// GemmSM90StoreArgs): the per-piece u32 counters (M/PieceRows of them), the piece size in
// rows (GemmSM90Config.CheckPieces) and a rotation of A's rows: D's row i is A's row
// (i + RowShift) mod M times B (RowShift a multiple of PieceRows below M; 0: none), so that
// a reduce-scatter can compute the pieces for its peers first and its own last, each piece
// contiguous in D, from an A in natural order.
type GemmSM90PieceArgs struct {
	Counters  dsl.Ptr   `kgen:"u32"`
	PieceRows dsl.Value `kgen:"u32"`
	RowShift  dsl.Value `kgen:"u32"`
}

// GemmSM90Args are the sm_90a gemm's parameters: the tensor maps of A and B (by value), m,
// n, k, alpha, beta; then GemmOut's c and d (Out elements; C may be null when beta is 0).
type GemmSM90Args struct {
	TmA, TmB    dsl.TensorMap
	M, N, K     dsl.Value `kgen:"u32"`
	Alpha, Beta dsl.Value `kgen:"f32"`
}

// GemmSM90StoreArgs is the TMA-store epilogue's last parameter (GemmSM90Config.TMAStore):
// D's tensor map, (N, M) innermost first over Out elements, box TMABoxD, 128-byte swizzle.
type GemmSM90StoreArgs struct {
	TmD dsl.TensorMap
}

func init() {
	register(&Spec{
		Name:    "gemm_sm90",
		Doc:     "D = alpha*A*B + beta*C on sm_90a: TMA (tensor-map parameters) and wgmma, warp-specialized and persistent; 128x256 tiles, 3 stages (kernels.GemmSM90For picks per shape); K, N multiples of 8; e4m3: B is N x K, D bf16, K a multiple of 16",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16, dsl.E4M3},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmSM90(k, DefaultGemmSM90Config(dt)) },
	})
}

// GemmSM90 writes the sm_90a gemm for cfg into k (target sm_90a). Launch cfg.Grid(M, N, SMs)
// blocks of cfg.Threads() threads with cfg.SharedBytes() bytes of dynamic shared memory, in
// clusters of (cfg.Cluster(), 1, 1) when ClusterM is 2; the tensor maps are A's (K, M) and
// B's (N, K), innermost first, with the boxes TMABoxA, TMABoxB and the 128-byte swizzle,
// and with TMAStore D's (N, M) with TMABoxD last (GemmSM90StoreArgs).
//
// The producer warpgroup gives up registers (setmaxnreg.dec 40) and one elected thread
// loads each tile's K steps into the stage ring (TMAPipeline: the full barrier counts the
// bytes, out-of-bounds rows and columns are zero-filled). The consumer warpgroups take more
// registers (setmaxnreg.inc 232) and run CuTe's mainloop: one wgmma group in flight, each
// stage released once the group after it is issued. The epilogue stores alpha*acc (+
// beta*C when beta != 0, a run-time branch) from the registers, predicated at the edges,
// while the producer already loads the next tile. A non-zero cfg.Epilogue applies its
// options there (GemmEpilogueArgs follow the other parameters).
//
// By default (cooperative) both consumer warpgroups work on one BM x BN tile, 64 rows each,
// and run its epilogue at the same time, the tensor cores idle meanwhile. With
// cfg.PingPong each consumer warpgroup owns whole 64 x BN tiles, the 1st, 3rd, ... of the
// block's tiles for warpgroup 0, the 2nd, 4th, ... for warpgroup 1; the producer loads them
// in that order, and two named barriers hand the mainloop's turn from one warpgroup to the
// other once it has issued its last wgmma, so one's epilogue (either store path, every
// Epilogue option) runs under the other's mainloop (gemmSM90PingPong). The registers are the
// cooperative kernel's (a 64 x BN accumulator tile a warpgroup, setmaxnreg 40/232); each
// K step loads B for 64 rows of A instead of 128 (ClusterM 2 shares it between two blocks).
func GemmSM90(k *dsl.Kernel, cfg GemmSM90Config) { gemmSM90(k, cfg, nil) }

// GemmSM90With writes the sm_90a gemm for cfg with a user-written epilogue: hook runs
// once after the gemm's parameters are declared (it may declare its own after them) and
// its EpilogueFunc runs on every pair of adjacent columns a consumer thread stores, in the
// register epilogue and in the TMA-store one. cfg.Epilogue must be zero (the hook replaces
// the library's options).
func GemmSM90With(k *dsl.Kernel, cfg GemmSM90Config, hook EpilogueHook) {
	if hook == nil {
		k.Errorf("GemmSM90With: nil EpilogueHook (GemmSM90 builds the plain gemm)")
		return
	}
	gemmSM90(k, cfg, hook)
}

func gemmSM90(k *dsl.Kernel, cfg GemmSM90Config, hook EpilogueHook) {
	if err := cfg.Check(); err != nil {
		k.Errorf("%v", err)
		return
	}
	if k.Target() != ptx.SM90a {
		k.Errorf("gemm_sm90: wgmma and setmaxnreg need sm_90a; the kernel targets %s", k.Target())
		return
	}
	if cfg.ShiftDivision {
		k.SetShiftDivision(true)
	}
	// .maxntid and .minnctapersm 1: ptxas then fixes the registers at entry (65536 over the
	// block), without which it ignores setmaxnreg (C7508).
	k.LaunchBounds(cfg.Threads(), 1)
	a := dsl.Params[GemmSM90Args](k, cfg.In)
	o := dsl.Params[GemmOut](k, cfg.Out)
	var h gemmSM90Hooks
	if cfg.TMAStore {
		h.store = dsl.Params[GemmSM90StoreArgs](k, cfg.Out).TmD
	}
	if cfg.Pieces {
		pa := dsl.Params[GemmSM90PieceArgs](k, cfg.Out)
		h.pieces = &pa
	}
	switch {
	case hook != nil && !cfg.Epilogue.IsZero():
		k.Errorf("gemm_sm90: a user epilogue (EpilogueHook) and Epilogue options %s together; give one", cfg.Epilogue)
		return
	case hook != nil:
		h.epi = hookPlan(k, cfg.Out, hook)
	default:
		h.epi = cfg.Epilogue.plan(k, cfg.Out)
	}
	gemmSM90Body(k, cfg, a, o, h)
}

// tileLoop runs a body per output tile of the calling block: dsl.TileScheduler, or a fused
// kernel's order of tiles.
type tileLoop interface {
	ForEach(body func(m, n dsl.Value))
}

// gemmSM90Hooks are where the fused kernels (fused_sm90.go) extend the sm_90a gemm's body;
// zero fields keep the plain gemm.
type gemmSM90Hooks struct {
	// tiles hands out the output tiles (nil: a TileScheduler over A's and B's tiles).
	tiles tileLoop
	// mapA is A's tensor map (nil: a.TmA).
	mapA dsl.TensorMapSource
	// load runs in the producer's elected thread before the loads of tile (m, n) and
	// returns the row of mapA the tile starts at (nil: m*BM).
	load func(m, n dsl.Value) dsl.Value
	// rowB, when set, runs in the producer's elected thread after load and returns the
	// offset added to the row coordinate of the tile's B loads in B's map: K for a 16-bit
	// B (K x N), N for fp8's N x K (the grouped gemm's group in its stacked B; nil: 0).
	rowB func() dsl.Value
	// producer runs in every producer thread (tid 0..127, after setmaxnreg.dec) once the
	// elected thread's loop is built; the elected thread runs it after its loop.
	producer func(tid dsl.Value)
	// epilogue replaces the stores of tile (m, n): consumer warpgroup wg's 64 x BN
	// accumulators, t the thread in the warpgroup.
	epilogue func(acc dsl.Tensor, t, wg, m, n dsl.Value)
	// store is D's tensor map for the TMA-store epilogue (cfg.TMAStore).
	store dsl.TensorMapSource
	// epi is the gemm's own epilogue's plan (cfg.Epilogue or a user hook; nil: plain).
	epi *epiPlan
	// pieces are the Pieces kernel's counters and piece size (cfg.Pieces).
	pieces *GemmSM90PieceArgs
}

// gemmSM90Body writes the sm_90a gemm's warp-specialized body for the parameters a (A's
// map unless h.mapA) and o (unless h.epilogue): GemmSM90 with h zero, the fused kernels
// with their hooks.
func gemmSM90Body(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, o GemmOut, h gemmSM90Hooks) {
	BM, BN, BK := cfg.BM(), cfg.BN, cfg.BK()
	cl := cfg.Cluster()
	if cl > 1 && (h.tiles != nil || h.load != nil) {
		k.Errorf("gemm_sm90: clusters (ClusterM %d) need the gemm's own tile scheduler and loads", cfg.ClusterM)
		return
	}
	if cfg.TMAStore && (h.epilogue != nil || h.store == nil) {
		k.Errorf("gemm_sm90: the TMA-store epilogue needs D's tensor map and the gemm's own epilogue")
		return
	}
	if h.epilogue != nil && h.epi != nil || !cfg.Epilogue.IsZero() && h.epi == nil {
		k.Errorf("gemm_sm90: Epilogue %s: only GemmSM90 applies epilogue options (the fused kernels take none)", cfg.Epilogue)
		return
	}
	if cfg.Pieces != (h.pieces != nil) || cfg.Pieces && (h.tiles != nil || h.load != nil || h.epilogue != nil) {
		k.Errorf("gemm_sm90: Pieces needs the gemm's own tile scheduler, loads and epilogue, and its counters (GemmSM90; the fused kernels signal their own way)")
		return
	}
	if cfg.PingPong && (h.tiles != nil || h.mapA != nil || h.load != nil || h.rowB != nil || h.producer != nil || h.epilogue != nil) {
		k.Errorf("gemm_sm90: PingPong needs the gemm's own tile scheduler, loads and epilogue (GemmSM90; the grouped and fused kernels run the cooperative schedule)")
		return
	}
	k.Assume(a.N, 8)
	k.Assume(a.K, 16/cfg.In.Bytes())

	atom, err := dsl.MakeGMMAAtom(cfg.In, BN)
	if err != nil {
		k.Errorf("gemm_sm90: %v", err)
		return
	}
	laK, err := dsl.GMMALayoutAtom(cfg.In, dsl.KMajor, 128)
	if err != nil {
		k.Errorf("gemm_sm90: %v", err)
		return
	}
	lA, errA := dsl.TileToShape(laK, BM, BK)
	lB, errB := gemmSM90LayoutB(cfg)
	if errA != nil || errB != nil {
		k.Errorf("gemm_sm90: shared layouts: %v %v", errA, errB)
		return
	}
	sA := k.DynamicSharedTile(cfg.In, lA, cfg.Stages, 0)
	sB := k.DynamicSharedTile(cfg.In, lB, cfg.Stages, cfg.Stages*sA.StageBytes)
	var mapA dsl.TensorMapSource = a.TmA
	if h.mapA != nil {
		mapA = h.mapA
	}
	cA, cB := k.MakeTMACopy(mapA, sA), k.MakeTMACopyMulticast(a.TmB, sB, cl)
	majorB := dsl.MNMajor
	if cfg.FP8() {
		majorB = dsl.KMajor
	}
	if cA.Box != cfg.TMABoxA() || cB.Box != cfg.TMABoxB() || cA.SwizzleBytes != 128 || cB.SwizzleBytes != 128 || cB.Major() != majorB {
		k.Errorf("gemm_sm90: TMA copies A %v-major box %v, B %v-major box %v; the host builds the maps with %v and %v", cA.Major(), cA.Box, cB.Major(), cB.Box, cfg.TMABoxA(), cfg.TMABoxB())
		return
	}
	var sD dsl.SharedTile
	var cD *dsl.TMACopy
	if cfg.TMAStore {
		laD, err := dsl.GMMALayoutAtom(cfg.Out, dsl.KMajor, 128)
		var lD layout.ComposedLayout
		if err == nil {
			lD, err = dsl.TileToShape(laD, 64, BN)
		}
		if err != nil {
			k.Errorf("gemm_sm90: D's shared layout: %v", err)
			return
		}
		// One 64 x BN tile per consumer warpgroup, after the stages.
		sD = k.DynamicSharedTile(cfg.Out, lD, cfg.Consumers, cfg.Stages*(sA.StageBytes+sB.StageBytes))
		cD = k.MakeTMACopy(h.store, sD)
		if cD.Box != cfg.TMABoxD() || cD.SwizzleBytes != 128 || cD.Major() != dsl.KMajor {
			k.Errorf("gemm_sm90: TMA store of D: %v-major box %v; the host builds the map with %v", cD.Major(), cD.Box, cfg.TMABoxD())
			return
		}
	}
	// One arrival per consumer warp (of each block of the cluster) frees a stage (lane 0,
	// after the warp's wait_group); with PingPong a stage belongs to one warpgroup's tile.
	readers := cfg.Consumers
	if cfg.PingPong {
		readers = 1
	}
	pipe := k.MakeTMAPipelineCluster(cfg.Stages, 4*readers, cl, cA, cB)
	mma := dsl.MakeTiledGMMA(atom, readers)

	tid := k.ThreadIdx(dsl.X)
	var tilesM, tilesN dsl.Value
	if h.tiles == nil {
		tilesM = a.M.Add(uint32(BM - 1)).Div(uint32(BM))
		tilesN = a.N.Add(uint32(BN - 1)).Div(uint32(BN))
	}
	kTiles := a.K.Add(uint32(BK - 1)).Div(uint32(BK))
	sched := h.tiles
	var tileOf func(lin dsl.Value) (m, n dsl.Value) // the gemm's own order (PingPong's)
	switch {
	case sched == nil && cl > 1:
		own := k.MakeClusterTileScheduler(tilesM, tilesN, 8/cl, cl)
		sched, tileOf = own, own.Tile
	case sched == nil && cfg.Pieces:
		own := newGemmSM90PieceOrder(k, tilesM, tilesN, h.pieces.PieceRows.Div(uint32(BM)))
		sched, tileOf = own, own.Tile
	case sched == nil:
		own := k.MakeTileScheduler(tilesM, tilesN, 8)
		sched, tileOf = own, own.Tile
	}
	mask := k.Const(dsl.U16, uint16(1<<cl-1))

	k.If(tid.Lt(uint32(128)), func() {
		k.WarpgroupRegDealloc(40)
		k.If(tid.Lt(uint32(32)).And(k.ElectOne()), func() {
			st := pipe.ProducerState()
			sched.ForEach(func(m, n dsl.Value) {
				var m0 dsl.Value
				if h.load != nil {
					m0 = h.load(m, n)
				} else {
					m0 = m.Mul(uint32(BM))
				}
				if h.pieces != nil {
					m0 = m0.Add(h.pieces.RowShift).Rem(a.M)
				}
				n0 := n.Mul(uint32(BN))
				n0B := n0
				var kB dsl.Value
				if h.rowB != nil && cfg.FP8() {
					n0B = n0.Add(h.rowB())
				} else if h.rowB != nil {
					kB = h.rowB()
				}
				k.For(uint32(0), kTiles, uint32(1), func(kt dsl.Value) {
					pipe.ProducerAcquire(st)
					k0 := kt.Mul(uint32(BK))
					pipe.Load(st, cA, m0, k0)
					k0B := k0
					if h.rowB != nil && !cfg.FP8() {
						k0B = k0.Add(kB)
					}
					if cl > 1 {
						pipe.LoadMulticast(st, cB, n0B, k0B, mask)
					} else {
						pipe.Load(st, cB, n0B, k0B)
					}
					pipe.ProducerCommit(st)
					st.Advance()
				})
			})
		})
		if h.producer != nil {
			h.producer(tid)
		}
	}).Else(func() {
		k.WarpgroupRegAlloc(232)
		acc := mma.Accumulators(k)
		wg := tid.Shr(uint32(7)).Sub(uint32(1))
		st, rel := pipe.ConsumerState(), pipe.ConsumerState()
		lane0 := tid.And(uint32(31)).Eq(uint32(0))
		release := func() { k.If(lane0, func() { pipe.ConsumerRelease(rel) }) }
		// preload loads the epilogue's per-column vectors at the tile's start, so that they
		// arrive while the mainloop runs (nil: nothing to load).
		preload := func(n dsl.Value) *epiPre {
			if h.epilogue == nil && h.epi != nil && len(h.epi.keyed) > 0 {
				return gemmSM90EpiloguePreload(k, cfg, a, h.epi, tid.And(uint32(127)), n.Mul(uint32(BN)))
			}
			return nil
		}
		// mainloop runs the tile's K steps on the warpgroup's accumulators; mmaWG is the
		// warpgroup's index in mma (its rows of the A stage), issued the hook that runs
		// once the last K step's wgmma is issued, before it is waited for.
		mainloop := func(mmaWG dsl.Value, issued func()) {
			// The first K step overwrites the previous tile's accumulators (scale-d 0).
			pipe.ConsumerWait(st)
			mma.Accumulating(k.Const(dsl.Bool, false)).Gemm(k, mmaWG, sA, sB, st.Index, acc)
			st.Advance()
			k.For(uint32(1), kTiles, uint32(1), func(kt dsl.Value) {
				pipe.ConsumerWait(st)
				mma.Gemm(k, mmaWG, sA, sB, st.Index, acc)
				k.WaitGroup(1)
				release()
				st.Advance()
				rel.Advance()
			})
			issued()
			k.WaitGroup(0)
			release()
			rel.Advance()
		}
		// epilogue stores the warpgroup's 64 x BN accumulators at rows row0.. and columns
		// col0.. of D; t is the thread in the warpgroup.
		epilogue := func(t, row0, col0 dsl.Value, pre *epiPre) {
			if cfg.TMAStore {
				if pre == nil {
					gemmSM90StoreEpilogue(k, cfg, a, o, cD, sD, acc, t, wg, row0, col0, h.epi)
				} else {
					gemmSM90StoreEpiloguePre(k, cfg, a, o, cD, sD, acc, t, wg, row0, col0, h.epi, pre)
				}
				return
			}
			gemmSM90EpiloguePre(k, cfg, a, o, acc, t, row0, col0, h.epi, pre)
		}
		var pend dsl.Value // TMA store with Pieces: 1 + the piece of the store in flight (0: none)
		if cfg.Pieces {
			if cfg.TMAStore {
				pend = k.Var(dsl.U32, uint32(0))
			}
			plain := epilogue
			epilogue = func(t, row0, col0 dsl.Value, pre *epiPre) {
				if cfg.TMAStore {
					gemmSM90PieceFlush(k, *h.pieces, t, pend) // the previous tile's store: done by now
				}
				plain(t, row0, col0, pre)
				gemmSM90PieceSignal(k, cfg, *h.pieces, t, wg, row0, pend)
			}
		}
		if cfg.PingPong {
			gemmSM90PingPong(k, tileOf, tilesM, tilesN, cl, pipe, wg, kTiles, st, rel, func(m, n dsl.Value, issued func()) {
				pre := preload(n)
				mainloop(k.Const(dsl.U32, uint32(0)), issued)
				epilogue(tid.And(uint32(127)), m.Mul(uint32(BM)), n.Mul(uint32(BN)), pre)
			})
		} else {
			sched.ForEach(func(m, n dsl.Value) {
				pre := preload(n)
				mainloop(wg, func() {})
				if h.epilogue != nil {
					h.epilogue(acc, tid.And(uint32(127)), wg, m, n)
					return
				}
				t := tid.And(uint32(127))
				epilogue(t, m.Mul(uint32(BM)).Add(wg.Mul(uint32(64))), n.Mul(uint32(BN)), pre)
			})
		}
		if cfg.TMAStore {
			// The last tile's stores complete before the block's shared memory goes.
			k.If(tid.And(uint32(127)).Eq(uint32(0)), func() { k.BulkWait(0, false) })
			if cfg.Pieces {
				gemmSM90PieceFlush(k, *h.pieces, tid.And(uint32(127)), pend)
			}
		}
	})
	if cl > 1 {
		// No block exits while another may still arrive on its empty barriers.
		k.ClusterSync()
	}
}

// gemmSM90PingPong runs the ping-pong schedule's consumer warpgroup wg (0 or 1): of the
// block's tiles of the tilesM x tilesN tiles (sched's linear tiles blockIdx, blockIdx +
// gridDim, ...; with clusters of cl blocks, sched's (MakeClusterTileScheduler) clusterIdx,
// clusterIdx + the clusters, ..., row cl*m + the block's rank: the order in which the
// producer loads them, each tile's kTiles K steps in turn into the stage ring), warpgroup 0
// takes the 1st, 3rd, ... and warpgroup 1 the 2nd, 4th, ...; tile(m, n, issued) writes one
// tile's mainloop and epilogue, calling issued once the mainloop's last wgmma is issued.
// The blocks of a cluster run as many tiles each, so their warpgroups take the same stages
// of the ring and release them on both blocks' empty barriers.
//
// The consumer states st and rel start at the warpgroup's first tile's stages (warpgroup 1
// skips the first tile's kTiles) and skip the other warpgroup's tile after each of its own.
// Two named barriers of 256 threads, one per warpgroup, hand the mainloop's turn over (the
// order barrier of CUTLASS's ping-pong kernel, FlashAttention-3's warp scheduler barriers):
// a warpgroup syncs on its own before its first K step and arrives on the other's once it
// has issued its last, then waits for its wgmmas and runs its epilogue while the other's
// mainloop runs. So the warpgroups take the ring's stages in the order the producer fills
// them (a warpgroup waiting on a stage of its next tile while the other still reads the
// ring could otherwise see a phase of the same parity complete). Warpgroup 1 gives
// warpgroup 0 the first turn (where the block has a tile), and an arrival is skipped where
// the other warpgroup has no next tile, so every arrival meets a sync. The epilogues of the
// two are not ordered: each has its own registers, its own D tile and barrier for the TMA
// store.
func gemmSM90PingPong(k *dsl.Kernel, tileOf func(lin dsl.Value) (m, n dsl.Value), tilesM, tilesN dsl.Value, cl int, pipe *dsl.TMAPipeline, wg, kTiles dsl.Value, st, rel dsl.PipelineState, tile func(m, n dsl.Value, issued func())) {
	total, grid, bid := tilesM.Mul(tilesN), k.GridDim(dsl.X), k.BlockIdx(dsl.X)
	var rank dsl.Value
	if cl > 1 {
		total = tilesM.Add(uint32(cl - 1)).Div(uint32(cl)).Mul(tilesN)
		grid, bid, rank = k.ClusterGridDim(dsl.X), k.ClusterIdx(dsl.X), k.BlockRankInCluster()
	}
	first := wg.Eq(uint32(0))
	bars := [2]dsl.NamedBar{k.NamedBarrierFor("gemm_sm90 ping-pong: warpgroup 0's mainloop turn", 256), k.NamedBarrierFor("gemm_sm90 ping-pong: warpgroup 1's mainloop turn", 256)}
	skip := func() {
		pipelineAdvanceBy(k, st, pipe.Stages(), kTiles)
		pipelineAdvanceBy(k, rel, pipe.Stages(), kTiles)
	}
	k.If(first.Not(), func() {
		skip()
		k.If(bid.Lt(total), bars[0].Arrive)
	})
	k.For(bid.Add(wg.Mul(grid)), total, grid.Mul(uint32(2)), func(lin dsl.Value) {
		m, n := tileOf(lin)
		if cl > 1 {
			m = m.Mul(uint32(cl)).Add(rank)
		}
		k.If(first, bars[0].Sync).Else(bars[1].Sync)
		tile(m, n, func() {
			k.If(lin.Add(grid).Lt(total), func() { k.If(first, bars[1].Arrive).Else(bars[0].Arrive) })
		})
		skip()
	})
}

// gemmSM90PieceOrder is the Pieces kernel's tile order: tilesM x tilesN tiles in pieces of
// perM tile rows (PieceRows/BM), piece-major; within a piece a TileScheduler's grouped order
// (groups of 8 tile rows) over its perM x tilesN tiles. The blocks take the linear tiles
// blockIdx, blockIdx + gridDim, ... as TileScheduler's ForEach does, so every piece's tiles
// are taken before the next piece's and the pieces complete about in order.
type gemmSM90PieceOrder struct {
	k              *dsl.Kernel
	inner          dsl.TileScheduler
	perM, perPiece dsl.Value
	total          dsl.Value
}

func newGemmSM90PieceOrder(k *dsl.Kernel, tilesM, tilesN, perM dsl.Value) gemmSM90PieceOrder {
	return gemmSM90PieceOrder{k: k, inner: k.MakeTileScheduler(perM, tilesN, 8), perM: perM,
		perPiece: perM.Mul(tilesN), total: tilesM.Mul(tilesN)}
}

// Tile returns linear tile lin's tile row and column.
func (o gemmSM90PieceOrder) Tile(lin dsl.Value) (m, n dsl.Value) {
	piece := lin.Div(o.perPiece)
	m, n = o.inner.Tile(lin.Rem(o.perPiece))
	return piece.Mul(o.perM).Add(m), n
}

// ForEach runs body for each of the calling block's tiles in order.
func (o gemmSM90PieceOrder) ForEach(body func(m, n dsl.Value)) {
	k := o.k
	k.For(k.BlockIdx(dsl.X), o.total, k.GridDim(dsl.X), func(lin dsl.Value) {
		m, n := o.Tile(lin)
		body(m, n)
	})
}

// gemmSM90PieceSignal signals that consumer warpgroup wg's 64 rows from row0 of D (all its
// columns of the tile) are stored: one thread adds 1 to the counter of row0's piece with a
// .sys release, once every store is complete and visible. Register stores: the warpgroup's
// barrier orders every thread's st.global before thread 0's red.release.sys, which is
// cumulative over what the barrier made it observe. TMA store: thread 0 issued the bulk
// store; it only notes the piece in pend, and gemmSM90PieceFlush signals it at the next
// tile's epilogue (or after the last tile), after the bulk group's completion: so the
// store still overlaps the next tile's mainloop, and the wait finds it long done. System
// scope, because the reader is a copy engine after a cuStreamWaitValue32 (or a peer GPU),
// not a thread of this GPU: the release makes the tile's writes visible at the point of
// coherence every agent reads before the counter moves.
func gemmSM90PieceSignal(k *dsl.Kernel, cfg GemmSM90Config, pa GemmSM90PieceArgs, t, wg, row0, pend dsl.Value) {
	first := t.Eq(uint32(0))
	if cfg.TMAStore {
		k.If(first, func() { k.Set(pend, row0.Div(pa.PieceRows).Add(uint32(1))) })
		return
	}
	bars := []dsl.NamedBar{k.NamedBarrierFor("gemm_sm90 piece signal: warpgroup 0", 128)}
	if cfg.Consumers > 1 {
		bars = append(bars, k.NamedBarrierFor("gemm_sm90 piece signal: warpgroup 1", 128))
	}
	if cfg.Consumers == 1 {
		bars[0].Sync()
	} else {
		k.If(wg.Eq(uint32(0)), bars[0].Sync).Else(bars[1].Sync)
	}
	k.If(first, func() {
		k.Reduce(dsl.AtomAdd, pa.Counters.At(row0.Div(pa.PieceRows)), k.Const(dsl.U32, 1), dsl.Release(dsl.System))
	})
}

// gemmSM90PieceFlush signals the TMA store thread t (0 of its warpgroup) has in flight, if
// any (pend: 1 + its piece): it waits for the bulk group's completion
// (cp.async.bulk.wait_group 0, not .read: the writes are performed and visible to the
// thread), orders the async proxy's global writes before its generic-proxy operations
// (fence.proxy.async.global), then adds 1 to the piece's counter with red.release.sys.
func gemmSM90PieceFlush(k *dsl.Kernel, pa GemmSM90PieceArgs, t, pend dsl.Value) {
	k.If(t.Eq(uint32(0)).And(pend.Ne(uint32(0))), func() {
		k.BulkWait(0, false)
		k.FenceProxyAsyncGlobal()
		k.Reduce(dsl.AtomAdd, pa.Counters.At(pend.Sub(uint32(1))), k.Const(dsl.U32, 1), dsl.Release(dsl.System))
		k.Set(pend, uint32(0))
	})
}

// pipelineAdvanceBy moves s (a ring of stages) n (a U32 Value) stages on: Advance n times.
func pipelineAdvanceBy(k *dsl.Kernel, s dsl.PipelineState, stages int, n dsl.Value) {
	next := s.Index.Add(n)
	k.Set(s.Phase, s.Phase.Xor(next.Div(uint32(stages)).And(uint32(1))))
	k.Set(s.Index, next.Rem(uint32(stages)))
}

// gemmSM90LayoutB is B's stage layout, (N, K) in elements with the 128-byte swizzle: for
// fp8 K-major like A (BN rows of one swizzle row); for 16-bit inputs MN-major, in 64-column
// blocks that each hold the stage's whole K (K first, then MN: one TMA box each), not
// TileToShape's MN-first order.
func gemmSM90LayoutB(cfg GemmSM90Config) (layout.ComposedLayout, error) {
	if cfg.FP8() {
		laK, err := dsl.GMMALayoutAtom(cfg.In, dsl.KMajor, 128)
		if err != nil {
			return layout.ComposedLayout{}, err
		}
		return dsl.TileToShape(laK, cfg.BN, cfg.BK())
	}
	laMN, err := dsl.GMMALayoutAtom(cfg.In, dsl.MNMajor, 128)
	if err != nil {
		return layout.ComposedLayout{}, err
	}
	lB, err := layout.Parse(fmt.Sprintf("((64,%d),(8,%d)):((1,%d),(64,512))", cfg.BN/64, cfg.BK()/8, 64*cfg.BK()))
	return layout.ComposedLayout{Outer: laMN.Outer, Offset: laMN.Offset, Inner: lB}, err
}

// gemmSM90Epilogue stores the warpgroup's 64 x BN accumulators at rows row0.. and columns
// col0.. of D. Thread t of the warpgroup holds, as value i (wgmma's D fragment), row
// 16*(t/32) + (t%32)/4 + 8*((i/2)%2) and column 2*(t%4) + 8*(i/4) + i%2 (the atom's AccView,
// GemmSM90AccCoord): two rows 8 apart, and in each pairs of adjacent columns every 8; a pair
// is both inside N or both outside (N is even), stored (and C read) as one 2-element vector. A plan p (nil: none) goes to gemmSM90EpiloguePlan,
// which applies it to each pair inside D, its loads 2-element vectors too.
func gemmSM90Epilogue(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, o GemmOut, acc dsl.Tensor, t, row0, col0 dsl.Value, p *epiPlan) {
	gemmSM90EpiloguePre(k, cfg, a, o, acc, t, row0, col0, p, nil)
}

// gemmSM90EpiloguePre is gemmSM90Epilogue with what gemmSM90EpiloguePreload loaded at the
// tile's start (nil: the epilogue loads its vectors itself).
func gemmSM90EpiloguePre(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, o GemmOut, acc dsl.Tensor, t, row0, col0 dsl.Value, p *epiPlan, pre *epiPre) {
	view := gemmSM90AccView(k, cfg, t)
	r, c := view.RowFrom(row0), view.ColFrom(col0)
	vals := acc.Values()
	if p != nil {
		gemmSM90EpiloguePlan(k, cfg, a, o, view, vals, r, c, p, pre)
		return
	}
	store := func(withC bool) {
		// Column bases once, then a 64-bit row offset per row: M*N may pass 2^32.
		dc, cc := o.D.At(c), o.C
		if withC {
			cc = o.C.At(c)
		}
		for half := 0; half < 2; half++ {
			row := r.Add(uint32(8 * half))
			k.If(row.Lt(a.M), func() {
				at := row.MulWide(a.N)
				d := dc.At(at)
				var cp dsl.Ptr
				if withC {
					cp = cc.At(at)
				}
				for j := 0; j < cfg.BN/8; j++ {
					k.If(c.Add(uint32(8*j)).Lt(a.N), func() {
						v := accPair(view, vals, half, j, a.Alpha)
						if withC {
							cv := k.LoadVec(cp.At(8*j), 2)
							for e := range v {
								v[e] = k.FMA(cv[e].To(dsl.F32), a.Beta, v[e])
							}
						}
						k.StoreVec(d.At(8*j), []dsl.Value{v[0].To(cfg.Out), v[1].To(cfg.Out)})
					})
				}
			})
		}
	}
	k.If(a.Beta.Eq(float32(0)), func() { store(false) }).Else(func() { store(true) })
}

// gemmSM90EpiloguePlan is gemmSM90Epilogue with the plan p: per column pair (inside N), both
// of the thread's rows in turn, so that the library's per-column loads (bias, scaleB) serve
// both; loads read rows past M at row M-1 (no branch), the stores alone are guarded. The
// per-column vectors come from pre (loaded at the tile's start) or are loaded here, several
// pairs ahead.
func gemmSM90EpiloguePlan(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, o GemmOut, view dsl.AccView, vals []dsl.Value, r, c dsl.Value, p *epiPlan, pre *epiPre) {
	alphaS, betaS := epiLinScalars(p, a)
	store := func(withC bool) {
		cache := map[epiKey][]dsl.Value{} // per branch: a load is not used outside its scope
		if pre != nil {
			for key, v := range pre.regs { // loaded before the branch: valid in both
				cache[key] = v
			}
		}
		type rowState struct {
			in    dsl.Value
			d, cp dsl.Ptr
			ld    sm90Loader
			rowv  []dsl.Value
		}
		var rs [2]rowState
		dc := o.D.At(c)
		for half := 0; half < 2; half++ {
			row := r.Add(uint32(8 * half))
			last := row.Min(a.M.Sub(uint32(1)))
			at := last.MulWide(a.N) // 64-bit: M*N may pass 2^32; row M-1 past M (not stored)
			h := &rs[half]
			h.in, h.d = row.Lt(a.M), dc.At(at)
			if withC {
				h.cp = o.C.At(c).At(at)
			}
			h.ld = sm90Loader{k: k, col: c, r: row, rowOff: at, rowIn: h.in, rowLoad: last, cache: cache}
			if p.rowv != nil {
				h.rowv = p.rowv(h.ld)
			}
		}
		for j := 0; j < cfg.BN/8; j++ {
			if j%epiPrefetchPairs == 0 {
				p.prefetchPairs(k, cache, c, a.N, j, min(j+epiPrefetchPairs, cfg.BN/8))
			}
			k.If(c.Add(uint32(8*j)).Lt(a.N), func() {
				if l := p.lin; l != nil {
					var b []dsl.Value
					if l.bias != nil {
						ld := rs[0].ld
						ld.colOff = 8 * j
						b = epiScaled(ld.colsKeyed(l.bias.key, l.bias.p, 2), l.bias.scale)
					}
					for half := 0; half < 2; half++ {
						h := &rs[half]
						acc := accRaw(k, view, vals, half, j)
						f := sm90Frag(k, cfg, a, p, h.ld, j, h.rowv, &acc)
						var cv []dsl.Value
						if withC {
							cv = k.LoadVec(h.cp.At(8*j), 2)
						}
						v := l.pair(f, acc, alphaS, betaS, b, cv)
						k.If(h.in, func() { k.StoreVec(h.d.At(8*j), []dsl.Value{v[0].To(cfg.Out), v[1].To(cfg.Out)}) })
					}
					return
				}
				for half := 0; half < 2; half++ {
					h := &rs[half]
					v := accPair(view, vals, half, j, a.Alpha)
					f := sm90Frag(k, cfg, a, p, h.ld, j, h.rowv, &v)
					if withC {
						cv := k.LoadVec(h.cp.At(8*j), 2)
						for e := range v {
							v[e] = k.FMA(cv[e].To(dsl.F32), a.Beta, v[e])
						}
					}
					f.V = v
					v = p.apply(f)
					k.If(h.in, func() { k.StoreVec(h.d.At(8*j), []dsl.Value{v[0].To(cfg.Out), v[1].To(cfg.Out)}) })
				}
			})
		}
	}
	k.If(a.Beta.Eq(float32(0)), func() { store(false) }).Else(func() { store(true) })
}

// gemmSM90StoreEpilogue stores the warpgroup's 64 x BN accumulators (alpha*acc, + beta*C
// when beta != 0) at rows row0.. and columns col0.. of D through its shared tile sD (stage
// wg): thread 0 of the warpgroup waits until the previous tile's TMA store has read the
// tile, the warpgroup writes its values converted to Out (pairs of adjacent columns, 128-byte
// swizzled: the 8 rows a warp writes at once fall in distinct banks), fences them to the
// async proxy and meets at a named barrier; then thread 0 stores the tile with TMA (rows
// and columns outside D clipped) and commits the bulk group. The plan p (nil: none) applies
// to every pair, its loads predicated on the pair being inside D.
func gemmSM90StoreEpilogue(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, o GemmOut, cD *dsl.TMACopy, sD dsl.SharedTile, acc dsl.Tensor, t, wg, row0, col0 dsl.Value, p *epiPlan) {
	gemmSM90StoreEpiloguePre(k, cfg, a, o, cD, sD, acc, t, wg, row0, col0, p, nil)
}

// gemmSM90StoreEpiloguePre is gemmSM90StoreEpilogue with what gemmSM90EpiloguePreload loaded
// at the tile's start (nil: the epilogue loads its vectors itself). The warpgroup stages
// those in shared memory after D's tiles (cfg.epiBytes: its vectors of BN f32 values, bias
// times its scale) before its first barrier, and each thread reads its pairs there. The
// previous tile's readers are done: they met at the barrier before its TMA store.
func gemmSM90StoreEpiloguePre(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, o GemmOut, cD *dsl.TMACopy, sD dsl.SharedTile, acc dsl.Tensor, t, wg, row0, col0 dsl.Value, p *epiPlan, pre *epiPre) {
	if pre != nil && (p == nil || len(pre.share) != len(p.keyed) || len(pre.share) != cfg.Epilogue.keyedCols()) {
		k.Errorf("gemm_sm90: the TMA-store epilogue's staged vectors (%d) are not its plan's (%d bytes of shared memory for %d)", len(pre.share), cfg.epiBytes(), cfg.Epilogue.keyedCols())
		return
	}
	es := cfg.Out.Bytes()
	w := 128 / es                                                             // columns of one 128-byte row
	bars := []dsl.NamedBar{k.NamedBarrierFor("epilogue of warpgroup 0", 128)} // each warpgroup's own
	if cfg.Consumers > 1 {
		bars = append(bars, k.NamedBarrierFor("epilogue of warpgroup 1", 128))
	}
	sync := func() {
		if cfg.Consumers == 1 {
			bars[0].Sync()
			return
		}
		k.If(wg.Eq(uint32(0)), bars[0].Sync).Else(bars[1].Sync)
	}
	first := t.Eq(uint32(0))
	k.If(first, func() { k.BulkWait(0, true) })
	var staged dsl.Ptr // the warpgroup's staged vectors, BN f32 values each
	if pre != nil {
		staged = sD.Stage(0).As(dsl.U8).At(cfg.Consumers * sD.StageBytes).At(wg.Mul(uint32(len(pre.share) * cfg.BN * 4))).As(dsl.F32)
		for ci, share := range pre.share {
			for i, v := range share {
				e := t.Add(uint32(128 * i))
				if s := p.keyed[ci].scale; s != 1 {
					v = v.Mul(s)
				}
				st := func() { k.Store(staged.At(e).At(ci*cfg.BN), v) }
				if cfg.BN-128*i < 128 {
					k.If(e.Lt(uint32(cfg.BN)), st)
				} else {
					st()
				}
			}
		}
	}
	sync()
	view := gemmSM90AccView(k, cfg, t)
	r := view.Row()                            // row in the tile (half 0)
	tc := t.And(uint32(3)).Mul(uint32(2 * es)) // byte of the thread's pair in 16 columns
	rowOff := r.Mul(uint32(128)).Add(tc.And(uint32(15)))
	chunk, r7 := tc.Shr(uint32(4)), r.And(uint32(7))
	base := sD.Stage(wg).As(dsl.U8)
	vals := acc.Values()
	alphaS, betaS := epiLinScalars(p, a)
	var stagedCol dsl.Value
	if pre != nil {
		stagedCol = view.Col() // the thread's first column in the tile
	}
	// fromStage reads pair j of staged vector ci.
	fromStage := func(ci, j int) []dsl.Value { return k.LoadVec(staged.At(stagedCol).At(ci*cfg.BN+8*j), 2) }
	// storePair writes the values of the thread's pair j of row half into the tile: byte of
	// (row, column 8j + pair) in the 128-byte-swizzled tile: box 8j/w of 64 rows, 16-byte
	// chunk ((8j % w)*es/16 + chunk) ^ (row % 8).
	storePair := func(half, j int, v []dsl.Value) {
		cb := (8 * j % w) * es
		off := rowOff.Add(uint32(8*j/w*64*128 + 1024*half)).Add(chunk.Add(uint32(cb / 16)).Xor(r7).Shl(uint32(4)))
		k.StoreVec(base.At(off).As(cfg.Out), []dsl.Value{v[0].To(cfg.Out), v[1].To(cfg.Out)})
	}
	write := func(withC bool) {
		cache := map[epiKey][]dsl.Value{} // per branch: a load is not used outside its scope
		type halfState struct {
			rowIn dsl.Value
			cp    dsl.Ptr
			gcol  dsl.Value
			ld    sm90Loader
			rowv  []dsl.Value
		}
		var hs [2]halfState
		setup := func(half int) {
			h := &hs[half]
			h.gcol = view.ColFrom(col0)
			if withC || p != nil {
				grow := row0.Add(r).Add(uint32(8 * half))
				h.rowIn = grow.Lt(a.M)
				if withC {
					h.cp = o.C.At(h.gcol).At(grow.MulWide(a.N)) // 64-bit: M*N may pass 2^32
				}
				if p != nil {
					// Rows past M read row M-1 (their values go nowhere: TMA clips them), so
					// that only the column needs a guard.
					last := grow.Min(a.M.Sub(uint32(1)))
					h.ld = sm90Loader{k: k, col: h.gcol, r: grow, rowOff: last.MulWide(a.N), rowIn: h.rowIn, rowLoad: last, guarded: true, cache: cache}
					if p.rowv != nil {
						h.rowv = p.rowv(h.ld)
					}
				}
			}
		}
		pair := func(half, j int, b []dsl.Value) {
			h := &hs[half]
			if p != nil && p.lin != nil {
				h.ld.in = h.gcol.Add(uint32(8 * j)).Lt(a.N)
				acc := accRaw(k, view, vals, half, j)
				f := sm90Frag(k, cfg, a, p, h.ld, j, h.rowv, &acc)
				var cv []dsl.Value
				if withC {
					cv = []dsl.Value{k.Var(cfg.Out, 0), k.Var(cfg.Out, 0)}
					k.If(h.rowIn.And(h.ld.in), func() {
						got := k.LoadVec(h.cp.At(8*j), 2)
						k.Set(cv[0], got[0])
						k.Set(cv[1], got[1])
					})
				}
				v := p.lin.pair(f, acc, alphaS, betaS, b, cv)
				storePair(half, j, v)
				return
			}
			v := accPair(view, vals, half, j, a.Alpha)
			var f *EpilogueFrag
			if p != nil {
				h.ld.in = h.gcol.Add(uint32(8 * j)).Lt(a.N)
				f = sm90Frag(k, cfg, a, p, h.ld, j, h.rowv, &v)
			}
			if withC {
				// N is even: a pair is inside D or outside it.
				cv := []dsl.Value{k.Var(cfg.Out, 0), k.Var(cfg.Out, 0)}
				k.If(h.rowIn.And(h.gcol.Add(uint32(8*j)).Lt(a.N)), func() {
					got := k.LoadVec(h.cp.At(8*j), 2)
					k.Set(cv[0], got[0])
					k.Set(cv[1], got[1])
				})
				for e := range v {
					v[e] = k.FMA(cv[e].To(dsl.F32), a.Beta, v[e])
				}
			}
			if f != nil {
				f.V = v
				v = p.apply(f)
			}
			storePair(half, j, v)
		}
		if p == nil {
			for half := 0; half < 2; half++ {
				setup(half)
				for j := 0; j < cfg.BN/8; j++ {
					pair(half, j, nil)
				}
			}
			return
		}
		// With an epilogue, both rows of a column pair in turn: the library's per-column
		// loads (bias, scaleB) serve both (the cache), live only that long.
		setup(0)
		setup(1)
		for j := 0; j < cfg.BN/8; j++ { // no prefetch here: its registers cost more (docs/bench.md)
			var b []dsl.Value // the pair's bias times its scale (p.lin)
			switch {
			case pre != nil && p.lin != nil && p.lin.bias != nil:
				b = fromStage(epiKeyIndex(p, p.lin.bias.key), j)
			case p.lin != nil && p.lin.bias != nil:
				ld := hs[0].ld
				ld.colOff, ld.in = 8*j, hs[0].gcol.Add(uint32(8*j)).Lt(a.N)
				b = epiScaled(ld.colsKeyed(p.lin.bias.key, p.lin.bias.p, 2), p.lin.bias.scale)
			case pre != nil:
				for ci, c := range p.keyed {
					cache[epiKey{c.key, 8 * j}] = fromStage(ci, j)
				}
			}
			pair(0, j, b)
			pair(1, j, b)
		}
	}
	k.If(a.Beta.Eq(float32(0)), func() { write(false) }).Else(func() { write(true) })
	k.FenceProxyAsync()
	sync()
	k.If(first, func() {
		cD.Store(wg, row0, col0)
		k.BulkCommit()
	})
}

// gemmSM90AccView is the view of the consumer thread t's (0..127) accumulators.
func gemmSM90AccView(k *dsl.Kernel, cfg GemmSM90Config, t dsl.Value) dsl.AccView {
	atom, err := dsl.MakeGMMAAtom(cfg.In, cfg.BN)
	if err != nil {
		k.Errorf("gemm_sm90 epilogue: %v", err)
	}
	return dsl.MakeTiledGMMA(atom, cfg.Consumers).AccView(k, t)
}

// accRaw returns the thread's pair of accumulators in row half at columns 8j and 8j+1 past
// its first (see accPair).
func accRaw(k *dsl.Kernel, view dsl.AccView, vals []dsl.Value, half, j int) []dsl.Value {
	out := make([]dsl.Value, 2)
	for e := range out {
		if i := view.Reg(8*half, 8*j+e); i >= 0 && i < len(vals) {
			out[e] = vals[i]
		} else {
			out[e] = k.Const(dsl.F32, float32(0))
		}
	}
	return out
}

// accPair returns alpha times the thread's pair of accumulators in row half (8*half past
// its first) at columns 8j and 8j+1 past its first (zeros where the view failed: Build
// reports why).
func accPair(view dsl.AccView, vals []dsl.Value, half, j int, alpha dsl.Value) []dsl.Value {
	out := make([]dsl.Value, 2)
	for e := range out {
		if i := view.Reg(8*half, 8*j+e); i >= 0 && i < len(vals) {
			out[e] = vals[i].Mul(alpha)
		} else {
			out[e] = alpha.Mul(float32(0))
		}
	}
	return out
}

// GemmSM90AccCoord returns the (row, column) in the warpgroup's 64 x N tile of accumulator
// value i of thread t (0..127): the layout gemmSM90Epilogue stores.
func GemmSM90AccCoord(t, i int) (int, int) {
	return 16*(t/32) + (t%32)/4 + 8*((i/2)%2), 2*(t%4) + 8*(i/4) + i%2
}

// sm90Loader reads an EpilogueFrag's operands in the sm_90a epilogues: 2-element vectors at
// the thread's column col + colOff (col even, so 8-byte aligned f32 pairs) of row r (u32);
// rowOff is rowLoad*N (64-bit), rowLoad the row loads read (r, or in the TMA-store epilogue
// r clamped to M-1). guarded (the TMA-store epilogue), a vector load happens only where in
// (the pair's column below N) holds, and reads zero elsewhere.
type sm90Loader struct {
	k       *dsl.Kernel
	col, r  dsl.Value
	rowOff  dsl.Value
	colOff  int
	guarded bool
	in      dsl.Value
	rowIn   dsl.Value // r < M
	rowLoad dsl.Value
	// cache, when not nil, keeps keyed column loads by (key, column offset) for the pair's
	// other row (the TMA-store epilogue: the two rows share a scope).
	cache map[epiKey][]dsl.Value
}

func (l sm90Loader) vec(p dsl.Ptr, n int, in dsl.Value) []dsl.Value {
	if !l.guarded {
		return l.k.LoadVec(p, n)
	}
	return l.loadIf(p, n, in)
}

// loadIf loads n elements at p where in holds, zeros elsewhere.
func (l sm90Loader) loadIf(p dsl.Ptr, n int, in dsl.Value) []dsl.Value {
	return sm90LoadIf(l.k, p, n, in)
}

// sm90LoadIf loads n elements at p where in holds, zeros elsewhere.
func sm90LoadIf(k *dsl.Kernel, p dsl.Ptr, n int, in dsl.Value) []dsl.Value {
	out := make([]dsl.Value, n)
	for i := range out {
		out[i] = k.Var(p.Elem(), 0)
	}
	k.If(in, func() {
		got := k.LoadVec(p, n)
		for i := range out {
			k.Set(out[i], got[i])
		}
	})
	return out
}

func (l sm90Loader) cols(p dsl.Ptr, n int) []dsl.Value {
	return l.vec(p.At(l.col).At(l.colOff), n, l.in)
}

func (l sm90Loader) colsKeyed(key string, p dsl.Ptr, n int) []dsl.Value {
	if l.cache == nil {
		return l.cols(p, n)
	}
	ck := epiKey{key, l.colOff}
	if v, ok := l.cache[ck]; ok {
		return v
	}
	v := l.cols(p, n)
	l.cache[ck] = v
	return v
}

// tile reads only rows below M (rowIn): a residual may be D itself, whose row M-1 another
// thread of the tile stores.
func (l sm90Loader) tile(p dsl.Ptr, n int) []dsl.Value {
	in := l.rowIn
	if l.guarded {
		in = in.And(l.in)
	}
	return l.loadIf(p.At(l.col).At(l.rowOff).At(l.colOff), n, in)
}

func (l sm90Loader) row(p dsl.Ptr) dsl.Value { return l.k.Load(p.At(l.rowLoad)) }

// sm90Frag returns the EpilogueFrag of pair j (columns 8j, 8j+1 of the thread's) for the
// plan p, nil without one; with p's scale stage it scales *v (alpha*acc) in place first.
func sm90Frag(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, p *epiPlan, ld sm90Loader, j int, rowv []dsl.Value, v *[]dsl.Value) *EpilogueFrag {
	if p == nil {
		return nil
	}
	ld.colOff = 8 * j
	f := &EpilogueFrag{K: k, V: *v, Row: ld.r, Col: ld.col.Add(uint32(8 * j)), M: a.M, N: a.N, Out: cfg.Out, ld: ld}
	if p.scale != nil {
		*v = p.scale(f, rowv)
	}
	return f
}

// epiPreloadRegs is the most registers a thread of the register epilogue gives the column
// pairs gemmSM90EpiloguePreload loads into registers: BN 256's bias (64, beside 128
// accumulators) fits without spills (ptxas 13.0); more (BN 256's bias and scaleB) load in
// the epilogue, several pairs ahead.
const epiPreloadRegs = 64

// gemmSM90EpiloguePreload issues, at the start of a tile (before its mainloop), the loads of
// p's per-column vectors (bias, scaleB) at the tile's columns col0.. for thread t of a
// consumer warpgroup, so that their latency (DRAM's at a tile's first touch) passes under
// the mainloop instead of at the epilogue's start: for the register epilogue the thread's
// own pairs (while they fit in epiPreloadRegs), for the TMA-store one the thread's share of
// the tile's BN columns (t + 128i), which that epilogue stages in shared memory. Columns
// past N read zero. nil: nothing to load.
func gemmSM90EpiloguePreload(k *dsl.Kernel, cfg GemmSM90Config, a GemmSM90Args, p *epiPlan, t, col0 dsl.Value) *epiPre {
	if p == nil || len(p.keyed) == 0 {
		return nil
	}
	pre := &epiPre{}
	if cfg.TMAStore {
		for _, c := range p.keyed {
			var share []dsl.Value
			for i := 0; i < cfg.BN; i += 128 {
				e := t.Add(uint32(i))
				in := col0.Add(e).Lt(a.N)
				if cfg.BN-i < 128 {
					in = e.Lt(uint32(cfg.BN)).And(in)
				}
				v := k.Var(dsl.F32, float32(0))
				k.If(in, func() { k.Set(v, k.Load(c.p.At(col0).At(e))) })
				share = append(share, v)
			}
			pre.share = append(pre.share, share)
		}
		return pre
	}
	if len(p.keyed)*cfg.BN/4 > epiPreloadRegs {
		return nil
	}
	c := gemmSM90AccView(k, cfg, t).ColFrom(col0)
	pre.regs = map[epiKey][]dsl.Value{}
	for _, v := range p.keyed {
		for j := 0; j < cfg.BN/8; j++ {
			pre.regs[epiKey{v.key, 8 * j}] = sm90LoadIf(k, v.p.At(c).At(8*j), 2, c.Add(uint32(8*j)).Lt(a.N))
		}
	}
	return pre
}

// epiLinScalars returns alpha and beta times p.lin's scale (zero Values without p.lin).
func epiLinScalars(p *epiPlan, a GemmSM90Args) (alphaS, betaS dsl.Value) {
	if p == nil || p.lin == nil {
		return
	}
	if p.lin.scale == 1 {
		return a.Alpha, a.Beta
	}
	return a.Alpha.Mul(p.lin.scale), a.Beta.Mul(p.lin.scale)
}

// epiKeyIndex is the index of key in p.keyed.
func epiKeyIndex(p *epiPlan, key string) int {
	for i, c := range p.keyed {
		if c.key == key {
			return i
		}
	}
	return -1
}
