package dsl

import (
	"math"

	"github.com/kgen-dev/kgen/ptx"
)

func isInt(t Type) bool   { return t.IsInt() }
func isFloat(t Type) bool { return t == F16 || t == BF16 || t == F32 || t == F64 }
func isNum(t Type) bool   { return isInt(t) || isFloat(t) }
func isLogic(t Type) bool { return isInt(t) || t == Bool }

// binary emits d = v op w, or folds it when both are constants.
func (v Value) binary(name string, x any, allowed func(Type) bool, emit func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand), fold func(a, b Value) (Value, bool)) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	w, ok := k.val(x, v.t, name)
	if !ok || !k.own(v, name) {
		return k.poison(v.t)
	}
	if !allowed(v.t) {
		k.errorf("%s is not defined for %s", name, v.t)
		return k.poison(v.t)
	}
	if (name == "Div" || name == "Rem") && isInt(v.t) && w.IsConst() && constInt(w) == 0 {
		k.errorf("%s: integer division by the constant 0", name)
		return k.poison(v.t)
	}
	if v.IsConst() && w.IsConst() && fold != nil {
		if r, ok := fold(v, w); ok {
			return r
		}
	}
	if r, ok := simplify(name, v, w); ok {
		return r
	}
	if k.shiftDiv && (name == "Div" || name == "Rem") && isInt(v.t) && w.IsConst() {
		if r, ok := k.divByConst(name == "Rem", v, w); ok {
			return r
		}
	}
	return k.memo(name, v.t, []Value{v, w}, func(d ptx.Reg) {
		k.emit8(name, v.t, d, func(t Type, d ptx.Reg) { emit(k, t, d, k.operand(v), k.operand(w)) })
	})
}

// arithType is the type arithmetic on t runs in: PTX has no 8-bit arithmetic, and 8-bit
// integers live in 16-bit registers, zero-extended (U8) or sign-extended (I8) as ld.u8 and
// ld.s8 leave them, so their operations use the 16-bit form.
func arithType(t Type) Type {
	switch t {
	case U8:
		return ptx.U16
	case I8:
		return ptx.S16
	}
	return t
}

// wraps8 reports whether operation name on 8-bit integers of type t can leave the 8-bit
// range when computed in 16 bits (and so must wrap back): sums, differences, products and
// left shifts can; so can negating -128, and dividing -128 by -1. Min, max, remainders,
// right shifts, comparisons and the bitwise operations of sign- or zero-extended operands
// stay extended (Not of a U8 is an xor with 0xff, see Not).
func wraps8(name string, t Type) bool {
	switch name {
	case "Add", "Sub", "Mul", "Shl", "FMA":
		return true
	case "Neg", "Abs", "Div":
		return t == I8
	}
	return false
}

// emit8 calls emit with t's arithmetic type and the destination d. For 8-bit integers whose
// operation can overflow 8 bits, emit computes into a 16-bit temporary and d gets it wrapped
// as Go's uint8 and int8 arithmetic wraps: the low byte, zero- or sign-extended.
func (k *Kernel) emit8(name string, t Type, d ptx.Reg, emit func(t Type, d ptx.Reg)) {
	at := arithType(t)
	if at == t || !wraps8(name, t) {
		emit(at, d)
		return
	}
	r := k.reg(at)
	emit(at, r)
	k.wrap8(t, d, r)
}

// wrap8 sets d to the low byte of the 16-bit r, zero-extended for U8, sign-extended for I8.
func (k *Kernel) wrap8(t Type, d, r ptx.Reg) {
	if t == I8 {
		k.emit(&ptx.Instr{Op: "cvt", Types: []ptx.Type{ptx.S16, ptx.S8}, Args: []ptx.Operand{d, r}})
		return
	}
	k.op("and", nil, ptx.B16, d, r, ptx.Imm{Type: ptx.B16, Bits: 0xff})
}

