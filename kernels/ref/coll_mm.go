package ref

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// Harnesses of the multimem collectives: the emulator's multicast addresses stand for
// NVLink SHARP. Like the p2p harnesses, each launches collLaunches times in a row without
// resetting the barrier flags.

func init() {
	for _, op := range []string{"sum", "min", "max"} {
		register("mm_allreduce_1shot_"+op, mmOneShot)
		register("mm_allreduce_2shot_"+op, mmTwoShot)
		register("mm_reducescatter_"+op, mmReduceScatter)
		register("mm_allreduce_1shot_fp8_"+op, mmOneShot)
		register("mm_allreduce_2shot_fp8_"+op, mmTwoShot)
		register("mm_reducescatter_fp8_"+op, mmReduceScatter)
		push := func(r *run) error {
			c := newColl(r)
			n := r.size(1000)
			r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
			return c.mmPush(n, r.spec.Op, r.mod, r.spec.VariantName(c.dt))
		}
		register("mm_allreduce_push_"+op, push)
		// The graph variants (epoch on the device) run the same harnesses.
		register("mm_allreduce_1shot_graph_"+op, mmOneShot)
		register("mm_allreduce_2shot_graph_"+op, mmTwoShot)
		register("mm_reducescatter_graph_"+op, mmReduceScatter)
		register("mm_allreduce_push_graph_"+op, push)
	}
	register("mm_allgather", mmAllGather)
	register("mm_allgather_graph", mmAllGather)
	register("mm_broadcast", mmBroadcast)
	register("mm_barrier", mmBarrier)
}

// flagSet allocates a zeroed set of barrier flags.
func (c *coll) flagSet() (*emu.Symmetric, error) {
	if c.graph() {
		return c.graphSet(kernels.GraphFlagWords, kernels.EpochWordMM, c.epoch*uint32(c.g))
	}
	f, err := c.sym(dsl.U32, kernels.FlagWords)
	if err != nil {
		return nil, err
	}
	// Every flag counts ngpus per barrier: after the barrier of the epoch, epoch*ngpus (mod 2^32).
	return f, c.fill(f, kernels.FlagWords, c.epoch*uint32(c.g))
}

// allReduceWant returns the reference of one all-reduce.
func (c *coll) allReduceWant(op dsl.ReduceOp, vals [][]float64, n int) []float64 {
	want := make([]float64, n)
	for i := range want {
		want[i] = c.reduce(op, vals, i)
	}
	return want
}

// mmAllReduce runs a one-shot (inPlaceOK false) or two-shot all-reduce; the two-shot kernel
// alternates out-of-place and in-place launches.
func (c *coll) mmAllReduce(n int, twoShot bool) error {
	op := c.r.spec.Op
	c.r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	in, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	flags, err := c.flagSet()
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		dst := out
		if twoShot && l%2 == 1 {
			dst = in
		}
		err := c.launch(c.blocks(n), func(g int) any {
			if twoShot {
				return launch.MMTwoShot{InMC: mc(in, c.dt), OutMC: mc(dst, c.dt), FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32),
					Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
			}
			return launch.MMOneShot{InMC: mc(in, c.dt), Out: on(dst, g, c.dt), FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32),
				Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
		want := c.allReduceWant(op, vals, n)
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, dst.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

func mmOneShot(r *run) error { return newColl(r).mmAllReduce(r.size(1000), false) }
func mmTwoShot(r *run) error { return newColl(r).mmAllReduce(r.size(1000), true) }

// mmPush runs a push all-reduce module (the library's or a deliberately broken one),
// alternating out-of-place and in-place launches.
func (c *coll) mmPush(n int, op dsl.ReduceOp, mod *ptx.Module, entry string) error {
	vec := 16 / c.dt.Bytes()
	ld := (n + vec - 1) / vec * vec
	in, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	scratch, err := c.sym(c.dt, kernels.CollMaxGPUs*ld)
	if err != nil {
		return err
	}
	flags, err := c.flagSet()
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		dst := out
		if l%2 == 1 {
			dst = in
		}
		err := c.launchMod(mod, entry, c.blocks(n), func(g int) any {
			return launch.MMPush{In: on(in, g, c.dt), Out: on(dst, g, c.dt), ScratchMC: mc(scratch, c.dt), ScratchUC: on(scratch, g, c.dt),
				FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
		want := c.allReduceWant(op, vals, n)
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, dst.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

func mmReduceScatter(r *run) error {
	c := newColl(r)
	m := r.size(1000)
	op := r.spec.Op
	r.res.Shape = fmt.Sprintf("m=%d gpus=%d", m, c.g)
	in, err := c.sym(c.dt, m*c.g)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, m)
	if err != nil {
		return err
	}
	flags, err := c.flagSet()
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(m * c.g)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launch(c.blocks(m), func(g int) any {
			return launch.MMReduceScatter{InMC: mc(in, c.dt), Out: on(out, g, c.dt), FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32),
				Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(m), Epoch: c.arg()}
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

func mmAllGather(r *run) error {
	c := newColl(r)
	m := r.size(1000)
	r.res.Shape = fmt.Sprintf("m=%d gpus=%d", m, c.g)
	in, err := c.sym(c.dt, m)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, m*c.g)
	if err != nil {
		return err
	}
	flags, err := c.flagSet()
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(m)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launch(c.blocks(m), func(g int) any {
			return launch.MMAllGather{In: on(in, g, c.dt), OutMC: mc(out, c.dt), FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32),
				Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(m), Epoch: c.arg()}
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

// mmBroadcast moves the root around: launch l broadcasts from GPU l mod ngpus.
func mmBroadcast(r *run) error {
	c := newColl(r)
	n := r.size(1000)
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	in, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	out, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	flags, err := c.flagSet()
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		root := l % c.g
		vals := c.inputs(n)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		err := c.launch(c.blocks(n), func(g int) any {
			return launch.MMBroadcast{In: on(in, g, c.dt), OutMC: mc(out, c.dt), FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32),
				Root: uint32(root), Rank: uint32(g), NGPUs: uint32(c.g), N: uint32(n), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch += 2
		for g := 0; g < c.g; g++ {
			if err := c.expect("out", g, out.On(g), vals[root]); err != nil {
				return err
			}
		}
	}
	return nil
}

func mmBarrier(r *run) error {
	c := newColl(r)
	blocks := 3
	r.res.Shape = fmt.Sprintf("blocks=%d gpus=%d", blocks, c.g)
	flags, err := c.flagSet()
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		err := c.launch(blocks, func(g int) any {
			return launch.MMBarrier{FlagsMC: mc(flags, dsl.U32), FlagsUC: on(flags, g, dsl.U32), NGPUs: uint32(c.g), Epoch: c.arg()}
		})
		if err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		c.epoch++
	}
	// Each launch adds ngpus to the flag of every block that ran.
	for g := 0; g < c.g; g++ {
		got, err := emu.ReadSlice[uint32](r.sys, flags.On(g), blocks)
		if err != nil {
			return err
		}
		var gotF, want []float64
		for _, x := range got {
			gotF = append(gotF, float64(x))
			want = append(want, float64(c.epoch*uint32(c.g))) // mod 2^32, as the flag
		}
		if err := r.check(fmt.Sprintf("GPU %d flags", g), gotF, want, 0, 0); err != nil {
			return err
		}
	}
	return nil
}
