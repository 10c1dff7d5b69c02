package collectives

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

var errClosed = errors.New("collectives: the Comm is closed")

// errNilComm is what the methods of a nil *Comm report (wrapped with the call).
var errNilComm = errors.New("nil *Comm (make one with New)")

// errZeroComm is what the methods of a Comm that New did not make (Comm{}) report.
var errZeroComm = errors.New("a zero Comm, not made by New (make one with New)")

// flatAlgorithm names the flat algorithm in flatCheck's error (Options.Algorithm flat).
const flatAlgorithm = "the flat algorithm (Options.Algorithm)"

// call is one collective call as every rank must make it. Its launches carry it (on the
// emulator), so that ranks that disagree on it fail, each naming the ranks that differ.
type call struct {
	what    string // "AllReduce", ...
	dt      dsl.Type
	n       int // elements (of the part, for ReduceScatter and AllGather)
	op      Op  // when reduces
	reduces bool
	root    int         // -1 when the call has no root
	inPlace bool        // dst is src
	stream  *jit.Stream // the stream its kernels run on (nil: Options.Stream)
	shared  int         // dynamic shared memory of its next launch (bytes; the MoE's bulk kernels)
}

func (c *call) String() string {
	s := fmt.Sprintf("%s of %d %s", c.what, c.n, c.dt)
	if c.reduces {
		s += " by " + kernels.OpName(c.op)
	}
	if c.root >= 0 {
		s += fmt.Sprintf(" from root %d", c.root)
	}
	if c.inPlace {
		s += " in place"
	}
	return s
}

// wrap says that err happened in the call: an allocation the ranks make together fails
// when their calls differ.
func (c *call) wrap(err error) error {
	return callError{call: c.String(), err: err}
}

// callError is an error of a collective call (call.wrap): "collectives:" once, though err,
// from the Comm's allocations, says it too.
type callError struct {
	call string
	err  error
}

func (e callError) Error() string {
	return "collectives: " + e.call + " (do the ranks' calls differ?): " + strings.TrimPrefix(e.err.Error(), "collectives: ")
}
func (e callError) Unwrap() error { return e.err }

// attrs are the call's debug-log attributes.
func (c *call) attrs() []any {
	a := []any{"elements", c.n, "bytes", c.n * c.dt.Bytes()}
	if c.root >= 0 {
		a = append(a, "root", c.root)
	}
	if c.what == "AllReduce" {
		a = append(a, "in_place", c.inPlace)
	}
	return a
}

