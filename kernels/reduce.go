package kernels

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// Row-kernel geometry. A row is worked on by a group of threads: a warp when it has at most
// rowWarpCols elements (rowWarps rows per block), otherwise the whole block (one row per
// block). A thread handles a row in chunks of rowElems elements: rowElems/(16/size) vectors
// of 128 bits, thread t's vector j starting at column (j*group + t)*16/size of the chunk.
const (
	rowElems    = 32
	rowWarpCols = 32 * rowElems
	rowWarps    = 8
	rowMaxBlock = 1024 // softmax keeps rows of up to rowMaxBlock*rowElems elements in registers
	rowSumBlock = 256  // row_sum's largest block: longer rows loop over chunks
)

func init() {
	register(&Spec{
		Name:       "row_sum",
		Doc:        "out[r] = sum of in[r, 0:cols] in f32; a warp per row (8 rows per block) up to 1024 columns, else a block per row; 128-bit loads",
		DTypes:     []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
		MaxThreads: rowMaxBlock,
		New:        RowSum,
	})
	register(&Spec{
		Name:       "softmax",
		Doc:        "out[r, :] = softmax(in[r, :]) in f32; one read of rows up to 32768 elements (kept in registers), a warp per row up to 1024 columns, else a block per row",
		DTypes:     []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
		MaxThreads: rowMaxBlock,
		New:        Softmax,
	})
}

// RowSumArgs are row_sum's parameters (launch.RowSum on the host).
type RowSumArgs struct {
	In   dsl.Ptr   // rows x cols of dt, row-major
	Out  dsl.Ptr   `kgen:"f32"` // one sum per row
	Rows dsl.Value `kgen:"u32"`
	Cols dsl.Value `kgen:"u32"`
}

// SoftmaxArgs are softmax's parameters (launch.Softmax on the host).
type SoftmaxArgs struct {
	In, Out    dsl.Ptr   // rows x cols of dt, row-major
	Rows, Cols dsl.Value `kgen:"u32"`
}

// Shape is a one-dimensional launch shape: Grid blocks of Block threads.
type Shape struct{ Grid, Block int }

// rowShape launches a warp per row (rowWarps per block) for rows of up to rowWarpCols
// elements, else a block per row of one thread per rowElems elements, rounded up to a power
// of two within [64, maxBlock].
func rowShape(rows, cols, maxBlock int) Shape {
	if cols <= rowWarpCols {
		return Shape{Grid: max(1, ceilDiv(rows, rowWarps)), Block: 32 * rowWarps}
	}
	b := 64
	for b < maxBlock && b*rowElems < cols {
		b *= 2
	}
	return Shape{Grid: max(1, rows), Block: b}
}

// SoftmaxShape is softmax's launch shape for a rows x cols matrix: a warp per row, 8 rows
// per block, up to 1024 columns; above, a block per row with a thread per 32 elements (the
// whole row in registers) up to 1024 threads (32768 columns); longer rows take 1024 threads
// and two reads.
func SoftmaxShape(rows, cols int) Shape { return rowShape(rows, cols, rowMaxBlock) }

// RowSumShape is row_sum's launch shape for a rows x cols matrix: a warp per row, 8 rows per
// block, up to 1024 columns; above, a block per row with a thread per 32 elements, at most
// 256 threads (longer rows loop).
func RowSumShape(rows, cols int) Shape { return rowShape(rows, cols, rowSumBlock) }

// rowWork is one thread's view of its rows: its first row and the step to its next, its
// index in the row's thread group, the group's size, and how the chunks of a row split
// over the group.
type rowWork struct {
	k           *dsl.Kernel
	dt          dsl.Type
	v, e        int       // elements per vector, vectors per thread and chunk
	rows, cols  dsl.Value // u32 parameters
	warp        dsl.Value // Bool, uniform: a warp per row
	first, step dsl.Value // u32: the group's first row, the rows the whole grid covers at once
	lane        dsl.Value // u32
	group       dsl.Value // u32: threads per row (32 or the block)
	vec         layout.Layout
	// inLd and outLd, when set (the strided kernels), are the elements between rows of in and
	// of out; otherwise both are cols.
	inLd, outLd *dsl.Value
}