// simplify applies the identities x+0, x-0, x*1, x*0 (integers), x&true, x|false, ...
func simplify(name string, v, w Value) (Value, bool) {
	isC := func(x Value, c int64) bool {
		if !x.IsConst() {
			return false
		}
		if isFloat(x.t) {
			return constFloat(x) == float64(c) && !(c == 0) // float x+0 is not x for -0
		}
		return constInt(x) == c || (x.t == Bool && int64(x.op.(ptx.Imm).Bits&1) == c)
	}
	if (name == "And" || name == "Or" || name == "Min" || name == "Max") && v.op == w.op && !v.IsConst() {
		return v, true
	}
	switch name {
	case "Add":
		if isC(w, 0) {
			return v, true
		}
		if isC(v, 0) {
			return w, true
		}
	case "Sub":
		if isC(w, 0) {
			return v, true
		}
	case "Mul":
		if isC(w, 1) {
			return v, true
		}
		if isC(v, 1) {
			return w, true
		}
		if isInt(v.t) && (isC(w, 0) || isC(v, 0)) {
			return wrapInt(v.k, v.t, 0), true
		}
	case "Div":
		if isC(w, 1) {
			return v, true
		}
	case "And":
		if v.t == Bool {
			if isC(w, 1) {
				return v, true
			}
			if isC(v, 1) {
				return w, true
			}
			if isC(w, 0) || isC(v, 0) {
				return v.k.Const(Bool, false), true
			}
		}
	case "Or":
		if v.t == Bool {
			if isC(w, 0) {
				return v, true
			}
			if isC(v, 0) {
				return w, true
			}
			if isC(w, 1) || isC(v, 1) {
				return v.k.Const(Bool, true), true
			}
		}
	}
	return Value{}, false
}

// memo emits a pure computation once per scope: a second request for the same operation on
// the same immutable operands returns the first result (common subexpressions).
func (k *Kernel) memo(name string, t Type, args []Value, emit func(d ptx.Reg)) Value {
	key := memoKey{name: name, tn: uint64(t)<<8 | uint64(len(args))}
	pure := len(args) <= len(key.ops)
	for i, a := range args {
		if !pure {
			break
		}
		switch o := a.op.(type) {
		case ptx.Reg:
			pure = !k.mutable.has(o)
			key.ops[i] = [2]uint64{uint64(o.N), uint64(o.Type)}
		case ptx.Imm:
			key.ops[i] = [2]uint64{o.Bits, 1<<16 | uint64(a.t)<<8 | uint64(o.Type)}
		default:
			pure = false
		}
	}
	if pure {
		if v, ok := k.memos[key]; ok {
			return v
		}
	}
	d := k.reg(t)
	emit(d)
	v := Value{k: k, t: t, op: k.boxedReg(d)}
	if pure {
		k.memos[key] = v
		if len(k.scopes) > 0 { // inside runtime control flow: forgotten when it ends
			k.nested = append(k.nested, key)
		}
	}
	return v
}

// boxedReg returns d as an operand, reusing the boxed copy in the last instruction when that
// wrote d (its first operand): one allocation fewer per computed value.
func (k *Kernel) boxedReg(d ptx.Reg) ptx.Operand {
	if k.fn != nil {
		if b := k.fn.Body; len(b) > 0 && len(b[len(b)-1].Args) > 0 {
			if r, ok := b[len(b)-1].Args[0].(ptx.Reg); ok && r == d {
				return b[len(b)-1].Args[0]
			}
		}
	}
	return d
}

// memoKey identifies a pure computation: the operation, its result type and operand count
// (tn), and its operands, each a register (its number, its type) or an immediate (its
// bits; a flag, the value's type and the immediate's type). Packed words hash fast.
type memoKey struct {
	name string
	tn   uint64
	ops  [3][2]uint64
}

func (k *Kernel) op(op string, q []string, t Type, args ...ptx.Operand) {
	x := k.box()
	x.ty[0] = t
	x.in = ptx.Instr{Op: op, Q: q, Types: x.ty[:1:1], Args: append(x.args[:0:len(x.args)], args...)}
	k.emit(&x.in)
}

