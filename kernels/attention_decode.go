package kernels

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// AttentionDecodeConfig selects one paged-KV decode attention kernel (flash-decoding on
// mma.sync, sm_80+): a few query tokens per sequence over a long K/V cache held in pages
// (vLLM's paged attention, FlashInfer's decode). A block takes BM query rows of one
// (batch, kv head) — the QLen tokens times the heads/kvHeads query heads that share the kv
// head (GQA), so that K and V are read once for all of them — and one split of the
// sequence's key tiles. Each of its Warps warps computes an online softmax over its own
// BN/Warps keys of every BN-key tile (K and V arrive through cp.async, Stages tiles in
// flight, a page at a time); the warps merge through shared memory at the end. With one
// split the block writes O and LSE; with several it writes f32 partials that
// AttentionDecodeCombine merges.
type AttentionDecodeConfig struct {
	In       dsl.Type
	HeadDim  int // 64, 128 or 256
	PageSize int // keys per page: a power of two, 16..1024
	BM, BN   int // query rows per block (16 or 32), keys per step
	Warps    int
	Stages   int
	// PrefetchPages loads a tile's page ids from the block table one tile ahead (into
	// registers, during the tile before), so that issuing a tile's copies waits for no
	// load; without it the issue waits for its ids' load every tile. A candidate to time
	// (gpubench decode -prefetch); not the default yet.
	PrefetchPages bool
	// ShiftDivision builds the kernel's integer divisions and remainders by constants (the
	// page size's among them) as shifts and masks (dsl.Kernel.SetShiftDivision). A candidate
	// to time (gpubench decode -shiftdiv); not the default.
	ShiftDivision bool
}

// MaxDecodeSplits bounds the splits of one sequence (the combine kernel's loop, the
// partials' size).
const MaxDecodeSplits = 256

// DefaultAttentionDecodeConfig is the decode kernel for rows = qLen * heads/kvHeads query
// rows per kv head: 16 rows a block (32 when rows > 16 and headDim <= 128), 64 keys per
// step on 4 warps (16 keys a warp), 3 stages (2 at head dim 256); a step over pages
// smaller than 64 keys gathers 64/pageSize pages.
func DefaultAttentionDecodeConfig(dt dsl.Type, headDim, pageSize, rows int) AttentionDecodeConfig {
	c := AttentionDecodeConfig{In: dt, HeadDim: headDim, PageSize: pageSize, BM: 16, BN: 64, Warps: 4, Stages: 3}
	if rows > 16 && headDim <= 128 {
		c.BM = 32
	}
	if headDim > 128 {
		c.Stages = 2
	}
	return c
}

// Name is the kernel's entry name:
// attention_decode_<in>_d<HeadDim>_p<PageSize>_<BM>x<BN>_<Warps>w<Stages>s, and _pf with
// PrefetchPages, _sdiv with ShiftDivision.
func (c AttentionDecodeConfig) Name() string {
	pf := ""
	if c.PrefetchPages {
		pf = "_pf"
	}
	if c.ShiftDivision {
		pf += "_sdiv"
	}
	return fmt.Sprintf("attention_decode_%s_d%d_p%d_%dx%d_%dw%ds%s", c.In, c.HeadDim, c.PageSize, c.BM, c.BN, c.Warps, c.Stages, pf)
}

// Threads returns the block size.
func (c AttentionDecodeConfig) Threads() int { return 32 * c.Warps }

// mergePitch is the f32 row pitch of the warps' O tiles in the merge (D plus 8 words: the
// quads' 8-byte stores of eight rows fall on distinct banks).
func (c AttentionDecodeConfig) mergePitch() int { return c.HeadDim + 8 }

// SharedBytes returns the dynamic shared memory a block needs: Stages tiles of K and of V,
// reused after the main loop for the warps' running maxima, sums and O tiles.
func (c AttentionDecodeConfig) SharedBytes() int {
	kv := 2 * c.Stages * c.BN * c.HeadDim * c.In.Bytes()
	merge := 4 * c.Warps * c.BM * (2 + c.mergePitch())
	return max(kv, merge)
}

// RowTiles returns the blocks a (batch, kv head, split) needs for its qLen*group rows.
func (c AttentionDecodeConfig) RowTiles(qLen, group int) int {
	return ceilDiv(int(min(satMul(qLen, group), math.MaxInt)), c.BM)
}

// Grid returns the number of blocks (a 1-D grid: splits fastest, then row tiles, kv heads
// and batches); 0 for an empty problem, math.MaxInt where the count overflows an int.
func (c AttentionDecodeConfig) Grid(batch, qLen, heads, kvHeads, splits int) int {
	if batch <= 0 || qLen <= 0 || heads <= 0 || kvHeads <= 0 || splits <= 0 || c.BM <= 0 {
		return 0
	}
	return int(min(satMul(batch, kvHeads, c.RowTiles(qLen, heads/kvHeads), splits), math.MaxInt))
}

// Registers is the registers a thread of the kernel is taken to hold when BlocksPerSM
// counts what fits an SM: ptxas's count for 16 keys a warp (the default tilings; at sm_80
// and sm_90, the larger), rounded up to the allocation unit of 8: 112 at head dim 64 and
// 16 rows, 168 at 64 and 32 rows or 128 and 16 rows, 256 (the limit) at 128 and 32 rows and
// at head dim 256. TestAttentionDecodeAssembles checks these against ptxas.
func (c AttentionDecodeConfig) Registers() int {
	switch {
	case c.HeadDim <= 64 && c.BM <= 16:
		return 112
	case c.HeadDim <= 128 && (c.HeadDim <= 64 || c.BM <= 16):
		return 168
	}
	return 256
}

// SMLimits are the resources of one SM that bound how many blocks it holds at once (the
// occupancy calculator's inputs).
type SMLimits struct {
	Shared         int // bytes of shared memory the SM gives its resident blocks
	SharedReserved int // bytes each resident block takes besides its own (the system's)
	Threads        int // resident threads
	Blocks         int // resident blocks
	Registers      int // 32-bit registers, allocated 256 a warp
}