// newRowWork reads the launch: with cols <= rowWarpCols warp w of block b works on rows
// b*(blockDim/32) + w + i*gridDim*(blockDim/32), otherwise block b on rows b + i*gridDim.
// Blocks hold a multiple of 32 threads; any grid covers any number of rows.
func newRowWork(k *dsl.Kernel, dt dsl.Type, rows, cols dsl.Value) *rowWork {
	v := 16 / max(dt.Bytes(), 1)
	tid, bid, bd, gd := k.ThreadIdx(dsl.X), k.BlockIdx(dsl.X), k.BlockDim(dsl.X), k.GridDim(dsl.X)
	warp := cols.Le(uint32(rowWarpCols))
	return &rowWork{
		k: k, dt: dt, v: v, e: rowElems / v, rows: rows, cols: cols, warp: warp,
		first: k.Select(warp, bid.Mul(bd.Shr(5)).Add(tid.Shr(5)), bid),
		step:  k.Select(warp, gd.Mul(bd.Shr(5)), gd),
		lane:  k.Select(warp, tid.And(31), tid),
		group: k.Select(warp, uint32(32), bd),
		vec:   layout.Must(layout.MakeLayout(layout.Int(v))),
	}
}

// chunkElems is the number of a row's elements the group covers per chunk.
func (w *rowWork) chunkElems() dsl.Value { return w.group.Mul(uint32(rowElems)) }

// eachRow runs body for each of the group's rows (a loop uniform per warp and per block:
// the reductions in body see whole groups), with p the first element of the row in in and q
// that of out (nil for none). Rows whose length is a multiple of the vector get pointers
// aligned to it (the chunk accesses are then vectors); the others take the same code with
// element accesses. A block that shares its rows' reductions waits for all its threads
// before the next row (BlockReduce's shared memory is reused).
func (w *rowWork) eachRow(in, out *dsl.Ptr, body func(row dsl.Value, p, q dsl.Ptr)) {
	k := w.k
	loop := func(inLd, outLd dsl.Value, align bool) {
		k.For(w.first, w.rows, w.step, func(row dsl.Value) {
			off := row.To(dsl.U64).Mul(inLd.To(dsl.U64))
			if align {
				off = k.Assume(off, w.v)
			}
			var q dsl.Ptr
			if out != nil {
				qoff := off
				if w.outLd != nil {
					qoff = row.To(dsl.U64).Mul(outLd.To(dsl.U64))
					if align {
						qoff = k.Assume(qoff, w.v)
					}
				}
				q = out.At(qoff)
			}
			body(row, in.At(off), q)
			k.If(w.warp.Not(), k.SyncThreads)
		})
	}
	if w.inLd != nil {
		// Strided rows: vectors when cols, both row strides and both addresses are whole
		// vectors (16 bytes) apart.
		n := w.cols.Or(*w.inLd)
		addr := k.PtrValue(*in)
		if out != nil {
			n = n.Or(*w.outLd)
			addr = addr.Or(k.PtrValue(*out))
		}
		aligned := n.And(uint32(w.v - 1)).Eq(0).And(addr.And(uint64(15)).Eq(uint64(0)))
		outLd := *w.inLd
		if w.outLd != nil {
			outLd = *w.outLd
		}
		k.If(aligned, func() {
			loop(k.Assume(*w.inLd, w.v), k.Assume(outLd, w.v), true)
		}).Else(func() {
			loop(*w.inLd, outLd, false)
		})
		return
	}
	k.If(w.cols.And(uint32(w.v-1)).Eq(0), func() {
		// cols rounded down to the vector: cols itself in this branch, known divisible.
		c := k.Assume(w.cols.And(^uint32(w.v-1)), w.v)
		loop(c, c, true)
	}).Else(func() {
		loop(w.cols, w.cols, false)
	})
}

// chunk runs f for each of the thread's vectors j in the chunk whose first column is c
// (col: the vector's first column, n = elements per vector) when the vector lies inside the
// row, and per element (n = 1, element e of vector j at column col) for a vector that
// crosses the row's end; nothing for vectors past it. A whole chunk inside the row takes a
// path without predicates.
func (w *rowWork) chunk(c dsl.Value, f func(j, e int, col dsl.Value, n int)) {
	k := w.k
	colOf := func(j int) dsl.Value {
		return k.Assume(c.Add(w.lane.Mul(uint32(w.v))).Add(w.group.Mul(uint32(j*w.v))), w.v)
	}
	k.If(colOf(w.e-1).Add(uint32(w.v)).Le(w.cols), func() {
		for j := 0; j < w.e; j++ {
			f(j, 0, colOf(j), w.v)
		}
	}).Else(func() {
		for j := 0; j < w.e; j++ {
			col := colOf(j)
			k.If(col.Add(uint32(w.v)).Le(w.cols), func() { f(j, 0, col, w.v) }).Else(func() {
				for e := 0; e < w.v; e++ {
					k.If(col.Add(uint32(e)).Lt(w.cols), func() { f(j, e, col.Add(uint32(e)), 1) })
				}
			})
		}
	})
}

