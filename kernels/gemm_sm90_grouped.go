package kernels

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// GemmSM90MaxGroups is the most groups (experts) one grouped sm_90a gemm takes: each block
// keeps the groups' row ranges and tile prefix in static shared memory.
const GemmSM90MaxGroups = 256

// gemmSM90GroupedStatic bounds the grouped gemm's static shared memory beside the stages:
// three u32 tables of GemmSM90MaxGroups entries and the pipeline's mbarriers (two of 8
// bytes per stage, at most 8 stages).
const gemmSM90GroupedStatic = 3*4*GemmSM90MaxGroups + 2*8*8

// GemmSM90GroupedConfig selects one grouped sm_90a gemm (MoE experts, contiguous layout):
// for each group g, rows Offsets[g] <= r < Offsets[g+1] of D are alpha*A[r,:]*B[g] + beta*C[r,:],
// with A [M, K] (every group's rows stacked, row-major), B [groups, K, N] (row-major per
// group, as GemmSM90Config's 16-bit B; for fp8 inputs [groups, N, K], each group's N x K
// row-major, K-major as wgmma reads fp8) and C, D [M, N]. Offsets are int32 on the device
// (groups+1 entries, as the MoE dispatch leaves them): the blocks read them at start, so no
// host round trip sizes the launch. The embedded GemmSM90Config picks the tiles and
// TMAStore (a warpgroup's 64 rows inside its group go through shared memory and a TMA store;
// those that cross the group's end are stored from registers, masked at the end), without
// clusters or Epilogue options.
//
// Scales multiplies the product by per-row and per-group, per-column f32 scales (fp8's
// row-wise scales, GemmSM90GroupedScaleArgs): D = alpha*acc*ScaleA[r]*ScaleB[g, c] + beta*C.
//
// BandM orders the tiles the persistent blocks take: 0 walks them row tile by row tile (a
// row tile's column tiles in turn, n fastest); b >= 1 walks bands of b row tiles (over all
// groups' row tiles) column by column, m fastest within a band, as gemm_sm90's scheduler
// does with 8: a wave of blocks then shares fewer B columns per row of A.
//
// Masked selects the masked layout (the MoE low-latency dispatch's, docs/moe.md): group g's
// rows start at g*Stride of A and D, a fixed stride (its slots), and only the first
// Counts[g] of them are the group's; Counts (groups int32) and Stride come in
// GemmSM90GroupedMaskArgs, and Offsets is not read. The blocks build their tile tables from
// the counts, so the tiles cover only the groups' rows: the slots past a group's count are
// neither computed (no tile starts there) nor written (as rows past a group's end).
type GemmSM90GroupedConfig struct {
	GemmSM90Config
	Scales bool
	BandM  int
	Masked bool
}

// gemmSM90GroupedMaxBand bounds BandM.
const gemmSM90GroupedMaxBand = 64

// DefaultGemmSM90GroupedConfig is the grouped gemm for dt (f16, bf16 or e4m3): 128x256
// tiles, 3 stages, out = in (bf16 for e4m3, with Scales).
func DefaultGemmSM90GroupedConfig(dt dsl.Type) GemmSM90GroupedConfig {
	c := GemmSM90GroupedConfig{GemmSM90Config: GemmSM90Config{In: dt, Out: dt, BN: 256, Consumers: 2, Stages: 3}}
	if c.FP8() {
		c.Out, c.Scales = dsl.BF16, true
	}
	return c
}

// Name is the kernel's entry name: gemm_sm90_grouped_<in>_<out>_<BM>x<BN>x<BK>_<stages>s,
// then _tmastore with TMAStore, _band<b> with BandM b, _scales with Scales, _masked with
// Masked and _sdiv with ShiftDivision.
func (c GemmSM90GroupedConfig) Name() string {
	n := fmt.Sprintf("gemm_sm90_grouped_%s_%s_%dx%dx%d_%ds", c.In, c.Out, c.BM(), c.BN, c.BK(), c.Stages)
	if c.TMAStore {
		n += "_tmastore"
	}
	if c.BandM > 0 {
		n += fmt.Sprintf("_band%d", c.BandM)
	}
	if c.Scales {
		n += "_scales"
	}
	if c.Masked {
		n += "_masked"
	}
	if c.ShiftDivision {
		n += "_sdiv"
	}
	return n
}

