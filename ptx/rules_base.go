package ptx

import "slices"

// Type groups used by the tables.
var (
	intTypes    = []Type{S16, S32, S64, U16, U32, U64}
	bitTypes    = []Type{B16, B32, B64}
	halfTypes   = []Type{F16, F16x2, BF16, BF16x2}
	floatTypes  = []Type{F32, F64, F16, F16x2, BF16, BF16x2}
	memTypes    = []Type{B8, B16, B32, B64, B128, U8, U16, U32, U64, S8, S16, S32, S64, F32, F64}
	movTypes    = []Type{Pred, B16, B32, B64, U16, U32, U64, S16, S32, S64, F32, F64}
	cvtTypes    = []Type{U8, U16, U32, U64, S8, S16, S32, S64, F16, BF16, F32, F64}
	floatRound  = []string{"rn", "rz", "rm", "rp"}
	intRound    = []string{"rni", "rzi", "rmi", "rpi"}
	scopes      = []string{"cta", "cluster", "gpu", "sys"}
	ldSpaces    = []string{"param", "global", "shared", "shared::cta", "shared::cluster", "local", "const"}
	stSpaces    = []string{"param", "global", "shared", "shared::cta", "shared::cluster", "local"}
	vecs        = []string{"v2", "v4", "v8"}
	intCmps     = []string{"eq", "ne", "lt", "le", "gt", "ge"}
	unsignedCmp = []string{"lo", "ls", "hi", "hs"}
	floatCmps   = []string{"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}
)

func join(ts ...[]Type) []Type {
	var out []Type
	for _, t := range ts {
		out = append(out, t...)
	}
	return out
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

// floatArithCheck applies the qualifier rules shared by add, sub and mul.
func floatArithCheck(r *rule) func(in *Instr) string {
	return func(in *Instr) string {
		t := in.Type()
		if t.IsInt() {
			if r.q(in, "rnd") != "" || r.q(in, "ftz") != "" {
				return "rounding and .ftz apply to floating-point types only"
			}
			if r.q(in, "sat") != "" && t != S32 {
				return ".sat applies to .s32 only among integer types"
			}
			return ""
		}
		if r.q(in, "mode") != "" {
			return "." + r.q(in, "mode") + " applies to integer types only"
		}
		if r.q(in, "ftz") != "" && t != F32 && t != F16 && t != F16x2 {
			return ".ftz applies to .f32, .f16 and .f16x2 only"
		}
		if r.q(in, "sat") != "" && t != F32 && t != F16 && t != F16x2 {
			return ".sat applies to .f32, .f16 and .f16x2 only"
		}
		if (isBF(t) || isHalf(t)) && r.q(in, "rnd") != "" && r.q(in, "rnd") != "rn" {
			return "half-precision arithmetic rounds with .rn only"
		}
		return ""
	}
}

// nd builds a requirement.
func nd(v Version, sm int, why string) need { return need{ptx: v, sm: sm, why: why} }

// ndArch builds a requirement of architecture-specific targets of the given SMs.
func ndArch(v Version, sms []int, why string) need {
	return need{ptx: v, sm: slices.Min(sms), arch: true, archSMs: sms, why: why}
}

// sameArgs returns n operands of type t: the destination, then sources.
func sameArgs(t Type, n int) []arg {
	if t < numTypes && n < len(sameTable[t]) {
		return sameTable[t][n]
	}
	return makeSame(t, n)
}

// sameTable holds sameArgs's operand lists (shared: callers must not modify them).
var sameTable = func() (tab [numTypes][5][]arg) {
	for t := range tab {
		for n := 1; n < len(tab[t]); n++ {
			tab[t][n] = makeSame(Type(t), n)
		}
	}
	return tab
}()

func makeSame(t Type, n int) []arg {
	out := make([]arg, n)
	out[0] = arg{kind: argDst, typ: t}
	for i := 1; i < n; i++ {
		out[i] = arg{kind: argSrc, typ: t}
	}
	return out
}

// fixed returns an args function with a constant operand list.
func fixed(a ...arg) func(*Instr) []arg { return func(*Instr) []arg { return a } }

func dst(t Type) arg     { return arg{kind: argDst, typ: t} }
func src(t Type) arg     { return arg{kind: argSrc, typ: t} }
func addr() arg          { return arg{kind: argAddr} }
func imm(v ...int64) arg { return arg{kind: argImm, imms: v} }

// one returns a slot holding a single flag qualifier.
func one(name string) slot { return slot{name: name, values: []string{name}} }

// vals returns an optional slot.
func vals(name string, v ...string) slot { return slot{name: name, values: v} }

// req returns a required slot.
func req(name string, v ...string) slot { return slot{name: name, values: v, required: true} }

func isHalf(t Type) bool { return t == F16 || t == F16x2 }
func isBF(t Type) bool   { return t == BF16 || t == BF16x2 }

// wideArgs is same(n) where .wide doubles the destination's width.
func wideArgs(n int) func(in *Instr) []arg {
	return func(in *Instr) []arg {
		a := sameArgs(in.Type(), n)
		if in.HasQ("wide") {
			a = slices.Clone(a) // sameArgs's lists are shared
			a[0].typ = doubleWidth(in.Type())
			if n == 4 {
				a[3].typ = a[0].typ
			}
		}
		return a
	}
}

func doubleWidth(t Type) Type {
	switch t {
	case S16:
		return S32
	case S32:
		return S64
	case U16:
		return U32
	case U32:
		return U64
	}
	return t
}

func vecLen(v string) int {
	switch v {
	case "v2":
		return 2
	case "v4":
		return 4
	case "v8":
		return 8
	}
	return 0
}

func vecBits(v string, t Type) int {
	n := vecLen(v)
	if n == 0 {
		n = 1
	}
	return n * t.Bits()
}
