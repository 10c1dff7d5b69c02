package ref

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// Harnesses of the hierarchical collectives (kernels/coll_hier.go) on an emulated machine of
// Problem.Nodes nodes of consecutive ranks (emu.System.SetNodes: an access of another node's
// memory is a fault, NVSHMEM operations between nodes arrive late): node-local peer tables,
// NVSHMEM between the nodes. collLaunches launches in a row, no resets.

func init() {
	for _, op := range []string{"sum", "min", "max"} {
		register("hier_allreduce_"+op, hierAllReduce)
		register("hier_reducescatter_"+op, hierReduceScatter)
	}
	register("hier_allgather", hierAllGather)
}

// hierEnv is the state shared by a hierarchical harness's launches.
type hierEnv struct {
	c            *coll
	nodes, local int
	pads, sig    *emu.Symmetric
	scratch      *emu.Symmetric
	padTabs      []*emu.Symmetric // per node: the node's pads
	sigEpoch     uint64
}

func newHier(r *run, shard int) (*hierEnv, error) {
	if _, err := newNVSHMEM(r); err != nil {
		return nil, err
	}
	c := newColl(r)
	nodes := max(r.p.Nodes, 1)
	h := &hierEnv{c: c, nodes: nodes, local: c.g / nodes}
	var err error
	if h.pads, err = c.sym(dsl.U32, kernels.PadWords); err != nil {
		return nil, err
	}
	if err := c.fill(h.pads, kernels.PadWords, c.epoch); err != nil {
		return nil, err
	}
	if h.padTabs, err = h.tables(h.pads); err != nil {
		return nil, err
	}
	if h.sig, err = r.sys.MallocSymmetric(8 * kernels.HierSigWords); err != nil {
		return nil, err
	}
	h.scratch, err = r.sys.MallocSymmetric(4 * kernels.HierScratchWords(nodes, shard))
	return h, err
}

// tables makes, per node, a symmetric table of CollMaxGPUs addresses whose entry l is GPU l
// of the node's copy of m (a GPU uses its node's table).
func (h *hierEnv) tables(m *emu.Symmetric) ([]*emu.Symmetric, error) {
	out := make([]*emu.Symmetric, h.nodes)
	for x := range out {
		t, err := h.c.r.sys.MallocSymmetric(8 * kernels.CollMaxGPUs)
		if err != nil {
			return nil, err
		}
		addrs := make([]uint64, kernels.CollMaxGPUs)
		for l := 0; l < h.local; l++ {
			addrs[l] = m.On(x*h.local + l)
		}
		for l := 0; l < h.local; l++ {
			if err := emu.WriteSlice(h.c.r.sys, t.On(x*h.local+l), addrs); err != nil {
				return nil, err
			}
		}
		out[x] = t
	}
	return out, nil
}

// symTables allocates a symmetric buffer of n elements and its node-local peer tables.
func (h *hierEnv) symTables(n int) (*emu.Symmetric, []*emu.Symmetric, error) {
	m, err := h.c.sym(h.c.dt, n)
	if err != nil {
		return nil, nil, err
	}
	tabs, err := h.tables(m)
	return m, tabs, err
}

// launch runs the kernel once on every GPU with in, out (and their node tables), shard and
// total elements.
func (h *hierEnv) launch(in, out *emu.Symmetric, inTabs, outTabs []*emu.Symmetric, shard, total int) error {
	return h.launchMod(h.c.r.mod, h.c.r.spec.VariantName(h.c.dt), in, out, inTabs, outTabs, shard, total)
}

// launchMod is launch of entry of m (the run's kernel or a deliberately broken variant).
func (h *hierEnv) launchMod(m *ptx.Module, entry string, in, out *emu.Symmetric, inTabs, outTabs []*emu.Symmetric, shard, total int) error {
	c := h.c
	err := c.launchMod(m, entry, c.blocks(shard), func(g int) any {
		x := g / h.local
		return launch.Hier{In: on(in, g, c.dt), Out: on(out, g, c.dt), Ins: table(inTabs[x], g), Outs: table(outTabs[x], g),
			Scratch: on(h.scratch, g, ptx.B32), Sig: on(h.sig, g, dsl.U64), Pads: table(h.padTabs[x], g),
			Rank: uint32(g % h.local), NGPUs: uint32(h.local), Node: uint32(x), Nodes: uint32(h.nodes),
			Shard: uint32(shard), Total: uint32(total), Epoch: c.epoch, SigEpoch: h.sigEpoch}
	})
	if err != nil {
		return fmt.Errorf("launch %d: %w", h.sigEpoch, err)
	}
	n, _, _ := kernels.CollBarriers(kernels.FamilyHierAllGather) // every hier kernel's
	c.epoch += uint32(n)
	h.sigEpoch++
	return nil
}

func (h *hierEnv) shape(what string, n int) string {
	return fmt.Sprintf("%s=%d nodes=%d gpus=%d", what, n, h.nodes, h.c.g)
}

func hierAllReduce(r *run) error {
	n := r.size(1000)
	g := r.sys.NumGPUs()
	shard := kernels.HierShard(r.p.DType, n, g)
	h, err := newHier(r, shard)
	if err != nil {
		return err
	}
	c := h.c
	r.res.Shape = h.shape("n", n)
	// The first launch runs out of place, the others in place.
	in, inTabs, err := h.symTables(n)
	if err != nil {
		return err
	}
	out, outTabs, err := h.symTables(n)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		dst, dstTabs := out, outTabs
		if l > 0 {
			dst, dstTabs = in, inTabs
		}
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		if err := h.launch(in, dst, inTabs, dstTabs, shard, n); err != nil {
			return err
		}
		want := make([]float64, n)
		for i := range want {
			want[i] = c.reduce(r.spec.Op, vals, i)
		}
		for gi := 0; gi < g; gi++ {
			if err := c.expect("out", gi, dst.On(gi), want); err != nil {
				return err
			}
		}
	}
	return nil
}

func hierReduceScatter(r *run) error {
	m := r.size(1000)
	h, err := newHier(r, m)
	if err != nil {
		return err
	}
	c := h.c
	r.res.Shape = h.shape("m", m)
	in, inTabs, err := h.symTables(m * c.g)
	if err != nil {
		return err
	}
	out, outTabs, err := h.symTables(m)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(m * c.g)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		if err := h.launch(in, out, inTabs, outTabs, m, m*c.g); err != nil {
			return err
		}
		for g := 0; g < c.g; g++ {
			want := make([]float64, m)
			for i := range want {
				want[i] = c.reduce(r.spec.Op, vals, g*m+i)
			}
			if err := c.expect("out", g, out.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

func hierAllGather(r *run) error {
	return hierAllGatherMod(r, r.mod, r.spec.VariantName(r.p.DType))
}

// hierAllGatherMod runs an all-gather module (the library's or a deliberately broken one).
func hierAllGatherMod(r *run, mod *ptx.Module, entry string) error {
	n := r.size(1000)
	h, err := newHier(r, n)
	if err != nil {
		return err
	}
	c := h.c
	r.res.Shape = h.shape("n", n)
	in, inTabs, err := h.symTables(n)
	if err != nil {
		return err
	}
	out, outTabs, err := h.symTables(n * c.g)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		if err := h.launchMod(mod, entry, in, out, inTabs, outTabs, n, n*c.g); err != nil {
			return err
		}
		var want []float64
		for g := 0; g < c.g; g++ {
			want = append(want, vals[g]...)
		}
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, out.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}
