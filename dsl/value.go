package dsl

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// Value is a typed value in a kernel: a virtual register or a constant. The zero Value is
// invalid; operations on it are recorded as errors.
type Value struct {
	k  *Kernel
	t  Type
	op ptx.Operand // ptx.Reg, or ptx.Imm for a constant
}

// Type returns the value's type.
func (v Value) Type() Type { return v.t }

// Kernel returns the kernel the value belongs to (nil for the zero Value).
func (v Value) Kernel() *Kernel { return v.k }

// IsConst reports whether the value is a compile-time constant.
func (v Value) IsConst() bool { _, ok := v.op.(ptx.Imm); return ok }

// String describes the value for error messages.
func (v Value) String() string {
	switch o := v.op.(type) {
	case ptx.Reg:
		return fmt.Sprintf("%s %s", v.t, ptx.RegName(o))
	case ptx.Imm:
		if v.t.IsFloat() {
			return fmt.Sprintf("%s constant %v", v.t, constFloat(v))
		}
		return fmt.Sprintf("%s constant %s", v.t, ptx.FormatImm(o))
	}
	return "invalid value"
}

// Const returns a constant of type t. Integers must be representable in t; a float constant
// of an integer type, or a value out of range, is an error. Float constants round to nearest
// even in t; a finite value that rounds above t's largest finite one (65504 for f16, 448 and
// 57344 for fp8) is an error, as is an infinity of E4M3 (it has none); NaN is allowed.
func (k *Kernel) Const(t Type, x any) Value {
	if !k.live() {
		return Value{}
	}
	v, err := constOf(k, t, x)
	if err != nil {
		k.errorf("%v", err)
		return k.poison(t)
	}
	return v
}

// poison returns a placeholder register after an error so that building can continue.
func (k *Kernel) poison(t Type) Value {
	if t == ptx.NoType {
		t = U32
	}
	return Value{k: k, t: t, op: k.reg(t)}
}

// smallImms holds small immediates of every type already boxed as operands, so that the
// common constants cost no allocation.
var smallImms = func() (c [ptx.TF32 + 1][64]ptx.Operand) {
	for t := range c {
		for b := range c[t] {
			c[t][b] = ptx.Imm{Type: ptx.Type(t), Bits: uint64(b)}
		}
	}
	return c
}()

// immOp returns the immediate operand {t, bits}.
func immOp(t ptx.Type, bits uint64) ptx.Operand {
	if int(t) < len(smallImms) && bits < uint64(len(smallImms[0])) {
		return smallImms[t][bits]
	}
	return ptx.Imm{Type: t, Bits: bits}
}

func constOf(k *Kernel, t Type, x any) (Value, error) {
	var i int64
	var u uint64
	var f float64
	isInt, isUint, isFloat := false, false, false
	switch x := x.(type) {
	case int:
		i, isInt = int64(x), true
	case int8:
		i, isInt = int64(x), true
	case int16:
		i, isInt = int64(x), true
	case int32:
		i, isInt = int64(x), true
	case int64:
		i, isInt = x, true
	case uint:
		u, isUint = uint64(x), true
	case uint8:
		u, isUint = uint64(x), true
	case uint16:
		u, isUint = uint64(x), true
	case uint32:
		u, isUint = uint64(x), true
	case uint64:
		u, isUint = x, true
	case float32:
		f, isFloat = float64(x), true
	case float64:
		f, isFloat = x, true
	case bool:
		if t != Bool {
			return Value{}, fmt.Errorf("a bool constant cannot be of type %s", t)
		}
		b := uint64(0)
		if x {
			b = 1
		}
		return Value{k: k, t: t, op: immOp(ptx.Pred, b)}, nil
	default:
		return Value{}, fmt.Errorf("cannot make a %s constant from Go %T", t, x)
	}
	switch {
	case t.IsFloat():
		if isInt || isUint {
			f = intFloat(t, i, u, isUint)
		}
		v, err := floatConst(k, t, f)
		if err == nil && !math.IsInf(f, 0) && math.IsInf(constFloat(v), 0) {
			// Go rejects float32(1e39); a Go number here is a constant too.
			return Value{}, fmt.Errorf("constant %v overflows %s (largest finite %v)", f, t, maxFinite[t])
		}
		return v, err
	case t.IsInt():
		if isFloat {
			return Value{}, fmt.Errorf("float constant %v used as %s (convert explicitly)", f, t)
		}
		bits := t.Bits()
		if t.Kind() == ptx.KindSigned {
			if isUint {
				if u > math.MaxInt64 {
					return Value{}, fmt.Errorf("constant %d overflows %s", u, t)
				}
				i = int64(u)
			}
			if bits < 64 && (i < -(1<<(bits-1)) || i >= 1<<(bits-1)) {
				return Value{}, fmt.Errorf("constant %d overflows %s", i, t)
			}
			return Value{k: k, t: t, op: immOp(t, uint64(i))}, nil
		}
		if isInt {
			if i < 0 {
				return Value{}, fmt.Errorf("negative constant %d used as %s", i, t)
			}
			u = uint64(i)
		}
		if bits < 64 && u >= 1<<bits {
			return Value{}, fmt.Errorf("constant %d overflows %s", u, t)
		}
		return Value{k: k, t: t, op: immOp(t, u)}, nil
	case t == Bool:
		return Value{}, fmt.Errorf("use true or false for a Bool constant, not %v", x)
	}
	return Value{}, fmt.Errorf("cannot make a constant of type %s", typeName(t))
}

