package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// MoEConfig is the shape of an expert-parallel MoE layer's dispatch and combine (the same on
// every rank).
type MoEConfig struct {
	Tokens  int // tokens per GPU
	TopK    int // experts per token
	Hidden  int // a token's elements (bf16), a multiple of 8
	Experts int // experts in all, a multiple of NumGPUs: expert e lives on GPU e/(Experts/NumGPUs)
	// Capacity is the rows of each GPU's receive buffer; 0: NumGPUs*Tokens*TopK, which no
	// routing exceeds. A dispatch whose rows do not fit fails (MoE.Check), never truncates
	// silently.
	Capacity int
	// LowLatency selects the low-latency mode (docs/moe.md, "Low-latency mode"): one kernel
	// per Dispatch and per Combine, no host synchronization and no host epoch (so both run
	// on a CaptureSafe Comm and inside Comm.Capture), fixed buffers of Tokens tokens per GPU
	// (the most a call sends: DispatchTokens sends fewer), and the masked layout (local
	// expert j's rows at Offsets[j] = j*NumGPUs*Tokens, Counts[j] of them). Capacity must be
	// 0 (it is set to Experts*Tokens: NumGPUs*Tokens rows per local expert).
	LowLatency bool
	// Blocks is the grid of the normal mode's row kernels (moe_dispatch_send,
	// moe_dispatch_expand, moe_combine), at most Options.MaxBlocks; 0: DefaultMoEBlocks
	// (capped by MaxBlocks: MaxBlocks itself) on sm_90+ targets, whose kernels move rows
	// with bulk copies, and the Comm's usual sizing (one block per 256 16-byte vectors, up
	// to MaxBlocks) before sm_90. Every rank must use the same.
	Blocks int
}

// DefaultMoEBlocks is the normal mode's default grid on sm_90+ (MoEConfig.Blocks), capped by
// Options.MaxBlocks (128 by default). On 4 x H200 (4096 tokens, hidden 7168, top-8 of 32;
// docs/bench.md) the bulk kernels took dispatch / combine 864 / 846 us on 128 blocks, 1122 /
// 2020 on 32, 1634 / 3943 on 16, and with 24 the combine 2673 us: fewer SMs keep NVLink
// busy for the sends (227 GB/s on 24) but not for the combine's sums, so the default keeps
// the whole grid; MoEConfig.Blocks gives the SMs back where a GEMM runs beside it.
const DefaultMoEBlocks = 1 << 30

func (c MoEConfig) String() string {
	ll := ""
	if c.LowLatency {
		ll = ", low latency"
	}
	return fmt.Sprintf("(%d tokens x %d, top-%d of %d experts, capacity %d%s)", c.Tokens, c.Hidden, c.TopK, c.Experts, c.Capacity, ll)
}

// MoE is the dispatch and combine of one MoEConfig on a Comm (one node, peer pointers): its
// receive buffer, layout and routes, reused by every call. See docs/moe.md.
type MoE struct {
	c   *Comm
	cfg MoEConfig
	el  int // experts per GPU
	// The count kernel's chunks of tokens: nchunks blocks of chunk tokens.
	chunk, nchunks int

	cnt, recv, src  *sym // symmetric: count matrix, receive rows, their sources
	tok, slotOf     *sym // symmetric: token buffer (NumGPUs*Tokens rows), each receive row's token slot
	slotIdx         *sym // symmetric: the slot of token t of GPU s at s*Tokens+t (or none)
	slotRows, slotW *sym // symmetric: each slot's receive row and weight per k
	part            *sym // symmetric: the combine's partial rows (row d*Tokens+t: GPU d's sum for token t)
	pos, rowStart   *sym // local: each pair's position in its chunk, each (chunk, expert or GPU)'s first row or slot
	tpos, tmask     *sym // local: each token's position per destination GPU, its destination GPUs
	tot             *sym // local: every GPU's total per count column
	route, status   *sym // local: each token's slot per GPU, the last dispatch's status
	counts          *Buffer
	offsets         *Buffer
	recvBuf, srcBuf *Buffer
	ll              *moeLL // the low-latency mode's state (nil: the normal mode)
	// The bulk kernels' row pieces (bytes) and dynamic shared memory (0: register kernels).
	sendPiece, combinePiece   int
	sendShared, combineShared int

	dispatched bool
	onLaunch   func(kernel string) error // OnLaunch's hook
}