// Check reports a configuration the grouped kernel cannot build: one GemmSM90Config.Check
// refuses, ClusterM 2, PingPong, Pieces, a non-zero Epilogue, BandM outside 0..64, or stages (and
// the TMA-store tile) that leave no room for the group tables in shared memory.
func (c GemmSM90GroupedConfig) Check() error {
	if err := c.GemmSM90Config.Check(); err != nil {
		return fmt.Errorf("gemm_sm90_grouped: %w", err)
	}
	switch {
	case c.BandM < 0 || c.BandM > gemmSM90GroupedMaxBand:
		return fmt.Errorf("gemm_sm90_grouped: BandM %d: want 0 (row tile by row tile) or a band of 1..%d row tiles", c.BandM, gemmSM90GroupedMaxBand)
	case c.Cluster() > 1:
		return fmt.Errorf("gemm_sm90_grouped: ClusterM %d: the grouped scheduler runs without clusters (want 0 or 1)", c.ClusterM)
	case c.PingPong:
		return fmt.Errorf("gemm_sm90_grouped: PingPong: the grouped gemm runs the cooperative schedule (its consumers share each 128-row tile)")
	case c.Pieces:
		return fmt.Errorf("gemm_sm90_grouped: Pieces: the grouped gemm orders its tiles by group and signals no pieces")
	case !c.Epilogue.IsZero():
		return fmt.Errorf("gemm_sm90_grouped: Epilogue %s: the grouped gemm takes no epilogue options", c.Epilogue)
	case c.SharedBytes()+gemmSM90GroupedStatic > gemmSM90MaxShared:
		return fmt.Errorf("gemm_sm90_grouped: %d stages (and %d bytes of TMA-store tile) need %d bytes of shared memory with the %d bytes of group tables; an sm_90 block has at most %d",
			c.Stages, c.storeBytes(), c.SharedBytes()+gemmSM90GroupedStatic, gemmSM90GroupedStatic, gemmSM90MaxShared)
	}
	return nil
}

// CheckShape reports a problem the kernel cannot run: m (A's and D's rows, every group's
// together) may be 0 (no tiles) but n, k and groups must be positive; groups at most
// GemmSM90MaxGroups; N and K multiples of 8 (TMA's 16-byte strides; for fp8 K of 16);
// B's stacked rows, groups*K (groups*N for fp8), at most 2^31-1 (TMA's coordinates). A
// configuration Check refuses is refused first.
func (c GemmSM90GroupedConfig) CheckShape(m, n, k, groups int) error {
	if err := c.Check(); err != nil {
		return err
	}
	switch {
	case groups < 1 || groups > GemmSM90MaxGroups:
		return fmt.Errorf("gemm_sm90_grouped: %d groups (want 1..%d)", groups, GemmSM90MaxGroups)
	case m < 0 || n <= 0 || k <= 0:
		return fmt.Errorf("gemm_sm90_grouped: shape %dx%dx%d: rows must be >= 0, N and K positive", m, n, k)
	case m > MaxGemmExtent || n > MaxGemmExtent || k > MaxGemmExtent || int64(c.stackedB(n, k))*int64(groups) > MaxGemmExtent:
		return fmt.Errorf("gemm_sm90_grouped: shape %dx%dx%d with %d groups: rows, N, K and B's stacked rows (groups*%s) must be at most 2^31-1 (TMA's coordinates are 32-bit signed)", m, n, k, groups, map[bool]string{false: "K", true: "N"}[c.FP8()])
	case c.FP8() && (k%16 != 0 || n%8 != 0):
		return fmt.Errorf("gemm_sm90_grouped: shape %dx%dx%d: K must be a multiple of 16 (TMA needs 16-byte-aligned row strides of the %s A and B) and N of 8", m, n, k, c.In)
	case k%8 != 0 || n%8 != 0:
		return fmt.Errorf("gemm_sm90_grouped: shape %dx%dx%d: K and N must be multiples of 8 (TMA needs 16-byte-aligned row strides of A and B)", m, n, k)
	}
	return nil
}