// begin checks what every call needs: an open Comm, a live context, buffers of this Comm.
func (c *Comm) begin(ctx context.Context, what string, bufs ...*Buffer) error {
	if c == nil {
		return fmt.Errorf("collectives: %s: %w", what, errNilComm)
	}
	if c.r == nil {
		return fmt.Errorf("collectives: %s: %w", what, errZeroComm)
	}
	if ctx == nil {
		return fmt.Errorf("collectives: %s: nil context", what)
	}
	if c.closed {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error // allocated only on failure: begin runs on every call
	for i, b := range bufs {
		if slices.Contains(bufs[:i], b) {
			continue // the same buffer twice (in place, or nil for both): one error, not two
		}
		if err := c.own(b, what); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// mmReduces reports whether multimem reduces dt with op (.min/.max take no f32).
func mmReduces(dt dsl.Type, op Op) bool { return op == Sum || dt != dsl.F32 }

func checkOp(op Op) error {
	if kernels.OpName(op) == "" {
		return fmt.Errorf("collectives: reduction %v is not supported (Sum, Min, Max)", op)
	}
	return nil
}

// fp8Check says why an fp8 reduction cannot run on this Comm (nil when it can): it needs the
// fp8 multimem kernels' target and multicast.
func (c *Comm) fp8Check(what string, fam kernels.Family, dt dsl.Type, op Op) error {
	spec, err := kernels.Find(reduction(fam, op, dt))
	if err != nil {
		return fmt.Errorf("collectives: %s: %w", what, err)
	}
	switch {
	case !slices.Contains(spec.Targets, c.o.Target):
		return fmt.Errorf("collectives: %s of %s needs multimem on an sm_100a-class target (%s), not %s; f32, f16, bf16 and s32 run everywhere", what, dt, spec.Targets[0], c.o.Target)
	case !c.mc:
		return fmt.Errorf("collectives: %s of %s needs multicast (NVLink SHARP), which is off (%v); f32, f16, bf16 and s32 run without it", what, dt, c.mcWhy)
	}
	return nil
}

// allReducePlan is what an all-reduce runs: one kernel.
type allReducePlan struct {
	k kernels.ID
}

func (p allReducePlan) String() string { return name(p.k) }

// allReducePlan chooses the all-reduce of n elements of dt by op, in place or not. See
// AllReduceAlgorithm.
func (c *Comm) allReducePlan(dt dsl.Type, op Op, n int, inPlace bool) (allReducePlan, error) {
	bytes := n * dt.Bytes()
	var fam kernels.Family
	switch {
	case c.o.CaptureSafe:
		return c.graphPlan(dt, op, n, inPlace)
	case isFP8(dt):
		if err := c.fp8Check("AllReduce", kernels.FamilyMMAllReduce1Shot, dt, op); err != nil {
			return allReducePlan{}, err
		}
		fam = kernels.FamilyMMAllReduce2Shot
		if bytes <= c.thr.oneShot {
			fam = kernels.FamilyMMAllReduce1Shot
		}
	case c.mc && mmReduces(dt, op) && bytes <= c.thr.oneShot:
		fam = kernels.FamilyMMAllReduce1Shot
	case c.mc && mmReduces(dt, op):
		fam = kernels.FamilyMMAllReduce2Shot
	case c.mc && bytes <= c.thr.oneShot:
		fam = kernels.FamilyMMAllReducePush
	case !c.o.DisableLamport && dt.IsFloat() && bytes <= c.thr.lamport:
		fam = kernels.FamilyP2PAllReduceLamport
	case bytes <= c.thr.oneShot:
		fam = kernels.FamilyP2PAllReduce1Shot
	case c.thr.push > 0 && bytes >= c.thr.push:
		fam = c.pushFamily(dt, bytes)
	default:
		fam = kernels.FamilyP2PAllReduce2Shot
	}
	return allReducePlan{k: reduction(fam, op, dt)}, nil
}

// AllReduce reduces buf over every GPU with op, in place: afterwards every GPU's copy holds
// the reduction of all copies. See AllReduceTo for the algorithms.
func (c *Comm) AllReduce(ctx context.Context, buf *Buffer, op Op) error {
	return c.allReduceTo(ctx, "AllReduce", buf, buf, op)
}

// AllReduceAlgorithm returns the kernel AllReduceTo would run for n elements of dt (""
// when none can: an unsupported type, or n beyond what a Buffer holds).
//
// Across nodes (Topology().Nodes > 1), or anywhere with Options.Algorithm, the cost model
// (Options.CostModel) or Options.Algorithm chooses:
// hier_allreduce (in-node reduce-scatter, exchange between nodes, in-node all-gather) or
// the NVSHMEM ring (nvshmem_reducescatter_ring+nvshmem_allgather_ring, which needs n to be a
// multiple of NumGPUs and at most kernels.CollMaxGPUs ranks; else hierarchical runs).
// On one node:
//
// With multicast (NVLink SHARP): mm_allreduce_1shot up to OneShotMaxBytes, else
// mm_allreduce_2shot; f32 min and max have no multimem.ld_reduce form, so they run
// mm_allreduce_push (multicast stores, local reduction) up to OneShotMaxBytes and the
// peer-to-peer two-shot above. Without multicast: p2p_allreduce_lamport for floats up to
// LamportMaxBytes, then p2p_allreduce_1shot up to OneShotMaxBytes, then p2p_allreduce_2shot
// (or, from PushMinBytes, p2p_allreduce_push; p2p_allreduce_push4, the same built for at
// most 4 GPUs, on a Comm of 4 or fewer unless Options.DisablePush4). fp8 (e4m3, e5m2) runs
// mm_allreduce_1shot_fp8 up to OneShotMaxBytes, else mm_allreduce_2shot_fp8, and has no
// algorithm ("") without multicast on sm_100a. On a CaptureSafe Comm it names the graph
// variant of graphPlan's out-of-place choice (docs/collectives.md).
func (c *Comm) AllReduceAlgorithm(dt dsl.Type, op Op, n int) string {
	if c == nil || !supported(dt) || !fits(dt, n) {
		return ""
	}
	if p := c.allReducePlanAcross(dt, n); p.alg != AlgFlat {
		if c.acrossCheck("AllReduce", dt) != nil || checkOp(op) != nil {
			return ""
		}
		return acrossName(AllReduceCollective, p, op, dt)
	} else if c.node.topo.Nodes > 1 {
		return "" // Options.Algorithm flat: refused across nodes
	}
	p, err := c.allReducePlan(dt, op, n, false)
	if err != nil {
		return ""
	}
	if c.o.CaptureSafe {
		if p.k, err = graphVariant(&call{what: "AllReduce", dt: dt, n: n, op: op, reduces: true, root: -1}, p.k); err != nil {
			return ""
		}
	}
	return p.String()
}

// AllReduceTo writes the reduction by op of every GPU's src into every GPU's dst (dst may
// be src). It picks the kernel by size, dtype and multicast availability
// (AllReduceAlgorithm) and logs the choice at debug level. Every rank must pass the same
// element count, type and op; on the emulator ranks that differ fail, each naming them.
func (c *Comm) AllReduceTo(ctx context.Context, dst, src *Buffer, op Op) error {
	return c.allReduceTo(ctx, "AllReduceTo", dst, src, op)
}

// allReduceTo is AllReduce and AllReduceTo; what names the method in errors (AllReduceTo's
// said "AllReduce: dst holds ..."). The call is an AllReduce either way (Call, logs).
func (c *Comm) allReduceTo(ctx context.Context, what string, dst, src *Buffer, op Op) error {
	if err := errors.Join(c.begin(ctx, what, dst, src), checkOp(op)); err != nil {
		return err
	}
	if dst.dt != src.dt || dst.n != src.n {
		return fmt.Errorf("collectives: %s: dst holds %d %s, src %d %s", what, dst.n, dst.dt, src.n, src.dt)
	}
	if p := c.allReducePlanAcross(src.dt, src.n); p.alg != AlgFlat {
		if err := c.acrossCheck(what, src.dt); err != nil {
			return err
		}
		cl := &call{what: "AllReduce", dt: src.dt, n: src.n, op: op, reduces: true, root: -1, inPlace: dst == src}
		return c.allReduceAcross(ctx, cl, p, dst, src, op)
	}
	if err := c.flatCheck(what, flatAlgorithm); err != nil {
		return err
	}
	p, err := c.allReducePlan(src.dt, op, src.n, dst == src)
	if err != nil {
		return err
	}
	cl := &call{what: "AllReduce", dt: src.dt, n: src.n, op: op, reduces: true, root: -1, inPlace: dst == src}
	if c.mc && !mmReduces(src.dt, op) && c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: multimem.ld_reduce has no f32 "+kernels.OpName(op)+"; using "+p.String())
	}
	return c.allReduce(ctx, cl, p.k, dst, src)
}

// allReduce launches the one-kernel all-reduce k.
func (c *Comm) allReduce(ctx context.Context, cl *call, k kernels.ID, dst, src *Buffer) error {
	dt, n := src.dt, uint32(src.n)
	vectors := (src.n + 16/dt.Bytes() - 1) / (16 / dt.Bytes())
	rank, g := uint32(c.rank), uint32(c.g)
	switch k.Family {
	case kernels.FamilyMMAllReduce1Shot, kernels.FamilyMMAllReduce1ShotFP8, kernels.FamilyP2PAllReduce1Shot:
		in := src.s
		if cl.inPlace {
			// Peers read this GPU's input while it writes its output: stage the input.
			if err := c.stage(ctx, cl, src); err != nil {
				return err
			}
			in = c.scratch
		}
		if k.Family != kernels.FamilyP2PAllReduce1Shot {
			return c.launch(ctx, cl, k, c.blocks(vectors), launch.MMOneShot{
				InMC: in.multicast(dt), Out: dst.s.at(dt), FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32),
				Rank: rank, NGPUs: g, N: n, Epoch: c.flagEpoch})
		}
		return c.launch(ctx, cl, k, c.blocks(vectors), launch.P2POneShot{
			Ins: in.table(), Out: dst.s.at(dt), Pads: c.pads.table(), Rank: rank, NGPUs: g, N: n, Epoch: c.padEpoch})
	case kernels.FamilyMMAllReduce2Shot, kernels.FamilyMMAllReduce2ShotFP8:
		return c.launch(ctx, cl, k, c.blocks((vectors+c.g-1)/c.g), launch.MMTwoShot{
			InMC: src.s.multicast(dt), OutMC: dst.s.multicast(dt), FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32),
			Rank: rank, NGPUs: g, N: n, Epoch: c.flagEpoch})
	case kernels.FamilyMMAllReducePush:
		ld := vectors * (16 / dt.Bytes())
		if err := c.ensureScratch(ctx, cl, kernels.CollMaxGPUs*ld*dt.Bytes()); err != nil {
			return err
		}
		return c.launch(ctx, cl, k, c.blocks(vectors), launch.MMPush{
			In: src.s.at(dt), Out: dst.s.at(dt), ScratchMC: c.scratch.multicast(dt), ScratchUC: c.scratch.at(dt),
			FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32), Rank: rank, NGPUs: g, N: n, Epoch: c.flagEpoch})
	case kernels.FamilyP2PAllReduce2Shot:
		return c.launch(ctx, cl, k, c.blocks((vectors+c.g-1)/c.g), launch.P2PTwoShot{
			Ins: src.s.table(), Outs: dst.s.table(), Pads: c.pads.table(), Rank: rank, NGPUs: g, N: n, Epoch: c.padEpoch})
	case kernels.FamilyP2PAllReducePush, kernels.FamilyP2PAllReducePush4:
		// ngpus regions of a slice: ceil(n/g) rounded up to whole 16-byte vectors.
		slice := ((src.n+c.g-1)/c.g + 16/dt.Bytes() - 1) / (16 / dt.Bytes()) * (16 / dt.Bytes())
		if err := c.ensurePushScratch(ctx, cl, c.g*slice*dt.Bytes()); err != nil {
			return err
		}
		blocks, err := c.pushBlocks(k, (vectors+c.g-1)/c.g)
		if err != nil {
			return cl.wrap(err)
		}
		return c.launch(ctx, cl, k, blocks, launch.P2PPush{
			In: src.s.at(dt), Outs: dst.s.table(), Scratch: c.pushes.table(), Pads: c.pads.table(), Rank: rank, NGPUs: g, N: n, Epoch: c.padEpoch})
	}
	// Lamport: in place is safe (each thread reads its input before it writes its output,
	// and peers never read this GPU's input).
	l, err := c.lamportFor(ctx, cl, dt)
	if err != nil {
		return err
	}
	blocks := c.blocks(vectors)
	if c.o.CaptureSafe {
		blocks = c.blocks((l.capacity + 16/dt.Bytes() - 1) / (16 / dt.Bytes())) // the graph variant's one grid
	}
	err = c.launch(ctx, cl, k, blocks, launch.P2PLamport{
		In: src.s.at(dt), Out: dst.s.at(dt), Lbufs: l.s.table(), Cap: uint32(l.capacity), Nclear: uint32(l.nprev),
		Rank: rank, NGPUs: g, N: n, Epoch: l.epoch})
	if err != nil {
		return err
	}
	l.epoch = kernels.NextLamportEpoch(l.epoch)
	l.nprev = src.n
	return nil
}