// OnLaunch sets f to run on the host after each kernel launch of the normal mode's Dispatch
// and Combine, with the kernel's family name (moe_dispatch_count, ..., moe_combine); nil
// removes it. An error from f ends the call with it. For timing each kernel: record an event
// on the Comm's stream (Options.Stream) before the call and in f (bench/moebench
// -breakdown); the low-latency mode (one kernel a call) does not call it.
func (m *MoE) OnLaunch(f func(kernel string) error) {
	if m != nil {
		m.onLaunch = f
	}
}

// launched runs the OnLaunch hook after kernel f's launch.
func (m *MoE) launched(f kernels.Family) error {
	if m.onLaunch == nil {
		return nil
	}
	return m.onLaunch(string(f))
}

// NewMoE allocates the buffers of cfg (collective: every rank calls it with the same cfg).
// Bad shapes fail naming the field and the rule.
func (c *Comm) NewMoE(ctx context.Context, cfg MoEConfig) (*MoE, error) {
	if err := c.begin(ctx, "NewMoE"); err != nil {
		return nil, err
	}
	g := c.g
	switch {
	case c.o.CaptureSafe && !cfg.LowLatency:
		return nil, errors.New("collectives: NewMoE: the normal-mode MoE kernels have no graph variants (Options.CaptureSafe): set MoEConfig.LowLatency")
	case c.node.topo.Nodes > 1:
		return nil, c.flatCheck("NewMoE", "MoE dispatch and combine (peer pointers)")
	case cfg.Tokens < 1:
		return nil, fmt.Errorf("collectives: MoEConfig.Tokens %d: want at least 1", cfg.Tokens)
	case cfg.TopK < 1:
		return nil, fmt.Errorf("collectives: MoEConfig.TopK %d: want at least 1", cfg.TopK)
	case cfg.Hidden < 8 || cfg.Hidden%8 != 0:
		return nil, fmt.Errorf("collectives: MoEConfig.Hidden %d: want a positive multiple of 8 (16-byte rows of bf16)", cfg.Hidden)
	case cfg.Experts < 1 || cfg.Experts%g != 0:
		return nil, fmt.Errorf("collectives: MoEConfig.Experts %d: want a positive multiple of the %d GPUs", cfg.Experts, g)
	case cfg.Capacity < 0:
		return nil, fmt.Errorf("collectives: MoEConfig.Capacity %d: want 0 (worst case) or a row count", cfg.Capacity)
	case cfg.Blocks < 0 || cfg.Blocks > c.o.MaxBlocks:
		return nil, fmt.Errorf("collectives: MoEConfig.Blocks %d: want 0 (the default) to Options.MaxBlocks %d", cfg.Blocks, c.o.MaxBlocks)
	}
	// Every field is positive here; each is bounded before any product, so that none
	// overflows (the kernels index in 32 bits, and expert ids are i32).
	switch {
	case cfg.Tokens >= math.MaxInt32, cfg.TopK >= math.MaxInt32, cfg.Hidden >= math.MaxInt32, cfg.Capacity >= math.MaxInt32:
		return nil, fmt.Errorf("collectives: MoEConfig %v: Tokens, TopK, Hidden and Capacity must stay below 2^31 (32-bit indices)", cfg)
	case cfg.Experts >= math.MaxInt32:
		return nil, fmt.Errorf("collectives: MoEConfig.Experts %d: want fewer than 2^31 (expert ids are i32)", cfg.Experts)
	}
	if cfg.LowLatency {
		return c.newMoELL(ctx, cfg)
	}
	pairs := int64(cfg.Tokens) * int64(cfg.TopK)
	if cfg.Capacity == 0 && int64(g)*pairs < math.MaxInt32 {
		cfg.Capacity = int(int64(g) * pairs)
	}
	switch {
	case int64(g)*pairs >= math.MaxInt32:
		return nil, fmt.Errorf("collectives: MoEConfig: NumGPUs*Tokens*TopK = %d: the source indices are 32-bit (below 2^31)", int64(g)*pairs)
	case int64(cfg.Capacity)*int64(cfg.Hidden) >= math.MaxInt32, int64(g)*int64(cfg.Tokens)*int64(cfg.Hidden) >= math.MaxInt32:
		return nil, fmt.Errorf("collectives: MoEConfig: Capacity*Hidden %d and NumGPUs*Tokens*Hidden %d (the token buffer) must stay below 2^31 (32-bit indices)",
			int64(cfg.Capacity)*int64(cfg.Hidden), int64(g)*int64(cfg.Tokens)*int64(cfg.Hidden))
	}
	m := &MoE{c: c, cfg: cfg, el: cfg.Experts / g}
	if kernels.MoEBulk(c.o.Target) {
		m.setPieces(kernels.MoESendMaxPiece, kernels.MoECombineMaxPiece)
	}
	nc := c.blocks(int(pairs))
	m.chunk = (cfg.Tokens + nc - 1) / nc
	m.nchunks = (cfg.Tokens + m.chunk - 1) / m.chunk
	// The count matrix (CollMaxGPUs x chunks rows of Experts+1+NumGPUs words) and the row
	// starts (chunks x Experts+NumGPUs words) are indexed in 32 bits.
	w := cfg.Experts + 1 + g
	if words := int64(kernels.CollMaxGPUs) * int64(m.nchunks) * int64(w); words >= math.MaxInt32 {
		return nil, fmt.Errorf("collectives: MoEConfig.Experts %d: the count matrix (%d GPUs x %d chunks x %d columns = %d words) must stay below 2^31 words (32-bit indices)",
			cfg.Experts, kernels.CollMaxGPUs, m.nchunks, w, words)
	}
	cl := &call{what: "NewMoE " + cfg.String(), dt: dsl.BF16, n: cfg.Tokens * cfg.Hidden, root: -1}
	var err error
	alloc := func(bytes int, table bool) *sym {
		if err != nil {
			return nil
		}
		var s *sym
		s, err = c.alloc(ctx, bytes, table)
		return s
	}
	p, slots := int(pairs), g*cfg.Tokens
	m.cnt = alloc(4*kernels.CollMaxGPUs*m.nchunks*w, true)
	m.tot = alloc(4*kernels.CollMaxGPUs*w, false)
	m.recv = alloc(2*cfg.Capacity*cfg.Hidden, true)
	m.src = alloc(4*cfg.Capacity, true)
	m.slotOf = alloc(4*cfg.Capacity, true)
	m.tok = alloc(2*slots*cfg.Hidden, true)
	m.part = alloc(2*slots*cfg.Hidden, true)
	m.slotIdx = alloc(4*slots, true)
	m.slotRows = alloc(4*slots*cfg.TopK, true)
	m.slotW = alloc(4*slots*cfg.TopK, true)
	m.pos = alloc(4*p, false)
	m.tpos = alloc(4*slots, false)
	m.tmask = alloc(4*cfg.Tokens, false)
	m.rowStart = alloc(4*m.nchunks*(cfg.Experts+g), false)
	m.route = alloc(4*slots, false)
	m.status = alloc(4*kernels.MoEStatusWords, false)
	cs := alloc(4*m.el, true)
	os := alloc(4*(m.el+1), true)
	if err != nil {
		return nil, cl.wrap(err)
	}
	m.counts = &Buffer{c: c, s: cs, dt: dsl.I32, n: m.el}
	m.offsets = &Buffer{c: c, s: os, dt: dsl.I32, n: m.el + 1}
	m.recvBuf = &Buffer{c: c, s: m.recv, dt: dsl.BF16, n: cfg.Capacity * cfg.Hidden}
	m.srcBuf = &Buffer{c: c, s: m.src, dt: dsl.I32, n: cfg.Capacity}
	return m, nil
}