// CheckMasked reports a masked problem the kernel cannot run: what CheckShape refuses, a
// configuration without Masked (it reads offsets, not counts), a stride below 1, or groups
// whose slots (stride*groups rows) do not fit in A's and D's m rows. The counts live on the
// device and are not checked here: the kernel clamps each to [0, stride].
func (c GemmSM90GroupedConfig) CheckMasked(m, n, k, groups, stride int) error {
	if err := c.CheckShape(m, n, k, groups); err != nil {
		return err
	}
	switch {
	case !c.Masked:
		return fmt.Errorf("gemm_sm90_grouped: a row stride (%d) for %s: the configuration is not Masked (it reads groups+1 offsets, not counts)", stride, c.Name())
	case stride < 1:
		return fmt.Errorf("gemm_sm90_grouped: stride %d: want a positive row stride (each group's slots)", stride)
	case satMul(stride, groups) > int64(m):
		return fmt.Errorf("gemm_sm90_grouped: stride %d x %d groups = %s rows: the groups' slots must lie inside A's and D's %d rows", stride, groups, satString(stride, groups), m)
	}
	return nil
}

// stackedB is the rows each group adds to B's map: K of a K x N B, N of fp8's N x K.
func (c GemmSM90GroupedConfig) stackedB(n, k int) int {
	if c.FP8() {
		return n
	}
	return k
}

// dimsB is the stacked B's map extents, innermost first: (N, groups*K), or (K, groups*N)
// for fp8.
func (c GemmSM90GroupedConfig) dimsB(n, k, groups int) [2]int {
	if c.FP8() {
		return [2]int{k, groups * n}
	}
	return [2]int{n, groups * k}
}

// Grid returns the number of persistent blocks for m rows in groups groups and N = n on a
// GPU of sms multiprocessors: at most one per SM and one per tile the rows can make (each
// group adds at most one partial row tile); at least 1 (the blocks find the tiles on the
// device). 0 for a configuration Check refuses, n < 1 or sms < 1.
func (c GemmSM90GroupedConfig) Grid(m, n, groups, sms int) int {
	if c.Check() != nil || n < 1 || sms < 1 {
		return 0
	}
	tiles := (ceilDiv(max(m, 0), c.BM()) + max(groups, 0)) * ceilDiv(n, c.BN)
	return max(1, min(tiles, sms))
}

// Launch returns the launch of c for m rows of A and D, N = n, K = k and groups groups on a
// GPU of sms multiprocessors: Grid blocks of Threads(), SharedBytes(), and the maps: A's
// (K, M) with TMABoxA, B's (N, groups*K) with TMABoxB (the groups' K x N matrices stacked;
// for fp8 (K, groups*N), the N x K ones), with TMAStore D's (N, M) with TMABoxD (HasD), the
// 128-byte swizzle. A map of M = 0 rows is encoded as one row (TMA refuses an empty extent;
// no tile reads or writes it). It returns an error for what Check or CheckShape refuses or
// sms < 1.
func (c GemmSM90GroupedConfig) Launch(m, n, k, groups, sms int) (GemmSM90Launch, error) {
	if err := c.CheckShape(m, n, k, groups); err != nil {
		return GemmSM90Launch{}, err
	}
	if sms < 1 {
		return GemmSM90Launch{}, fmt.Errorf("gemm_sm90_grouped: %d multiprocessors: want a positive count (the device's)", sms)
	}
	spec := func(dt dsl.Type, dims [2]int, box [2]int) TMASpec {
		return TMASpec{Elem: dt, Dims: [2]uint64{uint64(dims[0]), uint64(dims[1])}, Strides: [1]uint64{uint64(dims[0]) * uint64(dt.Bytes())},
			Box: [2]uint32{uint32(box[0]), uint32(box[1])}, Swizzle: c.SwizzleBytes()}
	}
	l := GemmSM90Launch{Grid: c.Grid(m, n, groups, sms), Block: c.Threads(), SharedBytes: c.SharedBytes(), Cluster: 1,
		A: spec(c.In, [2]int{k, max(m, 1)}, c.TMABoxA()), B: spec(c.In, c.dimsB(n, k, groups), c.TMABoxB())}
	if c.TMAStore {
		l.D, l.HasD = spec(c.Out, [2]int{n, max(m, 1)}, c.TMABoxD()), true
	}
	return l, nil
}

// GemmSM90GroupedArgs are the grouped sm_90a gemm's parameters: the tensor maps of A and of
// the stacked B, M (A's and D's rows), N, K, the number of groups, Offsets (groups+1 int32
// row offsets into A and D, on the device; not read with Masked, which takes
// GemmSM90GroupedMaskArgs' counts), alpha and beta; then GemmOut's C and D (C may be null
// when beta is 0).
type GemmSM90GroupedArgs struct {
	TmA, TmB    dsl.TensorMap
	M, N, K     dsl.Value `kgen:"u32"`
	Groups      dsl.Value `kgen:"u32"`
	Offsets     dsl.Ptr   `kgen:"s32"`
	Alpha, Beta dsl.Value `kgen:"f32"`
}

