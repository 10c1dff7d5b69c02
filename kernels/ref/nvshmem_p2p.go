package ref

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
)

// Harnesses of the NVSHMEM kernels (kernels/nvshmem_p2p.go): one collective launch over every
// simulated GPU, NVSHMEM's device API emulated by package nvshmem.

func init() {
	register("nvshmem_ring_signal", nvshmemRingSignal)
	register("nvshmem_alltoall_put", nvshmemAlltoallPut)
	register("nvshmem_ring_get", nvshmemRingGet)
}

// nvshmemEnv is the state of one NVSHMEM check.
type nvshmemEnv struct {
	r   *run
	dt  dsl.Type
	g   int
	emu *shmemu.Emulator
}

func newNVSHMEM(r *run) (*nvshmemEnv, error) {
	e, err := shmemu.Emulate(r.sys)
	if err != nil {
		return nil, err
	}
	return &nvshmemEnv{r: r, dt: r.p.DType, g: r.sys.NumGPUs(), emu: e}, nil
}

// values returns n exact values of the dtype, distinct per GPU and element.
func (e *nvshmemEnv) values(g, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		x := float64(g*37+i%101) - 50
		if e.dt.IsFloat() {
			x = float64(e.r.rng.Intn(2048)-1024) / 8 // exact in f16 and bf16 (|x| < 128, 1/8 steps)
			if e.dt == dsl.BF16 {
				x = float64(e.r.rng.Intn(256) - 128)
			}
		}
		v[i] = x
	}
	return v
}

func (e *nvshmemEnv) sym(n int) (*emu.Symmetric, error) {
	return e.r.sys.MallocSymmetric(max(n, 1) * e.dt.Bytes())
}

func (e *nvshmemEnv) write(m *emu.Symmetric, g int, v []float64) error {
	if e.dt == dsl.I32 {
		x := make([]int32, len(v))
		for i := range v {
			x[i] = int32(v[i])
		}
		return emu.WriteSlice(e.r.sys, m.On(g), x)
	}
	return write(e.r.sys, m.On(g), e.dt, v)
}

func (e *nvshmemEnv) read(m *emu.Symmetric, g, n int) ([]float64, error) {
	if e.dt == dsl.I32 {
		x, err := emu.ReadSlice[int32](e.r.sys, m.On(g), n)
		out := make([]float64, len(x))
		for i := range x {
			out[i] = float64(x[i])
		}
		return out, err
	}
	return read(e.r.sys, m.On(g), e.dt, n)
}

// launch runs the kernel on every GPU, GPU g with the host twin args(g) (checked against the
// parameters its builder declared).
func (e *nvshmemEnv) launch(args func(g int) any) error {
	name := e.r.spec.VariantName(e.dt)
	fn, err := entry(e.r.mod, name)
	if err != nil {
		return err
	}
	all := make([][]any, e.g)
	for g := range all {
		if all[g], err = emuArgs(fn, e.r.built.Params, args(g)); err != nil {
			return err
		}
	}
	err = e.r.sys.Launch(emu.Launch{
		Module: e.r.mod, Entry: name, GPUs: e.r.sys.All(), Grid: emu.D1(1),
		Block: emu.D1(kernels.NVSHMEMThreads), ArgsFor: func(g int) []any { return all[g] }, Options: emu.Options{Seed: e.r.p.Seed, Weak: e.r.p.Weak},
	})
	if err != nil {
		return err
	}
	if p := e.emu.Pending(); p != 0 {
		return fmt.Errorf("%d non-blocking puts were still pending when the kernel ended (no quiet or barrier)", p)
	}
	return nil
}

