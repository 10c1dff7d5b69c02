package kernels

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// AttentionSM90Config selects one FlashAttention-3-class forward attention kernel for
// sm_90a: a warp-specialized block of one producer warpgroup (TMA loads of the Q tile and
// of a ring of Stages K and V tiles) and Consumers consumer warpgroups of 64 query rows each
// (BM = 64*Consumers), which compute S = Q K^T on wgmma from shared memory, the online
// softmax over the accumulator rows and O += P V on wgmma with P from registers. It takes
// the arguments of Attention (AttentionArgs) and, after them, the tensor maps of
// AttentionSM90Maps.
type AttentionSM90Config struct {
	In        dsl.Type
	HeadDim   int // 64, 128 or 256
	BN        int // keys per step: a multiple of 16, 16..256
	Stages    int // K and V tiles in flight: 2..8
	Consumers int // consumer warpgroups: 1, 2 or 3 (BM 64, 128 or 192; 3 at head dim 64)
	Causal    bool
	// Overlap issues S_{j+1} = Q K_{j+1}^T before the softmax of tile j's scores and P_j V_j
	// after it (FlashAttention-3's intra-warpgroup pipelining, section 3.2): the tensor
	// cores work on one tile while the warpgroup's exp2s run on the other.
	Overlap bool
	// PingPong orders the consumer warpgroups' GEMMs with two named barriers (FlashAttention-3's
	// inter-warpgroup ping-pong, section 3.1): one warpgroup's softmax runs while the other's
	// GEMMs run. It needs two consumers.
	PingPong bool
	// VarLen packs the batch's sequences (FlashAttention's varlen): Q and O are [totalQ,
	// heads, d], K and V [totalK, kvHeads, d], sequence b's queries rows CuQ[b]..CuQ[b+1] and
	// keys CuK[b]..CuK[b+1] (AttentionVarLenArgs, after the maps), SeqQ the longest query
	// sequence (the grid's), SeqK unused; LSE is [heads, totalQ].
	VarLen bool
	// Persistent launches at most one block an SM (LaunchPersistent), each walking work
	// tiles as Schedule says (blockIdx, blockIdx + gridDim, ... in Grid's order for
	// AttentionStrided): the producer runs ahead across tiles (the K/V rings run on; the
	// next Q loads into a second buffer where shared memory holds one), so one tile's
	// epilogue overlaps the next tile's loads.
	Persistent bool
	// Schedule orders the work tiles and, with Persistent, how the blocks take them:
	// AttentionStrided (the zero value), AttentionLPT (longest first across the heads, a
	// snake walk) or AttentionDynamic (Persistent only: a tile counter in global memory,
	// AttentionSchedArgs after the other parameters). The causal tiles' costs differ (a
	// query tile's key tiles), so the strided walk balances them badly.
	Schedule AttentionSchedule
	// ShiftDivision builds the kernel's integer divisions and remainders by constants as
	// shifts and masks (dsl.Kernel.SetShiftDivision): ptxas compiles div and rem by an
	// immediate to a general sequence of about 30 instructions.
	ShiftDivision bool
}

// DefaultAttentionSM90Config is the library's sm_90a attention for dt and headDim: two
// consumer warpgroups (128 query rows), 128 keys per step (80 at head dim 256, for the
// registers of O: 3-8% faster than 64 on an H200, causal or not, 1k to 16k tokens), two
// stages, the intra-warpgroup Overlap on and the ping-pong off: the fastest variant at every
// head dim on an H200 (bf16, 2k and 16k tokens, causal or not; docs/attention.md), e.g. at
// d 128 seqlen 16k 691 TFLOP/s against 687 with the ping-pong too and 590 with the
// ping-pong alone. Persistent when not causal: 2-14% faster there (d 128 2k 661 against 580
// TFLOP/s). Causal tiles are unequal; AttentionSM90ConfigForShape makes them Persistent
// with AttentionLPT (d 64) or AttentionDynamic (d 128, 256), which measured faster.
func DefaultAttentionSM90Config(dt dsl.Type, headDim int, causal bool) AttentionSM90Config {
	c := AttentionSM90Config{In: dt, HeadDim: headDim, BN: 128, Stages: 2, Consumers: 2, Causal: causal, Overlap: true, Persistent: !causal}
	if headDim > 128 {
		c.BN = 80
	}
	return c
}

// AttentionSM90ConfigForShape is DefaultAttentionSM90Config fitted to seqQ queries over
// seqK keys (0: not known), from one-call A/Bs on an H200 (bf16, 16k tokens, docs/attention.md):
//   - seqQ at most 64: one consumer warpgroup (64 query rows, no ping-pong; 64 keys a step
//     at head dim 256, for its registers);
//   - causal: Persistent with AttentionLPT at d 64 (1k-16k tokens: 298-509 TFLOP/s against
//     242-487 one block a tile), there with 3 K/V stages (1k-16k: 308-505 against 300-493
//     with 2, two runs each in one call); at d 128 and 256 Persistent with AttentionDynamic
//     (its L2 sections): d 128 1k-16k 443 / 554 / 628 / 675 / 702 against one block a
//     tile's 374 / 490 / 595 / 657 / 698, d 256 405-778 against 408-784 (the same within
//     1%, 2k 558 against 529);
//   - d 64 from 4k queries causal, 2k queries and keys not: three consumer warpgroups (192
//     query rows, 128-key steps; causal with AttentionDynamic and 3 stages): causal 4k /
//     8k / 16k 434-436 / 490 / 510 against 426-427 / 477-479 / 489-491, not causal 2k-16k
//     463-469 / 484-487 / 508 / 504-506 against 443-450 / 466 / 487-492 / 479-481 with two
//     (shorter ones ran slower: 192-row tiles pad and mask more);
//   - not causal, many keys: longer key steps, d 64 (two consumers: fewer than 2k queries)
//     BN 192 from 2k keys (440 / 448 TFLOP/s at 2k), BN 224 from 4k (483 / 502 at 16k); d
//     128 BN 160 from 4k (735 / 750 at 16k).
//     Fewer keys ran faster at BN 128, and causal tiles at BN 128 at every length.
func AttentionSM90ConfigForShape(dt dsl.Type, headDim int, causal bool, seqQ, seqK int) AttentionSM90Config {
	c := DefaultAttentionSM90Config(dt, headDim, causal)
	switch {
	case seqQ <= 64:
		c.Consumers, c.PingPong = 1, false
		if headDim > 128 {
			c.BN = 64
		}
	case causal && headDim == 64 && seqQ >= 4096:
		c.Consumers, c.Persistent, c.Schedule, c.Stages = 3, true, AttentionDynamic, 3
	case causal && headDim == 64:
		c.Persistent, c.Schedule, c.Stages = true, AttentionLPT, 3
	case causal:
		c.Persistent, c.Schedule = true, AttentionDynamic
	case headDim == 64 && seqQ >= 2048 && seqK >= 2048:
		c.Consumers = 3
	case headDim == 64 && seqK >= 4096:
		c.BN = 224
	case headDim == 64 && seqK >= 2048:
		c.BN = 192
	case headDim == 128 && seqK >= 4096:
		c.BN = 160
	}
	return c
}

// BM returns the query rows of a block: 64 per consumer warpgroup.
func (c AttentionSM90Config) BM() int { return 64 * c.Consumers }

