package ref

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// Harnesses of the peer-to-peer collectives: every harness launches its kernel
// collLaunches times in a row on all of the problem's GPUs (Problem.Ranks) with fresh inputs,
// never resetting pads or slots, and checks every GPU's output exactly.

func init() {
	for _, op := range []string{"sum", "min", "max"} {
		register("p2p_allreduce_1shot_"+op, p2pOneShot)
		register("p2p_allreduce_2shot_"+op, p2pTwoShot)
		register("p2p_allreduce_lamport_"+op, p2pLamport)
		register("p2p_allreduce_push_"+op, p2pPush)
		register("p2p_allreduce_push_graph_"+op, p2pPush)
		register("p2p_allreduce_push4_"+op, p2pPush)
		register("p2p_allreduce_push4_graph_"+op, p2pPush)
	}
	for _, op := range []string{"sum", "min", "max"} {
		rs := func(r *run) error {
			c := newColl(r)
			m := r.size(1000)
			r.res.Shape = fmt.Sprintf("m=%d gpus=%d", m, c.g)
			return c.reduceScatter(m, r.spec.Op, r.mod, r.spec.VariantName(c.dt))
		}
		register("p2p_reducescatter_"+op, rs)
		pull := func(r *run) error {
			c := newColl(r)
			m := r.size(1000)
			r.res.Shape = fmt.Sprintf("m=%d gpus=%d", m, c.g)
			return c.reduceScatterPull(m, r.spec.Op)
		}
		register("p2p_reducescatter_pull_"+op, pull)
		register("p2p_reducescatter_pull_graph_"+op, pull)
		// The graph variants (epoch on the device) run the same harnesses.
		register("p2p_allreduce_1shot_graph_"+op, p2pOneShot)
		register("p2p_allreduce_2shot_graph_"+op, p2pTwoShot)
		register("p2p_reducescatter_graph_"+op, rs)
		register("p2p_allreduce_lamport_graph_"+op, p2pLamport)
	}
	register("p2p_allgather", p2pAllGather)
	register("p2p_allgather_graph", p2pAllGather)
	register("p2p_broadcast", p2pBroadcast)
	register("p2p_barrier", p2pBarrier)
}

// p2pSetup allocates the inputs (and their table) and the signal pads (and their table).
func (c *coll) p2pSetup(n int) (in, inTab, pads, padTab *emu.Symmetric, err error) {
	if in, err = c.sym(c.dt, n); err != nil {
		return
	}
	if inTab, err = c.table(in); err != nil {
		return
	}
	if c.graph() {
		pads, err = c.graphSet(kernels.GraphPadWords, kernels.EpochWordP2P, c.epoch)
	} else if pads, err = c.sym(dsl.U32, kernels.PadWords); err == nil {
		// Every slot holds the target of the barrier before the first launch: the epoch.
		err = c.fill(pads, kernels.PadWords, c.epoch)
	}
	if err != nil {
		return
	}
	padTab, err = c.table(pads)
	return
}

func (c *coll) writeInputs(in *emu.Symmetric, vals [][]float64) error {
	for g, v := range vals {
		if err := c.write(in.On(g), v); err != nil {
			return err
		}
	}
	return nil
}

