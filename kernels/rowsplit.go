package kernels

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// Split rows: softmax_split and row_sum_split work on rows longer than one block keeps in
// registers (rowMaxBlock*rowElems = 32768 elements) with several blocks per row. The row is
// cut into Parts segments, one per block; the blocks of a row publish their segment's
// partial result (max and scaled sum, or sum) in global scratch and meet at a barrier of
// their own, then each combines every part's partial in the same order. The grid is
// launched co-resident (jit.LaunchConfig.CoResident): the blocks of a row wait on each
// other.
//
// Scratch holds, for each of the grid's Grid/Parts row slots, an arrival count and a
// generation (u32) and two buffers of Parts partials (two f32 each); the buffers alternate
// between a slot's successive rows, so a block that runs ahead into the next row cannot
// overwrite a partial that a slower block of the row is still reading (it cannot run two
// rows ahead: the next barrier waits for the slower block). A barrier's last arrival resets
// the count to 0 and bumps the generation the others wait on: Scratch must be zero before
// the first launch and every launch leaves it ready for the next. ChooseRowKernel
// (rowchoose.go) says when the host runs them in place of softmax and row_sum.

const (
	splitSegAlign = 8 // segment starts are multiples of 8 elements: 128-bit aligned for any dtype
	// splitSMThreads is the threads per SM the split shape counts on: 1024 (64 registers a
	// thread, which .maxntid 1024 guarantees), whatever the block size.
	splitSMThreads = 1024
	// splitMinSeg is the shortest segment the shape cuts a row into to fill the device.
	splitMinSeg = 8192
)

func init() {
	register(&Spec{
		Name:       "row_sum_split",
		Doc:        "out[r] = sum of in[r, 0:cols] in f32 with several blocks per row (long rows): per-segment sums combined through global scratch by a co-resident grid",
		DTypes:     []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
		MaxThreads: rowMaxBlock,
		New:        RowSumSplit,
	})
	register(&Spec{
		Name:       "softmax_split",
		Doc:        "out[r, :] = softmax(in[r, :]) in f32 with several blocks per row (long rows): one read when each block's segment fits its registers; partial max/sum combined through global scratch by a co-resident grid",
		DTypes:     []dsl.Type{dsl.F32, dsl.F16, dsl.BF16},
		MaxThreads: rowMaxBlock,
		New:        SoftmaxSplit,
	})
}

// RowSumSplitArgs are row_sum_split's parameters (launch.RowSumSplit on the host).
type RowSumSplitArgs struct {
	In      dsl.Ptr   // rows x cols of dt, row-major
	Out     dsl.Ptr   `kgen:"f32"` // one sum per row
	Scratch dsl.Ptr   `kgen:"u32"` // SplitShape.ScratchWords words, zero before the first launch
	Rows    dsl.Value `kgen:"u32"`
	Cols    dsl.Value `kgen:"u32"`
	Parts   dsl.Value `kgen:"u32"` // blocks per row (SplitShape.Parts)
}

// SoftmaxSplitArgs are softmax_split's parameters (launch.SoftmaxSplit on the host).
type SoftmaxSplitArgs struct {
	In, Out dsl.Ptr   // rows x cols of dt, row-major
	Scratch dsl.Ptr   `kgen:"u32"` // SplitShape.ScratchWords words, zero before the first launch
	Rows    dsl.Value `kgen:"u32"`
	Cols    dsl.Value `kgen:"u32"`
	Parts   dsl.Value `kgen:"u32"` // blocks per row (SplitShape.Parts)
}

// SplitShape is the launch of a split-row kernel: Grid blocks of Block threads, Parts
// blocks per row, and the scratch it needs (u32 words). Launch it co-resident.
type SplitShape struct {
	Grid, Block, Parts, ScratchWords int
}