// Name is the kernel's entry name:
// attention_sm90_<in>_d<HeadDim>_<BM>x<BN>_<Stages>s{_causal}{_ov}{_pp}{_varlen}{_persist}{_lpt|_dyn}.
func (c AttentionSM90Config) Name() string {
	s := fmt.Sprintf("attention_sm90_%s_d%d_%dx%d_%ds", c.In, c.HeadDim, c.BM(), c.BN, c.Stages)
	if c.Causal {
		s += "_causal"
	}
	if c.Overlap {
		s += "_ov"
	}
	if c.PingPong {
		s += "_pp"
	}
	if c.VarLen {
		s += "_varlen"
	}
	if c.Persistent {
		s += "_persist"
	}
	switch c.Schedule {
	case AttentionStrided:
	case AttentionLPT:
		s += "_lpt"
	case AttentionDynamic:
		s += "_dyn"
	default:
		s += fmt.Sprintf("_sched%d", int(c.Schedule))
	}
	if c.ShiftDivision {
		s += "_sdiv"
	}
	return s
}

// Threads returns the block size: the producer warpgroup and the consumers.
func (c AttentionSM90Config) Threads() int { return 128 * (1 + c.Consumers) }

// tileBytes is the bytes of a rows x HeadDim tile of In, rounded up to 1024 (a SharedTile's
// stage).
func (c AttentionSM90Config) tileBytes(rows int) int {
	return (rows*c.HeadDim*c.In.Bytes() + 1023) / 1024 * 1024
}

// SharedBytes returns the dynamic shared memory a block needs: the Q tile (two with
// Persistent where they fit in 227 KiB: at head dim 64 and 128 in the default
// configurations, not at 256), Stages tiles of K and of V, and dsl.DynamicSharedTilePad to
// align them to 1024 bytes at run time.
func (c AttentionSM90Config) SharedBytes() int {
	return c.qStages()*c.tileBytes(c.BM()) + 2*c.Stages*c.tileBytes(c.BN) + dsl.DynamicSharedTilePad
}

// qStages is the Q buffers of a block: two with Persistent where shared memory holds them
// (the next tile's Q then loads while this tile's S GEMMs still read its own), else one.
func (c AttentionSM90Config) qStages() int {
	if c.Persistent && 2*c.tileBytes(c.BM())+2*c.Stages*c.tileBytes(c.BN)+dsl.DynamicSharedTilePad <= 227*1024 {
		return 2
	}
	return 1
}

// Grid returns the number of work tiles, the blocks of a launch without Persistent (a 1-D
// grid in Schedule's order: for AttentionStrided query tiles fastest, then heads, then
// batches, causal blocks taking a head's longest tiles first); 0 for an empty problem,
// math.MaxInt where the count overflows int (CheckShape refuses such shapes).
func (c AttentionSM90Config) Grid(batch, heads, seqQ int) int {
	if batch <= 0 || heads <= 0 || seqQ <= 0 || c.Consumers <= 0 {
		return 0
	}
	return int(min(satMul(ceilDiv(seqQ, c.BM()), heads, batch), math.MaxInt))
}

// PersistentGrid returns the blocks of a launch on a device of sms multiprocessors: with
// Persistent Grid's tiles but at most sms (one block an SM: a block takes an SM's registers),
// each walking several (Schedule); without it Grid.
func (c AttentionSM90Config) PersistentGrid(batch, heads, seqQ, sms int) int {
	g := c.Grid(batch, heads, seqQ)
	if c.Persistent && sms > 0 {
		return min(g, sms)
	}
	return g
}

// TMABox returns the first two extents of every tensor map's box, innermost first: 64
// elements of the head dim (one 128-byte swizzle row) by BM rows for Q, by BN rows for K
// and V (the box is 1 along the batch).
func (c AttentionSM90Config) TMABox() (q, kv [2]int) {
	return [2]int{64, c.BM()}, [2]int{64, c.BN}
}

// attentionSM90AccRegs bounds a consumer thread's accumulators and P registers (BN/2 +
// HeadDim/2 + BN/4) so that the kernel fits the registers its consumers get (240, or 232
// with one consumer) without spills. ptxas 13.0 spills nothing up to 208 (d 128 at BN 192),
// with PingPong (its turn barriers keep more values live across the GEMMs) up to 184 (d 128
// at BN 160; Persistent causal spills at 196), and with one consumer up to 176 (Persistent
// spills at d 256 and BN 80, 188). Three consumers get 160 registers: 128 (d 64 at BN
// 128, FlashAttention-3's tile there). TestAttentionSM90Ptxas assembles the widest BN each
// bound admits.
func attentionSM90AccRegs(pingPong bool, consumers int) int {
	switch {
	case pingPong:
		return 184
	case consumers == 1:
		return 176
	case consumers == 3:
		return 128
	}
	return 208
}

// Check reports a configuration the kernel cannot build.
func (c AttentionSM90Config) Check() error {
	switch {
	case c.In != dsl.F16 && c.In != dsl.BF16:
		return fmt.Errorf("attention_sm90: input type %s (want f16 or bf16)", typeName(c.In))
	case c.HeadDim != 64 && c.HeadDim != 128 && c.HeadDim != 256:
		return fmt.Errorf("attention_sm90: head dim %d (want 64, 128 or 256)", c.HeadDim)
	case c.Consumers < 1 || c.Consumers > 3:
		return fmt.Errorf("attention_sm90: %d consumer warpgroups (want 1, 2 or 3: BM 64, 128 or 192)", c.Consumers)
	case c.BN < 16 || c.BN > 256 || c.BN%16 != 0:
		return fmt.Errorf("attention_sm90: BN %d: want a multiple of 16 in 16..256 (wgmma's N, P's K blocks)", c.BN)
	case c.Stages < 2 || c.Stages > 8:
		return fmt.Errorf("attention_sm90: %d stages (want 2..8)", c.Stages)
	case c.PingPong && c.Consumers != 2:
		return fmt.Errorf("attention_sm90: PingPong alternates two consumer warpgroups; the configuration has %d", c.Consumers)
	case c.Schedule < AttentionStrided || c.Schedule > AttentionDynamic:
		return fmt.Errorf("attention_sm90: schedule %v (want AttentionStrided, AttentionLPT or AttentionDynamic)", c.Schedule)
	case c.Schedule == AttentionDynamic && !c.Persistent:
		return fmt.Errorf("attention_sm90: AttentionDynamic hands tiles to Persistent blocks; the configuration is not Persistent (AttentionLPT orders a grid of one block a tile)")
	case c.Persistent && c.Overlap && c.PingPong && c.HeadDim > 128:
		return fmt.Errorf("attention_sm90: Persistent with Overlap and PingPong at head dim %d: the consumers' 240 registers (O's %d a thread, two tiles of S) leave too few for the tile loop (ptxas spills); drop one of the three", c.HeadDim, c.HeadDim/2)
	}
	if r, most := c.BN/2+c.HeadDim/2+c.BN/4, attentionSM90AccRegs(c.PingPong, c.Consumers); r > most {
		return fmt.Errorf("attention_sm90: BN %d at head dim %d holds %d accumulator and P registers a thread (BN/2 + HeadDim/2 + BN/4); at most %d fit %d consumer warpgroup(s) with PingPong %v without spills", c.BN, c.HeadDim, r, most, c.Consumers, c.PingPong)
	}
	if c.SharedBytes() > 227*1024 {
		return fmt.Errorf("attention_sm90: %d bytes of shared memory (more than an H100's 227 KiB)", c.SharedBytes())
	}
	return nil
}

