package ptx

import "slices"

// Integer and floating-point arithmetic, bit manipulation and comparisons.

var (
	ftzTypes = []Type{F32, F16, F16x2}
	absTypes = []Type{S16, S32, S64, F32, F64, F16, F16x2, BF16, BF16x2}
)

// halfArith returns the requirements of an arithmetic op on half types: f16 needs PTX 4.2,
// bf16 needs sm_bf and PTX bfv.
func halfArith(bfSM int, bfV Version) func(in *Instr) []need {
	return func(in *Instr) []need {
		switch t := in.Type(); {
		case isBF(t):
			return []need{nd(bfV, bfSM, in.Op+"."+t.String()+" needs sm_"+itoa(bfSM)+" and PTX "+bfV.String())}
		case isHalf(t):
			return []need{nd(42, 53, in.Op+"."+t.String()+" needs PTX 4.2")}
		}
		return nil
	}
}

func init() {
	arith := []slot{vals("rnd", floatRound...), one("ftz"), one("sat")}
	for _, op := range []string{"add", "sub"} {
		r := &rule{slots: arith, types: [][]Type{join(intTypes, floatTypes)}, args: same(3), need: halfArith(90, 78)}
		r.check = floatArithCheck(r)
		rules[op] = r
	}

	mul := &rule{
		slots: append([]slot{vals("mode", "hi", "lo", "wide")}, arith...),
		types: [][]Type{join(intTypes, floatTypes)},
		args:  wideArgs(3),
		need:  halfArith(90, 78),
	}
	fc := floatArithCheck(mul)
	mul.check = func(in *Instr) string {
		if in.Type().IsInt() {
			switch {
			case mul.q(in, "mode") == "":
				return "integer mul needs .lo, .hi or .wide"
			case mul.q(in, "sat") != "" || mul.q(in, "rnd") != "" || mul.q(in, "ftz") != "":
				return "integer mul takes no rounding, .ftz or .sat"
			case mul.q(in, "mode") == "wide" && in.Type().Bits() == 64:
				return "mul.wide applies to 16- and 32-bit types"
			}
			return ""
		}
		return fc(in)
	}
	rules["mul"] = mul

	mad := &rule{
		slots: append([]slot{vals("mode", "hi", "lo", "wide")}, arith...),
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

	for _, op := range []string{"mul24", "mad24"} {
		n := 3
		if op == "mad24" {
			n = 4
		}
		slots := []slot{req("mode", "hi", "lo")}
		if op == "mad24" {
			slots = append(slots, one("sat"))
		}
		r := &rule{slots: slots, types: [][]Type{{U32, S32}}, args: same(n)}
		r.check = func(in *Instr) string {
			if r.q(in, "sat") != "" && (in.Op != "mad24" || in.Type() != S32 || r.q(in, "mode") != "hi") {
				return ".sat applies to mad24.hi.s32 only"
			}
			return ""
		}
		rules[op] = r
	}
	rules["sad"] = &rule{types: [][]Type{intTypes}, args: same(4)}

	fma := &rule{
		slots: []slot{req("rnd", floatRound...), one("ftz"), one("sat"), one("relu")},
		types: [][]Type{floatTypes},
		args:  same(4),
	}
	fma.check = func(in *Instr) string {
		t := in.Type()
		if (fma.q(in, "ftz") != "" || fma.q(in, "sat") != "") && !slices.Contains(ftzTypes, t) {
			return ".ftz and .sat apply to .f32, .f16 and .f16x2 only"
		}
		if (isBF(t) || isHalf(t)) && fma.q(in, "rnd") != "rn" {
			return "half-precision fma rounds with .rn only"
		}
		if fma.q(in, "relu") != "" && (t == F32 || t == F64 || fma.q(in, "sat") != "") {
			return ".relu applies to f16 and bf16 types, without .sat"
		}
		return ""
	}
	fma.need = func(in *Instr) []need {
		ns := halfArith(80, 70)(in)
		if fma.q(in, "relu") != "" {
			ns = append(ns, nd(70, 80, "fma.relu needs sm_80 and PTX 7.0"))
		}
		return ns
	}
	rules["fma"] = fma

	div := &rule{
		slots: []slot{vals("mode", "approx", "full"), vals("rnd", floatRound...), one("ftz")},
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
			slots: []slot{one("ftz"), one("NaN"), one("xorsign"), one("abs"), one("relu")},
			types: [][]Type{join(intTypes, floatTypes)},
			args:  same(3),
			excl: []excl{
				x("xorsign", "-abs", ".xorsign needs .abs"), x("-xorsign", "abs", ".abs needs .xorsign"),
			},
		}
		r.check = func(in *Instr) string {
			t := in.Type()
			if r.q(in, "relu") != "" {
				if t != S32 || len(in.Q) > 1 {
					return in.Op + ".relu applies to .s32 alone"
				}
				return ""
			}
			if t.IsInt() && len(in.Q) > 0 {
				return "integer " + in.Op + " takes no qualifiers but .relu (on .s32)"
			}
			if r.q(in, "ftz") != "" && !slices.Contains(ftzTypes, t) {
				return ".ftz applies to .f32, .f16 and .f16x2 only"
			}
			if r.q(in, "NaN") != "" && t == F64 {
				return ".NaN does not apply to .f64"
			}
			if r.q(in, "xorsign") != "" && (t == F64 || t == F32) {
				return ".xorsign.abs applies to f16 and bf16 types"
			}
			return ""
		}
		r.need = func(in *Instr) []need {
			var ns []need
			t := in.Type()
			if slices.Contains(halfTypes, t) {
				ns = append(ns, nd(70, 80, in.Op+"."+t.String()+" needs sm_80 and PTX 7.0"))
			}
			if in.HasQ("NaN") {
				ns = append(ns, nd(70, 80, in.Op+".NaN needs sm_80 and PTX 7.0"))
			}
			if in.HasQ("xorsign") {
				ns = append(ns, nd(72, 86, in.Op+".xorsign.abs needs sm_86 and PTX 7.2"))
			}
			if in.HasQ("relu") {
				ns = append(ns, nd(80, 90, in.Op+".relu needs sm_90 and PTX 8.0"))
			}
			return ns
		}
		rules[op] = r
	}
	for _, op := range []string{"neg", "abs"} {
		r := &rule{slots: []slot{one("ftz")}, types: [][]Type{absTypes}, args: same(2), need: halfArith(80, 70)}
		r.check = func(in *Instr) string {
			if t := in.Type(); r.q(in, "ftz") != "" && !slices.Contains(ftzTypes, t) {
				return ".ftz applies to .f32, .f16 and .f16x2 only"
			}
			return ""
		}
		rules[op] = r
	}

	// Transcendentals and friends.
	rcp := &rule{slots: []slot{vals("mode", "approx"), vals("rnd", floatRound...), one("ftz")}, types: [][]Type{{F32, F64}}, args: same(2)}
	rcp.check = func(in *Instr) string {
		mode, rnd, ftz := rcp.q(in, "mode"), rcp.q(in, "rnd"), rcp.q(in, "ftz")
		switch {
		case (mode == "") == (rnd == ""):
			return in.Op + " needs exactly one of .approx or a rounding modifier"
		case in.Type() == F64 && mode == "approx" && ftz == "":
			return in.Op + ".approx.f64 needs .ftz"
		case in.Type() == F64 && rnd != "" && ftz != "":
			return ".ftz applies to .f32 (and rcp.approx.ftz.f64) only"
		}
		return ""
	}
	rules["rcp"] = rcp
	sqrt := &rule{slots: rcp.slots, types: [][]Type{{F32, F64}}, args: same(2)}
	sqrt.check = func(in *Instr) string {
		mode, rnd, ftz := sqrt.q(in, "mode"), sqrt.q(in, "rnd"), sqrt.q(in, "ftz")
		switch {
		case (mode == "") == (rnd == ""):
			return "sqrt needs exactly one of .approx or a rounding modifier"
		case in.Type() == F64 && (mode != "" || ftz != ""):
			return "sqrt.f64 needs a rounding modifier and takes no .approx or .ftz"
		}
		return ""
	}
	rules["sqrt"] = sqrt
	rules["rsqrt"] = &rule{slots: []slot{req("mode", "approx"), one("ftz")}, types: [][]Type{{F32, F64}}, args: same(2),
		need: func(in *Instr) []need {
			if in.Type() == F64 && in.HasQ("ftz") {
				return []need{nd(40, 0, "rsqrt.approx.ftz.f64 needs PTX 4.0")}
			}
			return nil
		}}
	for _, op := range []string{"sin", "cos", "lg2"} {
		rules[op] = &rule{slots: []slot{req("mode", "approx"), one("ftz")}, types: [][]Type{{F32}}, args: same(2)}
	}
	ex2 := &rule{slots: []slot{req("mode", "approx"), one("ftz")}, types: [][]Type{{F32, F16, F16x2, BF16, BF16x2}}, args: same(2)}
	ex2.check = func(in *Instr) string {
		t := in.Type()
		switch {
		case isHalf(t) && in.HasQ("ftz"):
			return "ex2.approx.f16 takes no .ftz"
		case isBF(t) && !in.HasQ("ftz"):
			return "ex2.approx.bf16 needs .ftz"
		}
		return ""
	}
	ex2.need = func(in *Instr) []need {
		switch t := in.Type(); {
		case isHalf(t):
			return []need{nd(70, 75, "ex2.approx."+t.String()+" needs sm_75 and PTX 7.0")}
		case isBF(t):
			return []need{nd(78, 90, "ex2.approx.ftz."+t.String()+" needs sm_90 and PTX 7.8")}
		}
		return nil
	}
	rules["ex2"] = ex2
	rules["tanh"] = &rule{slots: []slot{req("mode", "approx")}, types: [][]Type{{F32, F16, F16x2, BF16, BF16x2}}, args: same(2),
		need: func(in *Instr) []need {
			if isBF(in.Type()) {
				return []need{nd(78, 90, "tanh.approx."+in.Type().String()+" needs sm_90 and PTX 7.8")}
			}
			return []need{nd(70, 75, "tanh.approx needs sm_75 and PTX 7.0")}
		}}
	rules["testp"] = &rule{
		slots: []slot{req("op", "finite", "infinite", "number", "notanumber", "normal", "subnormal")},
		types: [][]Type{{F32, F64}},
		args:  func(in *Instr) []arg { return []arg{dst(Pred), src(in.Type())} },
	}
	rules["copysign"] = &rule{types: [][]Type{{F32, F64}}, args: same(3)}

	// Bits.
	for _, op := range []string{"and", "or", "xor"} {
		rules[op] = &rule{types: [][]Type{{Pred, B16, B32, B64}}, args: same(3)}
	}
	rules["not"] = &rule{types: [][]Type{{Pred, B16, B32, B64}}, args: same(2)}
	rules["cnot"] = &rule{types: [][]Type{bitTypes}, args: same(2)}
	shift := func(in *Instr) []arg {
		t := in.Type()
		return []arg{dst(t), src(t), src(U32)}
	}
	rules["shl"] = &rule{types: [][]Type{bitTypes}, args: shift}
	rules["shr"] = &rule{types: [][]Type{join(bitTypes, intTypes)}, args: shift}
	rules["shf"] = &rule{slots: []slot{req("dir", "l", "r"), req("mode", "clamp", "wrap")}, types: [][]Type{{B32}},
		args: fixed(dst(B32), src(B32), src(B32), src(U32))}
	rules["lop3"] = &rule{types: [][]Type{{B32}},
		args: fixed(dst(B32), src(B32), src(B32), src(B32), arg{kind: argImm, typ: B32, lim: 0xff})} // any lookup table
	rules["prmt"] = &rule{slots: []slot{vals("mode", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16")}, types: [][]Type{{B32}},
		args: fixed(dst(B32), src(B32), src(B32), src(B32))}
	for _, op := range []string{"popc", "clz"} {
		rules[op] = &rule{types: [][]Type{{B32, B64}}, args: func(in *Instr) []arg { return []arg{dst(U32), src(in.Type())} }}
	}
	rules["brev"] = &rule{types: [][]Type{{B32, B64}}, args: same(2)}
	rules["bfind"] = &rule{slots: []slot{one("shiftamt")}, types: [][]Type{{U32, U64, S32, S64}},
		args: func(in *Instr) []arg { return []arg{dst(U32), src(in.Type())} }}
	rules["bfe"] = &rule{types: [][]Type{{U32, U64, S32, S64}},
		args: func(in *Instr) []arg { t := in.Type(); return []arg{dst(t), src(t), src(U32), src(U32)} }}
	rules["bfi"] = &rule{types: [][]Type{{B32, B64}},
		args: func(in *Instr) []arg { t := in.Type(); return []arg{dst(t), src(t), src(t), src(U32), src(U32)} }}
	rules["bmsk"] = &rule{slots: []slot{req("mode", "clamp", "wrap")}, types: [][]Type{{B32}},
		args: fixed(dst(B32), src(U32), src(U32)), need: func(*Instr) []need { return []need{nd(76, 70, "bmsk needs sm_70 and PTX 7.6")} }}
	rules["szext"] = &rule{slots: []slot{req("mode", "clamp", "wrap")}, types: [][]Type{{U32, S32}},
		args: func(in *Instr) []arg { return []arg{dst(in.Type()), src(in.Type()), src(U32)} },
		need: func(*Instr) []need { return []need{nd(76, 70, "szext needs sm_70 and PTX 7.6")} }}
	rules["dp4a"] = &rule{types: [][]Type{{U32, S32}, {U32, S32}},
		args: func(in *Instr) []arg {
			d := U32
			if in.Types[0] == S32 || in.Types[1] == S32 {
				d = S32
			}
			return []arg{dst(d), src(in.Types[0]), src(in.Types[1]), src(d)}
		}}

	// Comparison and selection.
	setp := &rule{
		slots: []slot{
			req("cmp", append(append([]string{}, floatCmps...), unsignedCmp...)...),
			vals("bool", "and", "or", "xor"),
			one("ftz"),
		},
		types: [][]Type{join(bitTypes, intTypes, []Type{F32, F64, F16, F16x2, BF16, BF16x2})},
		shapes: func(in *Instr) [][]arg {
			t := in.Type()
			var out [][]arg
			dsts := []arg{{kind: argPair, typ: Pred, typ2: Pred}}
			switch t {
			case F16x2, BF16x2:
			case F16, BF16:
				dsts = []arg{dst(Pred)}
			default:
				dsts = append([]arg{dst(Pred)}, dsts...)
			}
			for _, d := range dsts {
				a := []arg{d, src(t), src(t)}
				if slices.ContainsFunc(in.Q, func(q string) bool { return q == "and" || q == "or" || q == "xor" }) {
					a = append(a, arg{kind: argPred})
				}
				out = append(out, a)
			}
			return out
		},
		need: func(in *Instr) []need {
			switch t := in.Type(); {
			case isBF(t):
				return []need{nd(78, 90, "setp."+t.String()+" needs sm_90 and PTX 7.8")}
			case isHalf(t):
				return []need{nd(42, 53, "setp."+t.String()+" needs PTX 4.2")}
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
		if setp.q(in, "ftz") != "" && t != F32 && !isHalf(t) {
			return ".ftz applies to .f32, .f16 and .f16x2 only"
		}
		return ""
	}
	rules["setp"] = setp
	rules["selp"] = &rule{
		types: [][]Type{join(bitTypes, intTypes, []Type{F32, F64})},
		args: func(in *Instr) []arg {
			t := in.Type()
			return []arg{dst(t), src(t), src(t), {kind: argPred}}
		},
	}
}