// setPieces sizes the bulk kernels' row pieces: the fewest of at most sendMax (send, expand)
// and combineMax (combine) bytes per row, multiples of 16 (tests pass small ones to split
// short rows).
func (m *MoE) setPieces(sendMax, combineMax int) {
	row := 2 * m.cfg.Hidden
	m.sendPiece, m.combinePiece = kernels.MoEPieceBytes(row, sendMax), kernels.MoEPieceBytes(row, combineMax)
	m.sendShared, m.combineShared = kernels.MoESendShared(m.sendPiece), kernels.MoECombineShared(m.combinePiece)
}

// rowBlocks is the grid of the row kernels for work 16-byte vectors (MoEConfig.Blocks).
func (m *MoE) rowBlocks(vectors int) int {
	switch {
	case m.cfg.Blocks > 0:
		return m.cfg.Blocks
	case m.sendPiece > 0:
		return min(DefaultMoEBlocks, m.c.o.MaxBlocks)
	}
	return m.c.blocks(vectors)
}

// Config returns the MoE's shape (Capacity filled in); the zero config for a nil MoE.
func (m *MoE) Config() MoEConfig {
	if m == nil {
		return MoEConfig{}
	}
	return m.cfg
}

// Recv, Src, Counts and Offsets belong to the MoE (freed with the Comm: do not Free them);
// each Dispatch rewrites them. A nil MoE has none (nil).
//
// Recv is this GPU's receive buffer, [Capacity, Hidden] bf16: local expert j's rows at
// [Offsets[j], Offsets[j]+Counts[j]), by source GPU, then by the source's (token, k). In the
// low-latency mode (masked layout) Offsets[j] = j*NumGPUs*Tokens, fixed, and a token that
// names expert j twice has one row there; the rows past Counts[j] are stale (ops'
// GroupedMatmul and SwiGLU skip them given Counts and the stride NumGPUs*Tokens: their
// Counts and Stride options).
func (m *MoE) Recv() *Buffer {
	if m == nil {
		return nil
	}
	return m.recvBuf
}