// CheckShape reports a problem the kernel cannot run: AttentionConfig.CheckShape's rules
// (which also keep the TMA coordinates within 32 bits).
func (c AttentionSM90Config) CheckShape(batch, heads, kvHeads, seqQ, seqK int) error {
	if err := (AttentionConfig{HeadDim: c.HeadDim, BM: c.BM()}).CheckShape(batch, heads, kvHeads, seqQ, seqK); err != nil {
		return fmt.Errorf("attention_sm90%s", err.Error()[len("attention"):])
	}
	return nil
}

// AttentionSM90Maps are the sm_90a attention's tensor maps, passed after AttentionArgs.
// Each views its tensor as (heads*HeadDim, seq, batch), innermost first (kvHeads for K and
// V), with the boxes of AttentionSM90Config.TMABox (extent 1 along the batch) and the
// 128-byte swizzle: a tile of one head is the box at column head*HeadDim (plus 64 per box
// along the head dim), row first, batch b, and TMA zero-fills the rows past the sequence.
// AttentionSM90Launch gives them as data.
type AttentionSM90Maps struct {
	TmQ, TmK, TmV dsl.TensorMap
}

// AttentionTMASpec describes one of the sm_90a attention's rank-3 tensor maps as plain
// data, for the caller to encode (jit.NewTensorMap(buf, Dims[:], Strides[:], Box[:],
// jit.Swizzle(Swizzle))): the extents innermost first, the byte strides of dimensions 1 and
// 2 (dimension 0 is dense), the box and the swizzle in bytes.
type AttentionTMASpec struct {
	Elem    dsl.Type
	Dims    [3]uint64 // heads*HeadDim, seq, batch
	Strides [2]uint64 // bytes between rows, between batches
	Box     [3]uint32
	Swizzle int
}

// AttentionSM90Launch is a launch of one sm_90a attention configuration: Grid blocks of
// Block threads, SharedBytes of dynamic shared memory, and the tensor maps of Q, K and V
// (AttentionSM90Maps' order), each over the buffer of the same name in AttentionArgs.
// SchedWords is the u32 words of AttentionSchedArgs.Sched the launch takes last
// (AttentionDynamic: AttentionSchedWords, zeroed before the first launch; else 0: no such
// parameter).
type AttentionSM90Launch struct {
	Grid, Block, SharedBytes int
	Q, K, V                  AttentionTMASpec
	SchedWords               int
}

// schedWords is AttentionSM90Launch.SchedWords of c.
func (c AttentionSM90Config) schedWords() int {
	if c.Schedule == AttentionDynamic {
		return AttentionSchedWords
	}
	return 0
}

// Launch returns the launch of c for a problem of AttentionArgs' shapes, or an error (Check's
// or CheckShape's) naming the rule it breaks. A Persistent configuration's launch is
// LaunchPersistent's (its grid depends on the device).
func (c AttentionSM90Config) Launch(batch, heads, kvHeads, seqQ, seqK int) (AttentionSM90Launch, error) {
	if c.Persistent {
		return AttentionSM90Launch{}, fmt.Errorf("attention_sm90: %s walks its tiles persistently: its launch is LaunchPersistent's (the grid depends on the SM count)", c.Name())
	}
	return c.launch(batch, heads, kvHeads, seqQ, seqK, 0)
}

// LaunchPersistent is Launch on a device of sms multiprocessors (jit.Info.Multiproc): the
// grid is PersistentGrid's. Without Persistent it is Launch's and sms is not used.
func (c AttentionSM90Config) LaunchPersistent(batch, heads, kvHeads, seqQ, seqK, sms int) (AttentionSM90Launch, error) {
	if c.Persistent && sms < 1 {
		return AttentionSM90Launch{}, fmt.Errorf("attention_sm90: %s on %d SMs: want the device's multiprocessor count (at least 1)", c.Name(), sms)
	}
	return c.launch(batch, heads, kvHeads, seqQ, seqK, sms)
}

func (c AttentionSM90Config) launch(batch, heads, kvHeads, seqQ, seqK, sms int) (AttentionSM90Launch, error) {
	if err := c.Check(); err != nil {
		return AttentionSM90Launch{}, err
	}
	if c.VarLen {
		return AttentionSM90Launch{}, fmt.Errorf("attention_sm90: %s packs its sequences: its launch is LaunchVarLen's", c.Name())
	}
	if err := c.CheckShape(batch, heads, kvHeads, seqQ, seqK); err != nil {
		return AttentionSM90Launch{}, err
	}
	es := uint64(c.In.Bytes())
	bq, bkv := c.TMABox()
	spec := func(h, seq int, box [2]int) AttentionTMASpec {
		cols := uint64(h * c.HeadDim)
		return AttentionTMASpec{Elem: c.In, Dims: [3]uint64{cols, uint64(seq), uint64(batch)}, Strides: [2]uint64{cols * es, cols * es * uint64(seq)},
			Box: [3]uint32{uint32(box[0]), uint32(box[1]), 1}, Swizzle: 128}
	}
	return AttentionSM90Launch{Grid: c.PersistentGrid(batch, heads, seqQ, sms), Block: c.Threads(), SharedBytes: c.SharedBytes(),
		Q: spec(heads, seqQ, bq), K: spec(kvHeads, seqK, bkv), V: spec(kvHeads, seqK, bkv), SchedWords: c.schedWords()}, nil
}

func init() {
	register(&Spec{
		Name:    "attention_sm90",
		Doc:     "forward attention (FlashAttention-3 on wgmma and TMA, warp-specialized, sm_90a): AttentionArgs, then the rank-3 TMA maps of Q, K, V (AttentionSM90Config.LaunchPersistent); head dim 128, 128x128 tiles, 2 consumer warpgroups, 2 stages, intra-warpgroup overlap, persistent",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM90a},
		Golden:  []ptx.Target{ptx.SM90a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { AttentionSM90(k, DefaultAttentionSM90Config(dt, 128, false)) },
	})
}

