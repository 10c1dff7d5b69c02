package kernels

import (
	"fmt"
	"math/bits"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// MatrixLayout says how a matrix is stored: RowMajor (each row contiguous, leading dimension
// the column count) or ColMajor.
type MatrixLayout int

// The matrix layouts.
const (
	RowMajor MatrixLayout = iota
	ColMajor
)

func (l MatrixLayout) String() string {
	if l == RowMajor || l == ColMajor {
		return [...]string{"row", "col"}[l]
	}
	return fmt.Sprintf("MatrixLayout(%d)", int(l))
}

// GemmConfig selects one gemm kernel: D = alpha*A*B + beta*C with A (M x K) and B (K x N) of
// In elements in the given layouts, f32 accumulation, C and D (M x N, row-major) of Out
// elements. The block computes a BM x BN tile of D with WarpsM x WarpsN warps (each warp a
// BM/WarpsM x BN/WarpsN part, atoms interleaved), BK columns of K per main-loop step, Stages
// shared-memory stages of cp.async loads in flight. Aligned kernels require M, N and K to be
// multiples of 8 (every 8-element run of A and B starts on 16 bytes) and copy with 16-byte
// cp.async; the others take any shape and load through registers.
type GemmConfig struct {
	In, Out        dsl.Type
	A, B           MatrixLayout
	BM, BN, BK     int
	WarpsM, WarpsN int
	Stages         int
	Aligned        bool
	// IssueAfter is the K block (of 16) of a main-loop step before which the step issues the
	// next tile's loads: 0 right after the barrier, BK/16 (or more) after the last block's
	// MMAs (double-buffered: before the last block's, after the next tile's barrier).
	IssueAfter int
	// DoubleBuffer loads each K block's fragments one block ahead, the next tile's first
	// block before this tile's last MMAs (CUTLASS's register pipelining).
	DoubleBuffer bool
	// MinBlocks, when positive, asks ptxas to fit that many blocks per SM (.minnctapersm,
	// with .maxntid the block size): it caps the registers per thread accordingly.
	MinBlocks int
	// Atom overrides the MMA (nil: m16n8k16 with f32 accumulators of In); tests use it to
	// prove that a wrong fragment layout is caught.
	Atom *dsl.MMAAtom
	// Epilogue adds the library's epilogue options (bias, activation, residual;
	// GemmEpilogueArgs after GemmOut; Scales need gemm_sm90's fp8 inputs). Zero: plain.
	Epilogue Epilogue
}

// DefaultGemmConfig is the registry's gemm: row-major A and B (torch.matmul's), out = in,
// 128x128x64 tiles on 4 warps (2x2, 64x64 each), 3 stages (96 KiB of shared memory: two
// blocks per SM), aligned: the fastest of the tile sweep in docs/bench.md on an H100.
func DefaultGemmConfig(dt dsl.Type) GemmConfig {
	return GemmConfig{In: dt, Out: dt, A: RowMajor, B: RowMajor, BM: 128, BN: 128, BK: 64, WarpsM: 2, WarpsN: 2, Stages: 3, Aligned: true}
}

// Name is the kernel's entry name: gemm_<in>_<out>_<A><B>_<BM>x<BN>x<BK>_<warps>w<stages>s{_a}{_i<IssueAfter>}{_db}{_b<MinBlocks>}{_ep_<options>}.
func (c GemmConfig) Name() string {
	al := ""
	if c.Aligned {
		al = "_a"
	}
	if c.IssueAfter > 0 {
		al += fmt.Sprintf("_i%d", c.IssueAfter)
	}
	if c.DoubleBuffer {
		al += "_db"
	}
	if c.MinBlocks > 0 {
		al += fmt.Sprintf("_b%d", c.MinBlocks)
	}
	return fmt.Sprintf("gemm_%s_%s_%s%s_%dx%dx%d_%dx%dw%ds%s%s", c.In, c.Out, c.A.String()[:1], c.B.String()[:1],
		c.BM, c.BN, c.BK, c.WarpsM, c.WarpsN, c.Stages, al, c.Epilogue.suffix())
}

// Threads returns the block size.
func (c GemmConfig) Threads() int { return 32 * c.WarpsM * c.WarpsN }

// SharedBytes returns the dynamic shared memory a block needs: the pipeline's stages, or
// the epilogue's f32 tile (rows padded by 8), whichever is larger.
func (c GemmConfig) SharedBytes() int {
	return max(c.Stages*(c.BM+c.BN)*c.BK*c.In.Bytes(), c.BM*(c.BN+8)*4)
}

// Grid returns the number of blocks for an M x N output (a 1-D grid; see gemmBlock); 0 for
// an empty problem or a configuration with an empty tile (Check and CheckShape say why).
func (c GemmConfig) Grid(m, n int) int {
	if m <= 0 || n <= 0 {
		return 0
	}
	return ceilDiv(m, c.BM) * ceilDiv(n, c.BN)
}

// Check reports a configuration the kernel cannot build.
func (c GemmConfig) Check() error {
	pow2 := func(x int) bool { return x > 0 && x&(x-1) == 0 }
	switch {
	case c.In != dsl.F16 && c.In != dsl.BF16:
		return fmt.Errorf("gemm: input type %s (want f16 or bf16)", typeName(c.In))
	case c.Out != dsl.F16 && c.Out != dsl.BF16 && c.Out != dsl.F32:
		return fmt.Errorf("gemm: output type %s (want f16, bf16 or f32)", typeName(c.Out))
	case c.A != RowMajor && c.A != ColMajor:
		return fmt.Errorf("gemm: A layout %s: want RowMajor or ColMajor", c.A)
	case c.B != RowMajor && c.B != ColMajor:
		return fmt.Errorf("gemm: B layout %s: want RowMajor or ColMajor", c.B)
	case !pow2(c.BM) || !pow2(c.BN) || !pow2(c.BK) || c.BK < 16 || c.BK > 64 || c.DoubleBuffer && c.BK < 32:
		return fmt.Errorf("gemm: tile %dx%dx%d: want powers of two, BK in 16..64 (32..64 double-buffered)", c.BM, c.BN, c.BK)
	case c.WarpsM <= 0 || c.WarpsN <= 0 || c.WarpsM > 32 || c.WarpsN > 32 || c.WarpsM*c.WarpsN > 32:
		return fmt.Errorf("gemm: %dx%d warps: want 1 to 32 warps in all (a block has at most 1024 threads)", c.WarpsM, c.WarpsN)
	case c.BM%(16*c.WarpsM) != 0 || c.BN%(16*c.WarpsN) != 0:
		return fmt.Errorf("gemm: %dx%d warps do not tile %dx%d in 16x16 steps", c.WarpsM, c.WarpsN, c.BM, c.BN)
	case c.Stages < 2 || c.Stages > 8:
		return fmt.Errorf("gemm: %d stages (want 2..8)", c.Stages)
	case c.MinBlocks < 0 || c.MinBlocks > 8:
		return fmt.Errorf("gemm: %d blocks per SM (want 0..8)", c.MinBlocks)
	case c.IssueAfter < 0:
		return fmt.Errorf("gemm: IssueAfter %d: want 0 (right after the barrier) or more (a negative one never issues the next tiles' loads)", c.IssueAfter)
	}
	// BM, BN <= 2^20 keep SharedBytes' products far from overflowing.
	if c.BM > 1<<20 || c.BN > 1<<20 || c.SharedBytes() > gemmSM90MaxShared {
		return fmt.Errorf("gemm: %d stages of %dx%d and %dx%d tiles need more than the %d bytes of shared memory of an sm_90 block", c.Stages, c.BM, c.BK, c.BK, c.BN, gemmSM90MaxShared)
	}
	// The epilogue: threads cover whole rows of the tile in 16-byte runs.
	if cols := c.BN / (16 / c.Out.Bytes()); cols > c.Threads() || c.BM%(c.Threads()/cols) != 0 {
		return fmt.Errorf("gemm: %d threads cannot cover %d-column rows of %s in 16-byte runs, a whole number of rows at a time", c.Threads(), c.BN, c.Out)
	}
	return c.Epilogue.check("gemm", false)
}

// MaxGemmExtent is the largest M, N or K a library gemm takes: 2^31-1, since tile
// coordinates and TMA's coordinates are signed 32-bit.
const MaxGemmExtent = 1<<31 - 1

// MaxGemmGrid is the most blocks a 1-D launch may have (gridDim.x of sm_30 and later).
const MaxGemmGrid = 1<<31 - 1

// CheckShape reports an M x N x K problem the kernel cannot run: every extent in
// [1, MaxGemmExtent]; A (M x K) and B (K x N) each below 2^31 elements, since the main
// loop's tile offsets are signed 32-bit (D and C take 64-bit row offsets, so M*N may be
// larger); at most MaxGemmGrid blocks; and, aligned, M, N and K multiples of 8.
func (c GemmConfig) CheckShape(m, n, k int) error {
	switch {
	case m <= 0 || n <= 0 || k <= 0:
		return fmt.Errorf("gemm: shape %dx%dx%d: every extent must be positive", m, n, k)
	case m > MaxGemmExtent || n > MaxGemmExtent || k > MaxGemmExtent:
		return fmt.Errorf("gemm: shape %dx%dx%d: every extent must be at most 2^31-1 (32-bit signed tile coordinates)", m, n, k)
	case int64(m)*int64(k) >= 1<<31:
		return fmt.Errorf("gemm: shape %dx%dx%d: A (M x K) has %d elements; the mma.sync gemm takes fewer than 2^31 (its main loop's offsets are 32-bit signed)", m, n, k, int64(m)*int64(k))
	case int64(k)*int64(n) >= 1<<31:
		return fmt.Errorf("gemm: shape %dx%dx%d: B (K x N) has %d elements; the mma.sync gemm takes fewer than 2^31 (its main loop's offsets are 32-bit signed)", m, n, k, int64(k)*int64(n))
	case int64(ceilDiv(m, c.BM))*int64(ceilDiv(n, c.BN)) > MaxGemmGrid:
		return fmt.Errorf("gemm: shape %dx%dx%d: %d x %d tiles of %dx%d exceed the %d blocks of a 1-D grid", m, n, k, ceilDiv(m, c.BM), ceilDiv(n, c.BN), c.BM, c.BN, MaxGemmGrid)
	case c.Aligned && (m%8 != 0 || n%8 != 0 || k%8 != 0):
		return fmt.Errorf("gemm: shape %dx%dx%d: the aligned kernel %s needs M, N and K multiples of 8 (16-byte cp.async)", m, n, k, c.Name())
	}
	return nil
}

// GemmArgs are the gemm kernel's parameters: a, b (in type), m, n, k, alpha, beta, c, d (out
// type). C may be null when beta is 0.
type GemmArgs struct {
	A, B        dsl.Ptr
	M, N, K     dsl.Value `kgen:"u32"`
	Alpha, Beta dsl.Value `kgen:"f32"`
}

// GemmOut are the output parameters (Out elements), after GemmArgs.
type GemmOut struct {
	C, D dsl.Ptr
}

func init() {
	register(&Spec{
		Name:    "gemm",
		Doc:     "D = alpha*A*B + beta*C, row-major A (MxK), B (KxN), C, D; f32 accumulation on mma.sync; 128x128x64 tiles, 4 warps, 3 cp.async stages; M, N, K multiples of 8",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { Gemm(k, DefaultGemmConfig(dt)) },
	})
}

// gemmAtom is the MMA for f32 accumulation of the input type.
func gemmAtom(in dsl.Type) dsl.MMAAtom {
	if in == dsl.BF16 {
		return dsl.MMA_16x8x16_F32BF16BF16F32
	}
	return dsl.MMA_16x8x16_F32F16F16F32
}

// smemSwizzle returns the swizzle that keeps ldmatrix and the 16-byte cp.async stores free
// of bank conflicts on a tile whose contiguous mode has e 16-bit elements: the 16-byte
// chunk index (bits 3..) xor the row bits above a 128-byte line.
func smemSwizzle(e int) layout.Swizzle {
	lg := bits.TrailingZeros(uint(e))
	b := min(3, lg-3)
	s := max(3, lg-3)
	return layout.Swizzle{B: b, M: 3, S: s}
}

// Gemm writes the kernel for cfg into k. Launch cfg.Grid(M, N) blocks of cfg.Threads()
// threads with cfg.SharedBytes() bytes of dynamic shared memory. A non-zero cfg.Epilogue
// applies its options in the epilogue (GemmEpilogueArgs follow GemmOut).
func Gemm(k *dsl.Kernel, cfg GemmConfig) { gemm(k, cfg, nil) }

// GemmWith writes the gemm for cfg with a user-written epilogue: hook runs once after the
// gemm's parameters are declared (it may declare its own after them) and its EpilogueFunc
// runs on every 16-byte run of an output row a thread stores (8 columns of a 16-bit Out, 4
// of f32). cfg.Epilogue must be zero (the hook replaces the library's options).
func GemmWith(k *dsl.Kernel, cfg GemmConfig, hook EpilogueHook) {
	if hook == nil {
		k.Errorf("GemmWith: nil EpilogueHook (Gemm builds the plain gemm)")
		return
	}
	gemm(k, cfg, hook)
}

func gemm(k *dsl.Kernel, cfg GemmConfig, hook EpilogueHook) {
	if err := cfg.Check(); err != nil {
		k.Errorf("%v", err)
		return
	}
	if hook != nil && !cfg.Epilogue.IsZero() {
		k.Errorf("gemm: a user epilogue (EpilogueHook) and Epilogue options %s together; give one", cfg.Epilogue)
		return
	}
	if cfg.MinBlocks > 0 {
		k.LaunchBounds(cfg.Threads(), cfg.MinBlocks)
	}
	a := dsl.Params[GemmArgs](k, cfg.In)
	o := dsl.Params[GemmOut](k, cfg.Out)
	p := cfg.Epilogue.plan(k, cfg.Out)
	if hook != nil {
		p = hookPlan(k, cfg.Out, hook)
	}
	cfg.Epilogue = Epilogue{} // applied here, through p
	if cfg.Aligned {
		for _, v := range []dsl.Value{a.M, a.N, a.K} {
			k.Assume(v, 8)
		}
	}
	BM, BN := cfg.BM, cfg.BN
	tid := k.ThreadIdx(dsl.X)
	bm, bn := gemmBlock(k, a.M, a.N, BM, BN)

	// Global views: A as M x K, B as N x K (CuTe's convention), C and D as M x N.
	gA := k.MakeTensorDyn(a.A, []any{a.M, a.K}, map[MatrixLayout][]any{RowMajor: {a.K, 1}, ColMajor: {1, a.M}}[cfg.A])
	gB := k.MakeTensorDyn(a.B, []any{a.N, a.K}, map[MatrixLayout][]any{RowMajor: {1, a.N}, ColMajor: {a.K, 1}}[cfg.B])
	// D and C are stored and read with 64-bit row bases (gemmRows): M*N may pass 2^31.
	gD := gemmRows{p: o.D, m: a.M, ld: a.N, bm: bm, bn: bn}
	gC := gD
	gC.p = o.C
	main := gemmMainloop(k, cfg, gA, gB, gD.shape(k, BM, BN), a.K, bm, bn, tid)
	gemmEpilogue(k, cfg, main, dsl.Tensor{}, func() dsl.Tensor { return main.acc.Scale(a.Alpha) }, func() func(part func(dsl.Tensor) dsl.Tensor, row dsl.Value, v dsl.Tensor) {
		return func(part func(dsl.Tensor) dsl.Tensor, row dsl.Value, v dsl.Tensor) {
			grow := bm.To(dsl.U32).Mul(uint32(BM)).Add(row)
			if p != nil {
				gemmStoreEpi(k, cfg, a, o, p, part, grow, bm, bn, tid, v)
				return
			}
			k.If(a.Beta.Eq(float32(0)), func() {
				k.Copy(v.To(cfg.Out), part(gD.row(k, BM, BN, grow)))
			}).Else(func() {
				c := k.LoadFragment(part(gC.row(k, BM, BN, grow))).To(dsl.F32)
				k.Copy(c.FMA(a.Beta, v).To(cfg.Out), part(gD.row(k, BM, BN, grow)))
			})
		}
	})
}

// gemmStoreEpi is Gemm's store of a row run v (alpha*acc; part maps a tile to this thread's
// run, grow its row) with the plan p: beta*C (when beta != 0), then p, then D, stored as
// Gemm's plain store is (vectorized, predicated at the edges). p's loads use the same
// partition, so they are vectorized and predicated alike.
func gemmStoreEpi(k *dsl.Kernel, cfg GemmConfig, a GemmArgs, o GemmOut, p *epiPlan, part func(dsl.Tensor) dsl.Tensor, grow, bm, bn, tid dsl.Value, v dsl.Tensor) {
	BM, BN := cfg.BM, cfg.BN
	vec := 16 / cfg.Out.Bytes() // gemmEpilogue's run
	col := bn.To(dsl.U32).Mul(uint32(BN)).Add(tid.And(uint32(BN/vec - 1)).Mul(uint32(vec)))
	rows := func(q dsl.Ptr) gemmRows { return gemmRows{p: q, m: a.M, ld: a.N, bm: bm, bn: bn} }
	ld := mmaLoader{k: k, part: part, rows: rows, grow: grow, m: a.M, BM: BM, BN: BN}
	emit := func(withC bool) {
		vals := v
		if withC {
			vals = k.LoadFragment(part(rows(o.C).row(k, BM, BN, grow))).To(dsl.F32).FMA(a.Beta, v)
		}
		f := &EpilogueFrag{K: k, V: vals.Values(), Row: grow, Col: col, M: a.M, N: a.N, Out: cfg.Out, ld: ld}
		out := k.FragmentOf(p.apply(f)...)
		k.Copy(vals.Zip(out, func(_, b dsl.Value) dsl.Value { return b }).To(cfg.Out), part(rows(o.D).row(k, BM, BN, grow)))
	}
	k.If(a.Beta.Eq(float32(0)), func() { emit(false) }).Else(func() { emit(true) })
}

// mmaLoader reads an EpilogueFrag's operands in the mma.sync gemm's epilogue through the
// thread's partition of the tile (part), vectorized and predicated as D's stores are.
type mmaLoader struct {
	k      *dsl.Kernel
	part   func(dsl.Tensor) dsl.Tensor
	rows   func(dsl.Ptr) gemmRows
	grow   dsl.Value
	m      dsl.Value
	BM, BN int
}

func (l mmaLoader) cols(p dsl.Ptr, n int) []dsl.Value {
	g := l.rows(p)
	return l.k.LoadFragment(l.part(g.view(l.k, p, l.BM, l.BN))).Values()
}

func (l mmaLoader) colsKeyed(_ string, p dsl.Ptr, n int) []dsl.Value { return l.cols(p, n) }

func (l mmaLoader) tile(p dsl.Ptr, n int) []dsl.Value {
	return l.k.LoadFragment(l.part(l.rows(p).row(l.k, l.BM, l.BN, l.grow))).Values()
}

// row reads p[row] at the row clamped to M-1: rows past M are stored nowhere.
func (l mmaLoader) row(p dsl.Ptr) dsl.Value {
	return l.k.Load(p.At(l.grow.Min(l.m.Sub(uint32(1)))))
}

// gemmRows is a row-major matrix (m rows of ld elements, u32) that a gemm's block (bm, bn)
// (I32 tile coordinates) stores to or reads from with 64-bit row bases: row views put row
// r's offset r*ld into the pointer with one mul.wide, so that only column offsets are 32-bit
// and m*ld may pass 2^31.
type gemmRows struct {
	p      dsl.Ptr
	m, ld  dsl.Value
	bm, bn dsl.Value
}

// view is the block's BM x BN tile of the matrix at base p with row stride 0: rows add
// nothing to the offsets (the pointer holds the row), columns their index; both still
// predicate against m and ld.
func (g gemmRows) view(k *dsl.Kernel, p dsl.Ptr, BM, BN int) dsl.Tensor {
	return k.MakeTensorDyn(p, []any{g.m, g.ld}, []any{0, 1}).LocalTile([]int{BM, BN}, g.bm, g.bn)
}

// shape is a tile of the block's shape, for the MMA's accumulators (no row base computed).
func (g gemmRows) shape(k *dsl.Kernel, BM, BN int) dsl.Tensor { return g.view(k, g.p, BM, BN) }

// row is the tile viewed from matrix row grow (u32): a part of it (gemmEpilogue's part, whose
// thread row is grow) addresses row grow's elements.
func (g gemmRows) row(k *dsl.Kernel, BM, BN int, grow dsl.Value) dsl.Tensor {
	return g.view(k, g.p.At(grow.MulWide(g.ld)), BM, BN)
}

// gemmMain is what the gemm's main loop leaves for an epilogue: the MMA's slice for this
// thread, its f32 accumulators and the dynamic shared memory (free again).
type gemmMain struct {
	thr  dsl.ThrMMA
	acc  dsl.Tensor
	smem dsl.Ptr
	tid  dsl.Value
}

// gemmMainloop accumulates the BM x BN tile (bm, bn) of gA (M x K) times gB (N x K, CuTe's
// convention) into f32 fragments: the cp.async pipeline over K in BK steps, ldmatrix and
// mma.sync; gD (the output tile) gives the accumulators' shape. It ends with every stage
// drained, so the epilogue may reuse the shared memory.
func gemmMainloop(k *dsl.Kernel, cfg GemmConfig, gA, gB, gD dsl.Tensor, K, bm, bn, tid dsl.Value) gemmMain {
	if !cfg.Epilogue.IsZero() {
		k.Errorf("gemm: Epilogue %s: only Gemm applies epilogue options (the fused kernels take none)", cfg.Epilogue)
	}
	BM, BN, BK := cfg.BM, cfg.BN, cfg.BK
	nt := cfg.Threads()

	// Shared memory: Stages tiles of A then Stages tiles of B, each swizzled along its
	// contiguous mode.
	smem := k.DynamicShared(cfg.In, 128)
	aKContig, bKContig := cfg.A == RowMajor, cfg.B == ColMajor
	mk := func(p dsl.Ptr, rows int, kc bool) dsl.Tensor {
		if kc {
			return k.MakeSwizzledTensor(p, smemSwizzle(BK), layout.Must(layout.New(layout.Ints(rows, BK), layout.Ints(BK, 1))))
		}
		return k.MakeSwizzledTensor(p, smemSwizzle(rows), layout.Must(layout.New(layout.Ints(rows, BK), layout.Ints(1, rows))))
	}
	sA := mk(smem, BM, aKContig)
	sB := mk(smem.At(cfg.Stages*BM*BK), BN, bKContig)
	stageOf := func(t dsl.Tensor, elems int, st dsl.Value) dsl.Tensor {
		return t.ShiftBase(k.Assume(st.Mul(int32(elems)), elems))
	}

	// Global -> shared copies: 16-byte cp.async (aligned) or element loads, threads laid
	// along the contiguous mode.
	gcopy := func(rows int, kc bool) dsl.ThrCopy {
		atom, vec := dsl.CpAsync16, 8
		if !cfg.Aligned {
			atom, vec = dsl.UniversalCopy, 1
		}
		if kc {
			c := BK / vec
			if c > nt {
				c = nt
			}
			thr := layout.Must(layout.New(layout.Ints(nt/c, c), layout.Ints(c, 1)))
			return dsl.MakeTiledCopy(atom, thr, []int{1, vec}).Slice(tid)
		}
		c := rows / vec
		if c > nt {
			c = nt
		}
		thr := layout.Must(layout.New(layout.Ints(c, nt/c), layout.Ints(1, c)))
		return dsl.MakeTiledCopy(atom, thr, []int{vec, 1}).Slice(tid)
	}
	cpA, cpB := gcopy(BM, aKContig), gcopy(BN, bKContig)
	kTiles := K.Add(uint32(BK - 1)).Div(uint32(BK)).To(dsl.I32)
	pipe := k.CpAsyncPipeline(cfg.Stages, kTiles, func(st, t dsl.Value) {
		cpA.Copy(cpA.PartitionS(gA.LocalTile([]int{BM, BK}, bm, t)), cpA.PartitionD(stageOf(sA, BM*BK, st)))
		cpB.Copy(cpB.PartitionS(gB.LocalTile([]int{BN, BK}, bn, t)), cpB.PartitionD(stageOf(sB, BN*BK, st)))
	})

	// The MMA, its fragments and the ldmatrix copies retiled to them.
	atom := gemmAtom(cfg.In)
	if cfg.Atom != nil {
		atom = *cfg.Atom
	}
	mma := dsl.MakeTiledMMA(atom, layout.Must(layout.New(layout.Ints(cfg.WarpsM, cfg.WarpsN, 1), layout.Ints(1, cfg.WarpsM, 0))), nil)
	thr := mma.Slice(tid)
	tCrA, tCrB := thr.PartitionFragmentA(sA), thr.PartitionFragmentB(sB)
	tCrC := thr.PartitionFragmentC(gD) // f32 accumulators, zeroed
	ldA := dsl.MakeTiledCopyA(dsl.LdMatrixX4, mma).Slice(tid)
	ldB := dsl.MakeTiledCopyB(dsl.LdMatrixX4, mma).Slice(tid)
	tCsA, tCsB := ldA.PartitionS(sA), ldB.PartitionS(sB)

	KB := BK / 16
	frags := func(st dsl.Value, kb int) { // one K block of the stage into the fragments
		ldA.Copy(stageOf(tCsA, BM*BK, st).Slice(2, kb), tCrA.Slice(2, kb))
		ldB.Copy(stageOf(tCsB, BN*BK, st).Slice(2, kb), tCrB.Slice(2, kb))
	}
	issue := func(t dsl.Value, kb, last int) { // kb == KB: after the step's last MMAs
		if kb == min(cfg.IssueAfter, last) {
			pipe.Issue(t.Add(int32(cfg.Stages - 1))) // into the stage of tile t-1, free since the last barrier
		}
	}
	pipe.Start()
	if !cfg.DoubleBuffer {
		k.For(int32(0), kTiles, int32(1), func(t dsl.Value) {
			pipe.Wait(t) // tile t landed; every thread is done with tile t-1's stage
			st := pipe.Stage(t)
			for kb := 0; kb < KB; kb++ { // a Go loop: unrolled
				issue(t, kb, KB)
				frags(st, kb)
				k.Gemm(mma, tCrA.Slice(2, kb), tCrB.Slice(2, kb), tCrC)
			}
			issue(t, KB, KB)
		})
	} else {
		// Registers double-buffered: K block kb+1 is loaded before block kb's MMAs, and the
		// next tile's first block before this tile's last MMAs (after the barrier that says
		// it landed), so ldmatrix latency hides behind tensor-core work.
		pipe.Wait(k.Const(dsl.I32, 0))
		frags(k.Const(dsl.I32, 0), 0)
		k.For(int32(0), kTiles, int32(1), func(t dsl.Value) {
			st := pipe.Stage(t)
			for kb := 0; kb < KB; kb++ {
				issue(t, kb, KB-1) // before the wait below, which counts it
				if kb < KB-1 {
					frags(st, kb+1)
				} else {
					next := t.Add(int32(1))
					pipe.Wait(next) // tile t+1 landed; every thread has loaded its last block of tile t
					k.If(next.Lt(kTiles), func() { frags(pipe.Stage(next), 0) })
				}
				k.Gemm(mma, tCrA.Slice(2, kb), tCrB.Slice(2, kb), tCrC)
			}
		})
	}
	pipe.Drain()
	pipe.Drain() // every stage is free
	return gemmMain{thr: thr, acc: tCrC, smem: smem, tid: tid}
}

// gemmEpilogue stores the accumulators to gD (converted to cfg.Out). acc returns the f32
// fragment to store (the accumulators, scaled or not); setup, when not nil, runs once after
// the staging barrier and returns the function that stores a row block's staged values v in
// place of the plain store (part maps a BM x BN tile to this thread's part of the row block,
// row is this thread's row in the tile, u32, for gemmRows.row).
//
// Epilogue, as CUTLASS's: alpha*acc goes through shared memory (f32, rows padded by 8 so
// that the fragments' paired stores spread over the banks), then every thread takes
// 16-byte runs of rows (Gemm's store blends them with beta*C, only when beta != 0: a branch
// at run time, so beta = 0 reads no C and C may be null) and stores them to D, converted to
// Out, coalesced and predicated at the matrix edges, one row block per iteration of a
// runtime loop.
func gemmEpilogue(k *dsl.Kernel, cfg GemmConfig, main gemmMain, gD dsl.Tensor, acc func() dsl.Tensor, setup func() func(part func(dsl.Tensor) dsl.Tensor, row dsl.Value, v dsl.Tensor)) {
	BM, BN := cfg.BM, cfg.BN
	nt, tid := cfg.Threads(), main.tid
	sD := k.MakeTensor(main.smem.As(dsl.F32), layout.Must(layout.New(layout.Ints(BM, BN), layout.Ints(BN+8, 1))))
	k.Copy(acc(), main.thr.PartitionC(sD))
	k.SyncThreads()
	var store func(part func(dsl.Tensor) dsl.Tensor, row dsl.Value, v dsl.Tensor)
	if setup != nil {
		store = setup()
	}
	vec := 16 / cfg.Out.Bytes()
	cols := BN / vec // threads along a row
	rows := nt / cols
	eThr := layout.Must(layout.New(layout.Ints(rows, cols), layout.Ints(cols, 1)))
	k.For(int32(0), int32(BM/rows), int32(1), func(r dsl.Value) {
		part := func(t dsl.Tensor) dsl.Tensor {
			return t.LocalTile([]int{rows, BN}, r, 0).LocalPartition(eThr, tid, 1, vec)
		}
		v := k.LoadFragment(part(sD))
		if store != nil {
			store(part, r.To(dsl.U32).Mul(uint32(rows)).Add(tid.Shr(uint32(bits.TrailingZeros(uint(cols))))), v)
			return
		}
		k.Copy(v.To(cfg.Out), part(gD))
	})
}

// gemmBlock maps the 1-D block index to the output tile (bm, bn) in groups of 8 tile rows
// (the L2-friendly order of Triton's grouped GEMM): consecutive blocks sweep 8 tile rows
// of one tile column, then the next column, so that they share A's rows and B's columns.
func gemmBlock(k *dsl.Kernel, m, n dsl.Value, bmSize, bnSize int) (bm, bn dsl.Value) {
	b := k.BlockIdx(dsl.X)
	tilesM := m.Add(uint32(bmSize - 1)).Div(uint32(bmSize))
	tilesN := n.Add(uint32(bnSize - 1)).Div(uint32(bnSize))
	return groupedTile(b, tilesM, tilesN, dsl.I32)
}

// groupedTile maps tile index b (u32) of a tilesM x tilesN grid to (bm, bn) of type t in
// gemmBlock's grouped order.
func groupedTile(b, tilesM, tilesN dsl.Value, t dsl.Type) (bm, bn dsl.Value) {
	const group = 8
	perGroup := tilesN.Mul(uint32(group))
	g := b.Div(perGroup)
	first := g.Mul(uint32(group))
	size := tilesM.Sub(first).Min(uint32(group))
	r := b.Rem(perGroup)
	return first.Add(r.Rem(size)).To(t), r.Div(size).To(t)
}
