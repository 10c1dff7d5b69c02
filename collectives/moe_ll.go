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

// moeLL is the low-latency mode's state (kernels/moe_ll.go).
type moeLL struct {
	blocks int // every launch's grid (the call counts are per block)
	n      int // the last dispatch's tokens

	tok, tokIds *sym // symmetric: token buffer and ids, [2][NumGPUs*Tokens] rows
	w, part     *sym // symmetric: the combine's weights and partial rows, [2][NumGPUs*Tokens] rows
	state       *sym // symmetric: call counts and counters (kernels.MoELLStateWords)
	slotRows    *sym // local: each slot's rows here per k
	tmask       *sym // local: each token's destination GPUs
	rowSlot     *sym // local: each row's slot (scratch)
}

// newMoELL is NewMoE of a low-latency cfg (Tokens, TopK, Hidden and Experts checked).
func (c *Comm) newMoELL(ctx context.Context, cfg MoEConfig) (*MoE, error) {
	g := c.g
	if cfg.Capacity != 0 {
		return nil, fmt.Errorf("collectives: MoEConfig.Capacity %d with LowLatency: want 0 (the low-latency mode's receive buffer is fixed: NumGPUs*Tokens rows per local expert)", cfg.Capacity)
	}
	if cfg.TopK > kernels.MoELLMaxTopK {
		return nil, fmt.Errorf("collectives: MoEConfig.TopK %d with LowLatency: want at most %d (the combine keeps a token's rows and weights in shared memory)", cfg.TopK, kernels.MoELLMaxTopK)
	}
	el := cfg.Experts / g
	slots := int64(g) * int64(cfg.Tokens)
	rows := int64(el) * slots
	switch {
	case rows*int64(cfg.Hidden) >= math.MaxInt32, 2*slots*int64(cfg.Hidden) >= math.MaxInt32, 2*slots*int64(cfg.TopK) >= math.MaxInt32:
		return nil, fmt.Errorf("collectives: MoEConfig %v: Experts*Tokens*Hidden (the receive buffer) = %d and 2*NumGPUs*Tokens*max(Hidden, TopK) must stay below 2^31 (32-bit indices)",
			cfg, rows*int64(cfg.Hidden))
	}
	cfg.Capacity = int(rows)
	m := &MoE{c: c, cfg: cfg, el: el, ll: &moeLL{blocks: c.o.MaxBlocks}}
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
	l, ns, h, k := m.ll, int(slots), cfg.Hidden, cfg.TopK
	m.recv = alloc(2*cfg.Capacity*h, false)
	m.src = alloc(4*cfg.Capacity, false)
	m.status = alloc(4*kernels.MoEStatusWords, false)
	l.tok = alloc(2*2*ns*h, true)
	l.tokIds = alloc(2*4*ns*k, true)
	l.w = alloc(2*4*ns*k, true)
	l.part = alloc(2*2*ns*h, true)
	l.state = alloc(4*kernels.MoELLStateWords, true)
	l.slotRows = alloc(4*ns*k, false)
	l.tmask = alloc(4*cfg.Tokens, false)
	l.rowSlot = alloc(4*cfg.Capacity, false)
	cs := alloc(4*el, false)
	var os *sym
	if err == nil {
		os, err = c.allocFilled(ctx, 4*(el+1), false, func(p []byte) {
			for j := 0; j <= el; j++ {
				binary.LittleEndian.PutUint32(p[4*j:], uint32(int64(j)*slots))
			}
		})
	}
	if err != nil {
		return nil, cl.wrap(err)
	}
	m.counts = &Buffer{c: c, s: cs, dt: dsl.I32, n: el}
	m.offsets = &Buffer{c: c, s: os, dt: dsl.I32, n: el + 1}
	m.recvBuf = &Buffer{c: c, s: m.recv, dt: dsl.BF16, n: cfg.Capacity * h}
	m.srcBuf = &Buffer{c: c, s: m.src, dt: dsl.I32, n: cfg.Capacity}
	return m, nil
}