// AttentionSM90 writes the kernel for cfg into k (target sm_90a). Launch cfg.Grid(batch,
// heads, seqQ) blocks (Persistent: PersistentGrid's) of cfg.Threads() threads with
// cfg.SharedBytes() bytes of dynamic shared memory; the parameters are AttentionArgs, then
// AttentionSM90Maps (cfg.Launch, or LaunchPersistent, gives the grid and the maps). The results are Attention's: O, and LSE (m*scale + ln l; -inf and O 0 for a
// row that sees no key). Scale must be positive (the running max is of the raw scores).
//
// Warpgroup 0 produces: one elected thread loads the Q tile (TMA, one mbarrier) and then the
// block's K and V tiles through two TMA pipelines of Stages stages. The consumer warpgroups
// each own 64 query rows: per key tile S = Q K^T (wgmma, both operands in shared memory),
// keys past seqK and (causal) past the diagonal masked to -inf in the tiles that have any,
// the online softmax over the accumulator rows (AccView: row max and sum over a thread's
// registers, then the lanes sharing the row; exp2 with scale*log2(e) folded in; O rescaled
// by exp2(m_old - m_new)), P converted in registers to the A operand of O += P V (wgmma with
// A from registers). Finally O /= l, stored from the accumulators, and the LSE.
// Rows of a tile past the sequence are TMA's zeros (the maps are per batch).
//
// With cfg.VarLen the parameters end with AttentionVarLenArgs (cfg.LaunchVarLen gives the
// maps, over the packed tensors): a block reads its sequence's offsets, returns at once when
// its query tile starts past the sequence, and loads its tiles at the sequence's first row.
// The rows a tile reads past the sequence are the next sequence's: keys there are masked
// like keys past seqK, and query rows there are not stored.
//
// With cfg.Persistent (launched by LaunchPersistent or LaunchVarLenPersistent) each block
// walks the work tiles cfg.Schedule gives it (AttentionStrided: blockIdx, blockIdx +
// gridDim, ... of Grid's order; AttentionLPT: a snake over the longest-first order;
// AttentionDynamic: the producer takes them from a counter, AttentionSchedArgs, and passes
// each index to the consumers through shared memory). Q goes through a ring of its own
// (full and empty mbarriers, one or two buffers: SharedBytes) that the consumers free once
// the tile's last S has retired; the K/V rings run on from tile to tile, so the producer
// loads the next tile while the consumers finish this one. A tile that sees no key
// loads nothing; a VarLen tile past its sequence is skipped by both roles.
func AttentionSM90(k *dsl.Kernel, cfg AttentionSM90Config) {
	if err := cfg.Check(); err != nil {
		k.Errorf("%v", err)
		return
	}
	if k.Target() != ptx.SM90a {
		k.Errorf("attention_sm90: wgmma and setmaxnreg need sm_90a; the kernel targets %s", k.Target())
		return
	}
	if cfg.ShiftDivision {
		k.SetShiftDivision(true)
	}
	// Registers at entry fixed (65536 over the block) so that ptxas honours setmaxnreg.
	k.LaunchBounds(cfg.Threads(), 1)
	a := dsl.Params[AttentionArgs](k, cfg.In)
	maps := dsl.Params[AttentionSM90Maps](k, cfg.In)
	var vl AttentionVarLenArgs
	if cfg.VarLen {
		vl = dsl.Params[AttentionVarLenArgs](k, cfg.In)
	}
	var sch AttentionSchedArgs
	if cfg.Schedule == AttentionDynamic {
		sch = dsl.Params[AttentionSchedArgs](k, cfg.In)
	}
	D, BM, BN, C := cfg.HeadDim, cfg.BM(), cfg.BN, cfg.Consumers
	if !cfg.Persistent { // a block past Grid's (a larger grid) has no tile
		tiles := a.SeqQ.Add(uint32(BM - 1)).Div(uint32(BM)).Mul(a.Heads).Mul(a.Batch)
		k.If(k.BlockIdx(dsl.X).Ge(tiles), k.Return)
	}

	// Shared tiles: Q (BM x D) and K (BN x D) K-major, V (D x BN) MN-major over V's
	// row-major storage (the N x K operand B of P V), in blocks of 64 columns of D that
	// each hold all BN keys: one TMA box each.
	laK, err := dsl.GMMALayoutAtom(cfg.In, dsl.KMajor, 128)
	if err != nil {
		k.Errorf("attention_sm90: %v", err)
		return
	}
	laMN, err := dsl.GMMALayoutAtom(cfg.In, dsl.MNMajor, 128)
	if err != nil {
		k.Errorf("attention_sm90: %v", err)
		return
	}
	lQ, errQ := dsl.TileToShape(laK, BM, D)
	lK, errK := dsl.TileToShape(laK, BN, D)
	lVi, errV := layout.Parse(fmt.Sprintf("((64,%d),(8,%d)):((1,%d),(64,512))", D/64, BN/8, 64*BN))
	if errQ != nil || errK != nil || errV != nil {
		k.Errorf("attention_sm90: shared layouts: %v %v %v", errQ, errK, errV)
		return
	}
	lV := layout.ComposedLayout{Outer: laMN.Outer, Offset: laMN.Offset, Inner: lVi}
	qs := cfg.qStages()
	sQ := k.DynamicSharedTile(cfg.In, lQ, qs, 0)
	sK := k.DynamicSharedTile(cfg.In, lK, cfg.Stages, qs*sQ.StageBytes)
	sV := k.DynamicSharedTile(cfg.In, lV, cfg.Stages, qs*sQ.StageBytes+cfg.Stages*sK.StageBytes)
	cQ, cK, cV := k.MakeTMACopy(maps.TmQ, sQ), k.MakeTMACopy(maps.TmK, sK), k.MakeTMACopy(maps.TmV, sV)
	bq, bkv := cfg.TMABox()
	if cQ.Box != bq || cK.Box != bkv || cV.Box != bkv || cQ.Major() != dsl.KMajor || cK.Major() != dsl.KMajor || cV.Major() != dsl.MNMajor {
		k.Errorf("attention_sm90: TMA boxes Q %v, K %v, V %v (%v-major); the host builds the maps with %v and %v", cQ.Box, cK.Box, cV.Box, cV.Major(), bq, bkv)
		return
	}
	atomS, errS := dsl.MakeGMMAAtom(cfg.In, BN)
	atomO, errO := dsl.MakeGMMAAtom(cfg.In, D)
	if errS != nil || errO != nil {
		k.Errorf("attention_sm90: wgmma atoms: %v %v", errS, errO)
		return
	}
	qk, pv := dsl.MakeTiledGMMA(atomS, C), dsl.MakeTiledGMMA(atomO, C)

	tid := k.ThreadIdx(dsl.X)
	var qBar dsl.Mbarrier
	var pQ *dsl.TMAPipeline
	if cfg.Persistent { // Q full / Q empty per buffer; one arrival per consumer warp frees it
		pQ = k.MakeTMAPipeline(qs, 4*C, cQ)
	} else {
		qBar = k.Mbarriers(1).At(0)
		k.If(tid.Eq(uint32(0)), func() { qBar.Init(1) })
	}
	var ring attnTileRing
	if cfg.Schedule == AttentionDynamic { // every consumer thread frees a slot once it has read it
		ring = makeAttnTileRing(k, 128*C)
	}
	// One arrival per consumer warp frees a stage (lane 0, after the warp's wait_group).
	pK := k.MakeTMAPipeline(cfg.Stages, 4*C, cK) // also makes qBar's and the ring's inits visible (SyncThreads)
	pV := k.MakeTMAPipeline(cfg.Stages, 4*C, cV)

	// tileOf maps work tile t (U32) to (query tile, head, batch) in the schedule's order
	// (AttentionStrided: as Attention's grid does), and to the keys it sees. Without
	// Persistent a VarLen block whose tile starts past its sequence leaves here, before any
	// barrier.
	tileOf := func(t dsl.Value) attnSM90Tile {
		var tl attnSM90Tile
		tl.mt, tl.bh, tl.h, tl.b, tl.hkv = attnTileMap(k, a, BM, cfg.Causal, cfg.Schedule, cfg.attnSectionKeys(), t)
		tl.seqQ, tl.seqK = a.SeqQ.To(dsl.I32), a.SeqK.To(dsl.I32)
		tl.mIdx = tl.mt.To(dsl.I32)
		if cfg.VarLen {
			tl.seqs = attentionVarLenSeq(k, vl, tl.b)
			tl.seqQ, tl.seqK = tl.seqs.seqQ, tl.seqs.seqK
			tl.past = tl.mIdx.Mul(int32(BM)).Ge(tl.seqQ)
			if !cfg.Persistent {
				k.If(tl.past, k.Return)
			}
		}
		tl.diag = tl.seqK.Sub(tl.seqQ) // query i sees keys j <= i + diag
		tl.nKV = tl.seqK.Add(int32(BN - 1)).Div(int32(BN))
		if cfg.Causal {
			lastKey := tl.mIdx.Add(int32(1)).Mul(int32(BM)).Min(tl.seqQ).Sub(int32(1)).Add(tl.diag)
			tl.nKV = k.Select(lastKey.Lt(int32(0)), k.Const(dsl.I32, 0), tl.nKV.Min(lastKey.Div(int32(BN)).Add(int32(1))))
		}
		return tl
	}
	// visit runs body for work tile t, unless it is a VarLen tile past its sequence.
	visit := func(t dsl.Value, body func(tl attnSM90Tile)) {
		tl := tileOf(t)
		if cfg.VarLen {
			k.If(tl.past.Not(), func() { body(tl) })
			return
		}
		body(tl)
	}
	// forTiles runs body for each of the block's tiles (Persistent): a static schedule's
	// walk in both roles; AttentionDynamic's tiles are taken by the producer thread
	// (producer), which passes each index on through the ring before it loads the tile, and
	// the consumer threads read them there. The producer stops at the first index past the
	// last tile and passes attnNoTile on for it, where the consumers stop.
	forTiles := func(producer bool, body func(tl attnSM90Tile)) {
		if !producer && cfg.Schedule == AttentionDynamic { // no tile count: the end is attnNoTile
			pos := ring.pos(false)
			t := k.Var(dsl.U32, ring.get(pos))
			k.While(func() dsl.Value { return t.Ne(uint32(attnNoTile)) }, func() {
				visit(t, body)
				k.Set(t, ring.get(pos))
			})
			return
		}
		tiles := a.SeqQ.Add(uint32(BM - 1)).Div(uint32(BM)).Mul(a.Heads).Mul(a.Batch)
		if cfg.Schedule != AttentionDynamic {
			attnStaticWalk(k, cfg.Schedule, tiles, func(t dsl.Value) { visit(t, body) })
			return
		}
		grid := k.GridDim(dsl.X)
		pos := ring.pos(true)
		t := k.Var(dsl.U32, k.BlockIdx(dsl.X)) // the first tile is the block's own
		// put passes t on, or attnNoTile past the last tile.
		put := func() { ring.put(pos, k.Select(t.Lt(tiles), t, uint32(attnNoTile))) }
		put()
		k.While(func() dsl.Value { return t.Lt(tiles) }, func() {
			visit(t, body)
			// The next tile once this one's loads are issued: the K/V ring still holds
			// Stages key tiles for the consumers while the atomic returns.
			k.Set(t, k.Atomic(dsl.AtomAdd, sch.Sched, uint32(1)).Add(grid))
			put()
		})
		// The block has taken its last index (no more adds to word 0 from it): count it
		// (acq_rel), and the last block of the launch zeroes both words for the next.
		done := k.Atomic(dsl.AtomAdd, sch.Sched.At(1), uint32(1), dsl.AcqRel(dsl.GPU))
		k.If(done.Eq(grid.Sub(uint32(1))), func() {
			k.Store(sch.Sched, uint32(0), dsl.Relaxed(dsl.GPU))
			k.Store(sch.Sched.At(1), uint32(0), dsl.Relaxed(dsl.GPU))
		})
	}
	var blkTile attnSM90Tile
	if !cfg.Persistent {
		blkTile = tileOf(k.BlockIdx(dsl.X))
	}

	k.If(tid.Lt(uint32(128)), func() { // the producer warpgroup
		k.WarpgroupRegDealloc(attentionSM90ProducerRegs(C))
		k.If(tid.Lt(uint32(32)).And(k.ElectOne()), func() {
			// rows returns tile tl's first query row, first key row (VarLen) and batch
			// coordinate of the maps.
			rows := func(tl attnSM90Tile) (qRow, kRow0, bt dsl.Value) {
				qRow, bt = tl.mt.Mul(uint32(BM)), tl.b
				if cfg.VarLen { // one packed "batch": the sequence starts at row q0 (k0)
					qRow, kRow0, bt = qRow.To(dsl.I32).Add(tl.seqs.q0), tl.seqs.k0, k.Const(dsl.U32, 0)
				}
				return qRow, kRow0, bt
			}
			// loadKV loads tile tl's K and V tiles through the rings from st on (V's ring
			// walks K's stages).
			loadKV := func(tl attnSM90Tile, st dsl.PipelineState, kvCol, kRow0, bt dsl.Value) {
				k.For(int32(0), tl.nKV, int32(1), func(j dsl.Value) {
					row := j.Mul(int32(BN))
					if cfg.VarLen {
						row = row.Add(kRow0)
					}
					pK.ProducerAcquire(st)
					pK.LoadOuter(st, cK, row, kvCol, bt)
					pK.ProducerCommit(st)
					pV.ProducerAcquire(st)
					pV.LoadOuter(st, cV, kvCol, row, bt)
					pV.ProducerCommit(st)
					st.Advance()
				})
			}
			if !cfg.Persistent {
				tl := blkTile
				qCol, kvCol := tl.h.Mul(uint32(D)), tl.hkv.Mul(uint32(D))
				qBar.ArriveExpectTx(cQ.Bytes)
				qRow, kRow0, bt := rows(tl)
				cQ.LoadOuter(qBar, 0, qRow, qCol, bt)
				loadKV(tl, pK.ProducerState(), kvCol, kRow0, bt)
				return
			}
			stQ, advQ := attnQState(k, pQ, true)
			st := pK.ProducerState()
			forTiles(true, func(tl attnSM90Tile) {
				k.If(tl.nKV.Gt(int32(0)), func() { // a tile that sees no key loads nothing
					qCol, kvCol := tl.h.Mul(uint32(D)), tl.hkv.Mul(uint32(D))
					qRow, kRow0, bt := rows(tl)
					pQ.ProducerAcquire(stQ) // the consumers have freed the buffer
					pQ.LoadOuter(stQ, cQ, qRow, qCol, bt)
					pQ.ProducerCommit(stQ)
					advQ()
					loadKV(tl, st, kvCol, kRow0, bt)
				})
			})
		})
	}).Else(func() { // the consumer warpgroups
		k.WarpgroupRegAlloc(attentionSM90ConsumerRegs(C))
		attentionSM90Consumer(k, cfg, a, attnSM90Block{
			sQ: sQ, sK: sK, sV: sV, qk: qk, pv: pv, pQ: pQ, pK: pK, pV: pV, qBar: qBar,
			t: tid.Sub(uint32(128)), vl: vl, tile: blkTile,
			forTiles: func(body func(tl attnSM90Tile)) { forTiles(false, body) },
		})
	})
}

