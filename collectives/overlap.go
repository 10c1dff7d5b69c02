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

// AllGatherMatmul with the all-gather on the copy engines (MatmulOverlap), the design of
// PyTorch's async tensor parallelism: the GPU's DMA engines pull the peers' row slices of
// A into local chunk buffers on a side stream while the SMs multiply the rows already
// here, chunk by chunk, so the transfer costs no SM time and hides behind the GEMM.
//
// Per call, on GPU r of g, with rows = M/g:
//
//	compute stream: record start ──────────────────────────── gemm(a → D rows r) ── wait chunk q1 ── gemm(chunk q1) ── ... ── wait end
//	side stream:    wait start ── barrier ── pull q1 ── record chunk q1 ── pull q2 ── ... ── barrier ── record end
//
// The first barrier (every GPU's side stream after its compute stream's earlier work)
// says every peer's a is written; the pulls run in ring order q = r+1, r+2, ...; the
// second barrier says every peer has pulled this GPU's a, so that the caller's later work
// on the compute stream (which waits for end) may overwrite it. The chunk buffers are
// written only by this GPU's own copies, which the next call's side stream issues after
// waiting for this call's GEMMs (start is recorded after them).

// overlapState is the Comm's side stream, its events, and the chunk buffers of one shape.
type overlapState struct {
	side   *jit.Stream
	start  *jit.Event
	end    *jit.Event
	chunks []*jit.Event // chunks[j]: the pull from GPU rank+j has landed
	bufs   []*sym       // bufs[q]: GPU q's rows (nil for this GPU's)
	bytes  int          // the size of each chunk buffer
	peerA  map[jit.DevicePtr][]jit.DevicePtr
	rs     *rsState // the reduce-scatter's buffers
}

// overlapFor returns the overlap state with chunk buffers of at least bytes each.
func (c *Comm) overlapFor(ctx context.Context, cl *call, bytes int) (*overlapState, error) {
	o := c.ovl
	if o == nil {
		o = &overlapState{peerA: map[jit.DevicePtr][]jit.DevicePtr{}}
		var err error
		if o.side, err = c.r.Device.NewStream(); err != nil {
			return nil, cl.wrap(err)
		}
		c.ovl = o
		evs := make([]*jit.Event, c.g+2) // start, end, chunks[0..g-1] (chunks[0] unused)
		for i := range evs {
			if evs[i], err = c.r.Device.NewEvent(); err != nil {
				return nil, cl.wrap(err)
			}
		}
		o.start, o.end, o.chunks = evs[0], evs[1], evs[2:]
	}
	if bytes > 0 && o.bytes < bytes {
		o.bufs = make([]*sym, c.g)
		for q := range o.bufs {
			if q == c.rank {
				continue
			}
			s, err := c.alloc(ctx, bytes, false)
			if err != nil {
				return nil, cl.wrap(err)
			}
			o.bufs[q] = s
		}
		o.bytes = bytes
	}
	return o, nil
}