// GemmSM90GroupedMaskArgs are the grouped gemm's last parameters with Masked (after
// GemmSM90GroupedScaleArgs with Scales): Counts, groups int32 row counts on the device
// (each clamped to [0, Stride] and to the rows left before M), and Stride, the rows between
// two groups' first rows. GemmSM90GroupedArgs.Offsets is then not read (it may be null).
type GemmSM90GroupedMaskArgs struct {
	Counts dsl.Ptr   `kgen:"s32"`
	Stride dsl.Value `kgen:"u32"`
}

// GemmSM90GroupedScaleArgs are the grouped gemm's last parameters with Scales: ScaleA, M
// f32 values (one per row of A), and ScaleB, groups x N f32 values (one per group and
// column, row-major).
type GemmSM90GroupedScaleArgs struct {
	ScaleA, ScaleB dsl.Ptr `kgen:"f32"`
}

func init() {
	register(&Spec{
		Name:    "gemm_sm90_grouped",
		Doc:     "grouped D[rows of g] = alpha*A[rows of g]*B[g] + beta*C on sm_90a (MoE experts): group row offsets read on the device, TMA + wgmma, persistent; 128x256 tiles; K, N multiples of 8; f16/bf16; e4m3: B is groups x N x K, D bf16, row and group-column scales",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16, dsl.E4M3},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmSM90Grouped(k, DefaultGemmSM90GroupedConfig(dt)) },
	})
	register(&Spec{
		Name:    "gemm_sm90_grouped_masked",
		Doc:     "gemm_sm90_grouped on the masked layout (MoE low-latency): group g's rows at g*stride, Counts[g] of them read on the device, tiles only over those; 128x256 tiles, TMA store, bands of 8 row tiles (the pick's shape); f16/bf16; e4m3 with scales",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16, dsl.E4M3},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { GemmSM90Grouped(k, gemmSM90GroupedMaskedGolden(dt)) },
	})
}

// gemmSM90GroupedMaskedGolden is gemm_sm90_grouped_masked's configuration: the default
// tiles with the TMA store, BandM 8 and Masked.
func gemmSM90GroupedMaskedGolden(dt dsl.Type) GemmSM90GroupedConfig {
	c := DefaultGemmSM90GroupedConfig(dt)
	c.TMAStore, c.BandM, c.Masked = true, 8, true
	return c
}