// partBuffer returns the Comm's buffer of n elements of dt (one per size and type: the
// hierarchical all-reduce's part, the split matmuls' gathered operand and product).
func (c *Comm) partBuffer(ctx context.Context, cl *call, dt dsl.Type, n int) (*Buffer, error) {
	k := partKey{dt, n}
	if b, ok := c.parts[k]; ok {
		return b, nil
	}
	s, err := c.alloc(ctx, n*dt.Bytes(), true)
	if err != nil {
		return nil, cl.wrap(err)
	}
	b := &Buffer{c: c, s: s, dt: dt, n: n}
	if c.parts == nil {
		c.parts = map[partKey]*Buffer{}
	}
	c.parts[k] = b
	return b, nil
}

// lamportFor returns (allocating and filling with -0.0 once) the Lamport buffer of dt's size.
func (c *Comm) lamportFor(ctx context.Context, cl *call, dt dsl.Type) (*lamportState, error) {
	size := dt.Bytes()
	if l, ok := c.lamport[size]; ok {
		return l, nil
	}
	vec := 16 / size
	capacity := (c.thr.lamport/size + vec - 1) / vec * vec
	elems := kernels.LamportSlots * kernels.CollMaxGPUs * capacity
	state := 4 * kernels.LamportStateWords // the graph variant's epochs and clear counts, zero
	s, err := c.allocFilled(ctx, elems*size+state, true, func(p []byte) {
		for i := size - 1; i < elems*size; i += size {
			p[i] = 0x80 // -0.0: only the sign bit
		}
	})
	if err != nil {
		return nil, cl.wrap(err)
	}
	l := &lamportState{s: s, capacity: capacity}
	c.lamport[size] = l
	return l, nil
}

