package kernels

import "github.com/kgen-dev/kgen/dsl"

func init() {
	register(&Spec{
		Name:   "vector_add",
		Doc:    "c[i] = a[i] + b[i] for i < n, one element per thread",
		DTypes: []dsl.Type{dsl.F32, dsl.F16},
		New:    VectorAdd,
	})
	register(&Spec{
		Name:   "axpy",
		Doc:    "y[i] = alpha*x[i] + y[i] for i < n, fused multiply-add, grid-stride loop",
		DTypes: []dsl.Type{dsl.F32, dsl.F16},
		New:    Axpy,
	})
}

// VectorAdd writes c[i] = a[i] + b[i] for every i < n; launch at least n threads.
// Parameters: a, b, c (pointers to dt), n (u32).
func VectorAdd(k *dsl.Kernel, dt dsl.Type) {
	a := k.PtrParam("a", dt)
	b := k.PtrParam("b", dt)
	c := k.PtrParam("c", dt)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.Store(c.At(i), k.Load(a.At(i)).Add(k.Load(b.At(i))))
	})
}

// Axpy computes y[i] = alpha*x[i] + y[i] for every i < n with a grid-stride loop, so any grid
// size covers any n. Parameters: alpha (dt), x, y (pointers to dt), n (u32).
func Axpy(k *dsl.Kernel, dt dsl.Type) {
	alpha := k.Param("alpha", dt)
	x := k.PtrParam("x", dt)
	y := k.PtrParam("y", dt)
	n := k.Param("n", dsl.U32)
	k.For(k.GlobalThreadIdx(dsl.X), n, k.GridStride(dsl.X), func(i dsl.Value) {
		yi := y.At(i)
		k.Store(yi, k.FMA(alpha, k.Load(x.At(i)), k.Load(yi)))
	})
}