func p2pOneShot(r *run) error {
	c := newColl(r)
	n := r.size(1000)
	op := r.spec.Op
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	in, inTab, _, padTab, err := c.p2pSetup(n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launch(c.blocks(n), func(g int) any {
			return launch.P2POneShot{Ins: table(inTab, g), Out: on(out, g, c.dt), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.advance()
		want := make([]float64, n)
		for i := range want {
			want[i] = c.reduce(op, vals, i)
		}
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, out.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

// p2pTwoShot alternates out-of-place and in-place launches.
func p2pTwoShot(r *run) error {
	return p2pAllReduceInOut(r, func(c *coll, n int) (func(g int, in, inTab, dstTab, padTab *emu.Symmetric) any, error) {
		return func(g int, in, inTab, dstTab, padTab *emu.Symmetric) any {
			return launch.P2PTwoShot{Ins: table(inTab, g), Outs: table(dstTab, g), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		}, nil
	})
}

// p2pPush alternates out-of-place and in-place launches of the push all-reduce, its
// scratch (ngpus regions of a slice) never cleared between them.
func p2pPush(r *run) error {
	return p2pAllReduceInOut(r, func(c *coll, n int) (func(g int, in, inTab, dstTab, padTab *emu.Symmetric) any, error) {
		vec := 16 / c.dt.Bytes()
		slice := ((n+c.g-1)/c.g + vec - 1) / vec * vec
		scratch, err := c.sym(c.dt, c.g*slice)
		if err != nil {
			return nil, err
		}
		scratchTab, err := c.table(scratch)
		if err != nil {
			return nil, err
		}
		return func(g int, in, inTab, dstTab, padTab *emu.Symmetric) any {
			return launch.P2PPush{In: on(in, g, c.dt), Outs: table(dstTab, g), Scratch: table(scratchTab, g), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		}, nil
	})
}

// p2pAllReduceInOut runs an all-reduce harness: collLaunches launches with fresh inputs,
// out of place then in place in turn, every GPU's output checked. setup allocates what
// the kernel needs beside the inputs, outputs and pads and returns GPU g's arguments.
func p2pAllReduceInOut(r *run, setup func(c *coll, n int) (func(g int, in, inTab, dstTab, padTab *emu.Symmetric) any, error)) error {
	c := newColl(r)
	n := r.size(1000)
	op := r.spec.Op
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	in, inTab, _, padTab, err := c.p2pSetup(n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	outTab, err := c.table(out)
	if err != nil {
		return err
	}
	args, err := setup(c, n)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		dst, dstTab := out, outTab
		if l%2 == 1 {
			dst, dstTab = in, inTab
		}
		if err := c.launch(c.blocks(n), func(g int) any { return args(g, in, inTab, dstTab, padTab) }); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.advance()
		want := make([]float64, n)
		for i := range want {
			want[i] = c.reduce(op, vals, i)
		}
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, dst.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

// lamportFill sets n elements of dt at addr to -0.0 (the empty-slot sentinel).
func lamportFill(s *emu.System, addr uint64, dt dsl.Type, n int) error {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Copysign(0, -1)
	}
	return write(s, addr, dt, v)
}

// p2pLamport launches with changing sizes (n, n/2+1, n/3+1, n, ...) so that a slot comes
// back into use after a smaller launch, which checks the reset of the previous slot. The
// graph variant gets its epoch (the problem's, near the wrap in the wrap test) and clear
// count from the state words after the slots, the same grid every launch, and arguments
// that would fault if it used them.
func p2pLamport(r *run) error {
	c := newColl(r)
	n := r.size(1000)
	op := r.spec.Op
	vec := 16 / c.dt.Bytes()
	capacity := (n + vec - 1) / vec * vec
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	words := kernels.LamportSlots * kernels.CollMaxGPUs * capacity
	state := 0
	if c.graph() {
		state = kernels.LamportStateWords * 4 / c.dt.Bytes()
	}
	lbuf, err := c.sym(c.dt, words+state)
	if err != nil {
		return err
	}
	for g := 0; g < c.g; g++ {
		if err := lamportFill(r.sys, lbuf.On(g), c.dt, words); err != nil {
			return err
		}
		if state > 0 {
			st := make([]uint32, kernels.LamportStateWords)
			for b := 0; b < len(st); b += 2 {
				st[b] = c.epoch
			}
			if err := emu.WriteSlice(r.sys, lbuf.On(g)+uint64(words*c.dt.Bytes()), st); err != nil {
				return err
			}
		}
	}
	lTab, err := c.table(lbuf)
	if err != nil {
		return err
	}
	in, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	prev := 0
	for l := 0; l < collLaunches+1; l++ {
		m := []int{n, n/2 + 1, n/3 + 1}[l%3]
		vals := c.inputs(m)
		if l == 0 && m > 0 {
			vals[0][0] = math.Copysign(0, -1) // data -0.0 must not read as "empty"
		}
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		blocks, nclear := c.blocks(m), uint32(prev)
		if c.graph() {
			blocks, nclear = c.blocks(n), uint32(capacity+1<<20) // out of bounds if used
		}
		err := c.launch(blocks, func(g int) any {
			return launch.P2PLamport{In: on(in, g, c.dt), Out: on(out, g, c.dt), Lbufs: table(lTab, g), Cap: uint32(capacity), Nclear: nclear, Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(m), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch = kernels.NextLamportEpoch(c.epoch)
		prev = m
		want := make([]float64, m)
		for i := range want {
			want[i] = c.reduce(op, vals, i)
		}
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, out.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

func p2pAllGather(r *run) error {
	c := newColl(r)
	n := r.size(1000)
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	return c.allGather(n, r.mod, r.spec.VariantName(c.dt))
}

// allGather runs a p2p all-gather module (the library's or a deliberately broken one).
func (c *coll) allGather(n int, mod *ptx.Module, entry string) error {
	in, _, _, padTab, err := c.p2pSetup(n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n*c.g)
	if err != nil {
		return err
	}
	outTab, err := c.table(out)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launchMod(mod, entry, c.blocks(n), func(g int) any {
			return launch.P2PAllGather{In: on(in, g, c.dt), Outs: table(outTab, g), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
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

// reduceScatter runs a p2p reduce-scatter module (the library's or a deliberately broken
// one) over m elements per GPU.
func (c *coll) reduceScatter(m int, op dsl.ReduceOp, mod *ptx.Module, entry string) error {
	in, _, _, padTab, err := c.p2pSetup(m * c.g)
	if err != nil {
		return err
	}
	scratch, err := c.sym(c.dt, m*kernels.CollMaxGPUs)
	if err != nil {
		return err
	}
	scrTab, err := c.table(scratch)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, m)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(m * c.g)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launchMod(mod, entry, c.blocks(m), func(g int) any {
			return launch.P2PReduceScatter{In: on(in, g, c.dt), Out: on(out, g, c.dt), Scratch: table(scrTab, g), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(m), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
		for g := 0; g < c.g; g++ {
			want := make([]float64, m)
			for i := range want {
				want[i] = c.reduce(op, vals, g*m+i)
			}
			if err := c.expect("out", g, out.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceScatterPull runs p2p_reducescatter_pull (or its graph variant) collLaunches times
// on fresh inputs of ngpus parts of m elements, checking every GPU's part.
func (c *coll) reduceScatterPull(m int, op dsl.ReduceOp) error {
	in, inTab, _, padTab, err := c.p2pSetup(m * c.g)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, m)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(m * c.g)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launch(c.blocks(m), func(g int) any {
			return launch.P2PReduceScatterPull{Ins: table(inTab, g), Out: on(out, g, c.dt), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(m), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
		for g := 0; g < c.g; g++ {
			want := make([]float64, m)
			for i := range want {
				want[i] = c.reduce(op, vals, g*m+i)
			}
			if err := c.expect("out", g, out.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

// p2pBroadcast moves the root around and alternates in place (out = in) and out of place.
func p2pBroadcast(r *run) error {
	c := newColl(r)
	n := r.size(1000)
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	in, inTab, _, padTab, err := c.p2pSetup(n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	outTab, err := c.table(out)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		root := (l + 1) % c.g
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		dst, dstTab := out, outTab
		if l%2 == 1 {
			dst, dstTab = in, inTab
		}
		err := c.launch(c.blocks(n), func(g int) any {
			return launch.P2PBroadcast{In: on(in, g, c.dt), Outs: table(dstTab, g), Pads: table(padTab, g), Root: uint32(root), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, dst.On(g), vals[root]); err != nil {
				return err
			}
		}
	}
	return nil
}

func p2pBarrier(r *run) error {
	c := newColl(r)
	blocks := 3
	r.res.Shape = fmt.Sprintf("blocks=%d gpus=%d", blocks, c.g)
	pads, err := c.sym(dsl.U32, kernels.PadWords)
	if err != nil {
		return err
	}
	if err := c.fill(pads, kernels.PadWords, c.epoch); err != nil {
		return err
	}
	padTab, err := c.table(pads)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		err := c.launch(blocks, func(g int) any {
			return launch.P2PBarrier{Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch++
	}
	// Every pad slot of a block that ran holds the last epoch: one signal per launch.
	for g := 0; g < c.g; g++ {
		got, err := emu.ReadSlice[uint32](r.sys, pads.On(g), kernels.PadWords)
		if err != nil {
			return err
		}
		var gotF, want []float64
		for b := 0; b < blocks; b++ {
			for src := 0; src < c.g; src++ {
				gotF = append(gotF, float64(got[b*kernels.CollMaxGPUs+src]))
				want = append(want, float64(c.epoch))
			}
		}
		if err := r.check(fmt.Sprintf("GPU %d pads", g), gotF, want, 0, 0); err != nil {
			return err
		}
	}
	return nil
}