// ReduceScatter writes into every GPU r's dst the reduction by op over GPUs of part r of
// src (src holds NumGPUs parts of dst.Len() elements). With multicast (and a multimem form
// of op) it runs mm_reducescatter (ld_reduce of part r), else p2p_reducescatter (peer pushes
// into scratch, then a local reduction). dst and src are distinct buffers.
func (c *Comm) ReduceScatter(ctx context.Context, dst, src *Buffer, op Op) error {
	if err := errors.Join(c.begin(ctx, "ReduceScatter", dst, src), checkOp(op)); err != nil {
		return err
	}
	if dst == src || dst.dt != src.dt || src.n != dst.n*c.g {
		return fmt.Errorf("collectives: ReduceScatter: src must hold %d parts of dst's %d %s in another buffer (dst %d %s, src %d %s)", c.g, dst.n, dst.dt, dst.n, dst.dt, src.n, src.dt)
	}
	cl := &call{what: "ReduceScatter", dt: dst.dt, n: dst.n, op: op, reduces: true, root: -1}
	if p := c.reduceScatterPlanAcross(dst.dt, dst.n); p.alg != AlgFlat {
		if err := c.acrossCheck("ReduceScatter", dst.dt); err != nil {
			return err
		}
		c.logPlan(ctx, cl.what, p)
		if p.alg == AlgNVSHMEMRing {
			return c.ringReduceScatter(ctx, cl, dst, src, op)
		}
		return c.hierLaunch(ctx, cl, kernels.FamilyHierReduceScatter, op, src, dst, dst.n, src.n)
	}
	if err := c.flatCheck("ReduceScatter", flatAlgorithm); err != nil {
		return err
	}
	if isFP8(dst.dt) {
		if err := c.fp8Check("ReduceScatter", kernels.FamilyMMReduceScatter, dst.dt, op); err != nil {
			return err
		}
	}
	return c.reduceScatter(ctx, cl, dst, src, op)
}