// SMLimitsOf returns the limits of compute capability sm (90 for 9.0), as the CUDA
// programming guide's table of compute capabilities gives them: 228 KiB of shared memory,
// 2048 threads and 32 blocks on 9.0 and 10.x; 164 KiB, 2048 and 32 on 8.0; 164 KiB, 1536
// and 16 on 8.7; 100 KiB and 1536 threads on 8.6 (16 blocks), 8.9 and 12.x (24 blocks);
// 1 KiB reserved a block, 64 Ki registers. Other capabilities get 8.6's (the smallest).
func SMLimitsOf(sm int) SMLimits {
	l := SMLimits{Shared: 100 << 10, SharedReserved: 1 << 10, Threads: 1536, Blocks: 16, Registers: 64 << 10}
	switch sm {
	case 90, 100, 101, 103:
		l.Shared, l.Threads, l.Blocks = 228<<10, 2048, 32
	case 80:
		l.Shared, l.Threads, l.Blocks = 164<<10, 2048, 32
	case 87:
		l.Shared = 164 << 10
	case 89, 120, 121:
		l.Blocks = 24
	}
	return l
}

// BlocksPerSM returns how many blocks of the kernel an SM of limits l holds at once: the
// least that its shared memory (SharedBytes and l.SharedReserved a block), threads, block
// slots and registers (Registers a thread, 256 a warp at a time) allow; at least 1. The
// default at head dim 128 holds 2 on sm_90 (98 KiB of shared memory a block; registers
// would allow 3), the 2-stage one 3.
func (c AttentionDecodeConfig) BlocksPerSM(l SMLimits) int {
	n := min(l.Blocks, l.Threads/max(c.Threads(), 1))
	if sh := c.SharedBytes() + l.SharedReserved; sh > 0 {
		n = min(n, l.Shared/sh)
	}
	warpRegs := ceilDiv(c.Registers()*32, 256) * 256
	n = min(n, l.Registers/warpRegs/max(c.Warps, 1))
	return max(n, 1)
}

// The split choice's cost model (Splits), in key tiles of one block (the time a block takes
// for one BN-key tile when the SMs are full: on an H200 about 2 us at the default tiles).
const (
	// decodeBlockTiles is a block's cost besides its tiles: the context length's and the
	// first pages' loads before the first copy, the pipeline's fill, the warps' merge and
	// the stores.
	decodeBlockTiles = 3
	// decodeCombineTiles is the combine kernel's cost, its launch included.
	decodeCombineTiles = 2
	// decodeMinSplitTiles is the fewest key tiles a split takes.
	decodeMinSplitTiles = 2
	// decodeSplitTie is how much slower (a fraction) a choice of fewer splits may be
	// estimated and still be taken.
	decodeSplitTie = 0.03
)

// SplitCost is Splits' estimate of the decode's time with splits splits, in key tiles of one
// block (a model for choosing, not a prediction): the waves of blocks, ceil(blocks*splits /
// (sms*perSM)), times the tiles of a split, ceil(tiles/splits), plus a block's fixed cost
// (decodeBlockTiles), plus the combine's (decodeCombineTiles) when splits > 1. blocks is
// Grid at one split, tiles the longest context's key tiles and perSM BlocksPerSM. A
// wave-quantized model: the kernel is bound by each block's latency, so a partial wave
// takes about as long as a full one (on an H200, 1.45 waves of 264 blocks ran at 3.42 TB/s:
// about 2.3 TB/s in the last 0.45 if the first drew batch 64's 4.3).
func SplitCost(blocks, tiles, sms, perSM, splits int) float64 {
	if blocks <= 0 || tiles <= 0 || sms <= 0 || perSM <= 0 || splits <= 0 {
		return math.Inf(1)
	}
	// The products saturate (hostile counts wrapped them: 0 waves, or a negative cost).
	waves := ceilDiv(int(satMul(blocks, splits)), int(satMul(sms, perSM)))
	cost := float64(waves) * float64(ceilDiv(tiles, splits)+decodeBlockTiles)
	if splits > 1 {
		cost += decodeCombineTiles
	}
	return cost
}

// Splits chooses how many splits each sequence's keys take, from the longest context
// maxSeqLen, the SM count sms and the blocks an SM holds (perSM: BlocksPerSM of the
// device's SMLimitsOf). It minimises SplitCost: whole waves of sms*perSM blocks (a 0.48
// wave runs about as long as a full one), enough blocks to fill them (all SMs pulling K/V), few
// tiles a block, each block's fixed cost and the combine's. Of the choices estimated within
// decodeSplitTie of the best it takes the fewest splits (the combine reads less). A split
// keeps at least decodeMinSplitTiles key tiles; there are at most MaxDecodeSplits, and few
// enough for CheckShape's 32-bit offsets of the partials.
//
// Only the largest split count of each number of waves, floor(waves*sms*perSM/blocks), can
// be best, and of the counts with its tiles a split the fewest; so it weighs one candidate a
// wave, and stops when the waves' fixed costs alone pass the best estimate. On 132 SMs of 2
// blocks (an H200 at the default head dim 128): batch 1 and 8 kv heads get 32 splits at
// 32k keys (256 blocks, 16 tiles each: one wave), batch 16 gets 2 (256 blocks, 0.97 of a
// wave; 3 took 1.45 waves, the worst), batch 64 one (1.94 waves).
func (c AttentionDecodeConfig) Splits(batch, qLen, heads, kvHeads, maxSeqLen, sms, perSM int) int {
	blocks := c.Grid(batch, qLen, heads, kvHeads, 1)
	tiles := ceilDiv(maxSeqLen, c.BN)
	most := min(MaxDecodeSplits, tiles/decodeMinSplitTiles)
	if blocks <= 0 || sms <= 0 || perSM <= 0 || most <= 1 {
		return 1
	}
	// CheckShape's bound on the partials, batch*qLen*heads*splits*HeadDim below 2^31, the
	// product taken factor by factor (hostile extents wrapped it to 0: a division by zero).
	rows := int64(1)
	for _, x := range [...]int{batch, qLen, heads, c.HeadDim} {
		if x <= 0 || rows > (1<<31-1)/int64(x) {
			return 1
		}
		rows *= int64(x)
	}
	most = min(most, int((1<<31-1)/rows))
	if most <= 1 {
		return 1
	}
	slots := int(satMul(sms, perSM))
	ideal := float64(blocks) * float64(tiles) / float64(slots) // waves*tiles a split never go below it
	// candidates calls f with each candidate split count, in increasing order.
	candidates := func(f func(s int)) {
		f(1)
		prev, best := 1, SplitCost(blocks, tiles, sms, perSM, 1)
		for w := 1; prev < most && ideal+float64(w*decodeBlockTiles) < best; w++ {
			s := min(int(satMul(w, slots)/int64(blocks)), most)
			if s <= prev {
				continue
			}
			prev = s
			s = ceilDiv(tiles, ceilDiv(tiles, s)) // the fewest splits of as many tiles each
			best = min(best, SplitCost(blocks, tiles, sms, perSM, s))
			f(s)
		}
	}
	best := math.Inf(1)
	candidates(func(s int) { best = min(best, SplitCost(blocks, tiles, sms, perSM, s)) })
	choice := 0
	candidates(func(s int) {
		if choice == 0 && SplitCost(blocks, tiles, sms, perSM, s) <= best*(1+decodeSplitTie) {
			choice = s
		}
	})
	return max(choice, 1)
}

