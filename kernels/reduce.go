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
		Doc:    "out[r] = sum of in[r, 0:cols] in f32; a block per row, vector loads, warp shuffles + shared memory",
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

// RowSumArgs are row_sum's parameters (launch.RowSum on the host).
type RowSumArgs struct {
	In   dsl.Ptr   // rows x cols of dt, row-major
	Out  dsl.Ptr   `kgen:"f32"` // one sum per row
	Cols dsl.Value `kgen:"u32"`
}

// SoftmaxArgs are softmax's parameters (launch.Softmax on the host).
type SoftmaxArgs struct {
	In, Out dsl.Ptr   // rows x cols of dt, row-major
	Cols    dsl.Value `kgen:"u32"`
}

// rowBase returns a pointer to the first element of row r of a row-major matrix with cols
// columns (64-bit index arithmetic).
func rowBase(k *dsl.Kernel, p dsl.Ptr, r, cols dsl.Value) dsl.Ptr {
	return p.At(r.To(dsl.U64).Mul(cols.To(dsl.U64)))
}

// RowSum writes out[r] (f32) = in[r, 0] + ... + in[r, cols-1] for the row r of each block:
// each thread sums a strided share of the row in f32 (4 elements per access when cols is a
// multiple of 4), then the block combines the partial sums (BlockReduce: shuffles within
// warps, shared memory across them). Launch rows blocks of 256 threads.
func RowSum(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[RowSumArgs](k, dt)
	in, out, cols := a.In, a.Out, a.Cols
	r, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)
	row := rowBase(k, in, r, cols)
	acc := k.Var(dsl.F32, 0.0)
	rowEach(k, cols, tid, k.BlockDim(dsl.X), func(j dsl.Value, n int) {
		for _, v := range loadRow(k, row, j, n) {
			k.Set(acc, acc.Add(v.To(dsl.F32)))
		}
	})
	total := k.BlockReduce(acc, dsl.Sum)
	k.If(tid.Eq(0), func() { k.Store(out.At(r), total) })
}

// rowVec is the number of elements the row kernels move per access when a row allows it.
const rowVec = 4

// rowEach runs f(j, n) over a row's elements j..j+n-1, thread tid taking every step-th
// group: groups of rowVec when cols is a multiple of rowVec (every row then starts aligned to
// rowVec elements, so the accesses are vectors), single elements otherwise.
func rowEach(k *dsl.Kernel, cols, tid, step dsl.Value, f func(j dsl.Value, n int)) {
	k.If(cols.Rem(uint32(rowVec)).Eq(0), func() {
		k.For(tid, cols.Div(uint32(rowVec)), step, func(q dsl.Value) { f(q.Mul(uint32(rowVec)), rowVec) })
	}).Else(func() {
		k.For(tid, cols, step, func(j dsl.Value) { f(j, 1) })
	})
}

// loadRow loads n consecutive elements at p[j] (one vector access when n > 1).
func loadRow(k *dsl.Kernel, p dsl.Ptr, j dsl.Value, n int) []dsl.Value {
	if n == 1 {
		return []dsl.Value{k.Load(p.At(j))}
	}
	return k.LoadVec(p.At(j), n)
}

// storeRow stores vals to consecutive elements at p[j].
func storeRow(k *dsl.Kernel, p dsl.Ptr, j dsl.Value, vals []dsl.Value) {
	if len(vals) == 1 {
		k.Store(p.At(j), vals[0])
		return
	}
	k.StoreVec(p.At(j), vals)
}

// Softmax writes out[r, j] = exp(in[r, j] - max_r) / sum_j exp(in[r, j] - max_r) for the row
// r of each block, in f32: a pass for the maximum, one for the sum, one to write (4 elements
// per access when cols is a multiple of 4). Launch rows blocks of 256 threads.
func Softmax(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[SoftmaxArgs](k, dt)
	in, out, cols := a.In, a.Out, a.Cols
	r, tid, step := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	src, dst := rowBase(k, in, r, cols), rowBase(k, out, r, cols)

	m := k.Var(dsl.F32, math.Inf(-1))
	rowEach(k, cols, tid, step, func(j dsl.Value, n int) {
		for _, v := range loadRow(k, src, j, n) {
			k.Set(m, m.Max(v.To(dsl.F32)))
		}
	})
	rowMax := k.BlockReduce(m, dsl.Max)

	s := k.Var(dsl.F32, 0.0)
	rowEach(k, cols, tid, step, func(j dsl.Value, n int) {
		for _, v := range loadRow(k, src, j, n) {
			k.Set(s, s.Add(v.To(dsl.F32).Sub(rowMax).Exp()))
		}
	})
	inv := k.BlockReduce(s, dsl.Sum).Rcp()

	rowEach(k, cols, tid, step, func(j dsl.Value, n int) {
		vals := loadRow(k, src, j, n)
		for i, v := range vals {
			vals[i] = v.To(dsl.F32).Sub(rowMax).Exp().Mul(inv).To(dt)
		}
		storeRow(k, dst, j, vals)
	})
}
