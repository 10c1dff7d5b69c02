package ref

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// Harnesses of the NVSHMEM ring collectives (kernels/coll_nvshmem.go): three launches in a
// row on every simulated GPU with fresh inputs and no reset of the signal words.

func init() {
	register("nvshmem_allgather_ring", nvshmemAllGatherRing)
	for _, op := range []string{"sum", "min", "max"} {
		register("nvshmem_reducescatter_ring_"+op, nvshmemReduceScatterRing)
	}
}

// nvshmemColl launches an NVSHMEM kernel (one block per GPU) and checks that every
// non-blocking put completed.
func (c *coll) nvshmemLaunch(e *nvshmemEnv, args func(g int) any) error {
	if err := e.launch(args); err != nil {
		return fmt.Errorf("launch %d: %w", c.epoch, err)
	}
	c.epoch++
	return nil
}

func nvshmemAllGatherRing(r *run) error {
	e, err := newNVSHMEM(r)
	if err != nil {
		return err
	}
	c := newColl(r)
	n := r.size(1000)
	r.res.Shape = fmt.Sprintf("n=%d gpus=%d", n, c.g)
	src, err := c.sym(c.dt, n)
	if err != nil {
		return err
	}
	dst, err := c.sym(c.dt, n*c.g)
	if err != nil {
		return err
	}
	sig, err := r.sys.MallocSymmetric(8)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(n)
		if err := c.writeInputs(src, vals); err != nil {
			return err
		}
		epoch := uint64(c.epoch)
		if err := c.nvshmemLaunch(e, func(g int) any {
			return launch.NVSHMEMAllGatherRing{Dst: on(dst, g, c.dt), Src: on(src, g, c.dt), Sig: on(sig, g, dsl.U64), N: uint32(n), Epoch: epoch}
		}); err != nil {
			return err
		}
		var want []float64
		for g := 0; g < c.g; g++ {
			want = append(want, vals[g]...)
		}
		for g := 0; g < c.g; g++ {
			if err := c.expect("dst", g, dst.On(g), want); err != nil {
				return err
			}
		}
	}
	return nil
}

func nvshmemReduceScatterRing(r *run) error {
	e, err := newNVSHMEM(r)
	if err != nil {
		return err
	}
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
	scratch, err := c.sym(dsl.F32, 2*(kernels.CollMaxGPUs-1)*m)
	if err != nil {
		return err
	}
	sig, err := r.sys.MallocSymmetric(8)
	if err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		vals := c.inputs(m * c.g)
		if err := c.writeInputs(in, vals); err != nil {
			return err
		}
		epoch := uint64(c.epoch)
		if err := c.nvshmemLaunch(e, func(g int) any {
			return launch.NVSHMEMReduceScatterRing{Out: on(out, g, c.dt), In: on(in, g, c.dt), Scratch: on(scratch, g, ptx.B32), Sig: on(sig, g, dsl.U64), M: uint32(m), Epoch: epoch}
		}); err != nil {
			return err
		}
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