// Check reports a configuration the kernel cannot build.
func (c AttentionDecodeConfig) Check() error {
	pow2 := func(x int) bool { return x > 0 && x&(x-1) == 0 }
	switch {
	case c.In != dsl.F16 && c.In != dsl.BF16:
		return fmt.Errorf("attention_decode: input type %s (want f16 or bf16)", typeName(c.In))
	case c.HeadDim != 64 && c.HeadDim != 128 && c.HeadDim != 256:
		return fmt.Errorf("attention_decode: head dim %d (want 64, 128 or 256)", c.HeadDim)
	case !pow2(c.PageSize) || c.PageSize < 16 || c.PageSize > 1024:
		return fmt.Errorf("attention_decode: page size %d (want a power of two in 16..1024)", c.PageSize)
	case c.BM != 16 && c.BM != 32:
		return fmt.Errorf("attention_decode: BM %d (want 16 or 32 query rows a block)", c.BM)
	case c.Warps <= 0 || c.Warps > 8 || !pow2(c.Warps):
		return fmt.Errorf("attention_decode: %d warps (want a power of two, 1..8)", c.Warps)
	case !pow2(c.BN) || c.BN%(16*c.Warps) != 0 || c.BN > 256:
		return fmt.Errorf("attention_decode: BN %d: want a power of two up to 256 and a multiple of 16*Warps = %d (16 keys a warp at least)", c.BN, 16*c.Warps)
	case c.BN%c.PageSize != 0 && c.PageSize%c.BN != 0:
		return fmt.Errorf("attention_decode: BN %d and page size %d: one must divide the other", c.BN, c.PageSize)
	case c.Stages < 2 || c.Stages > 8:
		return fmt.Errorf("attention_decode: %d stages (want 2..8)", c.Stages)
	}
	// The 16-byte copies: threads lie along a row's HeadDim/8 chunks, whole rows at a time,
	// and a page segment (min(BN, PageSize) rows) must take whole passes.
	if rows := c.Threads() / min(c.HeadDim/8, c.Threads()); min(c.BN, c.PageSize)%rows != 0 {
		return fmt.Errorf("attention_decode: %d threads copy %d rows at a time, which do not tile a %d-row page segment", c.Threads(), rows, min(c.BN, c.PageSize))
	}
	if c.SharedBytes() > 227*1024 {
		return fmt.Errorf("attention_decode: %d bytes of shared memory (more than an H100's 227 KiB)", c.SharedBytes())
	}
	return nil
}

// CheckShape reports a problem the kernel cannot run: positive extents, heads a multiple
// of kvHeads, splits in 1..MaxDecodeSplits, Q's batch*qLen*heads*headDim and the
// partials' batch*qLen*heads*splits*headDim below 2^31 (32-bit offsets), the block
// table's batch*maxPages and its capacity maxPages*PageSize below 2^31 and at most 2^31-1
// blocks. The pages themselves take 64-bit offsets. What it cannot check lives on the
// device: every page id a sequence uses must be in [0, numPages) (an id out of range reads
// outside the cache), and a context length beyond maxPages*PageSize is clamped to it.
func (c AttentionDecodeConfig) CheckShape(batch, qLen, heads, kvHeads, numPages, maxPages, splits int) error {
	switch {
	case batch <= 0 || qLen <= 0 || heads <= 0 || kvHeads <= 0 || numPages <= 0 || maxPages <= 0:
		return fmt.Errorf("attention_decode: batch %d, qLen %d, heads %d, kv heads %d, pages %d, pages per sequence %d: every extent must be positive", batch, qLen, heads, kvHeads, numPages, maxPages)
	case heads%kvHeads != 0:
		return fmt.Errorf("attention_decode: %d heads are not a multiple of %d kv heads (GQA shares each K/V head by heads/kvHeads query heads)", heads, kvHeads)
	case splits < 1 || splits > MaxDecodeSplits:
		return fmt.Errorf("attention_decode: %d splits (want 1..%d)", splits, MaxDecodeSplits)
	// Products saturate (satMul): hostile extents must not wrap a product below a limit.
	case satMul(batch, qLen, heads, splits, c.HeadDim) >= 1<<31:
		return fmt.Errorf("attention_decode: batch*qLen*heads*splits*headDim = %s reaches 2^31 (the 32-bit offsets of Q, O and the partials)", satString(batch, qLen, heads, splits, c.HeadDim))
	case satMul(batch, maxPages) >= 1<<31 || satMul(maxPages, c.PageSize) >= 1<<31:
		return fmt.Errorf("attention_decode: batch*maxPages = %s or maxPages*pageSize = %s reaches 2^31 (32-bit block-table offsets and key indices)", satString(batch, maxPages), satString(maxPages, c.PageSize))
	case int64(c.Grid(batch, qLen, heads, kvHeads, splits)) > MaxGemmGrid:
		return fmt.Errorf("attention_decode: %d blocks exceed the %d of a 1-D grid", c.Grid(batch, qLen, heads, kvHeads, splits), MaxGemmGrid)
	}
	return nil
}