// close releases the side stream and events (the chunk buffers are the Comm's allocations).
func (o *overlapState) close() error {
	if o == nil {
		return nil
	}
	errs := []error{o.side.Close(), o.start.Close(), o.end.Close()}
	for _, e := range o.chunks {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// peers returns every GPU's address of s (NVSHMEM peer pointers), cached per allocation.
func (c *Comm) peers(o *overlapState, s *sym) ([]jit.DevicePtr, error) {
	if p, ok := o.peerA[s.own]; ok {
		return p, nil
	}
	p := make([]jit.DevicePtr, c.g)
	for q := range p {
		p[q] = s.own
		if q == c.rank {
			continue
		}
		var err error
		if p[q], err = c.r.NVSHMEM.PeerPtr(s.m, q); err != nil {
			return nil, fmt.Errorf("collectives: peer address of GPU %d from GPU %d: %w", q, c.rank, err)
		}
	}
	if len(o.peerA) >= maxTensorMaps {
		clear(o.peerA)
	}
	o.peerA[s.own] = p
	return p, nil
}

// overlapMatmul reports whether AllGatherMatmul (ag) or MatmulReduceScatter (!ag) of
// shape s runs on the copy engines: the Comm is on one node of several GPUs, not
// capture-safe (its barriers take host epochs) and has a stream of its own (on the legacy
// default stream the GEMMs would wait for the side stream's copies), the GEMM is
// gemm_sm90's (sm_90a, N and K multiples of 8), and the mode is MatmulOverlap, or
// MatmulAuto where the estimate (agOverlapWins, rsOverlapWins) says it wins. Otherwise
// MatmulOverlap runs split.
func (c *Comm) overlapMatmul(ag bool, dt, out dsl.Type, s MatmulShape) bool {
	if c.g == 1 || c.node.topo.Nodes > 1 || c.o.CaptureSafe || c.o.Stream == nil {
		return false
	}
	if ok, _ := kernels.UseSM90(c.o.Target, s.N, s.K); !ok {
		return false
	}
	switch c.o.Matmuls {
	case MatmulOverlap:
		return true
	case MatmulAuto:
		if ag {
			return agOverlapWins(c.g, c.r.Device.Info().Multiproc, dt, out, s)
		}
		return rsOverlapWins(c.g, c.r.Device.Info().Multiproc, dt, out, s)
	}
	return false
}

// agGemmOverlap runs AllGatherMatmul on checked buffers with the copy engines (see above).
func (c *Comm) agGemmOverlap(ctx context.Context, cl *call, a, b, out *Buffer, s MatmulShape) error {
	rows := s.M / c.g
	chunk := rows * s.K * a.dt.Bytes()
	o, err := c.overlapFor(ctx, cl, chunk)
	if err != nil {
		return err
	}
	peerA, err := c.peers(o, a.s)
	if err != nil {
		return err
	}
	main := c.o.Stream
	barrier := func() error { return c.overlapBarrier(ctx, cl, o) }
	if err := errors.Join(o.start.Record(main), o.side.WaitEvent(o.start)); err != nil {
		return cl.wrap(err)
	}
	if err := barrier(); err != nil {
		return err
	}
	for j := 1; j < c.g; j++ {
		q := (c.rank + j) % c.g
		if err := o.side.CopyDtoD(o.bufs[q].own, peerA[q], int64(chunk)); err != nil {
			return cl.wrap(err)
		}
		if err := o.chunks[j].Record(o.side); err != nil {
			return cl.wrap(err)
		}
	}
	if err := barrier(); err != nil {
		return err
	}
	if err := o.end.Record(o.side); err != nil {
		return cl.wrap(err)
	}
	part := MatmulShape{M: rows, N: s.N, K: s.K}
	x := gemmOperands{a: a.s, b: b.s, d: out.s, in: a.dt, out: out.dt, dOff: c.rank * rows * s.N}
	name, err := c.gemmSM90On(ctx, cl, x, part, main)
	if err != nil {
		return err
	}
	for j := 1; j < c.g; j++ {
		q := (c.rank + j) % c.g
		if err := main.WaitEvent(o.chunks[j]); err != nil {
			return cl.wrap(err)
		}
		x := gemmOperands{a: o.bufs[q], b: b.s, d: out.s, in: a.dt, out: out.dt, dOff: q * rows * s.N}
		if _, err := c.gemmSM90On(ctx, cl, x, part, main); err != nil {
			return err
		}
	}
	if err := main.WaitEvent(o.end); err != nil {
		return cl.wrap(err)
	}
	c.last = "copy_engine_allgather+" + name
	return nil
}

// MatmulReduceScatter with the reduce-scatter on the copy engines (MatmulOverlap), as
// PyTorch's async tensor parallelism does it. Per call, on GPU r of g, with rows = M/g:
//
//	compute stream: record start ── gemm(A rows q1 → send q1) ── record c1 ── gemm(rows q2 → send q2) ── ... ── gemm(A rows r → recv slot r) ── wait end ── sum_slots(recv → out)
//	side stream:    wait start ── barrier ── wait c1 ── push send q1 → GPU q1's recv slot r ── wait c2 ── ... ── barrier ── record end
//
// The partial products destined to the other GPUs come first, each pushed by the DMA
// engines while the SMs compute the next; this GPU's own rows come last, into its own slot
// (no peer writes it). The first barrier says every GPU has finished its previous call's
// sum (its slots are free), the second that every push has landed; sum_slots then adds the
// g slots in f32 and rounds once.

// rsState is MatmulOverlap's reduce-scatter buffers for one chunk size.
type rsState struct {
	send  []*sym // send[q]: the partial product of GPU q's rows (nil for this GPU's)
	recv  *sym   // g slots of a chunk: slot p from GPU p (slot rank: this GPU's own rows)
	bytes int
}

// rsFor returns the reduce-scatter buffers with chunks of at least bytes.
func (c *Comm) rsFor(ctx context.Context, cl *call, o *overlapState, bytes int) (*rsState, error) {
	if o.rs != nil && o.rs.bytes >= bytes {
		return o.rs, nil
	}
	rs := &rsState{send: make([]*sym, c.g), bytes: bytes}
	var err error
	for q := range rs.send {
		if q != c.rank {
			if rs.send[q], err = c.alloc(ctx, bytes, false); err != nil {
				return nil, cl.wrap(err)
			}
		}
	}
	if rs.recv, err = c.alloc(ctx, c.g*bytes, false); err != nil {
		return nil, cl.wrap(err)
	}
	o.rs = rs
	return rs, nil
}

// gemmRSOverlap runs MatmulReduceScatter on checked buffers with the copy engines (above).
func (c *Comm) gemmRSOverlap(ctx context.Context, cl *call, a, b, out *Buffer, s MatmulShape) error {
	rows := s.M / c.g
	n := rows * s.N
	chunk := n * out.dt.Bytes()
	o, err := c.overlapFor(ctx, cl, 0)
	if err != nil {
		return err
	}
	rs, err := c.rsFor(ctx, cl, o, chunk)
	if err != nil {
		return err
	}
	recv, err := c.peers(o, rs.recv)
	if err != nil {
		return err
	}
	main := c.o.Stream
	if err := errors.Join(o.start.Record(main), o.side.WaitEvent(o.start)); err != nil {
		return cl.wrap(err)
	}
	if err := c.overlapBarrier(ctx, cl, o); err != nil {
		return err
	}
	part := MatmulShape{M: rows, N: s.N, K: s.K}
	for j := 1; j < c.g; j++ {
		q := (c.rank + j) % c.g
		x := gemmOperands{a: a.s, b: b.s, d: rs.send[q], in: a.dt, out: out.dt, aOff: q * rows * s.K}
		if _, err := c.gemmSM90On(ctx, cl, x, part, main); err != nil {
			return err
		}
		if err := errors.Join(o.chunks[j].Record(main), o.side.WaitEvent(o.chunks[j])); err != nil {
			return cl.wrap(err)
		}
		dst := recv[q] + jit.DevicePtr(c.rank*chunk)
		if err := o.side.CopyDtoD(dst, rs.send[q].own, int64(chunk)); err != nil {
			return cl.wrap(err)
		}
	}
	x := gemmOperands{a: a.s, b: b.s, d: rs.recv, in: a.dt, out: out.dt, aOff: c.rank * rows * s.K, dOff: c.rank * n}
	name, err := c.gemmSM90On(ctx, cl, x, part, main)
	if err != nil {
		return err
	}
	if err := c.overlapBarrier(ctx, cl, o); err != nil {
		return err
	}
	if err := errors.Join(o.end.Record(o.side), main.WaitEvent(o.end)); err != nil {
		return cl.wrap(err)
	}
	if err := c.sumSlots(ctx, cl, out, rs.recv, n); err != nil {
		return err
	}
	c.last = name + "+copy_engine_reducescatter"
	return nil
}

// overlapBarrier launches the p2p barrier on the side stream.
func (c *Comm) overlapBarrier(ctx context.Context, cl *call, o *overlapState) error {
	bc := &call{what: cl.what, dt: dsl.U32, root: -1, stream: o.side}
	return c.launch(ctx, bc, kernels.ID{Family: kernels.FamilyP2PBarrier, DType: dsl.U32}, 1, launch.P2PBarrier{
		Pads: c.pads.table(), Rank: uint32(c.rank), NGPUs: uint32(c.g), Epoch: c.padEpoch})
}

// sumSlots writes out = the sum of the Comm's g slots of n elements at slots (sum_slots,
// built once per type), on the Comm's stream.
func (c *Comm) sumSlots(ctx context.Context, cl *call, out *Buffer, slots *sym, n int) error {
	dt := out.dt
	name := "sum_slots_" + dt.String()
	key := fusedKey{f: kernels.Family(name), in: dt, out: dt}
	fn, ok := c.fused[key]
	if !ok {
		k := dsl.New(name, dsl.WithTarget(c.o.Target))
		kernels.SumSlots(k, dt)
		var err error
		if fn, err = c.loadMatmul(key, name, k); err != nil {
			return err
		}
	}
	lc := jit.LaunchConfig{Grid: jit.D1(c.blocks((n*dt.Bytes() + 15) / 16)), Block: jit.D1(kernels.CollThreads), Stream: c.o.Stream, Context: ctx}
	args := launch.SumSlots{Out: out.s.at(dt), Slots: slots.at(dt), NSlots: uint32(c.g), N: uint32(n)}
	if err := c.launchFn(fn, lc, args); err != nil {
		return fmt.Errorf("collectives: %s (%s): %w", cl.what, name, err)
	}
	return nil
}