// Src is each received row's source: rank*Tokens*TopK + token*TopK + k (i32, Capacity; in
// the low-latency mode the first k of the token naming the row's expert).
func (m *MoE) Src() *Buffer {
	if m == nil {
		return nil
	}
	return m.srcBuf
}

// Counts is this GPU's received rows per local expert (i32, Experts/NumGPUs).
func (m *MoE) Counts() *Buffer {
	if m == nil {
		return nil
	}
	return m.counts
}

// Offsets is where each local expert's rows start in Recv (i32, Experts/NumGPUs+1; the
// last: the rows received; in the low-latency mode j*NumGPUs*Tokens, written once).
func (m *MoE) Offsets() *Buffer {
	if m == nil {
		return nil
	}
	return m.offsets
}

func (m *MoE) live(what string) error {
	if m == nil || m.c == nil {
		return fmt.Errorf("collectives: MoE.%s of a nil or freed MoE", what)
	}
	if m.c.closed {
		return errClosed
	}
	return nil
}

// checkBuf checks that b is a live buffer of this Comm holding at least n elements of dt.
func (m *MoE) checkBuf(what, name string, b *Buffer, dt dsl.Type, n int) error {
	if err := m.c.own(b, what+" "+name); err != nil {
		return err
	}
	if b.dt != dt || b.n < n {
		return fmt.Errorf("collectives: MoE.%s: %s holds %d %s, want at least %d %s", what, name, b.n, b.dt, n, dt)
	}
	return nil
}

// notOwn refuses b when it is one of the MoE's own buffers (Recv, Src, Counts, Offsets),
// which Dispatch rewrites while it reads its inputs.
func (m *MoE) notOwn(what, name string, b *Buffer) error {
	for _, o := range []*sym{m.recv, m.src, m.counts.s, m.offsets.s} {
		if b.s == o {
			return fmt.Errorf("collectives: MoE.%s: %s is one of the MoE's own buffers (Recv, Src, Counts, Offsets), which the dispatch rewrites while it reads %s: pass a buffer of your own", what, name, name)
		}
	}
	return nil
}