// AttentionDecodeArgs are the decode kernel's parameters. Q and O are [batch, qLen, heads,
// headDim] of the In type; KCache and VCache are pages [numPages, PageSize, kvHeads,
// headDim]; BlockTable is [batch, MaxPages] page ids (s32: key j of sequence b is slot
// j % PageSize of page BlockTable[b, j / PageSize]) and SeqLens [batch] the context
// lengths (s32, keys 0..SeqLens[b]-1, the last QLen of which are the queries' own).
// Query i of sequence b sees keys j < SeqLens[b] - QLen + i + 1. With NumSplits 1 the
// kernel writes O and LSE ([batch, heads, qLen] f32, m*scale + ln l; -inf for a query
// that sees no key, whose O is 0); with more it writes OPart ([batch*qLen*heads,
// NumSplits, headDim] f32, each split's normalised O) and LSEPart ([batch*qLen*heads,
// NumSplits] f32), which AttentionDecodeCombine merges. Query head h reads kv head
// h / (Heads/KVHeads).
type AttentionDecodeArgs struct {
	Q, KCache, VCache, O                             dsl.Ptr
	LSE, OPart, LSEPart                              dsl.Ptr   `kgen:"f32"`
	BlockTable, SeqLens                              dsl.Ptr   `kgen:"s32"`
	Batch, QLen, Heads, KVHeads, MaxPages, NumSplits dsl.Value `kgen:"u32"`
	Scale                                            dsl.Value `kgen:"f32"`
}

func init() {
	targets := []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a}
	register(&Spec{
		Name:    "attention_decode",
		Doc:     "paged-KV decode attention (flash-decoding on mma.sync): qLen queries over block-table pages, causal in the last qLen keys, GQA rows in one block, split-KV partials; head dim 128, 16-key pages, 64-key steps on 4 warps",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: targets,
		New:     func(k *dsl.Kernel, dt dsl.Type) { AttentionDecode(k, DefaultAttentionDecodeConfig(dt, 128, 16, 4)) },
	})
	register(&Spec{
		Name:    "attention_decode_combine",
		Doc:     "merges attention_decode's split partials by their LSEs into O and LSE; head dim 128",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: targets,
		New:     func(k *dsl.Kernel, dt dsl.Type) { AttentionDecodeCombine(k, dt, 128) },
	})
}

