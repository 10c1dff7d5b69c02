package collectives

import (
	"context"
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
)

// MatmulReduceScatter on the copy engines with piece signals (Options.OverlapSignals), the
// design of PyTorch's async-TP and Flux: one persistent gemm_sm90 (GemmSM90Config.Pieces)
// computes the whole M x N partial product into a buffer D, piece by piece (a piece is one
// GPU's rows = M/g), the peers' pieces first in ring order and this GPU's own last (A's rows
// rotated by RowShift = (r+1)*rows, so that piece j of D is GPU (r+1+j)%g's rows), and bumps
// a counter per piece as its tiles are stored; the side stream waits on each counter
// (cuStreamWaitValue32, GEQ the value this call brings it to) and pushes the piece to its
// owner with the copy engines while the SMs compute the next. Per call, on GPU r of g:
//
//	compute stream: record start ── gemm_sm90_pieces(all rows, grid SMs-1) ─────────────────────────── wait end ── sum_slots(slots → out)
//	side stream:    wait start ── barrier ── wait counter 0 ── push piece 0 → GPU r+1 ── wait counter 1 ── ... ── barrier ── record end
//
// One symmetric buffer holds D and the receive slots: D's g pieces, then g-1 more chunks, so
// that D's last piece (this GPU's own rows) is receive slot 0 and the peers' pushes land in
// slots 1..g-1 after it (GPU p's piece for GPU q in q's slot 1 + (p-q-1) mod g): sum_slots
// adds slots 0..g-1 with no copy of the own piece. The GEMM's grid leaves one SM free so that
// the side stream's barrier kernels run beside it (a persistent grid of every SM would hold
// the first barrier, and so every push, until the GEMM ends).
//
// Memory ordering: a consumer warpgroup's stores of a 64 x BN sub-tile, a barrier of the
// warpgroup (for the TMA store: the bulk group's completion and fence.proxy.async), then
// red.release.sys on the piece's counter. The stream wait reads the counter as the copy
// engine and later stream work see memory; once it sees the piece's last increment, every
// release before it has made its sub-tile's stores visible at system scope, so the copy
// engine's read of the piece after the wait (stream order) sees them. The counters grow by
// PieceSignals per call and are never reset: the wait is for the running total (cyclic GEQ,
// so it survives the 2^32 wrap). The first barrier says every GPU's slots are free (its
// previous sum_slots, before its start, has run); the second that every push has landed.

// rsSignal is the signal overlap's buffers.
type rsSignal struct {
	buf      *sym        // D's g pieces then g-1 more chunks; receive slots from chunk g-1 on
	bytes    int         // the chunk size buf holds
	counters *jit.Memory // g u32 counters, one per piece of D (plain device memory: local)
	want     uint32      // the counters' value after the last call's GEMM
}

// rsSignalConfig returns the Pieces configuration of gemm_sm90 for MatmulReduceScatter of
// shape s with piece signals, or false where it does not run (DisableOverlapSignals; neither
// OverlapSignals nor rsSignalsWin; or no configuration whose tiles divide a GPU's rows).
func (c *Comm) rsSignalConfig(in, out dsl.Type, s MatmulShape) (kernels.GemmSM90Config, bool) {
	if c.o.DisableOverlapSignals || c.g < 2 || s.M%c.g != 0 {
		return kernels.GemmSM90Config{}, false
	}
	rows := s.M / c.g
	sms := max(c.r.Device.Info().Multiproc, 1)
	if !c.o.OverlapSignals && !rsSignalsWin(c.g, sms, in, out, s) {
		return kernels.GemmSM90Config{}, false
	}
	cands := kernels.GemmSM90Candidates(in, out)
	if pick, err := kernels.GemmSM90For(in, out, s.M, s.N, s.K, sms); err == nil {
		cands = append([]kernels.GemmSM90Config{pick}, cands...)
	}
	for _, cfg := range cands {
		cfg.Pieces = true
		if cfg.TMAStore && out != dsl.F16 && out != dsl.BF16 {
			cfg.TMAStore = false // the Comm's tensor maps are of 16-bit types
		}
		if cfg.CheckShape(s.M, s.N, s.K) == nil && cfg.CheckPieces(s.M, rows) == nil {
			return cfg, true
		}
	}
	return kernels.GemmSM90Config{}, false
}

// rsSignalFor returns the signal overlap's buffers with chunks of at least bytes.
func (c *Comm) rsSignalFor(ctx context.Context, cl *call, o *overlapState, bytes int) (*rsSignal, error) {
	if o.sig == nil {
		cs, err := c.r.Device.Alloc(int64(4 * c.g))
		if err != nil {
			return nil, cl.wrap(err)
		}
		if err := c.r.Device.CopyHtoD(cs.DevPtr(), make([]byte, 4*c.g)); err != nil { // zero: waits for the device
			return nil, cl.wrap(errors.Join(err, cs.Free()))
		}
		o.sig = &rsSignal{counters: cs}
	}
	if o.sig.bytes < bytes {
		b, err := c.alloc(ctx, (2*c.g-1)*bytes, false)
		if err != nil {
			return nil, cl.wrap(err)
		}
		o.sig.buf, o.sig.bytes = b, bytes
	}
	return o.sig, nil
}