// nvshmemRingSignal runs three exchanges in a row (epochs 1, 2, 3) with new data each time
// and no reset of the signal words.
func nvshmemRingSignal(r *run) error {
	e, err := newNVSHMEM(r)
	if err != nil {
		return err
	}
	n := r.size(1000)
	r.res.Shape = fmt.Sprintf("n=%d ranks=%d", n, e.g)
	src, err := e.sym(n)
	if err != nil {
		return err
	}
	dst, err := e.sym(n)
	if err != nil {
		return err
	}
	sig, err := r.sys.MallocSymmetric(8)
	if err != nil {
		return err
	}
	for epoch := 1; epoch <= 3; epoch++ {
		in := make([][]float64, e.g)
		for g := range in {
			in[g] = e.values(g, n)
			if err := e.write(src, g, in[g]); err != nil {
				return err
			}
		}
		err := e.launch(func(g int) any {
			return launch.NVSHMEMRingSignal{Dst: on(dst, g, e.dt), Src: on(src, g, e.dt), Sig: on(sig, g, dsl.U64), N: uint32(n), Epoch: uint64(epoch)}
		})
		if err != nil {
			return fmt.Errorf("epoch %d: %w", epoch, err)
		}
		for g := 0; g < e.g; g++ {
			got, err := e.read(dst, g, n)
			if err != nil {
				return err
			}
			if err := r.check(fmt.Sprintf("epoch %d GPU %d dst", epoch, g), got, in[(g+e.g-1)%e.g], 0, 0); err != nil {
				return err
			}
			s, err := emu.ReadSlice[uint64](r.sys, sig.On(g), 1)
			if err != nil {
				return err
			}
			if s[0] != uint64(epoch) {
				return fmt.Errorf("epoch %d: GPU %d's signal is %d", epoch, g, s[0])
			}
		}
	}
	return nil
}

func nvshmemAlltoallPut(r *run) error {
	e, err := newNVSHMEM(r)
	if err != nil {
		return err
	}
	n := r.size(300)
	r.res.Shape = fmt.Sprintf("n=%d per rank, ranks=%d", n, e.g)
	src, err := e.sym(n * e.g)
	if err != nil {
		return err
	}
	dst, err := e.sym(n * e.g)
	if err != nil {
		return err
	}
	in := make([][]float64, e.g)
	for g := range in {
		in[g] = e.values(g, n*e.g)
		if err := e.write(src, g, in[g]); err != nil {
			return err
		}
	}
	if err := e.launch(func(g int) any { return launch.NVSHMEMCopy{Dst: on(dst, g, e.dt), Src: on(src, g, e.dt), N: uint32(n)} }); err != nil {
		return err
	}
	for j := 0; j < e.g; j++ {
		got, err := e.read(dst, j, n*e.g)
		if err != nil {
			return err
		}
		var want []float64
		for i := 0; i < e.g; i++ {
			want = append(want, in[i][j*n:(j+1)*n]...)
		}
		if err := r.check(fmt.Sprintf("GPU %d dst", j), got, want, 0, 0); err != nil {
			return err
		}
	}
	return nil
}

func nvshmemRingGet(r *run) error {
	e, err := newNVSHMEM(r)
	if err != nil {
		return err
	}
	n := r.size(1000)
	r.res.Shape = fmt.Sprintf("n=%d ranks=%d", n, e.g)
	src, err := e.sym(n)
	if err != nil {
		return err
	}
	dst, err := e.sym(n)
	if err != nil {
		return err
	}
	in := make([][]float64, e.g)
	for g := range in {
		in[g] = e.values(g, n)
		if err := e.write(src, g, in[g]); err != nil {
			return err
		}
	}
	if err := e.launch(func(g int) any { return launch.NVSHMEMCopy{Dst: on(dst, g, e.dt), Src: on(src, g, e.dt), N: uint32(n)} }); err != nil {
		return err
	}
	for g := 0; g < e.g; g++ {
		got, err := e.read(dst, g, n)
		if err != nil {
			return err
		}
		if err := r.check(fmt.Sprintf("GPU %d dst", g), got, in[(g+e.g-1)%e.g], 0, 0); err != nil {
			return err
		}
	}
	return nil
}