// AttentionDecode writes the decode kernel for cfg into k. Launch cfg.Grid(batch, qLen,
// heads, kvHeads, splits) blocks of cfg.Threads() threads with cfg.SharedBytes() bytes of
// dynamic shared memory (AttentionDecodeArgs; cfg.CheckShape says which shapes it takes),
// then, with several splits, AttentionDecodeCombine.
//
// Each block: (split, row tile, kv head, batch) from its index; the split's share of the
// sequence's BN-key tiles (tiles split evenly, so a split may be empty); Q's rows straight
// from global memory into the mma.sync A registers (row r is token r / group, head
// hkv*group + r % group); K and V tiles by cp.async one page segment at a time (the page id
// from the block table, rows past the context zero-filled), Stages in flight. Warp w takes
// keys [w*BN/Warps, (w+1)*BN/Warps) of each tile: S = Q K^T, the causal mask where a tile
// crosses the first query's last key, the online softmax of kernels.Attention, P packed
// into A registers, O += P V. At the end the warps' maxima, sums and O tiles meet in shared
// memory and the block rescales and adds them.
func AttentionDecode(k *dsl.Kernel, cfg AttentionDecodeConfig) {
	if err := cfg.Check(); err != nil {
		k.Errorf("%v", err)
		return
	}
	if cfg.ShiftDivision {
		k.SetShiftDivision(true)
	}
	a := dsl.Params[AttentionDecodeArgs](k, cfg.In)
	D, BM, BN, W, PS := cfg.HeadDim, cfg.BM, cfg.BN, cfg.Warps, cfg.PageSize
	KW := BN / W // keys per warp per tile
	nt := cfg.Threads()
	tid := k.ThreadIdx(dsl.X)
	lane := tid.And(uint32(31))
	warp := tid.Shr(uint32(5))

	// Block -> (split, row tile, kv head, batch).
	group := a.Heads.Div(a.KVHeads)
	rows := a.QLen.Mul(group)
	rowTiles := rows.Add(uint32(BM - 1)).Div(uint32(BM))
	blk := k.BlockIdx(dsl.X)
	split := blk.Rem(a.NumSplits)
	rest := blk.Div(a.NumSplits)
	rt := rest.Rem(rowTiles)
	rest = rest.Div(rowTiles)
	hkv, b := rest.Rem(a.KVHeads), rest.Div(a.KVHeads)
	k.If(b.Ge(a.Batch), k.Return) // a block past Grid's (a larger grid): no work

	// One warp's MMA for both products.
	mma := dsl.MakeTiledMMA(gemmAtom(cfg.In), layout.Must(layout.New(layout.Ints(1, 1, 1), layout.Ints(1, 1, 0))), nil)
	thr := mma.Slice(lane)
	tQ := thr.PartitionFragmentA(k.IdentityTensor(BM, D)) // (4, MM, D/16)
	MM := BM / 16
	NS, NO := KW/8, D/8
	nr := 2 * MM                                                            // rows a thread holds: (mm, half)
	sIdx := func(r, n, c int) int { return c + 2*(r%2) + 4*(r/2) + 4*MM*n } // S and O register of row r, n-tile n, column c

	// The thread's rows: local row, validity, token and Q offset.
	cO := thr.PartitionC(k.IdentityTensor(BM, D))
	local := make([]dsl.Value, nr)
	valid := make([]dsl.Value, nr)
	token := make([]dsl.Value, nr)
	qOff := make([]dsl.Value, nr)
	rowsI := rows.To(dsl.I32)
	for r := range nr {
		local[r] = cO.Coord(sIdx(r, 0, 0))[0]
		row := rt.To(dsl.I32).Mul(int32(BM)).Add(local[r])
		valid[r] = row.Lt(rowsI)
		rc := row.Min(rowsI.Sub(int32(1))).To(dsl.U32)
		qi, hg := rc.Div(group), rc.Rem(group)
		token[r] = qi.To(dsl.I32)
		qOff[r] = b.Mul(a.QLen).Add(qi).Mul(a.Heads).Add(hkv.Mul(group)).Add(hg).Mul(uint32(D))
	}
	// Q straight into the A registers, before the context's load so that their latency
	// hides behind it and the block table's: register j of atom (mm, kb) holds row half
	// j%2, two adjacent columns.
	cQ := thr.PartitionA(k.IdentityTensor(BM, D))
	pair := dsl.BF16x2
	if cfg.In == dsl.F16 {
		pair = dsl.F16x2
	}
	for kb := range D / 16 {
		for mm := range MM {
			for j := range 4 {
				r := 2*mm + j%2
				col := cQ.Coord(2*j + 8*(mm+MM*kb))[1]
				w := k.Load(a.Q.At(qOff[r].Add(col.To(dsl.U32))).As(dsl.U32))
				tQ.Set(j+4*(mm+MM*kb), k.Select(valid[r], w, uint32(0)).Bitcast(pair))
			}
		}
	}

	// The context, clamped to the block table's capacity; this split's key tiles.
	seqLen := k.Load(a.SeqLens.At(b)).Max(int32(0)).Min(a.MaxPages.Mul(uint32(PS)).To(dsl.I32))
	ns := a.NumSplits.To(dsl.I32)
	nT := seqLen.Add(int32(BN - 1)).Div(int32(BN))
	per := nT.Add(ns).Sub(int32(1)).Div(ns)
	t0 := split.To(dsl.I32).Mul(per)
	nKV := nT.Min(t0.Add(per)).Sub(t0).Max(int32(0))
	qLen := a.QLen.To(dsl.I32)
	diag := seqLen.Sub(qLen)       // query i sees keys j <= diag + i
	limit := make([]dsl.Value, nr) // the last key each of the thread's rows sees
	for r := range nr {
		limit[r] = diag.Add(token[r])
	}

	// Shared memory: Stages tiles of K, then of V, rows swizzled for ldmatrix.
	smem := k.DynamicShared(cfg.In, 128)
	sw := smemSwizzle(D)
	rowMajor := func(n int) layout.Layout { return layout.Must(layout.New(layout.Ints(n, D), layout.Ints(D, 1))) }
	vOff := cfg.Stages * BN * D
	stageOf := func(t dsl.Tensor, st dsl.Value) dsl.Tensor {
		return t.ShiftBase(k.Assume(st.Mul(int32(BN*D)), BN*D))
	}

	// K/V tile t of the split: BN/seg page segments of seg rows, each from its page.
	seg := min(BN, PS)
	sKseg := k.MakeSwizzledTensor(smem, sw, rowMajor(seg))
	sVseg := k.MakeSwizzledTensor(smem.At(vOff), sw, rowMajor(seg))
	c := min(D/8, nt)
	cp := dsl.MakeTiledCopy(dsl.CpAsync16, layout.Must(layout.New(layout.Ints(nt/c, c), layout.Ints(c, 1))), []int{1, 8}).Slice(tid)
	ldkv := k.Assume(a.KVHeads.Mul(uint32(D)), 8)
	btRow := b.Mul(a.MaxPages).To(dsl.I32)
	lastPage := a.MaxPages.To(dsl.I32).Sub(int32(1))
	// pageOf loads the id of the page holding key kk (the index clamped to the table's row: a
	// segment past the context copies nothing from its page).
	pageOf := func(kk dsl.Value) dsl.Value {
		return k.Load(a.BlockTable.At(btRow.Add(kk.Div(int32(PS)).Min(lastPage))))
	}
	pagesOf := func(t dsl.Value) []dsl.Value {
		ps := make([]dsl.Value, BN/seg)
		for s := range ps {
			ps[s] = pageOf(t0.Add(t).Mul(int32(BN)).Add(int32(s * seg)))
		}
		return ps
	}
	// With PrefetchPages, next holds the page ids of the next tile to issue, loaded one issue
	// ahead.
	var next []dsl.Value
	if cfg.PrefetchPages {
		for _, p := range pagesOf(k.Const(dsl.I32, 0)) {
			next = append(next, k.Var(dsl.I32, p))
		}
	}
	pipe := k.CpAsyncPipeline(cfg.Stages, nKV, func(st, t dsl.Value) {
		key0 := t0.Add(t).Mul(int32(BN))
		for s := 0; s < BN/seg; s++ {
			kk := key0.Add(int32(s * seg))
			n := seqLen.Sub(kk).Max(int32(0)).Min(int32(seg))
			var page dsl.Value
			if cfg.PrefetchPages {
				page = next[s]
			} else {
				page = pageOf(kk)
			}
			slot := kk.And(int32(PS - 1))
			base := k.Assume(page.To(dsl.U64).Mul(uint64(PS)).Add(slot.To(dsl.U64)).Mul(a.KVHeads.To(dsl.U64)).Add(hkv.To(dsl.U64)).Mul(uint64(D)), 8)
			for _, x := range []struct {
				cache dsl.Ptr
				dst   dsl.Tensor
			}{{a.KCache, sKseg}, {a.VCache, sVseg}} {
				g := k.MakeTensorDyn(x.cache.At(base), []any{n, D}, []any{ldkv, 1}).LocalTile([]int{seg, D}, 0, 0)
				cp.Copy(cp.PartitionS(g), cp.PartitionD(stageOf(x.dst, st).ShiftBase(s*seg*D)))
			}
		}
		if cfg.PrefetchPages { // tile t+1's ids: loaded now, used by the next issue
			for s, p := range pagesOf(t.Add(int32(1))) {
				k.Set(next[s], p)
			}
		}
	})
	pipe.Start()

	// Warp w's keys of a tile.
	wOff := k.Assume(warp.Mul(uint32(KW*D)).To(dsl.I32), KW*D)
	sKw := k.MakeSwizzledTensor(smem, sw, rowMajor(KW)).ShiftBase(wOff)
	sVtw := k.MakeSwizzledTensor(smem.At(vOff), sw, layout.Must(layout.New(layout.Ints(D, KW), layout.Ints(1, D)))).ShiftBase(wOff)
	tK := thr.PartitionFragmentB(sKw)  // (2, KW/8, D/16)
	tV := thr.PartitionFragmentB(sVtw) // (2, D/8, KW/16)
	tS := thr.PartitionFragmentC(k.IdentityTensor(BM, KW))
	tP := thr.PartitionFragmentA(k.IdentityTensor(BM, KW))
	tO := thr.PartitionFragmentC(k.IdentityTensor(BM, D))
	ldK := dsl.MakeTiledCopyB(dsl.LdMatrixX4, mma).Slice(lane)
	ldV := dsl.MakeTiledCopyB(dsl.LdMatrixX4, mma).Slice(lane)
	tsK, tsV := ldK.PartitionS(sKw), ldV.PartitionS(sVtw)

	sm := newOnlineSoftmax(k, MM, a.Scale)
	negInf, scaleLog2, mRow, lRow, quadSum := sm.negInf, sm.scaleLog2, sm.m, sm.l, sm.quadSum
	cS := thr.PartitionC(k.IdentityTensor(BM, KW))
	wKey := warp.Mul(uint32(KW)).To(dsl.I32)

	k.For(int32(0), nKV, int32(1), func(t dsl.Value) {
		pipe.Wait(t)
		pipe.Issue(t.Add(int32(cfg.Stages - 1)))
		st := pipe.Stage(t)

		// S = Q K^T over this warp's keys.
		for i := range tS.Size() {
			tS.Set(i, float32(0))
		}
		for kb := 0; kb < D/16; kb++ {
			ldK.Copy(stageOf(tsK, st).Slice(2, kb), tK.Slice(2, kb))
			k.Gemm(mma, tQ.Slice(2, kb), tK.Slice(2, kb), tS)
		}

		// Causal mask (keys past the context included), only where the warp's keys reach
		// past the first query's last key.
		key0 := t0.Add(t).Mul(int32(BN)).Add(wKey)
		k.If(key0.Add(int32(KW-1)).Gt(diag), func() {
			for r := range nr {
				for n := range NS {
					for c := range 2 {
						i := sIdx(r, n, c)
						ok := key0.Add(cS.Coord(i)[1]).Le(limit[r])
						tS.Set(i, k.Select(ok, tS.Get(i), negInf))
					}
				}
			}
		})

		// Online softmax, row by row; P into the A registers; O += P V.
		sm.step(tS, tO, NS, NO)
		sm.packP(tP, tS, KW/16, cfg.In)
		for kb := 0; kb < KW/16; kb++ {
			ldV.Copy(stageOf(tsV, st).Slice(2, kb), tV.Slice(2, kb))
			k.Gemm(mma, tP.Slice(2, kb), tV.Slice(2, kb), tO)
		}
	})

	// Merge the warps: every warp is done with the K/V tiles, whose memory now holds each
	// warp's maxima and sums ([W][BM] each) and O tile ([W][BM][pitch] f32).
	k.SyncThreads()
	DP := cfg.mergePitch()
	fs := k.DynamicShared(dsl.F32, 128)
	mBuf, lBuf, oBuf := fs, fs.At(W*BM), fs.At(2*W*BM)
	wRow := warp.Mul(uint32(BM))
	lSum := make([]dsl.Value, nr)
	for r := range nr { // every lane shuffles, outside the If
		lSum[r] = quadSum(lRow[r])
	}
	k.If(lane.And(uint32(3)).Eq(uint32(0)), func() {
		for r := range nr {
			at := wRow.Add(local[r].To(dsl.U32))
			k.Store(mBuf.At(at), mRow[r])
			k.Store(lBuf.At(at), lSum[r])
		}
	})
	sO := k.MakeTensor(oBuf, layout.Must(layout.New(layout.Ints(BM, D), layout.Ints(DP, 1)))).ShiftBase(k.Assume(warp.Mul(uint32(BM*DP)).To(dsl.I32), BM*DP))
	k.Copy(tO, thr.PartitionC(sO))
	k.SyncThreads()

	// Each thread finishes 4 adjacent columns of a row at a time.
	units := BM * D / 4
	scale := a.Scale
	for i := 0; i < ceilDiv(units, nt); i++ {
		u := tid.Add(uint32(i * nt))
		body := func() {
			row := u.Div(uint32(D / 4))
			c4 := u.Rem(uint32(D / 4)).Mul(uint32(4))
			m := negInf
			for w := range W {
				m = m.Max(k.Load(mBuf.At(row.Add(uint32(w * BM)))))
			}
			ms := k.Select(m.Eq(negInf), k.Const(dsl.F32, 0.0), m.Mul(scaleLog2))
			l := k.Const(dsl.F32, 0.0)
			o := []dsl.Value{l, l, l, l}
			for w := range W {
				at := row.Add(uint32(w * BM))
				cw := k.FMA(k.Load(mBuf.At(at)), scaleLog2, ms.Neg()).Exp2()
				l = k.FMA(k.Load(lBuf.At(at)), cw, l)
				ov := k.LoadVec(oBuf.At(at.Mul(uint32(DP)).Add(c4)), 4)
				for j := range 4 {
					o[j] = k.FMA(ov[j], cw, o[j])
				}
			}
			inv := k.Select(l.Eq(float32(0)), k.Const(dsl.F32, 0.0), l.Rcp())
			for j := range 4 {
				o[j] = o[j].Mul(inv)
			}
			lse := k.Select(l.Eq(float32(0)), negInf, k.FMA(m, scale, l.Log2().Mul(float32(math.Ln2))))
			gRow := rt.Mul(uint32(BM)).Add(row)
			k.If(gRow.Lt(rows), func() {
				qi, hg := gRow.Div(group), gRow.Rem(group)
				h := hkv.Mul(group).Add(hg)
				rowG := b.Mul(a.QLen).Add(qi).Mul(a.Heads).Add(h)
				first := c4.Eq(uint32(0))
				k.If(a.NumSplits.Eq(uint32(1)), func() {
					out := make([]dsl.Value, 4)
					for j := range 4 {
						out[j] = o[j].To(cfg.In)
					}
					k.StoreVec(a.O.At(rowG.Mul(uint32(D)).Add(c4)), out)
					k.If(first, func() {
						k.Store(a.LSE.At(b.Mul(a.Heads).Add(h).Mul(a.QLen).Add(qi)), lse)
					})
				}).Else(func() {
					at := rowG.Mul(a.NumSplits).Add(split)
					k.StoreVec(a.OPart.At(at.Mul(uint32(D)).Add(c4)), o)
					k.If(first, func() { k.Store(a.LSEPart.At(at), lse) })
				})
			})
		}
		if units%nt == 0 {
			body()
		} else {
			k.If(u.Lt(uint32(units)), body)
		}
	}
}

