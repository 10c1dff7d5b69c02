package dsl

import "github.com/kgen-dev/kgen/ptx"

// Pack2 rounds two F32 values to the 16-bit type t (F16 or BF16, round to nearest even)
// and packs them into one F16x2 or BF16x2 register, lo in the low half: the operand an
// mma.sync A or B fragment register holds (lo the lower-indexed element). One
// cvt.rn.{f16x2,bf16x2}.f32 (sm_80+ for bf16x2); attention uses it to turn the f32
// accumulators of Q*K^T into the A operand of P*V.
func (k *Kernel) Pack2(lo, hi Value, t Type) Value {
	if !k.live() {
		return Value{}
	}
	pt := F16x2
	switch t {
	case F16:
	case BF16:
		pt = BF16x2
	default:
		k.errorf("Pack2: element type %s (want F16 or BF16)", t)
		return k.poison(F16x2)
	}
	if !k.own(lo, "Pack2") || !k.own(hi, "Pack2") {
		return k.poison(pt)
	}
	if lo.t != F32 || hi.t != F32 {
		k.errorf("Pack2: values are %s and %s (want F32)", lo.t, hi.t)
		return k.poison(pt)
	}
	if pt == BF16x2 && k.target.SM() < 80 {
		k.errorf("Pack2: cvt to bf16x2 needs sm_80 or later; the kernel targets %s", k.target)
		return k.poison(pt)
	}
	return k.memo("Pack2", pt, []Value{lo, hi}, func(d ptx.Reg) {
		// cvt.rn.bf16x2.f32 d, a, b: d.hi = a, d.lo = b.
		k.emit(&ptx.Instr{Op: "cvt", Q: []string{"rn"}, Types: []ptx.Type{pt, ptx.F32}, Args: []ptx.Operand{d, k.operand(hi), k.operand(lo)}})
	})
}
