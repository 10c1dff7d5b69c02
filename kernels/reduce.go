package kernels

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
)

// Row kernels use one block of rowThreads threads per row.
const rowThreads = 256

func init() {
	register(&Spec{
		Name:   "row_sum",
		Doc:    "out[r] = sum of in[r, 0:cols] in f32; a block per row, warp shuffles + shared memory",
		DTypes: []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
		New:    RowSum,
	})
	register(&Spec{
		Name:   "softmax",
		Doc:    "out[r, :] = softmax(in[r, :]) computed in f32; a block per row, three passes",
		DTypes: []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
		New:    Softmax,
	})
}

// rowBase returns a pointer to the first element of row r of a row-major matrix with cols
// columns (64-bit index arithmetic).
func rowBase(k *dsl.Kernel, p dsl.Ptr, r, cols dsl.Value) dsl.Ptr {
	return p.At(r.To(dsl.U64).Mul(cols.To(dsl.U64)))
}

// RowSum writes out[r] (f32) = in[r, 0] + ... + in[r, cols-1] for the row r of each block:
// each thread sums a strided share of the row in f32, then the block combines the partial
// sums (BlockReduce: shuffles within warps, shared memory across them). Launch rows blocks
// of 256 threads. Params: in (dt), out (f32), cols (u32).
func RowSum(k *dsl.Kernel, dt dsl.Type) {
	in := k.PtrParam("in", dt)
	out := k.PtrParam("out", dsl.F32)
	cols := k.Param("cols", dsl.U32)
	r, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)
	row := rowBase(k, in, r, cols)
	acc := k.Var(dsl.F32, 0.0)
	k.For(tid, cols, k.BlockDim(dsl.X), func(j dsl.Value) {
		k.Set(acc, acc.Add(k.Load(row.At(j)).To(dsl.F32)))
	})
	total := k.BlockReduce(acc, dsl.Sum)
	k.If(tid.Eq(0), func() { k.Store(out.At(r), total) })
}

// Softmax writes out[r, j] = exp(in[r, j] - max_r) / sum_j exp(in[r, j] - max_r) for the row
// r of each block, in f32: a pass for the maximum, one for the sum, one to write. Launch rows
// blocks of 256 threads. Params: in, out (dt), cols (u32).
func Softmax(k *dsl.Kernel, dt dsl.Type) {
	in := k.PtrParam("in", dt)
	out := k.PtrParam("out", dt)
	cols := k.Param("cols", dsl.U32)
	r, tid, step := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	src, dst := rowBase(k, in, r, cols), rowBase(k, out, r, cols)

	m := k.Var(dsl.F32, math.Inf(-1))
	k.For(tid, cols, step, func(j dsl.Value) {
		k.Set(m, m.Max(k.Load(src.At(j)).To(dsl.F32)))
	})
	rowMax := k.BlockReduce(m, dsl.Max)

	s := k.Var(dsl.F32, 0.0)
	k.For(tid, cols, step, func(j dsl.Value) {
		k.Set(s, s.Add(k.Load(src.At(j)).To(dsl.F32).Sub(rowMax).Exp()))
	})
	inv := k.BlockReduce(s, dsl.Sum).Rcp()

	k.For(tid, cols, step, func(j dsl.Value) {
		e := k.Load(src.At(j)).To(dsl.F32).Sub(rowMax).Exp()
		k.Store(dst.At(j), e.Mul(inv).To(dt))
	})
}
