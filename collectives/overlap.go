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
	rs     *rsState  // the reduce-scatter's buffers
	sig    *rsSignal // the reduce-scatter's buffers with piece signals (Options.OverlapSignals)
	ag     *agSide   // the all-reduce's all-gather stream
}

// agSide is the all-reduce overlap's second side stream, which pushes each round's sums to
// the peers, and its events.
type agSide struct {
	stream *jit.Stream
	summed *jit.Event // a round's sums are written
	done   *jit.Event // the last round's sums are pushed
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
	if o.ag != nil {
		errs = append(errs, o.ag.stream.Close(), o.ag.summed.Close(), o.ag.done.Close())
	}
	if o.sig != nil {
		errs = append(errs, o.sig.counters.Free())
	}
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

// arOverlap returns the rounds of MatmulAllReduce's copy-engine overlap for shape s (0:
// split), under overlapMatmul's conditions; Options.OverlapRounds fixes the count where
// it divides M into parts.
func (c *Comm) arOverlap(dt dsl.Type, s MatmulShape) int {
	if c.g == 1 || c.node.topo.Nodes > 1 || c.o.CaptureSafe || c.o.Stream == nil {
		return 0
	}
	if ok, _ := kernels.UseSM90(c.o.Target, s.N, s.K); !ok {
		return 0
	}
	switch r := c.o.OverlapRounds; {
	case c.o.Matmuls != MatmulOverlap && c.o.Matmuls != MatmulAuto:
		return 0
	case r > 0 && s.M%(r*c.g) == 0:
		return r
	}
	switch c.o.Matmuls {
	case MatmulOverlap, MatmulAuto:
		return arOverlapRounds(c.g, c.r.Device.Info().Multiproc, dt, s, c.o.Matmuls == MatmulOverlap)
	}
	return 0
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
	if err := c.overlapStart(ctx, cl, o); err != nil {
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
	recv  *sym   // sets of g slots of a chunk: slot p from GPU p (slot rank: this GPU's own rows)
	bytes int
	sets  int
}

// rsFor returns the reduce-scatter buffers with chunks of at least bytes and at least sets
// sets of receive slots.
func (c *Comm) rsFor(ctx context.Context, cl *call, o *overlapState, bytes, sets int) (*rsState, error) {
	if o.rs != nil && o.rs.bytes >= bytes && o.rs.sets >= sets {
		return o.rs, nil
	}
	rs := &rsState{send: make([]*sym, c.g), bytes: bytes, sets: sets}
	var err error
	for q := range rs.send {
		if q != c.rank {
			if rs.send[q], err = c.alloc(ctx, bytes, false); err != nil {
				return nil, cl.wrap(err)
			}
		}
	}
	if rs.recv, err = c.alloc(ctx, sets*c.g*bytes, false); err != nil {
		return nil, cl.wrap(err)
	}
	o.rs = rs
	return rs, nil
}

// gemmRSOverlap runs MatmulReduceScatter on checked buffers with the copy engines (above).
func (c *Comm) gemmRSOverlap(ctx context.Context, cl *call, a, b, out *Buffer, s MatmulShape) error {
	chunk := s.M / c.g * s.N * out.dt.Bytes()
	o, err := c.overlapFor(ctx, cl, 0)
	if err != nil {
		return err
	}
	rs, err := c.rsFor(ctx, cl, o, chunk, 1)
	if err != nil {
		return err
	}
	recv, err := c.peers(o, rs.recv)
	if err != nil {
		return err
	}
	if err := c.overlapStart(ctx, cl, o); err != nil {
		return err
	}
	r := rsRound{o: o, rs: rs, recv: recv, a: a, b: b, out: out.dt, s: s, dst: out.s}
	name, err := c.rsRound(ctx, cl, r)
	if err != nil {
		return err
	}
	c.last = name + "+copy_engine_reducescatter"
	return nil
}

// rsRound is one reduce-scatter round of the copy-engine overlap: the product of rows
// [row0, row0+s.M) of A (s.M x s.K of a larger A) summed over the GPUs, this GPU's part
// (rows row0 + rank*s.M/g on) written to dst at element dOff, through receive set set.
type rsRound struct {
	o         *overlapState
	rs        *rsState
	recv      []jit.DevicePtr // every GPU's address of rs.recv
	a, b      *Buffer
	out       dsl.Type
	s         MatmulShape
	row0, set int
	dst       *sym
	dOff      int
}

// rsRound runs round r after the side stream's barrier that frees its receive set (see
// gemmRSOverlap's timeline): the partial products for the other GPUs, each pushed by the
// side stream while the next is computed, this GPU's own into its slot, the barrier that
// says every push has landed, then sum_slots into dst on the compute stream. It returns
// the GEMM's name.
func (c *Comm) rsRound(ctx context.Context, cl *call, r rsRound) (string, error) {
	o, rs, s := r.o, r.rs, r.s
	rows := s.M / c.g
	n := rows * s.N
	chunk := n * r.out.Bytes()
	set := r.set * c.g * chunk
	main := c.o.Stream
	part := MatmulShape{M: rows, N: s.N, K: s.K}
	for j := 1; j < c.g; j++ {
		q := (c.rank + j) % c.g
		x := gemmOperands{a: r.a.s, b: r.b.s, d: rs.send[q], in: r.a.dt, out: r.out, aOff: (r.row0 + q*rows) * s.K}
		if _, err := c.gemmSM90On(ctx, cl, x, part, main); err != nil {
			return "", err
		}
		if err := errors.Join(o.chunks[j].Record(main), o.side.WaitEvent(o.chunks[j])); err != nil {
			return "", cl.wrap(err)
		}
		dst := r.recv[q] + jit.DevicePtr(set+c.rank*chunk)
		if err := o.side.CopyDtoD(dst, rs.send[q].own, int64(chunk)); err != nil {
			return "", cl.wrap(err)
		}
	}
	x := gemmOperands{a: r.a.s, b: r.b.s, d: rs.recv, in: r.a.dt, out: r.out, aOff: (r.row0 + c.rank*rows) * s.K,
		dOff: set/r.out.Bytes() + c.rank*n}
	name, err := c.gemmSM90On(ctx, cl, x, part, main)
	if err != nil {
		return "", err
	}
	if err := c.overlapBarrier(ctx, cl, o); err != nil {
		return "", err
	}
	if err := errors.Join(o.end.Record(o.side), main.WaitEvent(o.end)); err != nil {
		return "", cl.wrap(err)
	}
	slots := rs.recv.own + jit.DevicePtr(set)
	out := r.dst.own + jit.DevicePtr(r.dOff*r.out.Bytes())
	if err := c.sumSlots(ctx, cl, main, r.out, out, slots, n); err != nil {
		return "", err
	}
	return name, nil
}

// MatmulAllReduce with the copy engines (MatmulOverlap): the reduce-scatter overlap above
// in rounds of rows, each round's sums pushed to every peer by a second side stream (ag)
// while the SMs compute the next round. Per call, on GPU r of g, in C rounds of M/C rows
// (round i receives into slot set i%2; q1, q2, ... = r+1, r+2, ...):
//
//	compute: record start ── gemm(q1) ── record c1 ── gemm(q2) ── ... ── gemm(own → slot r) ── wait end ── sum_slots(set i%2 → out part r) ── record summed ── next round ── ... ── wait end
//	side:    wait start ── barrier ── wait c1 ── push q1 ── wait c2 ── ... ── barrier ── record end ── next round ── ... ── wait done ── barrier ── record end
//	ag:      wait summed ── push out part r → every peer's out ── next round ── ... ── record done
//
// Round i's pushes into set i%2 are safe once every GPU passed round i-1's barrier: its side
// stream reaches it after its gemms of round i-1, which its compute stream runs after the
// sum of round i-2. Keeping the sums on the compute stream (rather than on multiprocessors
// left free beside the GEMMs) measured as fast or faster on 4 x H100 (docs/bench.md). The
// last barrier says every sum has landed everywhere.

// arFor returns the overlap state with the all-reduce's ag stream and events.
func (c *Comm) arFor(ctx context.Context, cl *call) (*overlapState, error) {
	o, err := c.overlapFor(ctx, cl, 0)
	if err != nil || o.ag != nil {
		return o, err
	}
	ag := &agSide{}
	if ag.stream, err = c.r.Device.NewStream(); err != nil {
		return nil, cl.wrap(err)
	}
	evs := []**jit.Event{&ag.summed, &ag.done}
	for i, e := range evs {
		if *e, err = c.r.Device.NewEvent(); err != nil {
			errs := []error{err, ag.stream.Close()}
			for _, made := range evs[:i] {
				errs = append(errs, (*made).Close())
			}
			return nil, cl.wrap(errors.Join(errs...))
		}
	}
	o.ag = ag
	return o, nil
}

// gemmAROverlap runs MatmulAllReduce on checked buffers with the copy engines in rounds
// rounds (above); s.M is a multiple of rounds * NumGPUs.
func (c *Comm) gemmAROverlap(ctx context.Context, cl *call, a, b, out *Buffer, s MatmulShape, rounds int) error {
	rowsR := s.M / rounds
	rows := rowsR / c.g
	n := rows * s.N
	chunk := n * out.dt.Bytes()
	o, err := c.arFor(ctx, cl)
	if err != nil {
		return err
	}
	rs, err := c.rsFor(ctx, cl, o, chunk, min(rounds, 2))
	if err != nil {
		return err
	}
	recv, err := c.peers(o, rs.recv)
	if err != nil {
		return err
	}
	peerOut, err := c.peers(o, out.s)
	if err != nil {
		return err
	}
	main, side, ag := c.o.Stream, o.side, o.ag
	if err := c.overlapStart(ctx, cl, o); err != nil {
		return err
	}
	var name string
	for i := range rounds {
		// The round's pieces, pushes, barrier and sum, as MatmulReduceScatter's (rsRound),
		// into out's rows of this round that this GPU owns.
		at := jit.DevicePtr((i*rowsR + c.rank*rows) * s.N * out.dt.Bytes())
		r := rsRound{o: o, rs: rs, recv: recv, a: a, b: b, out: out.dt, s: MatmulShape{M: rowsR, N: s.N, K: s.K},
			row0: i * rowsR, set: i % 2, dst: out.s, dOff: (i*rowsR + c.rank*rows) * s.N}
		if name, err = c.rsRound(ctx, cl, r); err != nil {
			return err
		}
		if err := errors.Join(ag.summed.Record(main), ag.stream.WaitEvent(ag.summed)); err != nil {
			return cl.wrap(err)
		}
		for j := 1; j < c.g; j++ {
			q := (c.rank + j) % c.g
			if err := ag.stream.CopyDtoD(peerOut[q]+at, out.s.own+at, int64(chunk)); err != nil {
				return cl.wrap(err)
			}
		}
	}
	if err := errors.Join(ag.done.Record(ag.stream), side.WaitEvent(ag.done)); err != nil {
		return cl.wrap(err)
	}
	if err := c.overlapBarrier(ctx, cl, o); err != nil {
		return err
	}
	if err := errors.Join(o.end.Record(side), main.WaitEvent(o.end)); err != nil {
		return cl.wrap(err)
	}
	c.last = fmt.Sprintf("%s+copy_engine_allreduce_%d", name, rounds)
	return nil
}

// overlapStart begins an overlapped call: the side stream waits for the work queued on the
// compute stream before it (o.start), then runs the barrier that says every GPU's buffers
// of the previous call are free.
func (c *Comm) overlapStart(ctx context.Context, cl *call, o *overlapState) error {
	if err := errors.Join(o.start.Record(c.o.Stream), o.side.WaitEvent(o.start)); err != nil {
		return cl.wrap(err)
	}
	return c.overlapBarrier(ctx, cl, o)
}

// overlapBarrier launches the p2p barrier on the side stream.
func (c *Comm) overlapBarrier(ctx context.Context, cl *call, o *overlapState) error {
	bc := &call{what: cl.what, dt: dsl.U32, root: -1, stream: o.side}
	return c.launch(ctx, bc, kernels.ID{Family: kernels.FamilyP2PBarrier, DType: dsl.U32}, 1, launch.P2PBarrier{
		Pads: c.pads.table(), Rank: uint32(c.rank), NGPUs: uint32(c.g), Epoch: c.padEpoch})
}

// sumSlots writes n elements of dt at out = the sum of the Comm's g slots of n elements at
// slots (sum_slots, built once per type) on stream.
func (c *Comm) sumSlots(ctx context.Context, cl *call, stream *jit.Stream, dt dsl.Type, out, slots jit.DevicePtr, n int) error {
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
	lc := jit.LaunchConfig{Grid: jit.D1(c.blocks((n*dt.Bytes() + 15) / 16)), Block: jit.D1(kernels.CollThreads), Stream: stream, Context: ctx}
	args := launch.SumSlots{Out: jit.AnyPtr{Addr: out, Elem: dt}, Slots: jit.AnyPtr{Addr: slots, Elem: dt}, NSlots: uint32(c.g), N: uint32(n)}
	if err := c.launchFn(fn, lc, args); err != nil {
		return fmt.Errorf("collectives: %s (%s): %w", cl.what, name, err)
	}
	return nil
}