// GemmSM90Grouped writes the grouped sm_90a gemm for cfg into k (target sm_90a). Launch
// cfg.Launch's grid, block and shared memory with its tensor maps (GemmSM90GroupedArgs, then
// GemmOut, then with TMAStore GemmSM90StoreArgs, then with Scales GemmSM90GroupedScaleArgs,
// then with Masked GemmSM90GroupedMaskArgs).
//
// Each block first reads the groups' offsets (one thread per group), clamps them to
// 0 <= Offsets[g] <= Offsets[g+1] <= M (decreasing or out-of-range offsets cannot make it
// write outside D; rows outside every group are not written) and scans ceil(rows_g/BM) into
// a tile prefix in shared memory. With Masked it reads the counts instead: group g's rows
// are [g*Stride, g*Stride + min(max(Counts[g], 0), Stride)), clamped to M (a count above
// Stride cannot reach the next group's slots, nor one past M outside D). It then walks the
// linear tiles of all groups in cfg's order (BandM), as gemm_sm90's persistent blocks do
// (block b takes tiles b, b+gridDim, ...; empty groups have no tiles), each tile's group
// found by a binary search of the prefix. A row tile of group g starts at row Offsets[g] +
// BM*i of A (g*Stride + BM*i with Masked); its rows past the group's end are loaded (the
// next group's rows, a masked group's stale slots, or zeros past M) but not stored, and C is
// read only for the group's rows. B's loads take the group's K rows, g*K on, of the stacked B (fp8: its N rows,
// g*N on); where K is not a multiple of BK the last K step's B rows past K are the next
// group's first rows, multiplied by A's zero-filled columns past K (exact for finite
// weights; fp8's K-major B has no such rows: its map's K is exact).
//
// With TMAStore a consumer warpgroup whose 64 rows all lie inside the tile's group stores
// them as gemm_sm90's TMA-store epilogue does (through its shared tile, one TMA store, which
// clips only at D's M); a warpgroup whose rows cross the group's end stores from registers,
// each row guarded by the group's end, so the next group's rows are never written.
func GemmSM90Grouped(k *dsl.Kernel, cfg GemmSM90GroupedConfig) {
	if err := cfg.Check(); err != nil {
		k.Errorf("%v", err)
		return
	}
	if k.Target() != ptx.SM90a {
		k.Errorf("gemm_sm90_grouped: wgmma and setmaxnreg need sm_90a; the kernel targets %s", k.Target())
		return
	}
	if cfg.ShiftDivision {
		k.SetShiftDivision(true)
	}
	k.LaunchBounds(cfg.Threads(), 1)
	ga := dsl.Params[GemmSM90GroupedArgs](k, cfg.In)
	o := dsl.Params[GemmOut](k, cfg.Out)
	var tmD dsl.TensorMap
	if cfg.TMAStore {
		tmD = dsl.Params[GemmSM90StoreArgs](k, cfg.Out).TmD
	}
	var sc *GemmSM90GroupedScaleArgs
	if cfg.Scales {
		p := dsl.Params[GemmSM90GroupedScaleArgs](k, dsl.F32)
		sc = &p
	}
	var mask *GemmSM90GroupedMaskArgs
	if cfg.Masked {
		p := dsl.Params[GemmSM90GroupedMaskArgs](k, dsl.U32)
		mask = &p
	}
	a := GemmSM90Args{TmA: ga.TmA, TmB: ga.TmB, M: ga.M, N: ga.N, K: ga.K, Alpha: ga.Alpha, Beta: ga.Beta}
	sched := newGroupedTiles(k, cfg, ga, mask)
	BN := cfg.BN
	h := gemmSM90Hooks{tiles: sched}
	h.load = func(m, n dsl.Value) dsl.Value { return sched.row0 }
	h.rowB = func() dsl.Value {
		if cfg.FP8() {
			return sched.group.Mul(ga.N)
		}
		return sched.group.Mul(ga.K)
	}
	var st *groupedStore
	if cfg.TMAStore {
		if st = newGroupedStore(k, cfg, tmD, sc, sched); st == nil {
			return
		}
		sched.drain = true
	}
	h.epilogue = func(acc dsl.Tensor, t, wg, m, n dsl.Value) {
		ag := a
		ag.M = sched.end // rows past the group's end are not stored, C not read there
		row0, col0 := sched.row0.Add(wg.Mul(uint32(64))), n.Mul(uint32(BN))
		regs := func() {
			if sc != nil {
				groupedScaledEpilogue(k, cfg, ag, o, *sc, sched.group, acc, t, row0, col0)
				return
			}
			gemmSM90Epilogue(k, cfg.GemmSM90Config, ag, o, acc, t, row0, col0, nil)
		}
		if st == nil {
			regs()
			return
		}
		k.If(row0.Add(uint32(64)).Le(sched.end), func() {
			if sc != nil {
				st.scaleB = sc.ScaleB.At(sched.group.MulWide(ga.N))
			}
			gemmSM90StoreEpilogue(k, cfg.GemmSM90Config, ag, o, st.cD, st.sD, acc, t, wg, row0, col0, st.plan)
		}).Else(regs)
	}
	body := cfg.GemmSM90Config
	body.TMAStore = false // the grouped epilogue above owns D's tile and its TMA stores
	gemmSM90Body(k, body, a, o, h)
}

// groupedStore is the grouped gemm's TMA-store epilogue: D's shared tiles (one 64 x BN
// tile per consumer warpgroup, after the stages, as gemm_sm90 places them), the TMA copy
// of D's map into them and, with Scales, the plan that scales the accumulators.
type groupedStore struct {
	sD     dsl.SharedTile
	cD     *dsl.TMACopy
	plan   *epiPlan
	scaleB dsl.Ptr // the tile's group's row of ScaleB (set per tile before the plan runs)
}