// attnQState returns the producer's or the consumers' state in the Persistent Q ring p and
// the function that advances it. With one buffer the index is the constant 0 and only the
// phase flips per tile: the barriers' addresses stay constants, which saves registers the
// consumers lack at head dim 256.
func attnQState(k *dsl.Kernel, p *dsl.TMAPipeline, producer bool) (dsl.PipelineState, func()) {
	if p.Stages() > 1 {
		st := p.ConsumerState()
		if producer {
			st = p.ProducerState()
		}
		return st, st.Advance
	}
	phase := k.Var(dsl.U32, 0) // ConsumerState's parity; the producer's starts at 1
	if producer {
		phase = k.Var(dsl.U32, 1)
	}
	return dsl.PipelineState{Index: k.Const(dsl.U32, 0), Phase: phase}, func() { k.Set(phase, phase.Xor(uint32(1))) }
}

// attentionSM90ProducerRegs and attentionSM90ConsumerRegs are the setmaxnreg budgets of the
// producer and the consumer warpgroups: 128*(producer + Consumers*consumer) <= 65536.
func attentionSM90ProducerRegs(consumers int) int {
	switch consumers {
	case 1:
		return 40
	case 3:
		return 32
	}
	return 24
}

func attentionSM90ConsumerRegs(consumers int) int {
	switch consumers {
	case 1:
		return 232
	case 3:
		return 160
	}
	return 240
}