// Dispatch sends every (token, k) pair of this GPU's x ([Tokens, Hidden] bf16) to the GPU of
// expert ids[token*TopK+k] (i32; -1: none), into that GPU's Recv, and fills Counts, Offsets
// and Src (collective; four launches in stream order, no host synchronization). A token
// crosses to a GPU once, however many of its experts live there: into that GPU's token
// buffer, from which the GPU expands it into Recv's rows. Ids outside [-1, Experts) and rows
// past the capacity are not sent: Check reports them.
func (m *MoE) Dispatch(ctx context.Context, x, ids *Buffer) error {
	if err := m.live("Dispatch"); err != nil {
		return err
	}
	if m.ll != nil {
		return m.dispatchLL(ctx, x, ids, m.cfg.Tokens)
	}
	c, cfg := m.c, m.cfg
	if err := c.begin(ctx, "MoE.Dispatch"); err != nil {
		return err
	}
	pairs := cfg.Tokens * cfg.TopK
	if err := errors.Join(m.checkBuf("Dispatch", "x", x, dsl.BF16, cfg.Tokens*cfg.Hidden),
		m.checkBuf("Dispatch", "ids", ids, dsl.I32, pairs)); err != nil {
		return err
	}
	if err := errors.Join(m.notOwn("Dispatch", "x", x), m.notOwn("Dispatch", "ids", ids)); err != nil {
		return err
	}
	cl := &call{what: "MoE.Dispatch " + cfg.String(), dt: dsl.BF16, n: cfg.Tokens * cfg.Hidden, root: -1}
	id := func(f kernels.Family) kernels.ID { return kernels.ID{Family: f, DType: dsl.BF16} }
	u32 := func(s *sym) jit.AnyPtr { return s.at(ptx.U32) }
	rank, g, e, el := uint32(c.rank), uint32(c.g), uint32(cfg.Experts), uint32(m.el)
	if err := c.launch(ctx, cl, id(kernels.FamilyMoEDispatchCount), m.nchunks, launch.MoEDispatchCount{
		Ids: ids.s.at(dsl.I32), Pos: u32(m.pos), TPos: u32(m.tpos), TMask: u32(m.tmask), Cnt: m.cnt.table(), Pads: c.pads.table(),
		Rank: rank, NGPUs: g, Tokens: uint32(cfg.Tokens), K: uint32(cfg.TopK), Chunk: uint32(m.chunk), E: e, EL: el, Epoch: c.padEpoch}); err != nil {
		return err
	}
	if err := m.launched(kernels.FamilyMoEDispatchCount); err != nil {
		return err
	}
	if err := c.launch(ctx, cl, id(kernels.FamilyMoEDispatchLayout), 1, launch.MoEDispatchLayout{
		Cnt: u32(m.cnt), Tot: u32(m.tot), RowStart: u32(m.rowStart), Counts: u32(m.counts.s), Offsets: u32(m.offsets.s), Status: u32(m.status),
		Rank: rank, NGPUs: g, Chunks: uint32(m.nchunks), E: e, EL: el}); err != nil {
		return err
	}
	if err := m.launched(kernels.FamilyMoEDispatchLayout); err != nil {
		return err
	}
	cl.shared = m.sendShared
	if err := c.launch(ctx, cl, id(kernels.FamilyMoEDispatchSend), m.rowBlocks(cfg.Tokens*cfg.Hidden/8), launch.MoEDispatchSend{
		X: x.s.at(dsl.BF16), Recv: m.recv.at(dsl.BF16), Ids: ids.s.at(dsl.I32), Pos: u32(m.pos), TPos: u32(m.tpos), TMask: u32(m.tmask), RowStart: u32(m.rowStart), Route: u32(m.route),
		Tok: m.tok.table(), SlotIdx: m.slotIdx.table(), SlotRows: m.slotRows.table(), SlotOf: m.slotOf.table(), Src: m.src.table(), Pads: c.pads.table(),
		Rank: rank, NGPUs: g, Tokens: uint32(cfg.Tokens), Chunk: uint32(m.chunk), K: uint32(cfg.TopK), H: uint32(cfg.Hidden), E: e, EL: el,
		Cap: uint32(cfg.Capacity), Epoch: c.padEpoch, Piece: uint32(m.sendPiece)}); err != nil {
		return err
	}
	if err := m.launched(kernels.FamilyMoEDispatchSend); err != nil {
		return err
	}
	if err := c.launch(ctx, cl, id(kernels.FamilyMoEDispatchExpand), m.rowBlocks(cfg.Capacity*cfg.Hidden/8), launch.MoEDispatchExpand{
		Tok: m.tok.at(dsl.BF16), Recv: m.recv.at(dsl.BF16), SlotOf: u32(m.slotOf), Offsets: u32(m.offsets.s), SlotRows: u32(m.slotRows), Status: u32(m.status),
		EL: el, H: uint32(cfg.Hidden), Cap: uint32(cfg.Capacity), K: uint32(cfg.TopK), Piece: uint32(m.sendPiece)}); err != nil {
		return err
	}
	if err := m.launched(kernels.FamilyMoEDispatchExpand); err != nil {
		return err
	}
	m.dispatched = true
	return nil
}

