package collectives

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// Collectives across nodes: the hierarchical kernels (kernels/coll_hier.go) and the NVSHMEM
// rings (kernels/coll_nvshmem.go), chosen by the cost model (Options.CostModel).

// across prepares a Comm for the kernels across nodes (its ranks span several nodes, or
// Options.Algorithm asks for them): the hierarchical kernels' rail signals and the ring
// kernels' signal word.
func (c *Comm) across(ctx context.Context) error {
	why := fmt.Sprintf("the ranks span %d nodes (topology %v)", c.node.topo.Nodes, c.node.topo)
	if c.node.topo.Nodes == 1 {
		why = fmt.Sprintf("Options.Algorithm is %s", c.o.Algorithm)
	}
	if c.o.CaptureSafe {
		return fmt.Errorf("collectives: Options.CaptureSafe: %s, and the kernels across nodes have no graph variants", why)
	}
	if c.r.Backend == jit.GPU && c.o.DevLib == nil {
		return fmt.Errorf("collectives: %s: the kernels across nodes call NVSHMEM; set Options.DevLib (package nvshmem/devlib builds it)", why)
	}
	var err error
	if c.hierSig, err = c.alloc(ctx, 8*kernels.HierSigWords, false); err != nil {
		return err
	}
	c.ringSig, err = c.alloc(ctx, 8, false)
	return err
}

// plan is how a collective runs: flat (the single-node kernels), hierarchical or NVSHMEM
// ring, as the cost model chose, and the algorithm the model chose when it cannot run.
type plan struct {
	alg   Algorithm
	chose Algorithm // the cost model's choice (== alg unless it could not run)
	why   string    // why chose did not run
}

// choose returns how collective coll of bytes (the cost model's size: the per-GPU buffer)
// runs: Options.Algorithm when set, else on one node always flat (the cost model's
// contract: Choose returns AlgFlat there; not calling it keeps the single-node path free of
// its cost), else the model's choice. An NVSHMEM ring that cannot run this call (ringOK
// says why) runs hierarchical instead. A flat plan across nodes (Options.Algorithm) is
// refused when it launches, naming the ranks out of reach.
func (c *Comm) choose(coll Collective, bytes int64, ringOK func() string) plan {
	a := c.o.Algorithm
	if a == "" {
		if c.node.topo.Nodes == 1 {
			return plan{alg: AlgFlat, chose: AlgFlat}
		}
		a, _ = c.cost.Choose(coll, c.node.topo, max(bytes, 1))
	}
	p := plan{alg: a, chose: a}
	switch {
	case a == AlgHierarchical, a == AlgFlat && c.o.Algorithm == AlgFlat:
	case a == AlgNVSHMEMRing:
		if why := ringOK(); why != "" {
			p.alg, p.why = AlgHierarchical, why
		}
	default: // the model chose flat across nodes, or "" (an invalid model)
		p.alg, p.why = AlgHierarchical, fmt.Sprintf("the cost model chose %q, which cannot run on %v", a, c.node.topo)
	}
	return p
}

// ringFits says why the NVSHMEM ring cannot run parts of n elements ("" when it can): the
// ring reduce-scatter keeps a slot per hop for up to CollMaxGPUs ranks.
func (c *Comm) ringFits(reduces bool) string {
	if reduces && c.g > kernels.CollMaxGPUs {
		return fmt.Sprintf("the ring reduce-scatter handles at most %d ranks, not %d", kernels.CollMaxGPUs, c.g)
	}
	return ""
}

// logPlan logs a plan across nodes at debug level.
func (c *Comm) logPlan(ctx context.Context, what string, p plan) {
	if p.why != "" && c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: "+what+": the cost model's choice cannot run this call; running hierarchical", "chose", string(p.chose), "reason", p.why)
	}
}

