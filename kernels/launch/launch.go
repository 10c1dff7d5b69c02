// Package launch holds the host twins of the library kernels' parameter structs: for each
// family's kernels.XxxArgs (read by dsl.Params) a struct of the same fields in the same order,
// pointers as jit.Ptr[T] of their element type, for jit.Function.LaunchArgs. T is the
// variant's element type (float32, fp.F16, fp.BF16, uint8...), so a buffer of another type
// does not compile. It imports no builder (dsl, layout): programs that only launch need jit
// and this package.
package launch

import "github.com/kgen-dev/kgen/jit"

// VectorAdd launches vector_add: C[i] = A[i] + B[i] for i < N.
type VectorAdd[T jit.Elem] struct {
	A, B, C jit.Ptr[T]
	N       uint32
}

// Axpy launches axpy: Y[i] = Alpha*X[i] + Y[i] for i < N.
type Axpy[T jit.Elem] struct {
	Alpha T
	X, Y  jit.Ptr[T]
	N     uint32
}

// Copy launches tiled_copy: Dst[i] = Src[i] for i < N.
type Copy[T jit.Elem] struct {
	Src, Dst jit.Ptr[T]
	N        uint32
}

// Transpose launches transpose: Out (N x M) = In (M x N) transposed, row-major.
type Transpose[T jit.Elem] struct {
	In, Out jit.Ptr[T]
	M, N    uint32
}

// RowSum launches row_sum: Out[r] = the f32 sum of row r of In (Rows rows of Cols columns).
type RowSum[T jit.Elem] struct {
	In   jit.Ptr[T]
	Out  jit.Ptr[float32]
	Rows uint32
	Cols uint32
}

// Softmax launches softmax: row r of Out = softmax of row r of In (Rows rows of Cols
// columns).
type Softmax[T jit.Elem] struct {
	In, Out    jit.Ptr[T]
	Rows, Cols uint32
}