// op2 is op for an instruction of two types (cvt).
func (k *Kernel) op2(op string, q []string, t1, t2 Type, args ...ptx.Operand) {
	x := k.box()
	x.ty = [2]ptx.Type{t1, t2}
	x.in = ptx.Instr{Op: op, Q: q, Types: x.ty[:2:2], Args: append(x.args[:0:len(x.args)], args...)}
	k.emit(&x.in)
}

// box returns an unused opBox from the slab.
func (k *Kernel) box() *opBox {
	if len(k.opSlab) == 0 { // slabs double up to opSlabLen: small kernels stay small
		k.nslab = min(max(2*k.nslab, 8), opSlabLen)
		k.opSlab = make([]opBox, k.nslab)
	}
	x := &k.opSlab[0]
	k.opSlab = k.opSlab[1:]
	return x
}

// Qualifier lists shared by the instructions that use them (never changed after emission).
var (
	qLo   = []string{"lo"}
	qWide = []string{"wide"}
	qRn   = []string{"rn"}
)

// opBox holds an instruction with its type and (most) operand lists; op takes them from a
// slab of up to opSlabLen, one allocation for many instructions.
type opBox struct {
	in   ptx.Instr
	ty   [2]ptx.Type
	args [4]ptx.Operand
}

const opSlabLen = 64

// simple returns an emitter for "op{.q}.T d, a, b".
func simple(op string, q ...string) func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) {
	return func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) { k.op(op, q, t, d, a, b) }
}

// foldArith folds integer and float arithmetic; integers wrap to their width. fu, when not
// nil, folds unsigned integers (Div, Rem, Min and Max differ from the signed operations on
// a u64 of 2^63 or more, which fi would see negative); fi folds them otherwise.
func foldArith(fi func(a, b int64) (int64, bool), fu func(a, b uint64) (uint64, bool), ff func(a, b float64) float64) func(a, b Value) (Value, bool) {
	return func(a, b Value) (Value, bool) {
		if isInt(a.t) && a.t.Kind() == ptx.KindUnsigned && fu != nil {
			r, ok := fu(uint64(constInt(a)), uint64(constInt(b)))
			if !ok {
				return Value{}, false
			}
			return wrapInt(a.k, a.t, int64(r)), true
		}
		if isInt(a.t) && fi != nil {
			r, ok := fi(constInt(a), constInt(b))
			if !ok {
				return Value{}, false
			}
			return wrapInt(a.k, a.t, r), true
		}
		if isFloat(a.t) && ff != nil {
			v, err := floatConst(a.k, a.t, ff(constFloat(a), constFloat(b)))
			return v, err == nil
		}
		return Value{}, false
	}
}

// ptxMin and ptxMax fold min and max as PTX computes them: a NaN operand gives the other
// operand (math.Min and math.Max give NaN), and -0 is below +0.
func ptxMin(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return math.Min(a, b)
}

func ptxMax(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return math.Max(a, b)
}

func wrapInt(k *Kernel, t Type, r int64) Value {
	bits := uint64(r)
	if n := t.Bits(); n < 64 {
		bits &= 1<<n - 1
	}
	return Value{k: k, t: t, op: immOp(t, bits)}
}

// Add returns v + x. x is a Value of the same type or a Go number.
func (v Value) Add(x any) Value {
	return v.binary("Add", x, isNum, func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) {
		if t == BF16 && k.target.SM() < 90 {
			one := k.operand(k.Const(BF16, 1.0))
			k.op("fma", qRn, BF16, d, a, one, b)
			return
		}
		k.op("add", nil, t, d, a, b)
	}, foldArith(func(a, b int64) (int64, bool) { return a + b, true }, nil, func(a, b float64) float64 { return a + b }))
}

// Sub returns v - x.
func (v Value) Sub(x any) Value {
	return v.binary("Sub", x, isNum, func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) {
		if t == BF16 && k.target.SM() < 90 {
			m1 := k.operand(k.Const(BF16, -1.0))
			k.op("fma", qRn, BF16, d, b, m1, a)
			return
		}
		k.op("sub", nil, t, d, a, b)
	}, foldArith(func(a, b int64) (int64, bool) { return a - b, true }, nil, func(a, b float64) float64 { return a - b }))
}