// AttentionDecodeCombineArgs are the combine kernel's parameters: OPart and LSEPart as
// AttentionDecodeArgs describes them (NumSplits splits of batch*qLen*heads rows), O
// [batch, qLen, heads, headDim] of the output type and LSE [batch, heads, qLen] f32.
type AttentionDecodeCombineArgs struct {
	OPart, LSEPart                dsl.Ptr `kgen:"f32"`
	O                             dsl.Ptr
	LSE                           dsl.Ptr   `kgen:"f32"`
	Batch, QLen, Heads, NumSplits dsl.Value `kgen:"u32"`
}

// AttentionDecodeCombineThreads is the combine kernel's block size.
const AttentionDecodeCombineThreads = 128

// combineUnroll is the splits one thread group of the combine kernel loads per round: every
// load of a round is issued before the first is used.
const combineUnroll = 8

// AttentionDecodeCombineName is the combine kernel's entry name for output type dt and
// head dim d: attention_decode_combine_<dt>_d<d>.
func AttentionDecodeCombineName(dt dsl.Type, d int) string {
	return fmt.Sprintf("attention_decode_combine_%s_d%d", dt, d)
}

// AttentionDecodeCombineGrid returns the combine kernel's blocks for rows = batch*qLen*heads
// rows of head dim d: one block a row.
func AttentionDecodeCombineGrid(rows, d int) int {
	if rows <= 0 || d < 4 {
		return 0
	}
	return rows
}