// reduceScatterPlanAcross is the plan of a reduce-scatter into parts of m elements of dt
// across nodes (the cost model prices the input, NumGPUs parts).
func (c *Comm) reduceScatterPlanAcross(dt dsl.Type, m int) plan {
	return c.choose(ReduceScatterCollective, int64(c.g*m*dt.Bytes()), func() string { return c.ringFits(true) })
}

// ReduceScatterAlgorithm returns the kernel ReduceScatter would run for parts of m elements
// of dt ("" when none can): across nodes the cost model's choice of hier_reducescatter and
// nvshmem_reducescatter_ring (at most kernels.CollMaxGPUs ranks); on one node
// mm_reducescatter with multicast (and a multimem form of op), else p2p_reducescatter.
func (c *Comm) ReduceScatterAlgorithm(dt dsl.Type, op Op, m int) string {
	if c == nil || checkOp(op) != nil || !supported(dt) || !fits(dt, m) {
		return ""
	}
	if p := c.reduceScatterPlanAcross(dt, m); p.alg != AlgFlat {
		if c.acrossCheck("ReduceScatter", dt) != nil {
			return ""
		}
		return acrossName(ReduceScatterCollective, p, op, dt)
	} else if c.node.topo.Nodes > 1 {
		return "" // Options.Algorithm flat: refused across nodes
	}
	if isFP8(dt) && c.fp8Check("ReduceScatter", kernels.FamilyMMReduceScatter, dt, op) != nil {
		return ""
	}
	if c.mc && mmReduces(dt, op) {
		return name(reduction(kernels.FamilyMMReduceScatter, op, dt))
	}
	return name(reduction(c.p2pReduceScatterFamily(m*c.g*dt.Bytes()), op, dt))
}

