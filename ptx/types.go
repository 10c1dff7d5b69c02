package ptx

import "fmt"

// Type is a PTX fundamental type, as used in register declarations and instruction suffixes.
type Type uint8

// The PTX fundamental types.
const (
	NoType Type = iota
	Pred
	B8
	B16
	B32
	B64
	B128
	U8
	U16
	U32
	U64
	S8
	S16
	S32
	S64
	F16
	F16x2
	BF16
	BF16x2
	F32
	F64
	E4M3
	E5M2
	E4M3x2
	E5M2x2
	E4M3x4 // four e4m3 lanes in 32 bits (multimem)
	E5M2x4 // four e5m2 lanes in 32 bits (multimem)
	TF32   // tensor-float 32 (mma multiplicands; held in .b32 registers)
	numTypes
)

var typeInfo = [numTypes]struct {
	name   string
	bits   int
	kind   Kind
	prefix string // virtual register name prefix
}{
	NoType: {"", 0, KindNone, ""},
	Pred:   {"pred", 1, KindPred, "%p"},
	B8:     {"b8", 8, KindBits, "%rb"},
	B16:    {"b16", 16, KindBits, "%rs"},
	B32:    {"b32", 32, KindBits, "%r"},
	B64:    {"b64", 64, KindBits, "%rd"},
	B128:   {"b128", 128, KindBits, "%rq"},
	U8:     {"u8", 8, KindUnsigned, "%ub"},
	U16:    {"u16", 16, KindUnsigned, "%us"},
	U32:    {"u32", 32, KindUnsigned, "%u"},
	U64:    {"u64", 64, KindUnsigned, "%ud"},
	S8:     {"s8", 8, KindSigned, "%sb"},
	S16:    {"s16", 16, KindSigned, "%ss"},
	S32:    {"s32", 32, KindSigned, "%s"},
	S64:    {"s64", 64, KindSigned, "%sd"},
	F16:    {"f16", 16, KindFloat, "%h"},
	F16x2:  {"f16x2", 32, KindFloat, "%hh"},
	BF16:   {"bf16", 16, KindFloat, "%bh"},
	BF16x2: {"bf16x2", 32, KindFloat, "%bhh"},
	F32:    {"f32", 32, KindFloat, "%f"},
	F64:    {"f64", 64, KindFloat, "%fd"},
	E4M3:   {"e4m3", 8, KindFloat, "%e4_"},
	E5M2:   {"e5m2", 8, KindFloat, "%e5_"},
	E4M3x2: {"e4m3x2", 16, KindFloat, "%e4x"},
	E5M2x2: {"e5m2x2", 16, KindFloat, "%e5x"},
	E4M3x4: {"e4m3x4", 32, KindFloat, "%e4q"},
	E5M2x4: {"e5m2x4", 32, KindFloat, "%e5q"},
	TF32:   {"tf32", 32, KindFloat, "%tf"},
}

// Kind groups types by how PTX checks operand compatibility.
type Kind uint8

// The kinds of type.
const (
	KindNone Kind = iota
	KindPred
	KindBits
	KindUnsigned
	KindSigned
	KindFloat
)

// String returns the PTX spelling without the dot ("f32").
func (t Type) String() string {
	if t >= numTypes {
		return fmt.Sprintf("Type(%d)", uint8(t))
	}
	return typeInfo[t].name
}

// Bits returns the width in bits (1 for pred).
func (t Type) Bits() int {
	if t >= numTypes {
		return 0
	}
	return typeInfo[t].bits
}

// Bytes returns the width in bytes (0 for pred).
func (t Type) Bytes() int { return t.Bits() / 8 }

// Kind returns the type's kind.
func (t Type) Kind() Kind {
	if t >= numTypes {
		return KindNone
	}
	return typeInfo[t].kind
}

// IsInt reports whether t is a signed or unsigned integer type.
func (t Type) IsInt() bool { k := t.Kind(); return k == KindSigned || k == KindUnsigned }

// IsFloat reports whether t is a floating-point type (packed included).
func (t Type) IsFloat() bool { return t.Kind() == KindFloat }

// IsPacked reports whether t holds two or more lanes (f16x2, bf16x2, e4m3x2, e5m2x2,
// e4m3x4, e5m2x4).
func (t Type) IsPacked() bool {
	return t == F16x2 || t == BF16x2 || t == E4M3x2 || t == E5M2x2 || t == E4M3x4 || t == E5M2x4
}

// BitType returns the .bN type of t's width (B32 for F32).
func (t Type) BitType() Type {
	switch t.Bits() {
	case 8:
		return B8
	case 16:
		return B16
	case 32:
		return B32
	case 64:
		return B64
	case 128:
		return B128
	}
	return NoType
}

// RegType returns the type a virtual register holding a t value is declared with.
// PTX has no .bf16 or fp8 registers (they live in .b16/.b32 registers), and 8-bit integers
// live in 16-bit registers as nvcc keeps them.
func (t Type) RegType() Type {
	switch t {
	case E4M3, E5M2, E4M3x2, E5M2x2, BF16:
		return B16
	case BF16x2, E4M3x4, E5M2x4, TF32:
		return B32
	case B8, U8, S8:
		return t.widen16()
	}
	return t
}

func (t Type) widen16() Type {
	switch t {
	case B8:
		return B16
	case U8:
		return U16
	case S8:
		return S16
	}
	return t
}

// Compatible reports whether a register declared as reg may be an operand of an instruction
// of type inst, following the PTX ISA's operand type-checking rules: identical types, bit
// types of the same width, and integer types of the same width are compatible.
func Compatible(inst, reg Type) bool {
	if inst == reg {
		return true
	}
	if inst.Bits() != reg.Bits() || inst.Kind() == KindPred || reg.Kind() == KindPred {
		return false
	}
	if inst.Kind() == KindBits || reg.Kind() == KindBits {
		return true
	}
	return inst.IsInt() && reg.IsInt()
}

// ParseType parses a PTX type spelling without the dot.
func ParseType(s string) (Type, bool) {
	for t := Type(1); t < numTypes; t++ {
		if typeInfo[t].name == s {
			return t, true
		}
	}
	return NoType, false
}