// SplitRowShape is the split-row kernels' launch for a rows x cols matrix on a device of
// sms multiprocessors (jit.Info.Multiproc). It counts on 1024 resident threads per SM, so
// the grid is at most sms*1024/Block blocks. A row gets at least one part per 32768
// elements (its segments then fit the registers of a 1024-thread block: one read), more
// (down to segments of 8192 elements) until the rows' parts number 4 per SM, and at most
// as many as the device holds; the block is the smallest power of two in [64, 1024] that
// holds a segment in registers (1024 when the segments are longer: two reads of each).
func SplitRowShape(rows, cols, sms int) SplitShape {
	// sms is capped where the products below (4*sms, sms*1024) stay far inside an int: a
	// hostile count wrapped them to 0 and divided by zero.
	rows, cols, sms = max(rows, 1), max(cols, 1), min(max(sms, 1), maxSMs)
	parts := ceilDiv(cols, rowMaxBlock*rowElems)
	if fill := min(ceilDiv(cols, splitMinSeg), ceilDiv(4*sms, rows)); fill > parts {
		parts = fill
	}
	block := 64
	seg := splitSeg(cols, parts)
	for block < rowMaxBlock && block*rowElems < seg {
		block *= 2
	}
	resident := sms * splitSMThreads / block
	if parts > resident { // longer segments: each read twice
		parts, block = resident, rowMaxBlock
		resident = sms * splitSMThreads / block
		parts = min(parts, resident)
	}
	slots := min(rows, resident/parts)
	return SplitShape{Grid: slots * parts, Block: block, Parts: parts, ScratchWords: slots * (2 + 4*parts)}
}

// maxSMs bounds the multiprocessor counts the launch-shape helpers take (far above any GPU's).
const maxSMs = 1 << 20

// splitSeg is the segment length for cols elements in parts parts (as the kernels compute it).
func splitSeg(cols, parts int) int {
	return ceilDiv(ceilDiv(cols, parts), splitSegAlign) * splitSegAlign
}

// splitWork is one block's share of the split rows.
type splitWork struct {
	*rowWork                    // lane: the thread, group: the block, cols: the segment's end
	parts, slots      dsl.Value // u32
	part, slot        dsl.Value // u32: this block's segment of its rows and its row slot
	lo, seg           dsl.Value // u32: the segment's first column and its full length
	ld                dsl.Value // u32: the row length (cols)
	count, gen, first dsl.Ptr   // the slot's barrier and its partials (buffer 0)
}

// newSplitWork reads the launch: block b is part b % parts of row slot b / parts; slot s
// works on rows s, s + slots, ... (blocks past slots*parts do nothing).
func newSplitWork(k *dsl.Kernel, dt dsl.Type, scratch dsl.Ptr, rows, cols, parts dsl.Value) *splitWork {
	tid, bid, bd, gd := k.ThreadIdx(dsl.X), k.BlockIdx(dsl.X), k.BlockDim(dsl.X), k.GridDim(dsl.X)
	v := 16 / max(dt.Bytes(), 1)
	seg := cols.Add(parts).Sub(uint32(1)).Div(parts)
	seg = seg.Add(uint32(splitSegAlign - 1)).And(^uint32(splitSegAlign - 1))
	part, slot := bid.Rem(parts), bid.Div(parts)
	lo := cols.Min(part.Mul(seg))
	hi := cols.Min(lo.Add(seg))
	base := slot.Mul(parts.Mul(uint32(4)).Add(uint32(2)))
	return &splitWork{
		// A block works on segments of rows: its chunks are bounded by hi, its reductions
		// are the block's.
		rowWork: &rowWork{
			k: k, dt: dt, v: v, e: rowElems / v, rows: rows, cols: hi,
			lane: tid, group: bd, vec: layout.Must(layout.MakeLayout(layout.Int(v))),
		},
		parts: parts, slots: gd.Div(parts), part: part, slot: slot,
		lo: k.Assume(lo, splitSegAlign), seg: seg, ld: cols,
		count: scratch.At(base), gen: scratch.At(base.Add(uint32(1))),
		first: scratch.At(base.Add(uint32(2))).As(dsl.F32),
	}
}