// hierLaunch runs the hierarchical kernel fam (op for the reducing ones) over in and out:
// shards of shard elements, total elements in all.
func (c *Comm) hierLaunch(ctx context.Context, cl *call, fam kernels.Family, op Op, in, out *Buffer, shard, total int) error {
	dt := in.dt
	if bytes := 4 * kernels.HierScratchWords(c.node.topo.Nodes, shard); c.hierScratch == nil || c.hierScratch.bytes() < bytes {
		s, err := c.alloc(ctx, max(bytes, 64<<10), false)
		if err != nil {
			return cl.wrap(err)
		}
		c.hierScratch = s
	}
	id := kernels.ID{Family: fam, DType: dt}
	if fam != kernels.FamilyHierAllGather {
		id.Op = op
	}
	vec := 16 / dt.Bytes()
	n := c.node
	err := c.launch(ctx, cl, id, c.blocks((shard+vec-1)/vec), launch.Hier{
		In: in.s.at(dt), Out: out.s.at(dt), Ins: in.s.table(), Outs: out.s.table(),
		Scratch: c.hierScratch.at(ptx.B32), Sig: c.hierSig.at(dsl.U64), Pads: c.pads.table(),
		Rank: uint32(n.local), NGPUs: uint32(n.topo.GPUsPerNode), Node: uint32(n.index), Nodes: uint32(n.topo.Nodes),
		Shard: uint32(shard), Total: uint32(total), Epoch: c.padEpoch, SigEpoch: c.hierEpoch})
	if err != nil {
		return err
	}
	c.hierEpoch++
	return nil
}

// ringLaunch runs an NVSHMEM ring kernel (one block of NVSHMEMThreads per GPU).
func (c *Comm) ringLaunch(ctx context.Context, cl *call, id kernels.ID, args any) error {
	f, err := c.function(id)
	if err != nil {
		return err
	}
	c.last = c.names[id]
	if c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: "+cl.what, append([]any{"algorithm", c.last, "dtype", id.DType.String(), "gpus", c.g, "topology", c.node.topo.String()}, cl.attrs()...)...)
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(kernels.NVSHMEMThreads), Stream: c.o.Stream,
		Collective: jit.CollectiveOn, Context: ctx, CoResident: true}
	if c.emu {
		cfg.Call = cl.String()
	}
	if err := c.launchFn(f, cfg, args); err != nil {
		return fmt.Errorf("collectives: %s (%s): %w", cl.what, f.Name(), err)
	}
	c.ringEpoch++
	return nil
}

// ringReduceScatter runs nvshmem_reducescatter_ring: dst (m elements) = op over every GPU
// of part rank of src.
func (c *Comm) ringReduceScatter(ctx context.Context, cl *call, dst, src *Buffer, op Op) error {
	dt, m := dst.dt, dst.n
	if err := c.ensureScratch(ctx, cl, 4*2*(kernels.CollMaxGPUs-1)*m); err != nil {
		return err
	}
	return c.ringLaunch(ctx, cl, kernels.ID{Family: kernels.FamilyNVSHMEMReduceScatterRing, Op: op, DType: dt}, launch.NVSHMEMReduceScatterRing{
		Out: dst.s.at(dt), In: src.s.at(dt), Scratch: c.scratch.at(ptx.B32), Sig: c.ringSig.at(dsl.U64), M: uint32(m), Epoch: c.ringEpoch})
}

// ringAllGather runs nvshmem_allgather_ring: part rank of every GPU's dst = src.
func (c *Comm) ringAllGather(ctx context.Context, cl *call, dst, src *Buffer) error {
	dt := src.dt
	return c.ringLaunch(ctx, cl, kernels.ID{Family: kernels.FamilyNVSHMEMAllGatherRing, DType: dt}, launch.NVSHMEMAllGatherRing{
		Dst: dst.s.at(dt), Src: src.s.at(dt), Sig: c.ringSig.at(dsl.U64), N: uint32(src.n), Epoch: c.ringEpoch})
}

// allReduceAcross runs an all-reduce across nodes by plan p: the hierarchical kernel, or
// the ring reduce-scatter into a part buffer and the ring all-gather of the parts.
func (c *Comm) allReduceAcross(ctx context.Context, cl *call, p plan, dst, src *Buffer, op Op) error {
	c.logPlan(ctx, cl.what, p)
	if p.alg == AlgNVSHMEMRing {
		part, err := c.partBuffer(ctx, cl, src.dt, src.n/c.g)
		if err != nil {
			return err
		}
		if err := c.ringReduceScatter(ctx, cl, part, src, op); err != nil {
			return err
		}
		if err := c.ringAllGather(ctx, cl, dst, part); err != nil {
			return err
		}
		c.last = ringAllReduceName(op, src.dt)
		return nil
	}
	return c.hierLaunch(ctx, cl, kernels.FamilyHierAllReduce, op, src, dst, kernels.HierShard(src.dt, src.n, c.g), src.n)
}

