package launch_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// A library kernel found by its identity, loaded with its declared parameters and launched
// with its host twin (here on the emulator): the buffers are *jit.Buffer[fp.F16], and a
// *jit.Buffer[float32] in their place would not compile.
func ExampleVectorAdd() {
	spec, err := kernels.Find(kernels.ID{Family: kernels.FamilyVectorAdd, DType: dsl.F16})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: dsl.F16})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	m, err := d.Load(jit.Source{Module: b.Module, Params: map[string][]jit.ParamInfo{b.Entry: jit.ParamInfos(b.Params)}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fn, err := m.Function(b.Entry)
	if err != nil {
		fmt.Println(err)
		return
	}
	const n = 4
	var bufs [3]*jit.Buffer[fp.F16]
	for i := range bufs {
		if bufs[i], err = jit.Alloc[fp.F16](d, n); err != nil {
			fmt.Println(err)
			return
		}
	}
	x, y, sum := bufs[0], bufs[1], bufs[2]
	if err := x.CopyFromHost(fp.From[fp.F16]([]float32{1, 2, 3, 4})); err != nil {
		fmt.Println(err)
		return
	}
	if err := y.CopyFromHost(fp.From[fp.F16]([]float32{0.5, 0.25, 0.125, 1e-4})); err != nil {
		fmt.Println(err)
		return
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(32)}
	if err := fn.LaunchArgs(cfg, launch.VectorAdd[fp.F16]{A: x, B: y, C: sum, N: n}); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]fp.F16, n)
	if err := sum.CopyToHost(got); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(fp.Float32s(got))
	// Output: [1.5 2.25 3.125 4]
}
