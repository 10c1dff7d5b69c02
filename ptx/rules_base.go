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

// halfNeeds: f16 arithmetic needs sm_53 (always true here); bf16 forms of add/sub/mul need
// sm_90 and PTX 7.8; bf16 fma/min/max/neg/abs need sm_80 and PTX 7.0.
func halfNeeds(bf16sm int, bf16ptx Version) func(in *Instr) []need {
	return func(in *Instr) []need {
		if t := in.Type(); t == BF16 || t == BF16x2 {
			return []need{{ptx: bf16ptx, sm: bf16sm, why: in.Op + ".bf16 needs sm_" + itoa(bf16sm) + " and PTX " + bf16ptx.String()}}
		}
		return nil
	}
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
		if (t == BF16 || t == BF16x2) && r.q(in, "rnd") != "" && r.q(in, "rnd") != "rn" {
			return "bf16 arithmetic rounds with .rn only"
		}
		return ""
	}
}

func init() {
	for _, op := range []string{"add", "sub"} {
		r := &rule{
			slots: []slot{{name: "rnd", values: floatRound}, {name: "ftz", values: []string{"ftz"}}, {name: "sat", values: []string{"sat"}}},
			types: [][]Type{join(intTypes, floatTypes)},
			args:  same(3),
			need:  halfNeeds(90, 78),
		}
		r.check = floatArithCheck(r)
		rules[op] = r
	}

	mul := &rule{
		slots: []slot{{name: "mode", values: []string{"hi", "lo", "wide"}}, {name: "rnd", values: floatRound}, {name: "ftz", values: []string{"ftz"}}, {name: "sat", values: []string{"sat"}}},
		types: [][]Type{join(intTypes, floatTypes)},
		args:  wideArgs(3),
		need:  halfNeeds(90, 78),
	}
	fc := floatArithCheck(mul)
	mul.check = func(in *Instr) string {
		if in.Type().IsInt() {
			if mul.q(in, "mode") == "" {
				return "integer mul needs .lo, .hi or .wide"
			}
			if mul.q(in, "sat") != "" {
				return "integer mul takes no .sat"
			}
			if mul.q(in, "mode") == "wide" && in.Type().Bits() == 64 {
				return "mul.wide applies to 16- and 32-bit types"
			}
			return ""
		}
		return fc(in)
	}
	rules["mul"] = mul

	mad := &rule{
		slots: []slot{{name: "mode", values: []string{"hi", "lo", "wide"}}, {name: "rnd", values: floatRound}, {name: "ftz", values: []string{"ftz"}}, {name: "sat", values: []string{"sat"}}},
		types: [][]Type{join(intTypes, []Type{F32, F64})},
		args:  wideArgs(4),
	}
	mad.check = func(in *Instr) string {
		t := in.Type()
		if t.IsInt() {
			switch {
			case mad.q(in, "mode") == "":
				return "integer mad needs .lo, .hi or .wide"
			case mad.q(in, "rnd") != "" || mad.q(in, "ftz") != "":
				return "rounding and .ftz apply to floating-point types only"
			case mad.q(in, "sat") != "" && (t != S32 || mad.q(in, "mode") != "hi"):
				return ".sat applies to mad.hi.s32 only"
			case mad.q(in, "mode") == "wide" && t.Bits() == 64:
				return "mad.wide applies to 16- and 32-bit types"
			}
			return ""
		}
		if mad.q(in, "mode") != "" {
			return "." + mad.q(in, "mode") + " applies to integer types only"
		}
		if mad.q(in, "rnd") == "" {
			return "floating-point mad needs a rounding modifier (.rn, .rz, .rm, .rp)"
		}
		if t == F64 && (mad.q(in, "ftz") != "" || mad.q(in, "sat") != "") {
			return ".ftz and .sat apply to .f32 only"
		}
		return ""
	}
	rules["mad"] = mad

	fma := &rule{
		slots: []slot{{name: "rnd", values: floatRound, required: true}, {name: "ftz", values: []string{"ftz"}}, {name: "sat", values: []string{"sat"}}},
		types: [][]Type{floatTypes},
		args:  same(4),
		need:  halfNeeds(80, 70),
	}
	fma.check = func(in *Instr) string {
		t := in.Type()
		if (fma.q(in, "ftz") != "" || fma.q(in, "sat") != "") && t != F32 && t != F16 && t != F16x2 {
			return ".ftz and .sat apply to .f32, .f16 and .f16x2 only"
		}
		if (t == BF16 || t == BF16x2) && fma.q(in, "rnd") != "rn" {
			return "bf16 fma rounds with .rn only"
		}
		return ""
	}
	rules["fma"] = fma

	div := &rule{
		slots: []slot{{name: "mode", values: []string{"approx", "full"}}, {name: "rnd", values: floatRound}, {name: "ftz", values: []string{"ftz"}}},
		types: [][]Type{join(intTypes, []Type{F32, F64})},
		args:  same(3),
	}
	div.check = func(in *Instr) string {
		t, mode, rnd, ftz := in.Type(), div.q(in, "mode"), div.q(in, "rnd"), div.q(in, "ftz")
		switch {
		case t.IsInt() && (mode != "" || rnd != "" || ftz != ""):
			return "integer div takes no qualifiers"
		case t == F32 && (mode == "") == (rnd == ""):
			return "div.f32 needs exactly one of .approx, .full or a rounding modifier"
		case t == F64 && (mode != "" || rnd == "" || ftz != ""):
			return "div.f64 needs a rounding modifier (.rn, .rz, .rm, .rp) and nothing else"
		}
		return ""
	}
	rules["div"] = div
	rules["rem"] = &rule{types: [][]Type{intTypes}, args: same(3)}

	for _, op := range []string{"min", "max"} {
		r := &rule{
			slots: []slot{{name: "ftz", values: []string{"ftz"}}, {name: "nan", values: []string{"NaN"}}},
			types: [][]Type{join(intTypes, floatTypes)},
			args:  same(3),
			need: func(in *Instr) []need {
				switch t := in.Type(); {
				case slices.Contains(halfTypes, t):
					return []need{{ptx: 70, sm: 80, why: in.Op + "." + t.String() + " needs sm_80 and PTX 7.0"}}
				case in.HasQ("NaN"):
					return []need{{ptx: 70, sm: 80, why: in.Op + ".NaN needs sm_80 and PTX 7.0"}}
				}
				return nil
			},
		}
		r.check = func(in *Instr) string {
			t := in.Type()
			if t.IsInt() && len(in.Q) > 0 {
				return "integer " + in.Op + " takes no qualifiers"
			}
			if r.q(in, "ftz") != "" && t != F32 && t != F16 && t != F16x2 {
				return ".ftz applies to .f32, .f16 and .f16x2 only"
			}
			if r.q(in, "nan") != "" && t == F64 {
				return ".NaN does not apply to .f64"
			}
			return ""
		}
		rules[op] = r
	}
	for _, op := range []string{"neg", "abs"} {
		r := &rule{
			slots: []slot{{name: "ftz", values: []string{"ftz"}}},
			types: [][]Type{{S16, S32, S64, F32, F64, F16, F16x2, BF16, BF16x2}},
			args:  same(2),
			need:  halfNeeds(80, 70),
		}
		r.check = func(in *Instr) string {
			if t := in.Type(); r.q(in, "ftz") != "" && t != F32 && t != F16 && t != F16x2 {
				return ".ftz applies to .f32, .f16 and .f16x2 only"
			}
			return ""
		}
		rules[op] = r
	}

	for _, op := range []string{"and", "or", "xor"} {
		rules[op] = &rule{types: [][]Type{{Pred, B16, B32, B64}}, args: same(3)}
	}
	rules["not"] = &rule{types: [][]Type{{Pred, B16, B32, B64}}, args: same(2)}
	rules["cnot"] = &rule{types: [][]Type{bitTypes}, args: same(2)}
	shift := func(in *Instr) []arg {
		t := in.Type()
		return []arg{{kind: argDst, typ: t}, {kind: argSrc, typ: t}, {kind: argSrc, typ: U32}}
	}
	rules["shl"] = &rule{types: [][]Type{bitTypes}, args: shift}
	rules["shr"] = &rule{types: [][]Type{join(bitTypes, intTypes)}, args: shift}

	setp := &rule{
		slots: []slot{
			{name: "cmp", values: append(append([]string{}, floatCmps...), unsignedCmp...), required: true},
			{name: "bool", values: []string{"and", "or", "xor"}},
			{name: "ftz", values: []string{"ftz"}},
		},
		types: [][]Type{join(bitTypes, intTypes, []Type{F32, F64, F16, BF16})},
		args: func(in *Instr) []arg {
			t := in.Type()
			a := []arg{{kind: argDst, typ: Pred}, {kind: argSrc, typ: t}, {kind: argSrc, typ: t}}
			if slices.ContainsFunc(in.Q, func(q string) bool { return q == "and" || q == "or" || q == "xor" }) {
				a = append(a, arg{kind: argSrc, typ: Pred})
			}
			return a
		},
		need: func(in *Instr) []need {
			if in.Type() == BF16 {
				return []need{{ptx: 78, sm: 90, why: "setp.bf16 needs sm_90 and PTX 7.8"}}
			}
			return nil
		},
	}
	setp.check = func(in *Instr) string {
		t, c := in.Type(), setp.q(in, "cmp")
		switch t.Kind() {
		case KindBits:
			if c != "eq" && c != "ne" {
				return "bit types compare with .eq and .ne only"
			}
		case KindSigned:
			if !slices.Contains(intCmps, c) {
				return "signed integers compare with .eq .ne .lt .le .gt .ge"
			}
		case KindUnsigned:
			if !slices.Contains(intCmps, c) && !slices.Contains(unsignedCmp, c) {
				return "unsigned integers compare with .eq .ne .lt .le .gt .ge .lo .ls .hi .hs"
			}
		case KindFloat:
			if !slices.Contains(floatCmps, c) {
				return "floating-point types compare with .eq .ne .lt .le .gt .ge .equ .neu .ltu .leu .gtu .geu .num .nan"
			}
		}
		if setp.q(in, "ftz") != "" && t != F32 && t != F16 {
			return ".ftz applies to .f32 and .f16 only"
		}
		return ""
	}
	rules["setp"] = setp
	rules["selp"] = &rule{
		types: [][]Type{join(bitTypes, intTypes, []Type{F32, F64})},
		args: func(in *Instr) []arg {
			t := in.Type()
			return []arg{{kind: argDst, typ: t}, {kind: argSrc, typ: t}, {kind: argSrc, typ: t}, {kind: argSrc, typ: Pred}}
		},
	}

	cvt := &rule{
		slots: []slot{
			{name: "rnd", values: append(append([]string{}, floatRound...), intRound...)},
			{name: "ftz", values: []string{"ftz"}},
			{name: "sat", values: []string{"sat"}},
		},
		types: [][]Type{cvtTypes, cvtTypes},
		args: func(in *Instr) []arg {
			return []arg{{kind: argDst, typ: in.Types[0], wide: true}, {kind: argSrc, typ: in.Types[1], wide: true}}
		},
	}
	cvt.check = func(in *Instr) string {
		d, a, rnd := in.Types[0], in.Types[1], cvt.q(in, "rnd")
		isInt := slices.Contains(intRound, rnd)
		switch {
		case d.IsFloat() && a.IsFloat():
			if d == a {
				if rnd != "" && !isInt || d != F32 && d != F64 && rnd != "" {
					return "a float-to-same-float cvt rounds with .rni .rzi .rmi .rpi only"
				}
			} else if d.Bits() < a.Bits() {
				if rnd == "" || isInt {
					return "a narrowing float cvt needs a rounding modifier (.rn .rz .rm .rp)"
				}
			} else if rnd != "" {
				return "a widening float cvt takes no rounding modifier"
			}
		case d.IsInt() && a.IsFloat():
			if !isInt {
				return "a float-to-integer cvt needs an integer rounding modifier (.rni .rzi .rmi .rpi)"
			}
		case d.IsFloat() && a.IsInt():
			if rnd == "" || isInt {
				return "an integer-to-float cvt needs a rounding modifier (.rn .rz .rm .rp)"
			}
		default:
			if rnd != "" {
				return "an integer-to-integer cvt takes no rounding modifier"
			}
		}
		if cvt.q(in, "ftz") != "" && a != F32 && d != F32 {
			return ".ftz applies when the source or destination is .f32"
		}
		return ""
	}
	cvt.need = func(in *Instr) []need {
		d, a := in.Types[0], in.Types[1]
		if d == BF16 && a == F32 {
			return []need{{ptx: 70, sm: 80, why: "cvt.bf16.f32 needs sm_80 and PTX 7.0"}}
		}
		if d == BF16 || a == BF16 {
			return []need{{ptx: 78, sm: 90, why: "cvt to or from .bf16 other than from .f32 needs sm_90 and PTX 7.8"}}
		}
		return nil
	}
	rules["cvt"] = cvt

	rules["mov"] = &rule{types: [][]Type{movTypes}, args: same(2)}

	sem := func(vals ...string) slot { return slot{name: "sem", values: vals} }
	memCheck := func(r *rule) func(in *Instr) string {
		return func(in *Instr) string {
			s, sc, sp := r.q(in, "sem"), r.q(in, "scope"), r.q(in, "space")
			switch s {
			case "relaxed", "acquire", "release":
				if sc == "" {
					return "." + s + " needs a scope (.cta .cluster .gpu .sys)"
				}
			default:
				if sc != "" {
					return "a scope needs .relaxed, .acquire or .release"
				}
			}
			if s != "" && (sp == "param" || sp == "const" || sp == "local") {
				return "memory ordering does not apply to ." + sp
			}
			if v := r.q(in, "vec"); v == "v8" && in.Type().Bits() > 32 {
				return ".v8 applies to 8-, 16- and 32-bit types"
			}
			if in.Type() == B128 && r.q(in, "vec") != "" {
				return ".b128 takes no vector"
			}
			if vecBits(r.q(in, "vec"), in.Type()) > 256 {
				return "vector too wide"
			}
			return ""
		}
	}
	memNeed := func(r *rule) func(in *Instr) []need {
		return func(in *Instr) []need {
			var ns []need
			if s := r.q(in, "sem"); s == "relaxed" || s == "acquire" || s == "release" {
				ns = append(ns, need{ptx: 60, sm: 70, why: "." + s + " needs sm_70 and PTX 6.0"})
			}
			if r.q(in, "scope") == "cluster" || r.q(in, "space") == "shared::cluster" {
				ns = append(ns, need{ptx: 78, sm: 90, why: "cluster scope and .shared::cluster need sm_90 and PTX 7.8"})
			}
			if r.q(in, "space") == "shared::cta" {
				ns = append(ns, need{ptx: 78, why: ".shared::cta needs PTX 7.8"})
			}
			if r.q(in, "vec") == "v8" {
				ns = append(ns, need{ptx: 88, sm: 100, why: ".v8 needs sm_100 and PTX 8.8"})
			}
			if in.Type() == B128 {
				ns = append(ns, need{ptx: 83, sm: 70, why: ".b128 needs PTX 8.3"})
			}
			return ns
		}
	}
	ld := &rule{
		slots: []slot{sem("weak", "volatile", "relaxed", "acquire"), {name: "scope", values: scopes}, {name: "space", values: ldSpaces},
			{name: "cache", values: []string{"ca", "cg", "cs", "lu", "cv"}}, {name: "vec", values: vecs}},
		types: [][]Type{memTypes},
	}
	ld.args = func(in *Instr) []arg {
		return []arg{{kind: argDst, typ: in.Type(), vec: vecLen(ld.q(in, "vec")), wide: true}, {kind: argAddr}}
	}
	ld.check, ld.need = memCheck(ld), memNeed(ld)
	rules["ld"] = ld
	st := &rule{
		slots: []slot{sem("weak", "volatile", "relaxed", "release"), {name: "scope", values: scopes}, {name: "space", values: stSpaces},
			{name: "cache", values: []string{"wb", "cg", "cs", "wt"}}, {name: "vec", values: vecs}},
		types: [][]Type{memTypes},
	}
	st.args = func(in *Instr) []arg {
		return []arg{{kind: argAddr}, {kind: argSrc, typ: in.Type(), vec: vecLen(st.q(in, "vec")), wide: true}}
	}
	st.check, st.need = memCheck(st), memNeed(st)
	rules["st"] = st

	rules["bra"] = &rule{slots: []slot{{name: "uni", values: []string{"uni"}}},
		args: func(*Instr) []arg { return []arg{{kind: argLabel}} }}
	rules["ret"] = &rule{slots: []slot{{name: "uni", values: []string{"uni"}}}, args: func(*Instr) []arg { return nil }}
	rules["exit"] = &rule{args: func(*Instr) []arg { return nil }}
	barArgs := func(in *Instr) []arg {
		if len(in.Args) == 2 {
			return []arg{{kind: argSrc, typ: U32}, {kind: argSrc, typ: U32}}
		}
		return []arg{{kind: argSrc, typ: U32}}
	}
	rules["bar.sync"] = &rule{args: barArgs}
	rules["barrier.sync"] = &rule{slots: []slot{{name: "aligned", values: []string{"aligned"}}}, args: barArgs}
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

// wideArgs is same(n) where .wide doubles the destination's width.
func wideArgs(n int) func(in *Instr) []arg {
	return func(in *Instr) []arg {
		a := same(n)(in)
		if in.HasQ("wide") {
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

func init() {
	rules["cvta"] = &rule{
		slots: []slot{{name: "to", values: []string{"to"}}, {name: "space", values: []string{"global", "shared", "shared::cta", "shared::cluster", "local", "const", "param"}, required: true}},
		types: [][]Type{{U32, U64}},
		args:  same(2),
	}
}