// p2pReduceScatterFamily is the peer-to-peer reduce-scatter of an input of bytes:
// p2p_reducescatter_pull (peer loads) from thresholds.rsPull, else p2p_reducescatter (peer
// stores into scratch, then a local reduction).
func (c *Comm) p2pReduceScatterFamily(bytes int) kernels.Family {
	if c.thr.rsPull >= 0 && bytes >= c.thr.rsPull {
		return kernels.FamilyP2PReduceScatterPull
	}
	return kernels.FamilyP2PReduceScatter
}

func (c *Comm) reduceScatter(ctx context.Context, cl *call, dst, src *Buffer, op Op) error {
	dt, m := dst.dt, dst.n
	blocks := c.blocks((m + 16/dt.Bytes() - 1) / (16 / dt.Bytes()))
	rank, g := uint32(c.rank), uint32(c.g)
	if c.mc && mmReduces(dt, op) {
		return c.launch(ctx, cl, reduction(kernels.FamilyMMReduceScatter, op, dt), blocks, launch.MMReduceScatter{
			InMC: src.s.multicast(dt), Out: dst.s.at(dt), FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32),
			Rank: rank, NGPUs: g, N: uint32(m), Epoch: c.flagEpoch})
	}
	if c.p2pReduceScatterFamily(src.Bytes()) == kernels.FamilyP2PReduceScatterPull {
		return c.launch(ctx, cl, reduction(kernels.FamilyP2PReduceScatterPull, op, dt), blocks, launch.P2PReduceScatterPull{
			Ins: src.s.table(), Out: dst.s.at(dt), Pads: c.pads.table(), Rank: rank, NGPUs: g, N: uint32(m), Epoch: c.padEpoch})
	}
	if err := c.ensureScratch(ctx, cl, kernels.CollMaxGPUs*m*dt.Bytes()); err != nil {
		return err
	}
	return c.launch(ctx, cl, reduction(kernels.FamilyP2PReduceScatter, op, dt), blocks, launch.P2PReduceScatter{
		In: src.s.at(dt), Out: dst.s.at(dt), Scratch: c.scratch.table(), Pads: c.pads.table(),
		Rank: rank, NGPUs: g, N: uint32(m), Epoch: c.padEpoch})
}