// load reads the thread's share of chunk c of the row at p into fresh fragments (one per
// vector) whose elements past the row's end hold fill.
func (w *rowWork) load(p dsl.Ptr, c dsl.Value, fill float64) []dsl.Tensor {
	k := w.k
	frags := make([]dsl.Tensor, w.e)
	for j := range frags {
		frags[j] = k.Fragment(w.dt, k.MakeTensor(p, w.vec))
		if fill != 0 {
			for e := 0; e < w.v; e++ {
				frags[j].Set(e, fill)
			}
		}
	}
	w.chunk(c, func(j, e int, col dsl.Value, n int) {
		if n == 1 {
			frags[j].Set(e, k.Load(p.At(col)))
			return
		}
		k.Copy(k.MakeTensor(p.At(col), w.vec), frags[j])
	})
	return frags
}

// store writes the fragments of chunk c to the row at q (columns inside the row only).
func (w *rowWork) store(q dsl.Ptr, c dsl.Value, frags []dsl.Tensor) {
	k := w.k
	w.chunk(c, func(j, e int, col dsl.Value, n int) {
		if n == 1 {
			k.Store(q.At(col), frags[j].Get(e))
			return
		}
		k.Copy(frags[j], k.MakeTensor(q.At(col), w.vec))
	})
}

// reduce combines v (f32) over the row's group: the warp's shuffles, or the block's.
func (w *rowWork) reduce(v dsl.Value, op dsl.ReduceOp) dsl.Value {
	k := w.k
	r := k.Var(dsl.F32, 0.0)
	k.If(w.warp, func() { k.Set(r, k.WarpReduce(v, op)) }).Else(func() { k.Set(r, k.BlockReduce(v, op)) })
	return r
}

// f32s converts the fragments' elements to f32, in order.
func f32s(frags []dsl.Tensor) []dsl.Value {
	var x []dsl.Value
	for _, f := range frags {
		for e := 0; e < f.Size(); e++ {
			x = append(x, f.Get(e).To(dsl.F32))
		}
	}
	return x
}

// fold combines xs pairwise (a tree: short dependency chains).
func fold(xs []dsl.Value, op func(a, b dsl.Value) dsl.Value) dsl.Value {
	for len(xs) > 1 {
		var next []dsl.Value
		for i := 0; i+1 < len(xs); i += 2 {
			next = append(next, op(xs[i], xs[i+1]))
		}
		if len(xs)%2 == 1 {
			next = append(next, xs[len(xs)-1])
		}
		xs = next
	}
	return xs[0]
}

func add(a, b dsl.Value) dsl.Value  { return a.Add(b) }
func maxv(a, b dsl.Value) dsl.Value { return a.Max(b) }

// RowSum writes out[r] (f32) = in[r, 0] + ... + in[r, cols-1] for each of the rows rows: a
// warp per row when cols <= 1024 (blockDim/32 rows per block), else a block per row. Each
// thread sums its share of the row in f32, 32 elements (128-bit vectors when cols is a
// multiple of 16/size(dt)) per chunk, then the group combines the partial sums (shuffles;
// for a block, shared memory across warps). Launch RowSumShape(rows, cols).
func RowSum(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[RowSumArgs](k, dt)
	rowSum(newRowWork(k, dt, a.Rows, a.Cols), a.In, a.Out)
}

// RowSumStridedArgs are row_sum_strided's parameters: row_sum's, and the elements between
// consecutive rows of In (at least Cols).
type RowSumStridedArgs struct {
	In   dsl.Ptr   // rows x cols of dt, rows Ld elements apart
	Out  dsl.Ptr   `kgen:"f32"` // one sum per row
	Rows dsl.Value `kgen:"u32"`
	Cols dsl.Value `kgen:"u32"`
	Ld   dsl.Value `kgen:"u32"`
}

// RowSumStrided is RowSum over rows Ld elements apart (a view of a wider matrix, or one not
// 16-byte aligned): 128-bit loads when Cols, Ld and In's address allow, else element loads.
// It is not a registered kernel (no golden file); package ops builds it for strided views.
// Launch RowSumShape(rows, cols).
func RowSumStrided(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[RowSumStridedArgs](k, dt)
	w := newRowWork(k, dt, a.Rows, a.Cols)
	w.inLd = &a.Ld
	rowSum(w, a.In, a.Out)
}

// rowSum is RowSum's body over w's rows.
func rowSum(w *rowWork, in, out dsl.Ptr) {
	k, cols := w.k, w.cols
	w.eachRow(&in, nil, func(row dsl.Value, p, _ dsl.Ptr) {
		acc := k.Var(dsl.F32, 0.0)
		k.For(uint32(0), cols, w.chunkElems(), func(c dsl.Value) {
			k.Set(acc, acc.Add(fold(f32s(w.load(p, c, 0)), add)))
		})
		total := w.reduce(acc, dsl.Sum)
		k.If(w.lane.Eq(0), func() { k.Store(out.At(row), total) })
	})
}