// gemmRSSignal runs MatmulReduceScatter on checked buffers with one piece-signalling GEMM
// and the copy engines (see above).
func (c *Comm) gemmRSSignal(ctx context.Context, cl *call, cfg kernels.GemmSM90Config, a, b, out *Buffer, s MatmulShape) error {
	g, r := c.g, c.rank
	rows := s.M / g
	n := rows * s.N
	chunk := n * out.dt.Bytes()
	o, err := c.overlapFor(ctx, cl, 0)
	if err != nil {
		return err
	}
	sg, err := c.rsSignalFor(ctx, cl, o, chunk)
	if err != nil {
		return err
	}
	peers, err := c.peers(o, sg.buf)
	if err != nil {
		return err
	}
	main := c.o.Stream
	if err := c.overlapStart(ctx, cl, o); err != nil {
		return err
	}
	name, err := c.gemmSM90Pieces(ctx, cl, cfg, a, b, sg, out.dt, s, rows, (r+1)%g*rows, main)
	if err != nil {
		return err
	}
	sg.want += uint32(cfg.PieceSignals(rows, s.N)) // what the GEMM brings every counter to
	slot0 := (g - 1) * chunk                       // receive slot 0: D's last piece
	for j := 0; j < g-1; j++ {
		q := (r + 1 + j) % g
		ctr := sg.counters.DevPtr() + jit.DevicePtr(4*j)
		dst := peers[q] + jit.DevicePtr(slot0+(1+(r-q-1+g)%g)*chunk)
		if err := errors.Join(o.side.WaitValue32(ctr, sg.want, jit.WaitGEQ), o.side.CopyDtoD(dst, sg.buf.own+jit.DevicePtr(j*chunk), int64(chunk))); err != nil {
			return cl.wrap(err)
		}
	}
	if err := c.overlapBarrier(ctx, cl, o); err != nil {
		return err
	}
	if err := errors.Join(o.end.Record(o.side), main.WaitEvent(o.end)); err != nil {
		return cl.wrap(err)
	}
	if err := c.sumSlots(ctx, cl, main, out.dt, out.s.own, sg.buf.own+jit.DevicePtr(slot0), n); err != nil {
		return err
	}
	c.last = name + "+copy_engine_reducescatter_signal"
	return nil
}

// gemmSM90Pieces launches cfg (Pieces) on stream: D = A (rotated by shift rows) * B into the
// signal buffer, pieces of pieceRows rows, counting into sg's counters; grid at most SMs-1.
func (c *Comm) gemmSM90Pieces(ctx context.Context, cl *call, cfg kernels.GemmSM90Config, a, b *Buffer, sg *rsSignal, out dsl.Type, s MatmulShape, pieceRows, shift int, stream *jit.Stream) (string, error) {
	sms := max(c.r.Device.Info().Multiproc, 1)
	name := cfg.Name()
	fn, err := c.gemmSM90Function(cfg)
	if err != nil {
		return "", err
	}
	tmA, err := c.tensorMapAt(a.s, 0, a.dt, s.K, s.M, cfg.TMABoxA())
	if err != nil {
		return "", fmt.Errorf("collectives: %s: A's tensor map: %w", cl.what, err)
	}
	tmB, err := c.tensorMapAt(b.s, 0, b.dt, s.N, s.K, cfg.TMABoxB())
	if err != nil {
		return "", fmt.Errorf("collectives: %s: B's tensor map: %w", cl.what, err)
	}
	grid := cfg.Grid(s.M, s.N, sms)
	if sms > 1 {
		grid = min(grid, sms-1) // one SM for the side stream's barriers
	}
	lc := jit.LaunchConfig{Grid: jit.D1(grid), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: stream, Context: ctx}
	d := jit.AnyPtr{Addr: sg.buf.own, Elem: out}
	ctrs := jit.AnyPtr{Addr: sg.counters.DevPtr(), Elem: dsl.U32}
	M, N, K := uint32(s.M), uint32(s.N), uint32(s.K)
	var args any = launch.GemmSM90Pieces{TmA: tmA, TmB: tmB, M: M, N: N, K: K, Alpha: 1, C: d, D: d, Counters: ctrs, PieceRows: uint32(pieceRows), RowShift: uint32(shift)}
	if cfg.TMAStore {
		tmD, err := c.tensorMapAt(sg.buf, 0, out, s.N, s.M, cfg.TMABoxD())
		if err != nil {
			return "", fmt.Errorf("collectives: %s: D's tensor map: %w", cl.what, err)
		}
		args = launch.GemmSM90StorePieces{TmA: tmA, TmB: tmB, M: M, N: N, K: K, Alpha: 1, C: d, D: d, TmD: tmD, Counters: ctrs, PieceRows: uint32(pieceRows), RowShift: uint32(shift)}
	}
	if err := c.launchFn(fn, lc, args); err != nil {
		return "", fmt.Errorf("collectives: %s (%s): %w", cl.what, name, err)
	}
	return name, nil
}
