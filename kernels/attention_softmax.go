package kernels

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
)

// onlineSoftmax is FlashAttention-2's running softmax over the score rows an mma.sync
// thread holds (two per 16-row atom, mm atoms): per row the running max m of the raw
// scores and this thread's part of the running sum l, with exp2 and the scale folded in.
// Attention and AttentionDecode share it.
type onlineSoftmax struct {
	k         *dsl.Kernel
	mm        int
	m, l      []dsl.Value // per row (registers)
	negInf    dsl.Value
	scaleLog2 dsl.Value // the scores' scale times log2(e)
}

// newOnlineSoftmax starts the state of 2*mm rows (m = -inf, l = 0) for scores scaled by
// scale.
func newOnlineSoftmax(k *dsl.Kernel, mm int, scale dsl.Value) *onlineSoftmax {
	s := &onlineSoftmax{k: k, mm: mm, m: make([]dsl.Value, 2*mm), l: make([]dsl.Value, 2*mm)}
	s.negInf = k.Const(dsl.F32, math.Inf(-1))
	s.scaleLog2 = scale.Mul(float32(math.Log2E))
	for r := range s.m {
		s.m[r] = k.Var(dsl.F32, s.negInf) // running max of the raw scores
		s.l[r] = k.Var(dsl.F32, 0.0)      // this thread's part of the running sum
	}
	return s
}

// idx is the accumulator register of row r, n-tile n, column c (0, 1) of an S or O
// fragment.
func (s *onlineSoftmax) idx(r, n, c int) int { return c + 2*(r%2) + 4*(r/2) + 4*s.mm*n }

// quadMax and quadSum reduce x over the four threads that share a row.
func (s *onlineSoftmax) quadMax(x dsl.Value) dsl.Value {
	x = x.Max(s.k.ShuffleXor(x, uint32(1)))
	return x.Max(s.k.ShuffleXor(x, uint32(2)))
}

func (s *onlineSoftmax) quadSum(x dsl.Value) dsl.Value {
	x = x.Add(s.k.ShuffleXor(x, uint32(1)))
	return x.Add(s.k.ShuffleXor(x, uint32(2)))
}

// step takes a tile of raw scores tS (ns n-tiles, masked entries -inf): it updates m and l,
// turns tS into exp2(scale*(S - m)) in place, and rescales the no n-tiles of O by
// exp2(scale*(m_old - m_new)).
func (s *onlineSoftmax) step(tS, tO dsl.Tensor, ns, no int) {
	k := s.k
	for r := range s.m {
		mx := s.m[r]
		for n := range ns {
			for c := range 2 {
				mx = mx.Max(tS.Get(s.idx(r, n, c)))
			}
		}
		mx = s.quadMax(mx)
		// exp2 offsets: 0 for a row with no key yet (m = -inf), so that its -inf scores
		// give 0, not NaN.
		ms := k.Select(mx.Eq(s.negInf), k.Const(dsl.F32, 0.0), mx.Mul(s.scaleLog2))
		corr := k.FMA(s.m[r], s.scaleLog2, ms.Neg()).Exp2()
		sum := k.Const(dsl.F32, 0.0)
		for n := range ns {
			for c := range 2 {
				i := s.idx(r, n, c)
				p := k.FMA(tS.Get(i), s.scaleLog2, ms.Neg()).Exp2()
				tS.Set(i, p)
				sum = sum.Add(p)
			}
		}
		k.Set(s.l[r], k.FMA(s.l[r], corr, sum))
		k.Set(s.m[r], mx)
		for n := range no {
			for c := range 2 {
				i := s.idx(r, n, c)
				tO.Set(i, tO.Get(i).Mul(corr))
			}
		}
	}
}

// packP writes the probabilities tS into the A registers tP of the P·V GEMM, rounded to in:
// k-block kb is n-tiles 2kb and 2kb+1 of S; A register j of a 16-row atom holds row half
// j%2 of n-tile 2kb + j/2.
func (s *onlineSoftmax) packP(tP, tS dsl.Tensor, kBlocks int, in dsl.Type) {
	for kb := range kBlocks {
		for mm := range s.mm {
			for j := range 4 {
				r, n := 2*mm+j%2, 2*kb+j/2
				tP.Set(j+4*mm+4*s.mm*kb, s.k.Pack2(tS.Get(s.idx(r, n, 0)), tS.Get(s.idx(r, n, 1)), in))
			}
		}
	}
}