// attnSM90Tile is one work tile: a query tile of one head and batch, and the keys it sees.
type attnSM90Tile struct {
	mt, bh, h, b, hkv dsl.Value     // query tile, batch*heads + head, head, batch, K/V head (U32)
	mIdx              dsl.Value     // the query tile (I32)
	nKV               dsl.Value     // key tiles the tile walks (I32)
	diag              dsl.Value     // seqK - seqQ (I32)
	seqQ, seqK        dsl.Value     // I32
	seqs              attnVarLenSeq // VarLen: the tile's sequence
	past              dsl.Value     // VarLen: the tile starts past its sequence (Bool)
}

// attnSM90Block is what the consumers of one block work on.
type attnSM90Block struct {
	sQ, sK, sV dsl.SharedTile
	qk, pv     dsl.TiledGMMA
	pQ         *dsl.TMAPipeline // Persistent: the Q ring
	pK, pV     *dsl.TMAPipeline
	qBar       dsl.Mbarrier // without Persistent: Q's barrier
	t          dsl.Value    // the thread among the consumers, 0..128*Consumers-1 (U32)
	vl         AttentionVarLenArgs
	tile       attnSM90Tile                // without Persistent: the block's tile
	forTiles   func(func(tl attnSM90Tile)) // Persistent: the block's tiles
}

// attentionSM90Consumer is a consumer warpgroup's part: per tile the key tiles through S,
// the softmax and P V, then O and LSE.
func attentionSM90Consumer(k *dsl.Kernel, cfg AttentionSM90Config, a AttentionArgs, blk attnSM90Block) {
	BM, BN := cfg.BM(), cfg.BN
	qk, pv, pK, pV := blk.qk, blk.pv, blk.pK, blk.pV
	t := blk.t
	wg := t.Shr(uint32(7))
	vs, vo := qk.AccView(k, t), pv.AccView(k, t) // rows of S and of O: the same two per thread
	rowsS := vs.Rows()
	accS, accO := qk.Accumulators(k), pv.Accumulators(k)
	sm := newSM90Softmax(k, len(rowsS), a.Scale)
	negInf := sm.negInf
	lane0 := t.And(uint32(31)).Eq(uint32(0))

	// The tile whose code is being written, set before it is.
	tl := blk.tile
	// The tile's first query row and this warpgroup's, in the sequence (I32).
	var row0, wgRow0, rowS, colS dsl.Value
	tileRows := func() {
		row0 = tl.mIdx.Mul(int32(BM))
		wgRow0 = row0.Add(wg.To(dsl.I32).Mul(int32(64)))
		rowS, colS = vs.RowFrom(row0.To(dsl.U32)).To(dsl.I32), vs.Col().To(dsl.I32)
	}
	if !cfg.Persistent {
		tileRows()
	}

	// scores turns the retired accS of key tile j into probabilities p (f32, masked keys
	// 0) and returns each row's correction of O.
	scores := func(j dsl.Value) (p []dsl.Value, corr []dsl.Value) {
		key0 := j.Mul(int32(BN))
		need := key0.Add(int32(BN)).Gt(tl.seqK)
		if cfg.Causal { // the warpgroup's first row sees keys up to wgRow0 + diag
			need = need.Or(key0.Add(int32(BN - 1)).Gt(wgRow0.Add(tl.diag)))
		}
		k.If(need, func() {
			for i := range atomRegs(qk) {
				key := key0.Add(colS).Add(int32(vs.ColOff[i]))
				ok := key.Lt(tl.seqK)
				if cfg.Causal {
					ok = ok.And(key.Le(rowS.Add(int32(vs.RowOff[i])).Add(tl.diag)))
				}
				k.Set(accS.Get(i), k.Select(ok, accS.Get(i), negInf))
			}
		})
		return sm.update(vs, accS)
	}
	// P's A registers of P V: variables, so that P V may read one tile's while the next
	// is computed (Overlap).
	pk := k.Pack2(k.Const(dsl.F32, 0.0), k.Const(dsl.F32, 0.0), cfg.In)
	pVars := make([]dsl.Value, atomRegs(qk)/2)
	for i := range pVars {
		pVars[i] = k.Var(pk.Type(), pk)
	}
	pFrag := k.FragmentOf(pVars...)
	packP := func(p []dsl.Value) {
		for i, v := range qk.AccToA(k, k.FragmentOf(p...), cfg.In).Values() {
			k.Set(pVars[i], v)
		}
	}
	release := func(p *dsl.TMAPipeline, st dsl.PipelineState) { k.If(lane0, func() { p.ConsumerRelease(st) }) }

	// Ping-pong: a warpgroup issues its GEMMs in its turn (turn), then hands the turn to
	// the other (pass), so one's softmax runs while the other's GEMMs do. Warpgroup 1 gives
	// warpgroup 0 the first turn of each tile (start) and skips its pass after the tile's
	// last section, so that every arrival meets a sync.
	turn, pass, start := func() {}, func(last dsl.Value) {}, func() {}
	if cfg.PingPong {
		bars := [2]dsl.NamedBar{k.NamedBarrierFor("attention_sm90: warpgroup 0's turn", 256), k.NamedBarrierFor("attention_sm90: warpgroup 1's turn", 256)}
		first := wg.Eq(uint32(0))
		turn = func() { k.If(first, bars[0].Sync).Else(bars[1].Sync) }
		pass = func(last dsl.Value) {
			k.If(first, bars[1].Arrive).Else(func() { k.If(last.Not(), bars[0].Arrive) })
		}
		start = func() { k.If(first.Not().And(tl.nKV.Gt(int32(0))), bars[0].Arrive) }
	}

	// Q: one buffer on qBar, or (Persistent) the Q ring, freed after the tile's last S.
	sQ, releaseQ := blk.sQ, func() {}
	var stQ dsl.PipelineState
	if cfg.Persistent {
		var advQ func()
		stQ, advQ = attnQState(k, blk.pQ, false)
		releaseQ = func() { release(blk.pQ, stQ); advQ() }
	} else {
		start()
		blk.qBar.Wait(0)
	}
	stK, stV := pK.ConsumerState(), pV.ConsumerState()
	sFirst := qk.Accumulating(k.Const(dsl.Bool, false)) // S overwrites the accumulators
	gemmS := func() {
		pK.ConsumerWait(stK)
		sFirst.Gemm(k, wg, sQ, blk.sK.StageView(stK.Index), 0, accS) // S = Q K^T
	}
	gemmPV := func() {
		pV.ConsumerWait(stV)
		pv.GemmRS(k, pFrag, blk.sV, stV.Index, accO) // O += P V
	}
	retireS := func() { release(pK, stK); stK.Advance() }
	retirePV := func() { release(pV, stV); stV.Advance() }

	// tile writes the consumers' code of tile tl: its key tiles, then O and LSE.
	tile := func() {
		if !cfg.Overlap {
			k.For(int32(0), tl.nKV, int32(1), func(j dsl.Value) {
				turn()
				gemmS()
				pass(j.Eq(tl.nKV.Sub(int32(1))))
				k.WaitGroup(0)
				retireS()
				p, corr := scores(j)
				sm.rescale(vo, accO, corr)
				packP(p)
				gemmPV()
				k.WaitGroup(0)
				retirePV()
			})
			if cfg.Persistent && !cfg.stagesO() {
				k.If(tl.nKV.Gt(int32(0)), releaseQ)
			}
		} else {
			// Tile j's section issues S_j and then P_{j-1} V_{j-1}; the softmax of S_j runs
			// while P V does, O's rescale and P_j's registers wait for it.
			k.If(tl.nKV.Gt(int32(0)), func() {
				turn()
				gemmS()
				pass(k.Const(dsl.Bool, false))
				k.WaitGroup(0)
				retireS()
				p, _ := scores(k.Const(dsl.I32, 0)) // O is 0: no rescale
				packP(p)
				k.For(int32(1), tl.nKV, int32(1), func(j dsl.Value) {
					turn()
					gemmS()
					gemmPV()
					pass(k.Const(dsl.Bool, false))
					k.WaitGroup(1) // S_j
					retireS()
					p, corr := scores(j)
					k.WaitGroup(0) // P_{j-1} V_{j-1}
					retirePV()
					sm.rescale(vo, accO, corr)
					packP(p)
				})
				if !cfg.stagesO() {
					releaseQ() // the last S has retired
				}
				turn()
				gemmPV()
				pass(k.Const(dsl.Bool, true))
				k.WaitGroup(0)
				retirePV()
			})
		}
		attentionSM90Epilogue(k, cfg, a, blk, attnSM90Out{tl: tl, sQ: sQ, releaseQ: releaseQ}, sm, vs, vo, accO, row0, wg)
	}
	if !cfg.Persistent {
		tile()
		return
	}
	zero := k.Const(dsl.F32, 0.0)
	blk.forTiles(func(x attnSM90Tile) {
		tl = x
		tileRows()
		sm.reset()
		for i := range accO.Values() { // O starts at 0 (the last tile's P V has retired)
			k.Set(accO.Get(i), zero)
		}
		start()
		k.If(tl.nKV.Gt(int32(0)), func() { blk.pQ.ConsumerWait(stQ) })
		if cfg.qStages() > 1 {
			sQ = blk.sQ.StageView(stQ.Index)
		}
		tile()
	})
}

