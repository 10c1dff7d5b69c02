package dsl

import (
	"math"

	"github.com/kgen-dev/kgen/ptx"
)

// float32Unary emits an f32 (or f64 where PTX has it) special-function instruction.
func (v Value) special(name, op string, q []string, f64 bool, fold func(float64) float64) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	if !k.own(v, name) {
		return k.poison(v.t)
	}
	if v.t != F32 && !(f64 && v.t == F64) {
		allowed := "F32"
		if f64 {
			allowed = "F32 and F64"
		}
		k.errorf("%s is defined for %s, not %s (convert with To)", name, allowed, v.t)
		return k.poison(v.t)
	}
	if v.IsConst() {
		r, _ := floatConst(k, v.t, fold(constFloat(v)))
		return r
	}
	return k.memo(name, v.t, []Value{v}, func(d ptx.Reg) {
		k.emit(&ptx.Instr{Op: op, Q: q, Types: []ptx.Type{v.t}, Args: []ptx.Operand{d, k.operand(v)}})
	})
}

// Exp2 returns 2**v (ex2.approx.ftz.f32: about 2 ulp, subnormals flushed).
func (v Value) Exp2() Value {
	return v.special("Exp2", "ex2", []string{"approx", "ftz"}, false, math.Exp2)
}

// Exp returns e**v as 2**(v*log2(e)) (ex2.approx; about 2 ulp plus the rounding of the
// product).
func (v Value) Exp() Value {
	if v.k == nil {
		return v
	}
	if v.t != F32 {
		v.k.errorf("Exp is defined for F32, not %s (convert with To)", v.t)
		return v.k.poison(v.t)
	}
	return v.Mul(float32(math.Log2E)).Exp2()
}

// Log2 returns log2(v) (lg2.approx.ftz.f32).
func (v Value) Log2() Value {
	return v.special("Log2", "lg2", []string{"approx", "ftz"}, false, math.Log2)
}

// Sqrt returns the correctly rounded square root (sqrt.rn).
func (v Value) Sqrt() Value { return v.special("Sqrt", "sqrt", []string{"rn"}, true, math.Sqrt) }

// Rsqrt returns 1/sqrt(v) (rsqrt.approx).
func (v Value) Rsqrt() Value {
	return v.special("Rsqrt", "rsqrt", []string{"approx"}, true, func(x float64) float64 { return 1 / math.Sqrt(x) })
}

// Rcp returns 1/v correctly rounded (rcp.rn).
func (v Value) Rcp() Value {
	return v.special("Rcp", "rcp", []string{"rn"}, true, func(x float64) float64 { return 1 / x })
}

// RcpApprox returns an approximation of 1/v (rcp.approx.ftz.f32: at most 1 ulp, one
// special-function instruction where Rcp takes several).
func (v Value) RcpApprox() Value {
	return v.special("RcpApprox", "rcp", []string{"approx", "ftz"}, false, func(x float64) float64 { return 1 / x })
}

// Tanh returns tanh(v) (tanh.approx.f32, sm_75 and later: relative error about 2^-11, one
// special-function instruction).
func (v Value) Tanh() Value { return v.special("Tanh", "tanh", []string{"approx"}, false, math.Tanh) }
