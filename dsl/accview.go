package dsl

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// AccView places a thread's accumulator registers of a TiledGMMA in the 64 x N tile of its
// warpgroup (or the TiledGMMA's whole tile, see TiledGMMA.AccView), from the atom's C layout (CuTe's partition of an identity tensor by the thread's C
// layout): register i lies at row Row() + RowOff[i] and column Col() + ColOff[i]. Epilogues
// index memory with it; softmax reduces over rows with Rows and RowReduce.
type AccView struct {
	k              *Kernel
	t              Value
	RowOff, ColOff []int
	rowTerms       []accTerm // the thread's row: sum of ((t / div) % mod) * mul
	colTerms       []accTerm
	quad           []int // lane xor masks of the threads holding the same rows
}

// accTerm is ((t / div) % mod) * mul, div and mod powers of two; mod 0: no modulo (the
// thread index's top mode).
type accTerm struct{ div, mod, mul int }

// AccView returns the view of the calling thread's accumulators; t (a U32 Value) is its
// index among m's consumer threads, 0..128*WarpGroupsM-1, warpgroup w's first: then Row is
// the row in the whole 64*WarpGroupsM x N tile (warpgroup w's rows 64w..64w+63); t & 127
// gives the row in the warpgroup's own 64 rows. A thread index counting a producer
// warpgroup first must subtract it (tid - 128). A C layout whose thread and value parts do
// not add (no GMMA atom has one) is an error.
func (m TiledGMMA) AccView(k *Kernel, t Value) AccView {
	if !k.live() {
		if t.k != nil {
			t.k.errorf("AccView: nil kernel")
		}
		return AccView{}
	}
	defer k.hold()()
	v := AccView{k: k, t: t}
	at := m.Atom
	if at.N == 0 {
		k.errorf("AccView: zero GMMA atom (use MakeGMMAAtom)")
		return v
	}
	if !k.own(t, "AccView") {
		return v
	}
	if t.t != U32 {
		k.errorf("AccView: thread index is %s; want U32", t.t)
		return v
	}
	rt, ct, quad, err := accThreadTermsCached(at)
	if err != nil {
		k.errorf("AccView: %v", err)
		return v
	}
	v.rowTerms, v.colTerms, v.quad = rt, ct, quad
	r0, c0 := at.Coord(0, 0)
	for i := 0; i < at.AccRegs(); i++ {
		r, c := at.Coord(0, i)
		v.RowOff, v.ColOff = append(v.RowOff, r-r0), append(v.ColOff, c-c0)
	}
	return v
}

// accTerms caches accThreadTerms (a pure function of the atom; checking every thread and
// value costs about 2 ms for an N = 128 atom).
var accTerms sync.Map

type accTermsResult struct {
	rows, cols []accTerm
	quad       []int
	err        error
}

// accThreadTermsCached is accThreadTerms through accTerms (the slices are shared: callers
// only read them).
func accThreadTermsCached(a GMMAAtom) (rows, cols []accTerm, quad []int, err error) {
	key := fmt.Sprintf("%v %v", a, a.CLayout)
	if r, ok := accTerms.Load(key); ok {
		r := r.(accTermsResult)
		return r.rows, r.cols, r.quad, r.err
	}
	rows, cols, quad, err = accThreadTerms(a)
	accTerms.Store(key, accTermsResult{rows, cols, quad, err})
	return rows, cols, quad, err
}

// accThreadTerms splits the thread mode of a's C layout into row and column terms (a mode's
// stride below 64 moves along M, a multiple of 64 along N) and checks that every (thread,
// value) lies at the sum of its thread's and its value's places. quad lists the lane xor
// masks of the modes inside a warp that move along N only: the threads holding a row.
func accThreadTerms(a GMMAAtom) (rows, cols []accTerm, quad []int, err error) {
	tl, err := a.CLayout.Mode(0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: C layout %v has no thread mode: %v", a, a.CLayout, err)
	}
	sh, st := tl.FlatShape(), tl.FlatStride()
	div := 1
	for i := range sh {
		s, d := sh[i], st[i]
		if s&(s-1) != 0 {
			return nil, nil, nil, fmt.Errorf("%s: C layout thread mode %v is not of powers of two", a, tl)
		}
		mod := s
		if div*s == 128 {
			mod = 0
		}
		switch {
		case s == 1:
		case d%GMMAM == 0:
			cols = append(cols, accTerm{div, mod, d / GMMAM})
			if div*s <= 32 {
				for b := div; b < div*s; b *= 2 {
					quad = append(quad, b)
				}
			}
		case d*(s-1) < GMMAM:
			rows = append(rows, accTerm{div, mod, d})
		default:
			return nil, nil, nil, fmt.Errorf("%s: C layout thread mode %d (%d:%d) moves along both M and N", a, i, s, d)
		}
		div *= s
	}
	if div != 128 {
		return nil, nil, nil, fmt.Errorf("%s: C layout has %d threads, not 128", a, div)
	}
	byMul := func(x, y accTerm) int { return y.mul - x.mul } // the larger strides first
	slices.SortStableFunc(rows, byMul)
	slices.SortStableFunc(cols, byMul)
	eval := func(ts []accTerm, t int) int {
		n := 0
		for _, x := range ts {
			q := t / x.div
			if x.mod > 0 {
				q %= x.mod
			}
			n += q * x.mul
		}
		return n
	}
	r0, c0 := a.Coord(0, 0)
	for t := 0; t < 128; t++ {
		for i := 0; i < a.AccRegs(); i++ {
			r, c := a.Coord(t, i)
			ri, ci := a.Coord(0, i)
			if r != eval(rows, t)+ri || c != eval(cols, t)+ci || r0 != 0 || c0 != 0 {
				return nil, nil, nil, fmt.Errorf("%s: C layout value %d of thread %d at (%d, %d) is not its thread's place plus its value's", a, i, t, r, c)
			}
		}
	}
	return rows, cols, quad, nil
}