// AllGather writes every GPU r's src into part r of every GPU's dst (dst holds NumGPUs parts
// of src.Len() elements). With multicast, and a part size that is a multiple of 4 bytes, it
// runs mm_allgather (multimem.st of 32-bit words), else p2p_allgather (peer stores).
func (c *Comm) AllGather(ctx context.Context, dst, src *Buffer) error {
	if err := c.begin(ctx, "AllGather", dst, src); err != nil {
		return err
	}
	if dst == src || dst.dt != src.dt || dst.n != src.n*c.g {
		return fmt.Errorf("collectives: AllGather: dst must hold %d parts of src's %d %s in another buffer (dst %d %s)", c.g, src.n, src.dt, dst.n, dst.dt)
	}
	cl := &call{what: "AllGather", dt: src.dt, n: src.n, root: -1}
	if p := c.allGatherPlanAcross(src.dt, src.n); p.alg != AlgFlat {
		if err := c.acrossCheck("AllGather", src.dt); err != nil {
			return err
		}
		c.logPlan(ctx, cl.what, p)
		if p.alg == AlgNVSHMEMRing {
			return c.ringAllGather(ctx, cl, dst, src)
		}
		return c.hierLaunch(ctx, cl, kernels.FamilyHierAllGather, 0, src, dst, src.n, dst.n)
	}
	if err := c.flatCheck("AllGather", flatAlgorithm); err != nil {
		return err
	}
	return c.allGather(ctx, cl, dst, src)
}

// allGatherPlanAcross is the plan of an all-gather of parts of n elements of dt across
// nodes (the cost model prices the output, NumGPUs parts).
func (c *Comm) allGatherPlanAcross(dt dsl.Type, n int) plan {
	return c.choose(AllGatherCollective, int64(c.g*n*dt.Bytes()), func() string { return c.ringFits(false) })
}

// AllGatherAlgorithm returns the kernel AllGather would run for parts of n elements of dt
// ("" when none can): across nodes the cost model's choice of hier_allgather and
// nvshmem_allgather_ring; on one node mm_allgather with multicast and parts of a multiple
// of 4 bytes, else p2p_allgather (fp8 only with the former).
func (c *Comm) AllGatherAlgorithm(dt dsl.Type, n int) string {
	if c == nil || !supported(dt) || !fits(dt, n) {
		return ""
	}
	if p := c.allGatherPlanAcross(dt, n); p.alg != AlgFlat {
		if c.acrossCheck("AllGather", dt) != nil {
			return ""
		}
		return acrossName(AllGatherCollective, p, 0, dt)
	} else if c.node.topo.Nodes > 1 {
		return "" // Options.Algorithm flat: refused across nodes
	}
	switch {
	case c.mc && n*dt.Bytes()%4 == 0:
		return name(kernels.ID{Family: kernels.FamilyMMAllGather, DType: dsl.F32})
	case isFP8(dt):
		return ""
	}
	return name(kernels.ID{Family: kernels.FamilyP2PAllGather, DType: dt})
}