// Mul returns v * x (the low half for integers).
func (v Value) Mul(x any) Value {
	return v.binary("Mul", x, isNum, func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) {
		switch {
		case isInt(t):
			k.op("mul", qLo, t, d, a, b)
		case t == BF16 && k.target.SM() < 90:
			// a*b + -0 keeps the sign of a zero product (a +0 addend would turn -0 into +0).
			// Go's -0.0 literal is +0, hence Copysign.
			negZero := k.operand(k.Const(BF16, math.Copysign(0, -1)))
			k.op("fma", qRn, BF16, d, a, b, negZero)
		default:
			k.op("mul", nil, t, d, a, b)
		}
	}, foldArith(func(a, b int64) (int64, bool) { return a * b, true }, nil, func(a, b float64) float64 { return a * b }))
}

// MulWide returns the full 64-bit product of 32-bit integers v and x (mul.wide): U64 for
// U32 operands, I64 for I32. Use it where a product of 32-bit extents can pass 2^32 (or
// 2^31 signed), such as a row's element offset row*ld in a large matrix: Mul keeps only the
// low 32 bits.
func (v Value) MulWide(x any) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	if !k.own(v, "MulWide") {
		return k.poison(U64)
	}
	if v.t != U32 && v.t != I32 {
		k.errorf("MulWide: operand type %s (want u32 or s32)", v.t)
		return k.poison(U64)
	}
	wt := U64
	if v.t == I32 {
		wt = I64
	}
	w, ok := k.val(x, v.t, "MulWide")
	if !ok {
		return k.poison(wt)
	}
	if v.IsConst() && w.IsConst() {
		if wt == U64 {
			return k.Const(wt, uint64(constInt(v))*uint64(constInt(w)))
		}
		return k.Const(wt, constInt(v)*constInt(w))
	}
	r := k.memo("MulWide", wt, []Value{v, w}, func(d ptx.Reg) {
		k.op("mul", qWide, v.t, d, k.operand(v), k.operand(w))
	})
	if div := k.divOf(v) * k.divOf(w); div > 1 && div < 1<<30 {
		k.Assume(r, int(div)) // what Assume said of the factors holds of the product
	}
	return r
}

// Div returns v / x: truncating for integers, IEEE round-to-nearest for F32 and F64.
func (v Value) Div(x any) Value {
	return v.binary("Div", x, func(t Type) bool { return isInt(t) || t == F32 || t == F64 },
		func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) {
			if isFloat(t) {
				k.op("div", qRn, t, d, a, b)
				return
			}
			k.op("div", nil, t, d, a, b)
		}, foldArith(func(a, b int64) (int64, bool) {
			if b == 0 {
				return 0, false
			}
			return a / b, true
		}, func(a, b uint64) (uint64, bool) {
			if b == 0 {
				return 0, false
			}
			return a / b, true
		}, func(a, b float64) float64 { return a / b }))
}

// Rem returns v % x for integers.
func (v Value) Rem(x any) Value {
	return v.binary("Rem", x, isInt, simple("rem"), foldArith(func(a, b int64) (int64, bool) {
		if b == 0 {
			return 0, false
		}
		return a % b, true
	}, func(a, b uint64) (uint64, bool) {
		if b == 0 {
			return 0, false
		}
		return a % b, true
	}, nil))
}

// Min returns the smaller of v and x.
func (v Value) Min(x any) Value {
	return v.binary("Min", x, isNum, simple("min"), foldArith(func(a, b int64) (int64, bool) { return min(a, b), true }, func(a, b uint64) (uint64, bool) { return min(a, b), true }, ptxMin))
}

// Max returns the larger of v and x.
func (v Value) Max(x any) Value {
	return v.binary("Max", x, isNum, simple("max"), foldArith(func(a, b int64) (int64, bool) { return max(a, b), true }, func(a, b uint64) (uint64, bool) { return max(a, b), true }, ptxMax))
}