// allReducePlanAcross is the plan of an all-reduce of n elements of dt across nodes: the
// ring needs n to split into whole parts.
func (c *Comm) allReducePlanAcross(dt dsl.Type, n int) plan {
	return c.choose(AllReduceCollective, int64(n*dt.Bytes()), func() string {
		if why := c.ringFits(true); why != "" {
			return why
		}
		if n%c.g != 0 {
			return fmt.Sprintf("the ring all-reduce needs whole parts: %d elements over %d ranks", n, c.g)
		}
		return ""
	})
}

// ringAllReduceName names the ring all-reduce's two kernels.
func ringAllReduceName(op Op, dt dsl.Type) string {
	return name(kernels.ID{Family: kernels.FamilyNVSHMEMReduceScatterRing, Op: op, DType: dt}) + "+" +
		name(kernels.ID{Family: kernels.FamilyNVSHMEMAllGatherRing, DType: dt})
}

// acrossName names what plan p runs for collective coll of dt by op.
func acrossName(coll Collective, p plan, op Op, dt dsl.Type) string {
	switch {
	case p.alg == AlgNVSHMEMRing && coll == AllReduceCollective:
		return ringAllReduceName(op, dt)
	case p.alg == AlgNVSHMEMRing && coll == ReduceScatterCollective:
		return name(kernels.ID{Family: kernels.FamilyNVSHMEMReduceScatterRing, Op: op, DType: dt})
	case p.alg == AlgNVSHMEMRing:
		return name(kernels.ID{Family: kernels.FamilyNVSHMEMAllGatherRing, DType: dt})
	case coll == AllReduceCollective:
		return name(kernels.ID{Family: kernels.FamilyHierAllReduce, Op: op, DType: dt})
	case coll == ReduceScatterCollective:
		return name(kernels.ID{Family: kernels.FamilyHierReduceScatter, Op: op, DType: dt})
	}
	return name(kernels.ID{Family: kernels.FamilyHierAllGather, DType: dt})
}

// acrossCheck says why a collective of dt cannot run across nodes (nil when it can): the
// kernels there are built for f32, f16, bf16 and s32.
func (c *Comm) acrossCheck(what string, dt dsl.Type) error {
	if isFP8(dt) {
		return fmt.Errorf("collectives: %s of %s on topology %v: the kernels across nodes (hierarchical, NVSHMEM ring) take f32, f16, bf16 and s32; fp8 needs multicast, which reaches one node", what, dt, c.node.topo)
	}
	return nil
}

// hierFamily reports whether f is a hierarchical kernel's family (the only ones c.launch
// runs across nodes).
func hierFamily(f kernels.Family) bool {
	return f == kernels.FamilyHierAllReduce || f == kernels.FamilyHierReduceScatter || f == kernels.FamilyHierAllGather
}

// barrierAcross is Barrier across nodes: hier_allgather of one s32 word per rank. A GPU
// leaves it only after its node's GPUs have passed the second in-node barrier, each of which
// waited for the signal of its rail peer on every other node, sent when that peer started:
// so every rank has arrived.
func (c *Comm) barrierAcross(ctx context.Context, cl *call) error {
	if c.barrierBufs[0] == nil {
		for i, n := range []int{1, c.g} {
			s, err := c.alloc(ctx, 4*n, true)
			if err != nil {
				return cl.wrap(err)
			}
			c.barrierBufs[i] = &Buffer{c: c, s: s, dt: dsl.I32, n: n}
		}
	}
	in, out := c.barrierBufs[0], c.barrierBufs[1]
	return c.hierLaunch(ctx, cl, kernels.FamilyHierAllGather, 0, in, out, 1, c.g)
}