// newGroupedStore lays out D's shared tiles and copy for cfg (nil after an error recorded
// on k).
func newGroupedStore(k *dsl.Kernel, cfg GemmSM90GroupedConfig, tmD dsl.TensorMap, sc *GemmSM90GroupedScaleArgs, sched *groupedTiles) *groupedStore {
	laD, err := dsl.GMMALayoutAtom(cfg.Out, dsl.KMajor, 128)
	var lD layout.ComposedLayout
	if err == nil {
		lD, err = dsl.TileToShape(laD, 64, cfg.BN)
	}
	if err != nil {
		k.Errorf("gemm_sm90_grouped: D's shared layout: %v", err)
		return nil
	}
	up := func(b int) int { return (b + 1023) / 1024 * 1024 } // DynamicSharedTile's stage size
	es := cfg.In.Bytes()
	stages := cfg.Stages * (up(cfg.BM()*cfg.BK()*es) + up(cfg.BN*cfg.BK()*es))
	st := &groupedStore{sD: k.DynamicSharedTile(cfg.Out, lD, cfg.Consumers, stages)}
	st.cD = k.MakeTMACopy(tmD, st.sD)
	if st.cD.Box != cfg.TMABoxD() || st.cD.SwizzleBytes != 128 || st.cD.Major() != dsl.KMajor {
		k.Errorf("gemm_sm90_grouped: TMA store of D: %v-major box %v; the host builds the map with %v", st.cD.Major(), st.cD.Box, cfg.TMABoxD())
		return nil
	}
	if sc != nil {
		// alpha*acc*ScaleA[row]*ScaleB[group, col], as groupedScaledEpilogue computes it.
		st.plan = &epiPlan{
			rowv: func(ld epiLoader) []dsl.Value { return []dsl.Value{ld.row(sc.ScaleA)} },
			scale: func(f *EpilogueFrag, rowv []dsl.Value) []dsl.Value {
				sb := epiF32s(f.ld.colsKeyed("grouped_scale_b", st.scaleB, len(f.V)))
				v := make([]dsl.Value, len(f.V))
				for i := range v {
					v[i] = f.V[i].Mul(rowv[0]).Mul(sb[i])
				}
				return v
			},
		}
	}
	return st
}

// groupedTiles is the grouped gemm's tile scheduler: the groups' row ranges and the
// inclusive prefix of their row tiles in shared memory, and per tile (in ForEach) the
// group, its first row and end row in registers for the loads and the epilogue.
type groupedTiles struct {
	k                *dsl.Kernel
	lo, hi, ends     dsl.Ptr   // shared: group g's rows [lo, hi); ends[g]: row tiles of groups 0..g
	tilesN           dsl.Value // column tiles
	group, row0, end dsl.Value // the current tile's group, first row and the group's end row
	bm, band         int
	// drain: after its last tile, thread 0 of each consumer warpgroup waits for its TMA
	// stores to finish reading shared memory (the TMA-store epilogue).
	drain bool
}

// newGroupedTiles reads the offsets (with mask, the counts at its stride) and scans the
// tile prefix (every thread of the block takes part: block barriers).
func newGroupedTiles(k *dsl.Kernel, cfg GemmSM90GroupedConfig, a GemmSM90GroupedArgs, mask *GemmSM90GroupedMaskArgs) *groupedTiles {
	const maxG = GemmSM90MaxGroups
	BM := cfg.BM()
	s := &groupedTiles{k: k, bm: BM, band: cfg.BandM,
		lo: k.SharedArray(dsl.U32, maxG), hi: k.SharedArray(dsl.U32, maxG), ends: k.SharedArray(dsl.U32, maxG)}
	s.tilesN = a.N.Add(uint32(cfg.BN - 1)).Div(uint32(cfg.BN))
	tid := k.ThreadIdx(dsl.X)
	groups := a.Groups.Min(uint32(maxG))
	// Offsets as rows in [0, M]: a negative one is 0.
	row := func(i dsl.Value) dsl.Value {
		return k.Load(a.Offsets.At(i)).Max(int32(0)).To(dsl.U32).Min(a.M)
	}
	// The masked layout's rows of group g: from g*Stride (in 64 bits: no wrap; at most M),
	// min(max(Counts[g], 0), Stride) of them, at most up to M.
	masked := func(g dsl.Value) (lo, hi dsl.Value) {
		lo = g.MulWide(mask.Stride).Min(a.M.To(dsl.U64)).To(dsl.U32)
		n := k.Load(mask.Counts.At(g)).Max(int32(0)).To(dsl.U32).Min(mask.Stride).Min(a.M.Sub(lo))
		return lo, lo.Add(n)
	}
	tiles := k.Var(dsl.U32, 0)
	k.If(tid.Lt(groups), func() {
		var lo, hi dsl.Value
		if mask != nil {
			lo, hi = masked(tid)
		} else {
			lo = row(tid)
			hi = row(tid.Add(uint32(1))).Max(lo)
		}
		k.Store(s.lo.At(tid), lo)
		k.Store(s.hi.At(tid), hi)
		k.Set(tiles, hi.Sub(lo).Add(uint32(BM-1)).Div(uint32(BM)))
	})
	// Inclusive scan of the tile counts (Hillis-Steele: threads 0..maxG-1, zeros past the
	// last group).
	inScan := tid.Lt(uint32(maxG))
	k.If(inScan, func() { k.Store(s.ends.At(tid), tiles) })
	for d := 1; d < maxG; d *= 2 {
		k.SyncThreads()
		v := k.Var(dsl.U32, 0)
		k.If(inScan.And(tid.Ge(uint32(d))), func() { k.Set(v, k.Load(s.ends.At(tid.Sub(uint32(d))))) })
		k.SyncThreads()
		k.If(inScan, func() { k.Store(s.ends.At(tid), k.Load(s.ends.At(tid)).Add(v)) })
	}
	k.SyncThreads()
	s.group, s.row0, s.end = k.Var(dsl.U32, 0), k.Var(dsl.U32, 0), k.Var(dsl.U32, 0)
	return s
}