// And returns the bitwise (or logical, for Bool) and of v and x.
func (v Value) And(x any) Value {
	return v.logic("And", "and", x, func(a, b int64) int64 { return a & b })
}

// Or returns the bitwise (or logical) or.
func (v Value) Or(x any) Value {
	return v.logic("Or", "or", x, func(a, b int64) int64 { return a | b })
}

// Xor returns the bitwise (or logical) exclusive or.
func (v Value) Xor(x any) Value {
	return v.logic("Xor", "xor", x, func(a, b int64) int64 { return a ^ b })
}

func (v Value) logic(name, op string, x any, f func(a, b int64) int64) Value {
	return v.binary(name, x, isLogic, func(k *Kernel, t Type, d ptx.Reg, a, b ptx.Operand) {
		k.op(op, nil, bitType(t), d, a, b)
	}, func(a, b Value) (Value, bool) {
		return wrapInt(a.k, a.t, f(constInt(a), constInt(b))), a.t != Bool
	})
}

func bitType(t Type) Type {
	if t == Bool {
		return Bool
	}
	return arithType(t).BitType()
}

// Shl returns v << n. n is a U32 Value or a Go number.
func (v Value) Shl(n any) Value { return v.shift("Shl", n) }

// Shr returns v >> n: arithmetic for signed types, logical for unsigned.
func (v Value) Shr(n any) Value { return v.shift("Shr", n) }

func (v Value) shift(name string, n any) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	s, ok := k.val(n, U32, name+" amount")
	if !ok || !k.own(v, name) {
		return k.poison(v.t)
	}
	if !isInt(v.t) {
		k.errorf("%s is not defined for %s", name, v.t)
		return k.poison(v.t)
	}
	if v.IsConst() && s.IsConst() {
		a, c := constInt(v), uint(constInt(s))
		if name == "Shl" {
			return wrapInt(k, v.t, a<<c)
		}
		if v.t.Kind() == ptx.KindUnsigned {
			return wrapInt(k, v.t, int64(uint64(a)>>c))
		}
		return wrapInt(k, v.t, a>>c)
	}
	return k.memo(name, v.t, []Value{v, s}, func(d ptx.Reg) {
		k.emit8(name, v.t, d, func(t Type, d ptx.Reg) {
			if name == "Shl" {
				k.op("shl", nil, t.BitType(), d, k.operand(v), k.operand(s))
			} else {
				k.op("shr", nil, t, d, k.operand(v), k.operand(s))
			}
		})
	})
}

// unary emits d = op v.
func (v Value) unary(name, op string, allowed func(Type) bool, fold func(Value) Value) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	if !k.own(v, name) {
		return k.poison(v.t)
	}
	if !allowed(v.t) {
		k.errorf("%s is not defined for %s", name, v.t)
		return k.poison(v.t)
	}
	if v.IsConst() && fold != nil {
		return fold(v)
	}
	return k.memo(name, v.t, []Value{v}, func(d ptx.Reg) {
		if op == "not" && v.t == U8 {
			// not.b16 would set the high byte of the zero-extended register.
			k.op("xor", nil, ptx.B16, d, k.operand(v), ptx.Imm{Type: ptx.B16, Bits: 0xff})
			return
		}
		k.emit8(name, v.t, d, func(t Type, d ptx.Reg) {
			if op == "not" {
				t = bitType(t)
			}
			k.op(op, nil, t, d, k.operand(v))
		})
	})
}

// Neg returns -v for signed integers and floats.
func (v Value) Neg() Value {
	return v.unary("Neg", "neg", func(t Type) bool { return t.Kind() == ptx.KindSigned || isFloat(t) }, func(c Value) Value {
		if isFloat(c.t) {
			r, _ := floatConst(c.k, c.t, -constFloat(c))
			return r
		}
		return wrapInt(c.k, c.t, -constInt(c))
	})
}