// eachRow runs body for each row of the block's slot (the same rows in every block of the
// slot: the barriers in body see all of them), with it the row's index among the slot's
// rows and p, q the row's first element in in and out (out nil: q unset). Rows whose
// length is a multiple of the vector (16/size(dt)) are 128-bit aligned (vector accesses;
// segments start at multiples of 8 elements); the others take element accesses. The block waits for all its threads after each row (the reductions'
// shared memory is reused).
func (w *splitWork) eachRow(in, out *dsl.Ptr, body func(row, it dsl.Value, p, q dsl.Ptr)) {
	k := w.k
	loop := func(ld dsl.Value, align bool) {
		it := k.Var(dsl.U32, 0)
		k.For(w.slot, w.rows, w.slots, func(row dsl.Value) {
			off := row.To(dsl.U64).Mul(ld.To(dsl.U64))
			if align {
				off = k.Assume(off, w.v)
			}
			var q dsl.Ptr
			if out != nil {
				q = out.At(off)
			}
			body(row, it, in.At(off), q)
			k.Set(it, it.Add(uint32(1)))
			k.SyncThreads()
		})
	}
	k.If(w.slot.Lt(w.slots), func() {
		k.If(w.ld.And(uint32(w.v-1)).Eq(0), func() {
			// ld rounded down to the vector: ld itself in this branch, known divisible.
			loop(k.Assume(w.ld.And(^uint32(w.v-1)), w.v), true)
		}).Else(func() {
			loop(w.ld, false)
		})
	})
}

// partial is the pointer to field f (0 or 1) of part i's partial in buffer buf (u32, 0 or 1).
func (w *splitWork) partial(buf, i dsl.Value, f int) dsl.Ptr {
	return w.first.At(buf.Mul(w.parts.Mul(uint32(2))).Add(i.Mul(uint32(2))).Add(uint32(f)))
}

// publish stores the block's partial (a, b: f32, uniform over the block) in buffer buf and
// waits until every block of the slot has published its own: thread 0 reads the barrier's
// generation, arrives (atomic add, acq_rel: releases the partial, acquires the earlier
// arrivals'); the last arrival resets the count and releases the next generation, the
// others wait for it (acquire). The block then waits for thread 0.
func (w *splitWork) publish(buf, a, b dsl.Value) {
	k := w.k
	k.If(w.lane.Eq(0), func() {
		k.Store(w.partial(buf, w.part, 0), a)
		k.Store(w.partial(buf, w.part, 1), b)
		g := k.Load(w.gen, dsl.Acquire(dsl.GPU))
		old := k.Atomic(dsl.AtomAdd, w.count, uint32(1), dsl.AcqRel(dsl.GPU))
		k.If(old.Eq(w.parts.Sub(uint32(1))), func() {
			k.Store(w.count, uint32(0))
			k.Store(w.gen, g.Add(uint32(1)), dsl.Release(dsl.GPU))
		}).Else(func() {
			k.WaitUntil(w.gen, dsl.Ne, g, dsl.Acquire(dsl.GPU))
		})
	})
	k.SyncThreads()
}

// gather combines field f of every part's partial in buffer buf over the block with op,
// after publish: thread t reads parts t, t + blockDim, ... (fn maps each part's two fields
// to the value combined); every thread gets the result, the same in every block of the row.
func (w *splitWork) gather(buf dsl.Value, op dsl.ReduceOp, id float64, fn func(a, b dsl.Value) dsl.Value) dsl.Value {
	k := w.k
	acc := k.Var(dsl.F32, id)
	k.For(w.lane, w.parts, w.group, func(i dsl.Value) {
		x := fn(k.Load(w.partial(buf, i, 0)), k.Load(w.partial(buf, i, 1)))
		if op == dsl.Max {
			k.Set(acc, acc.Max(x))
		} else {
			k.Set(acc, acc.Add(x))
		}
	})
	return k.BlockReduce(acc, op)
}

