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

// VectorAddArgs are vector_add's parameters (launch.VectorAdd on the host).
type VectorAddArgs struct {
	A, B, C dsl.Ptr   // c = a + b, of dt
	N       dsl.Value `kgen:"u32"`
}

// VectorAdd writes c[i] = a[i] + b[i] for every i < n; launch at least n threads.
func VectorAdd(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[VectorAddArgs](k, dt)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(a.N), func() {
		k.Store(a.C.At(i), k.Load(a.A.At(i)).Add(k.Load(a.B.At(i))))
	})
}

// AxpyArgs are axpy's parameters (launch.Axpy on the host).
type AxpyArgs struct {
	Alpha dsl.Value // of dt
	X, Y  dsl.Ptr   // of dt
	N     dsl.Value `kgen:"u32"`
}

// Axpy computes y[i] = alpha*x[i] + y[i] for every i < n with a grid-stride loop, so any grid
// size covers any n.
func Axpy(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[AxpyArgs](k, dt)
	k.For(k.GlobalThreadIdx(dsl.X), a.N, k.GridStride(dsl.X), func(i dsl.Value) {
		yi := a.Y.At(i)
		k.Store(yi, k.FMA(a.Alpha, k.Load(a.X.At(i)), k.Load(yi)))
	})
}