// Abs returns |v| for signed integers and floats.
func (v Value) Abs() Value {
	return v.unary("Abs", "abs", func(t Type) bool { return t.Kind() == ptx.KindSigned || isFloat(t) }, func(c Value) Value {
		if isFloat(c.t) {
			r, _ := floatConst(c.k, c.t, math.Abs(constFloat(c)))
			return r
		}
		x := constInt(c)
		if x < 0 {
			x = -x
		}
		return wrapInt(c.k, c.t, x)
	})
}

// Not returns the bitwise (or logical) complement.
func (v Value) Not() Value {
	return v.unary("Not", "not", isLogic, func(c Value) Value {
		if c.t == Bool {
			return Value{k: c.k, t: Bool, op: ptx.Imm{Type: ptx.Pred, Bits: 1 &^ c.op.(ptx.Imm).Bits}}
		}
		return wrapInt(c.k, c.t, ^constInt(c))
	})
}

// Comparisons return Bool values.

// Eq reports v == x.
func (v Value) Eq(x any) Value { return v.compare("Eq", "eq", x) }

// Ne reports v != x.
func (v Value) Ne(x any) Value { return v.compare("Ne", "ne", x) }

// Lt reports v < x.
func (v Value) Lt(x any) Value { return v.compare("Lt", "lt", x) }

// Le reports v <= x.
func (v Value) Le(x any) Value { return v.compare("Le", "le", x) }

// Gt reports v > x.
func (v Value) Gt(x any) Value { return v.compare("Gt", "gt", x) }

// Ge reports v >= x.
func (v Value) Ge(x any) Value { return v.compare("Ge", "ge", x) }