// tile returns the row tile (over all groups) and column tile of linear tile t in the
// scheduler's order (band: see GemmSM90GroupedConfig.BandM), total row tiles tilesM.
func (s *groupedTiles) tile(t, tilesM dsl.Value) (mt, n dsl.Value) {
	if s.band == 0 {
		return t.Div(s.tilesN), t.Rem(s.tilesN)
	}
	perBand := s.tilesN.Mul(uint32(s.band))
	first := t.Div(perBand).Mul(uint32(s.band))
	size := tilesM.Sub(first).Min(uint32(s.band)) // the last band may be narrower
	in := t.Rem(perBand)
	return first.Add(in.Rem(size)), in.Div(size)
}

// ForEach runs body(m, n) for each of the calling block's tiles, m the linear row tile over
// all groups, with group, row0 and end set for it: the group is the first whose inclusive
// tile prefix passes m (a binary search of the 256 entries: any tile order works).
func (s *groupedTiles) ForEach(body func(m, n dsl.Value)) {
	k := s.k
	tilesM := k.Load(s.ends.At(GemmSM90MaxGroups - 1))
	total := tilesM.Mul(s.tilesN)
	k.For(k.BlockIdx(dsl.X), total, k.GridDim(dsl.X), func(t dsl.Value) {
		mt, n := s.tile(t, tilesM)
		g := k.Var(dsl.U32, 0)
		for step := GemmSM90MaxGroups / 2; step >= 1; step /= 2 {
			// ends is non-decreasing: skip step entries while the last of them is <= mt.
			k.If(k.Load(s.ends.At(g.Add(uint32(step-1)))).Le(mt), func() { k.Set(g, g.Add(uint32(step))) })
		}
		first := k.Var(dsl.U32, 0) // the group's first row tile
		k.If(g.Gt(uint32(0)), func() { k.Set(first, k.Load(s.ends.At(g.Sub(uint32(1))))) })
		k.Set(s.group, g)
		k.Set(s.row0, k.Load(s.lo.At(g)).Add(mt.Sub(first).Mul(uint32(s.bm))))
		k.Set(s.end, k.Load(s.hi.At(g)))
		body(mt, n)
	})
	if s.drain {
		// The last tile's TMA stores complete before the block's shared memory goes.
		tid := k.ThreadIdx(dsl.X)
		k.If(tid.Ge(uint32(128)).And(tid.And(uint32(127)).Eq(uint32(0))), func() { k.BulkWait(0, false) })
	}
}

// GemmSM90GroupedFor returns the grouped configuration for rows rows of A in groups groups,
// N = n and K = k on a GPU of sms multiprocessors: GemmSM90Candidates' tiles (with their TMA
// store for 16-bit inputs, stages reduced until the rest fits; bands of
// 16 row tiles, gemmSM90GroupedBand) by GemmSM90Config.Cycles' estimate, with the row
// tiles the groups are expected to make (ceil(rows/BM) + groups/2: half a partial tile per
// group), so that few rows per expert get smaller tiles. Ties go to the larger tile.
// It returns an error for types no candidate builds, a shape CheckShape refuses or sms < 1.
func GemmSM90GroupedFor(in, out dsl.Type, rows, n, k, groups, sms int) (GemmSM90GroupedConfig, error) {
	if sms <= 0 {
		return GemmSM90GroupedConfig{}, fmt.Errorf("GemmSM90GroupedFor: %d multiprocessors: want a positive count (the device's)", sms)
	}
	var best GemmSM90GroupedConfig
	bestCost := 0.0
	var why error
	for _, c := range gemmSM90GroupedCandidates(in, out) {
		if err := c.Check(); err != nil {
			why = err
			continue
		}
		mTiles := ceilDiv(max(rows, 0), c.BM()) + max(groups, 0)/2
		cost := c.Cycles(max(mTiles, 1)*c.BM(), n, k, sms)
		if best.BN == 0 || cost < bestCost {
			best, bestCost = c, cost
		}
	}
	if best.BN == 0 {
		return GemmSM90GroupedConfig{}, fmt.Errorf("GemmSM90GroupedFor: no candidate for %s -> %s: %w", in, out, why)
	}
	if err := best.CheckShape(rows, n, k, groups); err != nil {
		return GemmSM90GroupedConfig{}, err
	}
	return best, nil
}