// stagesO reports whether the epilogue stages O in Q's buffer (attentionSM90Epilogue): always
// one block a tile; Persistent at head dim 128 where the consumers' registers hold the
// staging's addresses beside the tile loop's (ptxas 13.0 spilled at BN 192). One call on an
// H200 (docs/attention.md), TFLOP/s at 1k / 2k tokens, pairs -> staged: d 128 causal 332 ->
// 364, 433 -> 461, not causal 566 -> 606, 643 -> 672; d 64 (an O tile of 8 KiB a warpgroup)
// lost 0-6% (causal 16k 515 -> 486). At d 256 there is one Q buffer, and the next tile's Q
// would wait for this tile's O.
func (c AttentionSM90Config) stagesO() bool {
	return !c.Persistent || c.HeadDim == 128 && c.qStages() > 1 && c.BN/2+c.HeadDim/2+c.BN/4 <= 184
}

// attnSM90Out is what the epilogue writes tile tl's O through: the tile's Q buffer sQ and
// (Persistent) releaseQ, which hands that buffer back to the producer.
type attnSM90Out struct {
	tl       attnSM90Tile
	sQ       dsl.SharedTile
	releaseQ func()
}

// attentionSM90Epilogue writes tile out.tl's O /= l (0 for a row that saw no key) and LSE =
// m*scale + ln l (by the thread holding column 0 of the row); row0 is the tile's first query
// row (I32), wg the thread's consumer warpgroup. Where cfg.stagesO, O goes through the tile's
// Q buffer (every S of the tile has retired): into the warpgroup's own 64 rows of Q's
// 128-byte-swizzled layout (the accumulators' pairs land there without bank conflicts); then
// each thread copies 16-byte chunks of whole rows to global memory: coalesced stores, a
// quarter as many as the accumulators' 4-byte pairs, which queued in the load-store unit and
// held the block's exit until they drained (docs/attention.md, "Where our block's time
// goes"). O must be 16-byte aligned (ops.Attention checks it). A Persistent block hands the
// buffer back to the producer only then (a tile that saw no key holds none and stores the
// pairs: zeros).
func attentionSM90Epilogue(k *dsl.Kernel, cfg AttentionSM90Config, a AttentionArgs, blk attnSM90Block, out attnSM90Out, sm *sm90Softmax, vs, vo dsl.AccView, accO dsl.Tensor, row0, wg dsl.Value) {
	tl := out.tl
	D := cfg.HeadDim
	inv, lse := sm.finish(vs)
	ldq := a.Heads.Mul(uint32(D))
	var qBase dsl.Value
	rowsQ, lseAt := a.SeqQ, func(s dsl.Value) dsl.Value { return tl.bh.Mul(a.SeqQ).Add(s) }
	if cfg.VarLen { // row q0 of the packed tensors; LSE [heads, totalQ]
		q0 := tl.seqs.q0.To(dsl.U32)
		qBase = q0.MulWide(a.Heads).Add(tl.h.To(dsl.U64)).Mul(uint64(D))
		rowsQ = tl.seqQ.To(dsl.U32)
		lseAt = func(s dsl.Value) dsl.Value { return tl.h.Mul(blk.vl.TotalQ).Add(q0).Add(s) }
	} else {
		qBase = tl.b.MulWide(a.SeqQ).Mul(a.Heads.To(dsl.U64)).Add(tl.h.To(dsl.U64)).Mul(uint64(D))
	}
	oRow := vo.RowFrom(row0.To(dsl.U32))
	col := vo.Col()
	oPtr := a.O.At(qBase).At(col)
	for r, regs := range vo.Rows() {
		s := oRow.Add(uint32(vo.RowOff[regs[0]]))
		k.If(s.Lt(rowsQ).And(col.Eq(uint32(0))), func() {
			k.Store(a.LSE.At(lseAt(s)), lse[r])
		})
	}
	direct := func() {
		for r, regs := range vo.Rows() {
			s := oRow.Add(uint32(vo.RowOff[regs[0]]))
			k.If(s.Lt(rowsQ), func() {
				o := oPtr.At(s.Mul(ldq))
				for x := 0; x+1 < len(regs); x += 2 {
					i0, i1 := regs[x], regs[x+1]
					v0, v1 := accO.Get(i0).Mul(inv[r]), accO.Get(i1).Mul(inv[r])
					k.StoreVec(o.At(vo.ColOff[i0]), []dsl.Value{v0.To(cfg.In), v1.To(cfg.In)})
				}
			})
		}
	}
	var bars []dsl.NamedBar
	for w := range cfg.Consumers {
		bars = append(bars, k.NamedBarrierFor(fmt.Sprintf("attention_sm90 epilogue: warpgroup %d", w), 128))
	}
	// sync waits at the calling warpgroup's barrier.
	var sync func()
	sync = func() { bars[len(bars)-1].Sync() }
	for w := len(bars) - 2; w >= 0; w-- {
		inner := sync
		sync = func() { k.If(wg.Eq(uint32(w)), bars[w].Sync).Else(inner) }
	}
	staged := func() {
		es, BM := cfg.In.Bytes(), cfg.BM()
		chunks := D * es / 16 // a row's 16-byte chunks
		// at is byte b of the warpgroup's row lr in Q's layout: 64-column blocks (128-byte
		// rows) of all BM rows, 16-byte chunks swizzled by the row's low 3 bits. The
		// warpgroup's rows are those its S read (its own 64 of Q's), so the other
		// warpgroup's Q is untouched while it still computes.
		at := func(lr, b dsl.Value) dsl.Value {
			row := wg.Mul(uint32(64)).Add(lr).Mul(uint32(128))
			ch := b.And(uint32(127)).Shr(uint32(4)).Xor(lr.And(uint32(7))).Shl(uint32(4))
			return b.Shr(uint32(7)).Mul(uint32(BM * 128)).Add(row).Add(ch).Add(b.And(uint32(15)))
		}
		base := out.sQ.Stage(0).As(dsl.U8)
		tw := blk.t.And(uint32(127))                                // the thread in its warpgroup
		wgRow := oRow.Sub(row0.To(dsl.U32)).Sub(wg.Mul(uint32(64))) // the thread's first row in the warpgroup's 64
		for r, regs := range vo.Rows() {
			lr := wgRow.Add(uint32(vo.RowOff[regs[0]]))
			for x := 0; x+1 < len(regs); x += 2 {
				i0, i1 := regs[x], regs[x+1]
				v0, v1 := accO.Get(i0).Mul(inv[r]), accO.Get(i1).Mul(inv[r])
				b := col.Add(uint32(vo.ColOff[i0])).Mul(uint32(es)) // the pair's byte in the row
				k.StoreVec(base.At(at(lr, b)).As(cfg.In), []dsl.Value{v0.To(cfg.In), v1.To(cfg.In)})
			}
		}
		sync()
		first := row0.To(dsl.U32).Add(wg.Mul(uint32(64))) // the warpgroup's first row in the sequence
		o := a.O.At(qBase)
		for i := 0; i < 64*chunks/128; i++ {
			c := tw.Add(uint32(128 * i))
			lr, ch := c.Div(uint32(chunks)), c.Rem(uint32(chunks))
			v := k.LoadVec(base.At(at(lr, ch.Shl(uint32(4)))).As(dsl.U32), 4)
			s := first.Add(lr)
			k.If(s.Lt(rowsQ), func() {
				k.StoreVec(o.At(s.Mul(ldq)).At(ch.Mul(uint32(16/es))).As(dsl.U32), v)
			})
		}
	}
	switch {
	case !cfg.stagesO():
		direct()
	case !cfg.Persistent:
		staged()
	default:
		k.If(tl.nKV.Gt(int32(0)), func() {
			staged()
			// The warp's reads of the buffer are done before its arrival frees it for the
			// producer's next TMA load.
			k.SyncWarp()
			k.FenceProxyAsync()
			out.releaseQ()
		}).Else(direct)
	}
}

