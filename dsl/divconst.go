package dsl

import (
	"math/bits"

	"github.com/kgen-dev/kgen/ptx"
)

// Integer division and remainder by a constant. ptxas (13.x, sm_90) compiles div and rem by
// an immediate, even by 4, to its general reciprocal sequence: about 30 instructions with a
// MUFU.RCP, where a C++ compiler's front end would have left PTX shifts and a
// multiply-high. With WithShiftDivision the DSL strength-reduces them itself, exactly (PTX's
// div and rem truncate toward zero, like Go's / and %):
//   - unsigned by 2^s: shr and and;
//   - signed by 2^s: the bias (v >> (w-1)) & (2^s - 1) makes the shift truncate toward zero;
//   - u32 by another constant c: q = mul.hi(v, M) >> (p-32) with M = ceil(2^p / c) for the
//     least p whose M fits 32 bits and whose error M*c - 2^p is at most 2^(p-32), which makes
//     q exact for every 32-bit v (Granlund and Montgomery); the remainder is v - q*c.
// Other constants (negative, or a u32 divisor without such an M, like 7) keep div and rem.

// divByConst returns v / c (rem false) or v % c for a 32- or 64-bit integer v and a constant
// c, and true, when one of the sequences above applies.
func (k *Kernel) divByConst(rem bool, v, c Value) (Value, bool) {
	t := v.t
	if t != U32 && t != I32 && t != U64 && t != I64 {
		return Value{}, false
	}
	w := t.Bits()
	signed := t.Kind() == ptx.KindSigned
	x := constInt(c)
	if signed && x < 1 {
		return Value{}, false
	}
	u := uint64(x) // a signed divisor here is positive
	if u == 1 {
		if rem {
			return k.Const(t, 0), true
		}
		return v, true
	}
	if u&(u-1) == 0 { // 2^s
		s := bits.TrailingZeros64(u)
		mask := int64(u - 1)
		if !signed {
			if rem {
				return v.And(mask), true
			}
			return v.Shr(s), true
		}
		biased := v.Add(v.Shr(w - 1).And(mask))
		if rem {
			return v.Sub(biased.And(^mask)), true
		}
		return biased.Shr(s), true
	}
	if t != U32 {
		return Value{}, false
	}
	m, p, ok := magicU32(uint32(u))
	if !ok {
		return Value{}, false
	}
	q := k.mulHiU32(v, m)
	if p > 32 {
		q = q.Shr(p - 32)
	}
	if rem {
		return v.Sub(q.Mul(uint32(u))), true
	}
	return q, true
}

// magicU32 returns M and p with floor(v*M / 2^p) = floor(v / c) for every uint32 v, M below
// 2^32 (so that mul.hi.u32 takes it), or false when no p up to 63 gives one.
func magicU32(c uint32) (m uint32, p int, ok bool) {
	for p = 32; p < 64; p++ {
		// M = ceil(2^p / c), in 128 bits: 2^p fits 64.
		hi, lo := uint64(0), uint64(1)<<p
		q, r := bits.Div64(hi, lo, uint64(c))
		mm := q
		if r != 0 {
			mm++
		}
		if mm >= 1<<32 {
			continue
		}
		if e := mm*uint64(c) - uint64(1)<<p; e <= uint64(1)<<(p-32) {
			return uint32(mm), p, true
		}
	}
	return 0, 0, false
}

// mulHiU32 returns the high 32 bits of the 64-bit product of the u32 v and m (mul.hi.u32).
func (k *Kernel) mulHiU32(v Value, m uint32) Value {
	c := k.Const(U32, m)
	return k.memo("MulHi", U32, []Value{v, c}, func(d ptx.Reg) {
		k.op("mul", qHi, U32, d, k.operand(v), k.operand(c))
	})
}

// qHi is mul's .hi qualifier.
var qHi = []string{"hi"}