// RowSumSplit writes out[r] (f32) = in[r, 0] + ... + in[r, cols-1] for each of the rows
// rows, with parts blocks per row (see the split rows above): each block sums its segment
// as RowSum sums a row (f32, 32 elements a thread per chunk, 128-bit vectors when cols is a
// multiple of 16/size(dt)), publishes the sum, and part 0 writes the sum of the parts'
// sums, added in part order. Launch SplitRowShape(rows, cols, sms), co-resident.
func RowSumSplit(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[RowSumSplitArgs](k, dt)
	w := newSplitWork(k, dt, a.Scratch, a.Rows, a.Cols, a.Parts)
	out := a.Out
	w.eachRow(&a.In, nil, func(row, it dsl.Value, p, _ dsl.Ptr) {
		acc := k.Var(dsl.F32, 0.0)
		k.For(w.lo, w.cols, w.chunkElems(), func(c dsl.Value) {
			k.Set(acc, acc.Add(fold(f32s(w.load(p, c, 0)), add)))
		})
		buf := it.And(uint32(1))
		w.publish(buf, k.BlockReduce(acc, dsl.Sum), k.Const(dsl.F32, 0.0))
		total := w.gather(buf, dsl.Sum, 0, func(s, _ dsl.Value) dsl.Value { return s })
		k.If(w.part.Eq(0).And(w.lane.Eq(0)), func() { k.Store(out.At(row), total) })
	})
}

// SoftmaxSplit writes out[r, j] = exp(in[r, j] - max_r) / sum_j exp(in[r, j] - max_r) for
// each of the rows rows, in f32, with parts blocks per row (see the split rows above). A
// block whose segment has at most 32 elements per thread reads it once into registers
// (128-bit vectors when cols is a multiple of 16/size(dt)), takes the segment's maximum m
// and sum s of exp(x - m), and publishes (m, s); a longer segment is read twice, the first
// pass keeping each thread's running maximum and its sum scaled to it (online softmax).
// Every block then combines the parts' partials, M = max m and S = sum s*exp(m - M) (in
// part order: the same in every block), and writes its segment, exp(x - M)/S. Launch
// SplitRowShape(rows, cols, sms), co-resident.
func SoftmaxSplit(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[SoftmaxSplitArgs](k, dt)
	w := newSplitWork(k, dt, a.Scratch, a.Rows, a.Cols, a.Parts)
	negInf := math.Inf(-1)
	// finite returns m, or 0 when m is -inf (no finite element yet: x - m stays -inf, not NaN).
	finite := func(m dsl.Value) dsl.Value { return k.Select(m.Eq(negInf), float32(0), m) }
	// combine publishes the block's (m, s) and returns the row's max (finite) and 1/sum.
	combine := func(buf, m, s dsl.Value) (dsl.Value, dsl.Value) {
		w.publish(buf, m, s)
		rm := finite(w.gather(buf, dsl.Max, negInf, func(m, _ dsl.Value) dsl.Value { return m }))
		sum := w.gather(buf, dsl.Sum, 0, func(m, s dsl.Value) dsl.Value { return s.Mul(m.Sub(rm).Exp()) })
		return rm, sum.Rcp()
	}
	// write stores the f32 values ex, converted to dt, for chunk c.
	write := func(q dsl.Ptr, c dsl.Value, ex []dsl.Value, frags []dsl.Tensor) {
		for i, x := range ex {
			frags[i/w.v].Set(i%w.v, x.To(dt))
		}
		w.store(q, c, frags)
	}
	w.eachRow(&a.In, &a.Out, func(_, it dsl.Value, p, q dsl.Ptr) {
		buf := it.And(uint32(1))
		k.If(w.seg.Le(w.chunkElems()), func() {
			frags := w.load(p, w.lo, negInf)
			x := f32s(frags)
			m := k.BlockReduce(fold(x, maxv), dsl.Max)
			fm := finite(m)
			ex := make([]dsl.Value, len(x))
			for i := range x {
				ex[i] = x[i].Sub(fm).Exp()
			}
			rm, inv := combine(buf, m, k.BlockReduce(fold(ex, add), dsl.Sum))
			scale := fm.Sub(rm).Exp().Mul(inv)
			for i := range ex {
				ex[i] = ex[i].Mul(scale)
			}
			write(q, w.lo, ex, frags)
		}).Else(func() {
			step := w.chunkElems()
			m, s := k.Var(dsl.F32, negInf), k.Var(dsl.F32, 0.0)
			k.For(w.lo, w.cols, step, func(c dsl.Value) {
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
			bm := k.BlockReduce(m, dsl.Max)
			rm, inv := combine(buf, bm, k.BlockReduce(s.Mul(m.Sub(finite(bm)).Exp()), dsl.Sum))
			k.For(w.lo, w.cols, step, func(c dsl.Value) {
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