// Check waits for this GPU's work and reports what the last Dispatch could not send, the
// same on every rank: expert ids outside [-1, Experts) on any GPU, or a GPU receiving more
// rows than Capacity (those rows were dropped; their pairs contribute nothing to Combine).
func (m *MoE) Check(ctx context.Context) error {
	if err := m.live("Check"); err != nil {
		return err
	}
	if err := m.c.begin(ctx, "MoE.Check"); err != nil {
		return err
	}
	p := make([]byte, 8)
	if err := m.c.r.Device.SynchronizeContext(ctx); err != nil {
		return err
	}
	if err := m.c.r.Device.CopyDtoH(p, m.status.own); err != nil {
		return err
	}
	bad, most := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:])
	var errs []error
	if bad > 0 {
		errs = append(errs, fmt.Errorf("collectives: MoE.Dispatch: %d expert ids outside [-1, %d) (ids: -1 or an expert of MoEConfig.Experts); those pairs were not sent", bad, m.cfg.Experts))
	}
	if int(most) > m.cfg.Capacity {
		errs = append(errs, fmt.Errorf("collectives: MoE.Dispatch: a GPU receives %d rows, past MoEConfig.Capacity %d; the rows past it were not sent", most, m.cfg.Capacity))
	}
	return errors.Join(errs...)
}

// Combine writes into this GPU's out ([Tokens, Hidden] bf16) the weighted sum of token t's
// expert outputs (the rows of y, [Capacity, Hidden] bf16 on each expert's GPU, in Recv's row
// order), weights[t*TopK+k] (f32) for pair k (collective; one launch after the last
// Dispatch). The order is fixed: on each GPU d, part_d = the f32 sum over k in order of t's
// pairs on d, rounded to bf16 and sent to t's GPU as one row; there out[t] = the f32 sum of
// the part_d over d = 0..NumGPUs-1, rounded once more (a token whose experts live on one GPU
// is rounded once). out must not be y.
func (m *MoE) Combine(ctx context.Context, y, weights, out *Buffer) error {
	if err := m.live("Combine"); err != nil {
		return err
	}
	if m.ll != nil {
		return m.combineLL(ctx, y, weights, out)
	}
	c, cfg := m.c, m.cfg
	if err := c.begin(ctx, "MoE.Combine"); err != nil {
		return err
	}
	if out == y && out != nil {
		return errors.New("collectives: MoE.Combine: out is y: the combine reads y while it writes out")
	}
	pairs := cfg.Tokens * cfg.TopK
	if err := errors.Join(m.checkBuf("Combine", "y", y, dsl.BF16, cfg.Capacity*cfg.Hidden),
		m.checkBuf("Combine", "weights", weights, dsl.F32, pairs),
		m.checkBuf("Combine", "out", out, dsl.BF16, cfg.Tokens*cfg.Hidden)); err != nil {
		return err
	}
	if !m.dispatched {
		return errors.New("collectives: MoE.Combine before any MoE.Dispatch: no routes")
	}
	cl := &call{what: "MoE.Combine " + cfg.String(), dt: dsl.BF16, n: cfg.Tokens * cfg.Hidden, root: -1}
	u32 := func(s *sym) jit.AnyPtr { return s.at(ptx.U32) }
	cl.shared = m.combineShared
	if err := c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyMoECombine, DType: dsl.BF16}, m.rowBlocks(cfg.Tokens*cfg.Hidden/8), launch.MoECombine{
		Y: y.s.at(dsl.BF16), Weights: weights.s.at(dsl.F32), TMask: u32(m.tmask), Route: u32(m.route), SlotIdx: u32(m.slotIdx),
		SlotRows: u32(m.slotRows), SlotW: m.slotW.table(), Part: m.part.table(), Out: out.s.at(dsl.BF16),
		Pads: c.pads.table(), Rank: uint32(c.rank), NGPUs: uint32(c.g), Tokens: uint32(cfg.Tokens), K: uint32(cfg.TopK), H: uint32(cfg.Hidden), Epoch: c.padEpoch, Piece: uint32(m.combinePiece)}); err != nil {
		return err
	}
	return m.launched(kernels.FamilyMoECombine)
}