// DispatchTokens is Dispatch of the first n tokens of x and ids (0 <= n <= Tokens) in the
// low-latency mode; the next Combine combines those n tokens. A normal-mode MoE refuses it
// (its kernels take Tokens tokens).
func (m *MoE) DispatchTokens(ctx context.Context, x, ids *Buffer, n int) error {
	if err := m.live("DispatchTokens"); err != nil {
		return err
	}
	if m.ll == nil {
		return errors.New("collectives: MoE.DispatchTokens: the MoE is not low-latency (MoEConfig.LowLatency); Dispatch sends MoEConfig.Tokens tokens")
	}
	if n < 0 || n > m.cfg.Tokens {
		return fmt.Errorf("collectives: MoE.DispatchTokens: n %d: want 0 <= n <= MoEConfig.Tokens %d", n, m.cfg.Tokens)
	}
	return m.dispatchLL(ctx, x, ids, n)
}

// dispatchLL launches moe_ll_dispatch for n tokens.
func (m *MoE) dispatchLL(ctx context.Context, x, ids *Buffer, n int) error {
	c, cfg, l := m.c, m.cfg, m.ll
	if err := c.begin(ctx, "MoE.Dispatch"); err != nil {
		return err
	}
	if err := errors.Join(m.checkBuf("Dispatch", "x", x, dsl.BF16, n*cfg.Hidden),
		m.checkBuf("Dispatch", "ids", ids, dsl.I32, n*cfg.TopK)); err != nil {
		return err
	}
	if err := errors.Join(m.notOwn("Dispatch", "x", x), m.notOwn("Dispatch", "ids", ids)); err != nil {
		return err
	}
	cl := &call{what: "MoE.Dispatch " + cfg.String(), dt: dsl.BF16, n: cfg.Tokens * cfg.Hidden, root: -1} // the same on every rank, whatever its n
	u32 := func(s *sym) jit.AnyPtr { return s.at(ptx.U32) }
	if err := c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyMoELLDispatch, DType: dsl.BF16}, l.blocks, launch.MoELLDispatch{
		X: x.s.at(dsl.BF16), Recv: m.recv.at(dsl.BF16), Ids: ids.s.at(dsl.I32), Counts: u32(m.counts.s), Src: u32(m.src),
		SlotRows: u32(l.slotRows), TMask: u32(l.tmask), RowSlot: u32(l.rowSlot), Status: u32(m.status),
		Tok: l.tok.table(), TokIds: l.tokIds.table(), State: l.state.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), Tokens: uint32(n), MaxT: uint32(cfg.Tokens), K: uint32(cfg.TopK),
		H: uint32(cfg.Hidden), E: uint32(cfg.Experts), EL: uint32(m.el)}); err != nil {
		return err
	}
	l.n, m.dispatched = n, true
	return nil
}

// combineLL launches moe_ll_combine for the last dispatch's tokens.
func (m *MoE) combineLL(ctx context.Context, y, weights, out *Buffer) error {
	c, cfg, l := m.c, m.cfg, m.ll
	if err := c.begin(ctx, "MoE.Combine"); err != nil {
		return err
	}
	if out == y && out != nil {
		return errors.New("collectives: MoE.Combine: out is y: the combine reads y while it writes out")
	}
	if err := errors.Join(m.checkBuf("Combine", "y", y, dsl.BF16, cfg.Capacity*cfg.Hidden),
		m.checkBuf("Combine", "weights", weights, dsl.F32, l.n*cfg.TopK),
		m.checkBuf("Combine", "out", out, dsl.BF16, l.n*cfg.Hidden)); err != nil {
		return err
	}
	if !m.dispatched {
		return errors.New("collectives: MoE.Combine before any MoE.Dispatch: no routes")
	}
	cl := &call{what: "MoE.Combine " + cfg.String(), dt: dsl.BF16, n: cfg.Tokens * cfg.Hidden, root: -1}
	u32 := func(s *sym) jit.AnyPtr { return s.at(ptx.U32) }
	return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyMoELLCombine, DType: dsl.BF16}, l.blocks, launch.MoELLCombine{
		Y: y.s.at(dsl.BF16), Out: out.s.at(dsl.BF16), Weights: weights.s.at(dsl.F32), SlotRows: u32(l.slotRows), TMask: u32(l.tmask),
		W: l.w.table(), Part: l.part.table(), State: l.state.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), Tokens: uint32(l.n), MaxT: uint32(cfg.Tokens), K: uint32(cfg.TopK), H: uint32(cfg.Hidden)})
}