// Row returns the thread's row of register 0 in the 64 x N tile.
func (v AccView) Row() Value { return v.emit(Value{}, v.rowTerms) }

// Col returns the thread's column of register 0 in the 64 x N tile.
func (v AccView) Col() Value { return v.emit(Value{}, v.colTerms) }

// RowFrom returns row0 + Row(): register 0's row in a tile whose first row is row0.
func (v AccView) RowFrom(row0 Value) Value {
	if v.k != nil && !v.k.own(row0, "AccView.RowFrom") {
		return v.k.poison(U32)
	}
	return v.emit(row0, v.rowTerms)
}

// ColFrom returns col0 + Col().
func (v AccView) ColFrom(col0 Value) Value {
	if v.k != nil && !v.k.own(col0, "AccView.ColFrom") {
		return v.k.poison(U32)
	}
	return v.emit(col0, v.colTerms)
}

// emit adds the terms to origin (none: the zero Value) in order.
func (v AccView) emit(origin Value, ts []accTerm) Value {
	if v.k == nil {
		return Value{}
	}
	if v.RowOff == nil {
		return v.k.poison(U32)
	}
	acc := origin
	for _, x := range ts {
		q := v.t
		switch {
		case x.mod == 0 && x.div > 1:
			q = q.Shr(uint32(bits.TrailingZeros(uint(x.div))))
		case x.mod > 0 && x.div == 1:
			q = q.And(uint32(x.mod - 1))
		case x.mod > 0:
			q = q.And(uint32(x.div*x.mod - 1)).Shr(uint32(bits.TrailingZeros(uint(x.div))))
		}
		if x.mul != 1 {
			q = q.Mul(uint32(x.mul))
		}
		if acc.k == nil {
			acc = q
		} else {
			acc = acc.Add(q)
		}
	}
	if acc.k == nil {
		return v.k.Const(U32, 0)
	}
	return acc
}

// Reg returns the register at row offset dr and column offset dc from register 0, or -1
// when the thread holds none there.
func (v AccView) Reg(dr, dc int) int {
	for i := range v.RowOff {
		if v.RowOff[i] == dr && v.ColOff[i] == dc {
			return i
		}
	}
	return -1
}

// Rows returns, for each row the thread holds (in order of row offset), its registers in
// order of column.
func (v AccView) Rows() [][]int {
	offs := slices.Clone(v.RowOff)
	slices.Sort(offs)
	offs = slices.Compact(offs)
	out := make([][]int, len(offs))
	for r, dr := range offs {
		for i := range v.RowOff {
			if v.RowOff[i] == dr {
				out[r] = append(out[r], i)
			}
		}
		slices.SortStableFunc(out[r], func(a, b int) int { return v.ColOff[a] - v.ColOff[b] })
	}
	return out
}

// RowReduce combines, for each row the thread holds (Rows' order), the values of acc (a
// fragment of the view's registers, e.g. the accumulators or a Map of them) over the whole
// row of the tile with op: over the thread's registers (pairwise, in column order), then
// over the lanes holding the same row (shuffles). Every such thread gets the result: softmax's row max and row sum.
func (v AccView) RowReduce(acc Tensor, op ReduceOp) []Value {
	k := v.k
	if k == nil {
		return nil
	}
	defer k.hold()()
	if !acc.IsFragment() || acc.k != k || len(acc.regs) != len(v.RowOff) {
		k.errorf("RowReduce: acc must be a fragment of the view's %d registers", len(v.RowOff))
		return nil
	}
	var out []Value
	for _, regs := range v.Rows() {
		if !k.checkReduce("RowReduce", op, acc.regs[regs[0]]) {
			return nil
		}
		// Pairwise: a tree of log2(n) dependent steps, not a chain of n (softmax's critical
		// path; ptxas does not reassociate floating point).
		vals := make([]Value, len(regs))
		for j, i := range regs {
			vals[j] = acc.regs[i]
		}
		for len(vals) > 1 {
			next := vals[:0:0]
			for j := 0; j+1 < len(vals); j += 2 {
				next = append(next, op.combine(vals[j], vals[j+1]))
			}
			if len(vals)%2 == 1 {
				next = append(next, vals[len(vals)-1])
			}
			vals = next
		}
		r := vals[0]
		for _, mask := range v.quad {
			r = op.combine(r, k.ShuffleXor(r, mask))
		}
		out = append(out, r)
	}
	return out
}