func atomRegs(m dsl.TiledGMMA) int { return m.Atom.AccRegs() }

// sm90Softmax is FlashAttention's running softmax over the rows of a wgmma accumulator
// (AccView's rows): per row the running max m of the raw scores and this thread's part of
// the running sum l, exp2 with scale*log2(e) folded in.
type sm90Softmax struct {
	k         *dsl.Kernel
	m, l      []dsl.Value
	negInf    dsl.Value
	scale     dsl.Value
	scaleLog2 dsl.Value
}

func newSM90Softmax(k *dsl.Kernel, rows int, scale dsl.Value) *sm90Softmax {
	s := &sm90Softmax{k: k, m: make([]dsl.Value, rows), l: make([]dsl.Value, rows), scale: scale}
	s.negInf = k.Const(dsl.F32, math.Inf(-1))
	s.scaleLog2 = scale.Mul(float32(math.Log2E))
	for r := range s.m {
		s.m[r] = k.Var(dsl.F32, s.negInf)
		s.l[r] = k.Var(dsl.F32, 0.0)
	}
	return s
}

// update takes the masked scores acc (view v's registers): it updates m and l and returns
// the probabilities exp2(scale*(S - m)) (register order) and each row's correction
// exp2(scale*(m_old - m_new)) of O and l.
func (s *sm90Softmax) update(v dsl.AccView, acc dsl.Tensor) (p, corr []dsl.Value) {
	k := s.k
	mx := v.RowReduce(acc, dsl.Max)
	p = make([]dsl.Value, len(acc.Values()))
	corr = make([]dsl.Value, len(s.m))
	for r, regs := range v.Rows() {
		m := s.m[r].Max(mx[r])
		// exp2 offsets: 0 for a row with no key yet (m = -inf), so that its -inf scores
		// give 0, not NaN.
		ms := k.Select(m.Eq(s.negInf), k.Const(dsl.F32, 0.0), m.Mul(s.scaleLog2)).Neg()
		corr[r] = k.FMA(s.m[r], s.scaleLog2, ms).Exp2()
		row := make([]dsl.Value, len(regs))
		for j, i := range regs {
			p[i] = k.FMA(acc.Get(i), s.scaleLog2, ms).Exp2()
			row[j] = p[i]
		}
		k.Set(s.l[r], k.FMA(s.l[r], corr[r], pairwiseSum(row)))
		k.Set(s.m[r], m)
	}
	return p, corr
}

// pairwiseSum adds xs as a tree (log2(n) dependent adds, not n).
func pairwiseSum(xs []dsl.Value) dsl.Value {
	for len(xs) > 1 {
		next := make([]dsl.Value, 0, (len(xs)+1)/2)
		for j := 0; j+1 < len(xs); j += 2 {
			next = append(next, xs[j].Add(xs[j+1]))
		}
		if len(xs)%2 == 1 {
			next = append(next, xs[len(xs)-1])
		}
		xs = next
	}
	return xs[0]
}

// rescale multiplies each row of acc (view v's registers) by its correction.
func (s *sm90Softmax) rescale(v dsl.AccView, acc dsl.Tensor, corr []dsl.Value) {
	for r, regs := range v.Rows() {
		for _, i := range regs {
			s.k.Set(acc.Get(i), acc.Get(i).Mul(corr[r]))
		}
	}
}

// reset starts a tile: m -inf, l 0.
func (s *sm90Softmax) reset() {
	zero := s.k.Const(dsl.F32, 0.0)
	for r := range s.m {
		s.k.Set(s.m[r], s.negInf)
		s.k.Set(s.l[r], zero)
	}
}

// finish sums l over the lanes sharing each row and returns per row 1/l (0 for a row that
// saw no key) and the LSE m*scale + ln l.
func (s *sm90Softmax) finish(v dsl.AccView) (inv, lse []dsl.Value) {
	k := s.k
	rows := v.Rows()
	part := make([]dsl.Value, len(v.RowOff))
	zero := k.Const(dsl.F32, 0.0)
	for i := range part {
		part[i] = zero
	}
	for r, regs := range rows {
		part[regs[0]] = s.l[r]
	}
	l := v.RowReduce(k.FragmentOf(part...), dsl.Sum)
	for r := range rows {
		inv = append(inv, k.Select(l[r].Eq(float32(0)), zero, l[r].Rcp()))
		lse = append(lse, k.FMA(s.m[r], s.scale, l[r].Log2().Mul(float32(math.Ln2))))
	}
	return inv, lse
}