func (v Value) compare(name, cmp string, x any) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	w, ok := k.val(x, v.t, name)
	if !ok || !k.own(v, name) {
		return k.poison(Bool)
	}
	if !isNum(v.t) && !(v.t == Bool && (cmp == "eq" || cmp == "ne")) {
		k.errorf("%s is not defined for %s", name, v.t)
		return k.poison(Bool)
	}
	if v.IsConst() && w.IsConst() {
		var r bool
		if isFloat(v.t) {
			a, b := constFloat(v), constFloat(w)
			r = map[string]bool{"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp]
		} else if v.t.Kind() == ptx.KindUnsigned {
			a, b := uint64(constInt(v)), uint64(constInt(w))
			r = map[string]bool{"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp]
		} else {
			a, b := constInt(v), constInt(w)
			r = map[string]bool{"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp]
		}
		return k.Const(Bool, r)
	}
	t := v.t
	if t == Bool {
		// p != q is p xor q; p == q is not(p xor q).
		if cmp == "ne" {
			return v.Xor(w)
		}
		return v.Xor(w).Not()
	}
	if t == BF16 && k.target.SM() < 90 {
		// setp.bf16 needs sm_90: compare exactly in f32.
		return v.To(F32).compare(name, cmp, w.To(F32))
	}
	if isFloat(t) && cmp == "ne" {
		cmp = "neu" // NaN != x is true, as in Go
	}
	q, name := setpQ(cmp, t)
	return k.memo(name, Bool, []Value{v, w}, func(d ptx.Reg) {
		k.op("setp", q, arithType(t), d, k.operand(v), k.operand(w))
	})
}

// setpCmps are the comparisons of setp the DSL emits; setpNames their memo names by type.
var setpCmps = [...][]string{{"eq"}, {"ne"}, {"lt"}, {"le"}, {"gt"}, {"ge"}, {"neu"}}

var setpNames = func() (n [len(setpCmps)][ptx.TF32 + 1]string) {
	for i, c := range setpCmps {
		for t := range n[i] {
			n[i][t] = "setp." + c[0] + "." + ptx.Type(t).String()
		}
	}
	return n
}()

// setpQ returns the qualifiers of setp.cmp (shared, never changed) and the memo name of a
// comparison of t, without allocating for the common ones.
func setpQ(cmp string, t Type) ([]string, string) {
	for i, c := range setpCmps {
		if c[0] == cmp && int(t) < len(setpNames[i]) {
			return c, setpNames[i][t]
		}
	}
	return []string{cmp}, "setp." + cmp + "." + t.String()
}

// Select returns a where cond is true, else b; a and b have the same type.
func (k *Kernel) Select(cond Value, a, b any) Value {
	if !k.live() {
		return Value{}
	}
	av, aok := a.(Value)
	bv, bok := b.(Value)
	var t Type
	switch {
	case aok:
		t = av.t
	case bok:
		t = bv.t
	default:
		k.errorf("Select: give at least one Value so the type is known")
		return k.poison(U32)
	}
	x, ok1 := k.val(a, t, "Select")
	y, ok2 := k.val(b, t, "Select")
	if !k.own(cond, "Select") || !ok1 || !ok2 {
		return k.poison(t)
	}
	if cond.t != Bool {
		k.errorf("Select: condition is %s, not Bool", cond.t)
		return k.poison(t)
	}
	if cond.IsConst() {
		if cond.op.(ptx.Imm).Bits&1 == 1 {
			return x
		}
		return y
	}
	d := k.reg(t)
	if t == Bool {
		// d = (c and x) or (not c and y)
		t1, t2, nc := k.reg(Bool), k.reg(Bool), k.reg(Bool)
		k.op("and", nil, Bool, t1, cond.op, k.operand(x))
		k.op("not", nil, Bool, nc, cond.op)
		k.op("and", nil, Bool, t2, nc, k.operand(y))
		k.op("or", nil, Bool, d, t1, t2)
		return Value{k: k, t: Bool, op: d}
	}
	st := arithType(t)
	if t == F16 || t == BF16 || t == E4M3 || t == E5M2 {
		st = ptx.B16
	}
	k.op("selp", nil, st, d, k.operand(x), k.operand(y), cond.op)
	return Value{k: k, t: t, op: d}
}

// FMA returns a*b + c, fused and rounded once for floats (mad.lo for integers).
func (k *Kernel) FMA(a, b, c Value) Value {
	if !k.live() {
		return Value{}
	}
	if !k.own(a, "FMA") || !k.own(b, "FMA") || !k.own(c, "FMA") {
		return k.poison(a.t)
	}
	if a.t != b.t || a.t != c.t {
		k.errorf("FMA: type mismatch: %s, %s, %s", a.t, b.t, c.t)
		return k.poison(a.t)
	}
	if !isNum(a.t) {
		k.errorf("FMA is not defined for %s", a.t)
		return k.poison(a.t)
	}
	d := k.reg(a.t)
	if isInt(a.t) {
		k.emit8("FMA", a.t, d, func(t Type, d ptx.Reg) {
			k.op("mad", qLo, t, d, k.operand(a), k.operand(b), k.operand(c))
		})
	} else {
		k.op("fma", qRn, a.t, d, k.operand(a), k.operand(b), k.operand(c))
	}
	return Value{k: k, t: a.t, op: d}
}

// Bitcast reinterprets v's bits as type t of the same width, converting nothing (mov.b16,
// .b32, .b64): f32 <-> u32, f16 <-> u16, a packed fp8 word (E4M3x4) <-> u32. 8-bit types
// live in 16-bit registers and are not bitcast; convert them with To.
func (v Value) Bitcast(t Type) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	if !k.own(v, "Bitcast") {
		return k.poison(t)
	}
	bits := v.t.Bits()
	if v.t == Bool || t == Bool || t == ptx.NoType || bits != t.Bits() || bits != 16 && bits != 32 && bits != 64 {
		k.errorf("Bitcast: %s (%d bits) to %s (%d bits): needs two 16-, 32- or 64-bit types of the same width", v.t, v.t.Bits(), t, t.Bits())
		return k.poison(t)
	}
	if v.t == t {
		return v
	}
	return k.memo("Bitcast", t, []Value{v}, func(d ptx.Reg) {
		src := k.operand(v)
		if im, ok := src.(ptx.Imm); ok {
			src = ptx.Imm{Type: v.t.BitType(), Bits: im.Bits}
		}
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{v.t.BitType()}, Args: []ptx.Operand{d, src}})
	})
}