func (c *Comm) allGather(ctx context.Context, cl *call, dst, src *Buffer) error {
	dt, n := src.dt, src.n
	bytes := n * dt.Bytes()
	rank, g := uint32(c.rank), uint32(c.g)
	if c.mc && bytes%4 == 0 {
		words := bytes / 4
		return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyMMAllGather, DType: dsl.F32}, c.blocks((words+3)/4), launch.MMAllGather{
			In: src.s.at(dsl.F32), OutMC: dst.s.multicast(dsl.F32), FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32),
			Rank: rank, NGPUs: g, N: uint32(words), Epoch: c.flagEpoch})
	}
	if isFP8(dt) {
		return fmt.Errorf("collectives: AllGather of %s needs multicast and parts of a multiple of 4 bytes (%d bytes, multicast %v); f32, f16, bf16 and s32 run everywhere", dt, bytes, c.mc)
	}
	if c.mc && c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: all-gather part is not a multiple of 4 bytes; using peer stores", "bytes", bytes)
	}
	vec := 16 / dt.Bytes()
	return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyP2PAllGather, DType: dt}, c.blocks((n+vec-1)/vec), launch.P2PAllGather{
		In: src.s.at(dt), Outs: dst.s.table(), Pads: c.pads.table(), Rank: rank, NGPUs: g, N: uint32(n), Epoch: c.padEpoch})
}

// Broadcast writes GPU root's src into every GPU's dst (dst may be src). With multicast it
// runs mm_broadcast (multimem.st of 32-bit words) when the size allows, else p2p_broadcast.
func (c *Comm) Broadcast(ctx context.Context, dst, src *Buffer, root int) error {
	if err := c.begin(ctx, "Broadcast", dst, src); err != nil {
		return err
	}
	if dst.dt != src.dt || dst.n != src.n {
		return fmt.Errorf("collectives: Broadcast: dst holds %d %s, src %d %s", dst.n, dst.dt, src.n, src.dt)
	}
	if root < 0 || root >= c.g {
		return fmt.Errorf("collectives: Broadcast: root %d out of range (%d GPUs)", root, c.g)
	}
	dt, n := src.dt, src.n
	bytes := n * dt.Bytes()
	cl := &call{what: "Broadcast", dt: dt, n: n, root: root}
	rank, g := uint32(c.rank), uint32(c.g)
	if c.mc && bytes%4 == 0 {
		words := bytes / 4
		return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyMMBroadcast, DType: dsl.F32}, c.blocks((words+3)/4), launch.MMBroadcast{
			In: src.s.at(dsl.F32), OutMC: dst.s.multicast(dsl.F32), FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32),
			Root: uint32(root), Rank: rank, NGPUs: g, N: uint32(words), Epoch: c.flagEpoch})
	}
	if isFP8(dt) {
		return fmt.Errorf("collectives: Broadcast of %s needs multicast and a multiple of 4 bytes (%d bytes, multicast %v); f32, f16, bf16 and s32 run everywhere", dt, bytes, c.mc)
	}
	vec := 16 / dt.Bytes()
	return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyP2PBroadcast, DType: dt}, c.blocks((n+vec-1)/vec), launch.P2PBroadcast{
		In: src.s.at(dt), Outs: dst.s.table(), Pads: c.pads.table(), Root: uint32(root), Rank: rank, NGPUs: g, N: uint32(n), Epoch: c.padEpoch})
}

// Barrier returns once every GPU of the group has reached it (mm_barrier with multicast,
// else p2p_barrier; across nodes hier_allgather of one word, see barrierAcross). Like every collective here it is a kernel: it orders the GPUs' work
// that precedes and follows it on their streams.
func (c *Comm) Barrier(ctx context.Context) error {
	if err := c.begin(ctx, "Barrier"); err != nil {
		return err
	}
	cl := &call{what: "Barrier", dt: dsl.U32, root: -1}
	if c.node.topo.Nodes > 1 {
		return c.barrierAcross(ctx, cl)
	}
	if c.mc {
		return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyMMBarrier, DType: dsl.U32}, 1, launch.MMBarrier{
			FlagsMC: c.flags.multicast(ptx.U32), FlagsUC: c.flags.at(ptx.U32), NGPUs: uint32(c.g), Epoch: c.flagEpoch})
	}
	return c.launch(ctx, cl, kernels.ID{Family: kernels.FamilyP2PBarrier, DType: dsl.U32}, 1, launch.P2PBarrier{
		Pads: c.pads.table(), Rank: uint32(c.rank), NGPUs: uint32(c.g), Epoch: c.padEpoch})
}