// maxFinite is the largest finite value of each float type that rounds Go constants to
// infinity (fp8 types report their own).
var maxFinite = map[Type]float64{F16: 65504, BF16: 0x1.fep127, F32: math.MaxFloat32}

// floatConst keeps float constants as f64 bits of the exact value rounded to t.
func floatConst(k *Kernel, t Type, f float64) (Value, error) {
	switch t {
	case F32:
		f = float64(float32(f))
	case F16:
		f = float64(fp.F16ToF32(fp.F32ToF16(f32Odd(f))))
	case BF16:
		f = float64(fp.BF16ToF32(fp.F32ToBF16(f32Odd(f))))
	case E4M3:
		b, ok := fp.F64ToE4M3(f)
		if !ok {
			return Value{}, fmt.Errorf("constant %v overflows %s (largest finite 448, no infinities)", f, t)
		}
		f = fp.E4M3ToF64(b)
	case E5M2:
		b, ok := fp.F64ToE5M2(f)
		if !ok {
			return Value{}, fmt.Errorf("constant %v overflows %s (largest finite 57344)", f, t)
		}
		f = fp.E5M2ToF64(b)
	case F64:
	default:
		return Value{}, fmt.Errorf("no constants of type %s", t)
	}
	return Value{k: k, t: t, op: ptx.Imm{Type: ptx.F64, Bits: math.Float64bits(f)}}, nil
}

// f32Odd rounds f to float32 with round-to-odd: f itself when representable, else the
// neighbour toward zero with its last bit set. A second rounding to nearest, to a format of
// at most 22 significant bits (f16, bf16), is then f's correct rounding. float32(f) there
// rounded twice: 1 + 2^-11 + 2^-40 became the f16 midpoint 1 + 2^-11, then 1 by ties to
// even, not 1 + 2^-10 as cvt.rn.f16.f64 gives.
func f32Odd(f float64) float32 {
	r := float32(f)
	if float64(r) == f || math.IsNaN(f) {
		return r
	}
	if math.Abs(float64(r)) > math.Abs(f) {
		r = math.Nextafter32(r, 0)
	}
	return math.Float32frombits(math.Float32bits(r) | 1)
}

// intFloat is the integer i (or u, unsigned) as floatConst takes it for float type t: for
// f64 rounded to nearest, for narrower types rounded to odd at 53 bits, so that floatConst's
// rounding is the only one. float64 of a 64-bit integer beyond 2^53 rounded first:
// Const(F32, int64(1<<60+1<<36+1)) was 2^60, not 2^60+2^37 (Go's float32 of it, and
// cvt.rn.f32.s64's).
func intFloat(t Type, i int64, u uint64, unsigned bool) float64 {
	neg := !unsigned && i < 0
	if !unsigned {
		if t == F64 {
			return float64(i)
		}
		u = uint64(i)
		if neg {
			u = -u
		}
	} else if t == F64 {
		return float64(u)
	}
	if s := bits.Len64(u) - 53; s > 0 {
		m := u >> s
		if u&(1<<s-1) != 0 {
			m |= 1
		}
		u = m << s
	}
	f := float64(u) // exact: at most 53 significant bits
	if neg {
		f = -f
	}
	return f
}