// gemmSM90GroupedBand is GemmSM90GroupedFor's BandM. Bands of 16 row tiles against 8 (gemm_sm90's
// scheduler's), bf16, 8 experts x 4096 rows at 128x256 with the TMA store: 7168 -> 4096 2548.9
// against 2630.9-2668.2 us on an H200 and 2530.7 against 2521.2-2541.1 on an H100; 2048 -> 7168
// 1271.2 against 1280.6-1281.8 and 1278.2 against 1283.4-1305.8 (docs/bench.md, docs/moe.md).
const gemmSM90GroupedBand = 16

// gemmSM90GroupedCandidates are GemmSM90GroupedFor's choices: GemmSM90Candidates with
// BandM gemmSM90GroupedBand, the TMA store kept where it fits beside the group tables, stages reduced until
// the rest fits. For fp8 with Scales the TMA store spills 8 bytes at 128x256 under ptxas 13
// and still ran 1.14-1.69x faster than the register store on an H100 (docs/moe.md).
func gemmSM90GroupedCandidates(in, out dsl.Type) []GemmSM90GroupedConfig {
	var cs []GemmSM90GroupedConfig
	for _, base := range GemmSM90Candidates(in, out) {
		c := GemmSM90GroupedConfig{GemmSM90Config: base, BandM: gemmSM90GroupedBand}
		if c.TMAStore && c.SharedBytes()+gemmSM90GroupedStatic > gemmSM90MaxShared {
			c.TMAStore = false
		}
		for c.Stages > 2 && c.SharedBytes()+gemmSM90GroupedStatic > gemmSM90MaxShared {
			c.Stages--
		}
		cs = append(cs, c)
	}
	return cs
}

// groupedScaledEpilogue is gemmSM90Epilogue with the grouped scales: the warpgroup's 64 x BN
// accumulators at rows row0.. (below a.M, the group's end) and columns col0.. (below N) of
// D become alpha*acc*ScaleA[row]*ScaleB[group, col] (+ beta*C when beta != 0), stored as
// 2-element vectors (GemmSM90AccCoord's layout).
func groupedScaledEpilogue(k *dsl.Kernel, cfg GemmSM90GroupedConfig, a GemmSM90Args, o GemmOut, sc GemmSM90GroupedScaleArgs, group dsl.Value, acc dsl.Tensor, t, row0, col0 dsl.Value) {
	r := row0.Add(t.Shr(uint32(5)).Mul(uint32(16))).Add(t.And(uint32(31)).Shr(uint32(2)))
	c := col0.Add(t.And(uint32(3)).Mul(uint32(2)))
	vals := acc.Values()
	sb := sc.ScaleB.At(group.MulWide(a.N)).At(c) // the group's row of ScaleB, the thread's columns
	store := func(withC bool) {
		dc := o.D.At(c)
		for half := 0; half < 2; half++ {
			row := r.Add(uint32(8 * half))
			k.If(row.Lt(a.M), func() {
				at := row.MulWide(a.N)
				d := dc.At(at)
				var cp dsl.Ptr
				if withC {
					cp = o.C.At(c).At(at)
				}
				sa := k.Load(sc.ScaleA.At(row)).Mul(a.Alpha)
				for j := 0; j < cfg.BN/8; j++ {
					k.If(c.Add(uint32(8*j)).Lt(a.N), func() {
						s := k.LoadVec(sb.At(8*j), 2)
						v := []dsl.Value{vals[4*j+2*half].Mul(sa).Mul(s[0]), vals[4*j+2*half+1].Mul(sa).Mul(s[1])}
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