// AttentionDecodeCombine writes the kernel that merges the decode kernel's splits: for each
// row, M = max over splits of LSEPart, w_s = exp(LSEPart_s - M), O = sum w_s OPart_s /
// sum w_s (0 when every split is empty), LSE = M + ln(sum w_s) (-inf then). Launch
// AttentionDecodeCombineGrid(batch*qLen*heads, d) blocks of AttentionDecodeCombineThreads
// (AttentionDecodeCombineArgs); d is 64, 128 or 256, dt f16 or bf16 and NumSplits at
// least 1.
//
// One block takes one row, its splits in parallel. Its threads form groups of min(d/4, 32)
// threads, each thread 4 (8 at d 256) columns of the row; group g takes splits g, g+G,
// g+2G, ... of the G groups, combineUnroll a round with every load of the round issued
// before the first is used. Meanwhile every warp loads the row's LSEs itself (lane l
// those of splits l, l+32, ...) and reduces M and sum w_s by shuffles, so no barrier waits
// for them; the first round's loads are issued before that reduction. The groups' partial
// sums meet in shared memory (one barrier), and d/4 threads add them, scale by 1/sum w_s
// and store O (and thread 0 the LSE). All loads are 16-byte ones but the LSEs' (a warp
// reads one address at a time: a broadcast).
func AttentionDecodeCombine(k *dsl.Kernel, dt dsl.Type, d int) {
	if dt != dsl.F16 && dt != dsl.BF16 {
		k.Errorf("attention_decode_combine: output type %s (want f16 or bf16)", typeName(dt))
		return
	}
	if d != 64 && d != 128 && d != 256 {
		k.Errorf("attention_decode_combine: head dim %d (want 64, 128 or 256)", d)
		return
	}
	a := dsl.Params[AttentionDecodeCombineArgs](k, dt)
	const nt, U = AttentionDecodeCombineThreads, combineUnroll
	tpr := min(d/4, 32) // threads across a row: 16 at d 64, 32 at d 128 and 256
	cpt := d / tpr      // columns a thread: 4, 4 and 8 (one or two 16-byte loads)
	G := nt / tpr       // split groups: 8, 4 and 4
	tid := k.ThreadIdx(dsl.X)
	lane := tid.And(uint32(31))
	g := tid.Div(uint32(tpr))
	c0 := tid.Rem(uint32(tpr)).Mul(uint32(cpt))
	row := k.BlockIdx(dsl.X)
	ns := a.NumSplits
	nRows := a.Batch.Mul(a.QLen).Mul(a.Heads)
	negInf := k.Const(dsl.F32, math.Inf(-1))
	zero := k.Const(dsl.F32, 0.0)
	log2e := float32(math.Log2E)

	// loadIf returns the n values at p when ok, else n copies of def: a guarded load into
	// registers (ptxas predicates it; nothing waits for it until a value is used).
	loadIf := func(ok dsl.Value, p dsl.Ptr, n int, def dsl.Value) []dsl.Value {
		vs := make([]dsl.Value, n)
		for i := range vs {
			vs[i] = k.Var(dsl.F32, def)
		}
		k.If(ok, func() {
			var x []dsl.Value
			if n == 1 {
				x = []dsl.Value{k.Load(p)}
			}
			for i := 0; i+4 <= n; i += 4 {
				x = append(x, k.LoadVec(p.At(uint32(i)), 4)...)
			}
			for i := range vs {
				k.Set(vs[i], x[i])
			}
		})
		return vs
	}

	k.If(row.Lt(nRows), func() { // the block's row: uniform, so its barrier is every thread's
		base := row.Mul(ns)
		// This lane's LSEs (splits lane, lane+32, ...: MaxDecodeSplits/32 guarded loads;
		// later chunks of 256, if any, in loops below).
		const chunk = MaxDecodeSplits
		lseL := make([]dsl.Value, chunk/32)
		for j := range lseL {
			s := lane.Add(uint32(32 * j))
			lseL[j] = loadIf(s.Lt(ns), a.LSEPart.At(base.Add(s)), 1, negInf)[0]
		}
		// A round of group g: splits r*G*U + g + G*u for u < U, their LSEs and columns.
		round := func(r dsl.Value) (lse []dsl.Value, o [][]dsl.Value) {
			s0 := r.Mul(uint32(G * U)).Add(g)
			for u := range U {
				s := s0.Add(uint32(G * u))
				ok := s.Lt(ns)
				lse = append(lse, loadIf(ok, a.LSEPart.At(base.Add(s)), 1, negInf)[0])
				o = append(o, loadIf(ok, a.OPart.At(base.Add(s).Mul(uint32(d)).Add(c0)), cpt, zero))
			}
			return lse, o
		}
		lse0, o0 := round(k.Const(dsl.U32, 0))

		// M and sum w_s, every warp on its own.
		nChunks := ns.Add(uint32(chunk - 1)).Div(uint32(chunk))
		mv := k.Var(dsl.F32, negInf)
		m := lseL[0]
		for _, x := range lseL[1:] {
			m = m.Max(x)
		}
		k.Set(mv, m)
		k.For(uint32(1), nChunks, uint32(1), func(c dsl.Value) {
			k.For(uint32(0), uint32(chunk/32), uint32(1), func(j dsl.Value) {
				s := c.Mul(uint32(chunk)).Add(j.Mul(uint32(32))).Add(lane)
				k.If(s.Lt(ns), func() { k.Set(mv, mv.Max(k.Load(a.LSEPart.At(base.Add(s))))) })
			})
		})
		M := k.WarpReduce(mv, dsl.Max)
		ms := k.Select(M.Eq(negInf), zero, M) // every split empty: the weights are all 0
		weight := func(lse dsl.Value) dsl.Value { return lse.Sub(ms).Mul(log2e).Exp2() }
		lv := k.Var(dsl.F32, zero)
		l := weight(lseL[0])
		for _, x := range lseL[1:] {
			l = l.Add(weight(x))
		}
		k.Set(lv, l)
		k.For(uint32(1), nChunks, uint32(1), func(c dsl.Value) {
			k.For(uint32(0), uint32(chunk/32), uint32(1), func(j dsl.Value) {
				s := c.Mul(uint32(chunk)).Add(j.Mul(uint32(32))).Add(lane)
				k.If(s.Lt(ns), func() { k.Set(lv, lv.Add(weight(k.Load(a.LSEPart.At(base.Add(s)))))) })
			})
		})
		L := k.WarpReduce(lv, dsl.Sum)

		// The group's weighted sum of its splits' columns, a round at a time.
		acc := make([]dsl.Value, cpt)
		for i := range acc {
			acc[i] = k.Var(dsl.F32, zero)
		}
		add := func(lse []dsl.Value, o [][]dsl.Value) {
			for u := range lse {
				w := weight(lse[u])
				for i := range acc {
					k.Set(acc[i], k.FMA(o[u][i], w, acc[i]))
				}
			}
		}
		add(lse0, o0)
		k.For(uint32(1), ns.Add(uint32(G*U-1)).Div(uint32(G*U)), uint32(1), func(r dsl.Value) { add(round(r)) })

		// The groups meet in shared memory; d/4 threads finish 4 columns each.
		red := k.SharedArray(dsl.F32, G*d)
		at := g.Mul(uint32(d)).Add(c0)
		for i := 0; i < cpt; i += 4 {
			k.StoreVec(red.At(at.Add(uint32(i))), acc[i:i+4])
		}
		k.SyncThreads()
		k.If(tid.Lt(uint32(d/4)), func() {
			c4 := tid.Mul(uint32(4))
			sum := k.LoadVec(red.At(c4), 4)
			for gg := 1; gg < G; gg++ {
				v := k.LoadVec(red.At(c4.Add(uint32(gg*d))), 4)
				for j := range sum {
					sum[j] = sum[j].Add(v[j])
				}
			}
			inv := k.Select(L.Eq(float32(0)), zero, L.Rcp())
			out := make([]dsl.Value, 4)
			for j := range out {
				out[j] = sum[j].Mul(inv).To(dt)
			}
			k.StoreVec(a.O.At(row.Mul(uint32(d)).Add(c4)), out)
			k.If(tid.Eq(uint32(0)), func() {
				lse := k.Select(L.Eq(float32(0)), negInf, ms.Add(L.Log2().Mul(float32(math.Ln2))))
				h, bq := row.Rem(a.Heads), row.Div(a.Heads)
				qi, b := bq.Rem(a.QLen), bq.Div(a.QLen)
				k.Store(a.LSE.At(b.Mul(a.Heads).Add(h).Mul(a.QLen).Add(qi)), lse)
			})
		})
	})
}