// fp8Bits encodes an fp8 constant's value (already exact in t).
func fp8Bits(t Type, f float64) uint8 {
	if t == E5M2 {
		b, _ := fp.F64ToE5M2(f)
		return b
	}
	b, _ := fp.F64ToE4M3(f)
	return b
}

func constFloat(v Value) float64 { return math.Float64frombits(v.op.(ptx.Imm).Bits) }

func constInt(v Value) int64 {
	im := v.op.(ptx.Imm)
	if v.t.Kind() == ptx.KindSigned {
		s := 64 - v.t.Bits()
		return int64(im.Bits<<s) >> s
	}
	return int64(im.Bits)
}

// operand returns the PTX operand for v used as an instruction source. F16/BF16 constants
// have no PTX literal form, so they are materialised with mov.b16; fp8 constants, which only
// move (mov, selp, st), are their bits as a b16 immediate.
func (k *Kernel) operand(v Value) ptx.Operand {
	im, ok := v.op.(ptx.Imm)
	if !ok {
		k.checkScope(v)
		return v.op
	}
	switch v.t {
	case F32:
		return ptx.FloatImm(ptx.F32, math.Float64frombits(im.Bits))
	case F64:
		return ptx.FloatImm(ptx.F64, math.Float64frombits(im.Bits))
	case F16, BF16:
		f := float32(math.Float64frombits(im.Bits))
		bits := uint64(fp.F32ToF16(f))
		if v.t == BF16 {
			bits = uint64(fp.F32ToBF16(f))
		}
		r := k.reg(v.t)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B16}, Args: []ptx.Operand{r, ptx.Imm{Type: ptx.B16, Bits: bits}}})
		return r
	case E4M3, E5M2:
		return ptx.Imm{Type: ptx.B16, Bits: uint64(fp8Bits(v.t, math.Float64frombits(im.Bits)))}
	}
	return v.op // im, already boxed
}

// val converts a Go number or a Value into a Value of type t (for the right-hand side of
// binary operations); a Value of another type is an error.
func (k *Kernel) val(x any, t Type, what string) (Value, bool) {
	if v, ok := x.(Value); ok {
		if !k.own(v, what) {
			return Value{}, false
		}
		if v.t != t {
			k.errorf("%s: type mismatch: %s and %s (convert with To)", what, t, v.t)
			return Value{}, false
		}
		return v, true
	}
	v, err := constOf(k, t, x)
	if err != nil {
		k.errorf("%s: %v", what, err)
		return Value{}, false
	}
	return v, true
}

// own checks that v is a valid value of this kernel.
func (k *Kernel) own(v Value, what string) bool {
	switch {
	case v.k == nil:
		k.errorf("%s: invalid (zero) Value", what)
		return false
	case v.k != k:
		k.errorf("%s: value %s belongs to kernel %s, not %s", what, v, v.k.name, k.name)
		return false
	}
	return k.checkScope(v)
}

// orphan records, in the first kernel of ks (those of a method's arguments), that what was
// called on a zero or nil handle, which holds no kernel and so did nothing.
func orphan(what string, ks ...*Kernel) {
	for _, k := range ks {
		if k != nil {
			k.errorf("%s on a zero or nil handle (not made in a kernel): it did nothing", what)
			return
		}
	}
}

// anyKernel returns the kernel of x when it is a Value (else nil).
func anyKernel(x any) *Kernel {
	if v, ok := x.(Value); ok {
		return v.k
	}
	return nil
}

// typeName names t in an error: the zero Type, which prints as nothing, is named as such.
func typeName(t Type) string {
	if t == ptx.NoType {
		return "(the zero Type)"
	}
	return t.String()
}