// Softmax writes out[r, j] = exp(in[r, j] - max_r) / sum_j exp(in[r, j] - max_r) for each of
// the rows rows, in f32: a warp per row when cols <= 1024 (blockDim/32 rows per block), else
// a block per row. A row of at most 32 elements per thread of its group is read once and
// kept in registers (128-bit vectors when cols is a multiple of 16/size(dt)): the group's
// maximum, then the sum of the exponentials, then the outputs from the registers. A longer
// row is read twice: the first pass keeps each thread's running maximum and its sum scaled
// to it (online softmax), the second writes. Launch SoftmaxShape(rows, cols).
func Softmax(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[SoftmaxArgs](k, dt)
	softmax(newRowWork(k, dt, a.Rows, a.Cols), a.In, a.Out)
}

// SoftmaxStridedArgs are softmax_strided's parameters: softmax's, and the elements between
// consecutive rows of In and of Out (each at least Cols).
type SoftmaxStridedArgs struct {
	In, Out     dsl.Ptr   // rows x cols of dt, rows InLd and OutLd elements apart
	Rows, Cols  dsl.Value `kgen:"u32"`
	InLd, OutLd dsl.Value `kgen:"u32"`
}

// SoftmaxStrided is Softmax over rows InLd (in) and OutLd (out) elements apart (views of
// wider matrices, or ones not 16-byte aligned): 128-bit accesses when Cols, both strides and
// both addresses allow, else element accesses. It is not a registered kernel (no golden
// file); package ops builds it for strided views. Launch SoftmaxShape(rows, cols).
func SoftmaxStrided(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[SoftmaxStridedArgs](k, dt)
	w := newRowWork(k, dt, a.Rows, a.Cols)
	w.inLd, w.outLd = &a.InLd, &a.OutLd
	softmax(w, a.In, a.Out)
}

// softmax is Softmax's body over w's rows.
func softmax(w *rowWork, in, out dsl.Ptr) {
	k, dt, cols := w.k, w.dt, w.cols
	negInf := math.Inf(-1)
	// finite returns m, or 0 when m is -inf (no finite element yet: x - m stays -inf, not NaN).
	finite := func(m dsl.Value) dsl.Value { return k.Select(m.Eq(negInf), float32(0), m) }
	// write stores exp(x - m) * inv for chunk c.
	write := func(q dsl.Ptr, c dsl.Value, ex []dsl.Value, frags []dsl.Tensor) {
		for i, x := range ex {
			frags[i/w.v].Set(i%w.v, x.To(dt))
		}
		w.store(q, c, frags)
	}
	w.eachRow(&in, &out, func(_ dsl.Value, p, q dsl.Ptr) {
		k.If(cols.Le(w.chunkElems()), func() {
			frags := w.load(p, k.Const(dsl.U32, 0), negInf)
			x := f32s(frags)
			m := finite(w.reduce(fold(x, maxv), dsl.Max))
			ex := make([]dsl.Value, len(x))
			for i := range x {
				ex[i] = x[i].Sub(m).Exp()
			}
			inv := w.reduce(fold(ex, add), dsl.Sum).Rcp()
			for i := range ex {
				ex[i] = ex[i].Mul(inv)
			}
			write(q, k.Const(dsl.U32, 0), ex, frags)
		}).Else(func() {
			step := w.chunkElems()
			m, s := k.Var(dsl.F32, negInf), k.Var(dsl.F32, 0.0)
			k.For(uint32(0), cols, step, func(c dsl.Value) {
				x := f32s(w.load(p, c, negInf))
				nm := m.Max(fold(x, maxv))
				sub := finite(nm)
				ex := make([]dsl.Value, len(x))
				for i := range x {
					ex[i] = x[i].Sub(sub).Exp()
				}
				k.Set(s, s.Mul(m.Sub(sub).Exp()).Add(fold(ex, add)))
				k.Set(m, nm)
			})
			rm := finite(w.reduce(m, dsl.Max))
			inv := w.reduce(s.Mul(m.Sub(rm).Exp()), dsl.Sum).Rcp()
			k.For(uint32(0), cols, step, func(c dsl.Value) {
				frags := w.load(p, c, negInf)
				x := f32s(frags)
				for i := range x {
					x[i] = x[i].Sub(rm).Exp().Mul(inv)
				}
				write(q, c, x, frags)
			})
		})
	})
}