// To converts v to type t: floats to integers truncate toward zero (as Go does), integers
// and wider floats round to nearest even, integers wrap or extend by their signedness.
func (v Value) To(t Type) Value {
	k := v.k
	if k == nil {
		return Value{}
	}
	if !k.own(v, "To") {
		return k.poison(t)
	}
	if !isNum(v.t) || !isNum(t) {
		k.errorf("To: cannot convert %s to %s", v.t, t)
		return k.poison(t)
	}
	if v.t == t {
		return v
	}
	if v.IsConst() {
		switch {
		case isFloat(t) && isFloat(v.t):
			r, _ := floatConst(k, t, constFloat(v))
			return r
		case isFloat(t):
			x := constInt(v)
			r, _ := floatConst(k, t, intFloat(t, x, uint64(x), v.t.Kind() == ptx.KindUnsigned))
			return r
		case isInt(v.t):
			return wrapInt(k, t, constInt(v))
		}
	}
	if k.target.SM() < 90 && (v.t == BF16 || t == BF16) {
		return k.convertBF16(v, t)
	}
	if t == BF16 && v.t.Bits() == 8 || v.t == BF16 && t.Bits() == 8 {
		// PTX has no cvt between .bf16 and 8-bit integers: go through f32 (exact for 8-bit
		// values; f32 to an integer saturates as a direct cvt would).
		return v.To(F32).To(t)
	}
	var rnd []string
	switch {
	case isFloat(v.t) && isInt(t):
		rnd = []string{"rzi"}
	case isInt(v.t) && isFloat(t):
		rnd = []string{"rn"}
	case isFloat(v.t) && isFloat(t) && t.Bits() < v.t.Bits():
		rnd = []string{"rn"}
	case isFloat(v.t) && isFloat(t) && (t == BF16 || v.t == BF16) && t.Bits() == v.t.Bits():
		rnd = []string{"rn"}
	}
	return k.memo("To", t, []Value{v}, func(d ptx.Reg) {
		if t == I8 {
			// An I8 register holds the byte sign-extended: convert to 8 bits, then extend
			// explicitly (an I16's register already holds its low byte).
			r, _ := v.op.(ptx.Reg) // constants folded above
			if r.Type != ptx.S16 {
				r = k.reg(I8)
				k.emit(&ptx.Instr{Op: "cvt", Q: rnd, Types: []ptx.Type{t, v.t}, Args: []ptx.Operand{r, k.operand(v)}})
			}
			k.wrap8(I8, d, r)
			return
		}
		k.op2("cvt", rnd, t, v.t, d, k.operand(v))
	})
}

// convertBF16 converts to or from BF16 on targets before sm_90, where cvt handles only
// f32 -> bf16: other conversions go through f32 (bf16 -> f32 is exact: a 16-bit shift).
func (k *Kernel) convertBF16(v Value, t Type) Value {
	if v.t == BF16 {
		u := k.reg(U32)
		// k.operand: a BF16 constant's op holds its value, not its bits (the low 16 bits of
		// -1.5's float64 are 0: its conversion to an integer gave 0).
		k.emit(&ptx.Instr{Op: "cvt", Types: []ptx.Type{ptx.U32, ptx.U16}, Args: []ptx.Operand{u, k.operand(v)}})
		s := k.reg(U32)
		k.op("shl", nil, ptx.B32, s, u, ptx.IntImm(ptx.U32, 16))
		f := k.reg(F32)
		k.op("mov", nil, ptx.B32, f, s)
		return Value{k: k, t: F32, op: f}.To(t)
	}
	f := v.To(F32)
	d := k.reg(BF16)
	k.emit(&ptx.Instr{Op: "cvt", Q: []string{"rn"}, Types: []ptx.Type{ptx.BF16, ptx.F32}, Args: []ptx.Operand{d, k.operand(f)}})
	return Value{k: k, t: BF16, op: d}
}
