package ptx

import "slices"

// multimem.ld_reduce, multimem.st and multimem.red on multicast addresses (sm_90, PTX 8.1).
// Qualifier order: sem, scope, space, op, accumulator precision, vector, type.

var (
	mmInt    = []Type{B32, B64, U32, U64, S32, S64}
	mmFloat  = []Type{F16, F16x2, BF16, BF16x2, F32, F64}
	mmFP8    = []Type{E5M2, E5M2x2, E5M2x4, E4M3, E4M3x2, E4M3x4}
	mmSM100a = []int{100, 101, 103, 110, 120, 121}
)

func multimemRule(kind string) *rule {
	var sems []string
	switch kind {
	case "ld_reduce":
		sems = []string{"weak", "relaxed", "acquire"}
	case "st":
		sems = []string{"weak", "relaxed", "release"}
	default:
		sems = []string{"relaxed", "release"}
	}
	slots := []slot{vals("sem", sems...), vals("scope", scopes...), vals("space", "global")}
	types := join(mmInt, mmFloat)
	if kind != "st" {
		slots = append(slots, req("op", "min", "max", "add", "and", "or", "xor"))
	}
	if kind == "ld_reduce" {
		slots = append(slots, vals("acc", "acc::f32", "acc::f16"))
	}
	if kind != "red" {
		types = join(types, mmFP8)
	}
	slots = append(slots, vals("vec", vecs...))
	r := &rule{slots: slots, types: [][]Type{types}}
	r.excl = []excl{
		x("sem=relaxed|acquire|release", "-scope", "multimem ."+sems[len(sems)-1]+" and .relaxed need a scope"),
		x("-sem", "scope", "a multimem scope needs .relaxed, ."+sems[len(sems)-1]),
	}
	if kind != "red" {
		r.excl = append(r.excl, x("sem=weak", "scope", ".weak takes no scope"))
	}
	if kind == "ld_reduce" {
		r.excl = append(r.excl, x("acc", "op=min|max|and|or|xor", "an accumulator precision applies to .add only"))
	}
	r.check = func(in *Instr) string {
		t, v, op := in.Type(), r.q(in, "vec"), r.q(in, "op")
		bits := vecBits(v, t)
		switch {
		case slices.Contains(mmInt, t):
			if v != "" {
				return "integer multimem forms take no vector"
			}
			if r.q(in, "acc") != "" {
				return "integer multimem forms take no accumulator precision"
			}
			if kind == "st" {
				return ""
			}
			if op == "add" && t == S64 {
				return "multimem .add takes no .s64 (use .u64)"
			}
			if (op == "and" || op == "or" || op == "xor") != (t.Kind() == KindBits) {
				return "." + op + " takes ." + map[bool]string{true: "b32/.b64", false: "u32/.s32/.u64/.s64"}[op == "and" || op == "or" || op == "xor"]
			}
			return ""
		case t == F64 && v != "":
			return ".f64 takes no vector"
		case bits != 32 && bits != 64 && bits != 128:
			return "a floating-point type times the vector must be 32, 64 or 128 bits (." + t.String() + vecSuffix(v) + " is " + itoa(bits) + ")"
		case op != "" && op != "add" && op != "min" && op != "max":
			return "floating-point multimem reductions take .add, .min or .max"
		case (op == "min" || op == "max") && (t == F32 || t == F64):
			return "multimem ." + op + " takes no ." + t.String() + " (f16 and bf16 types only)"
		case kind == "red" && op != "add":
			return "floating-point multimem.red takes .add only"
		}
		switch acc := r.q(in, "acc"); {
		case acc == "acc::f32" && !slices.Contains([]Type{F16, F16x2, BF16, BF16x2}, t):
			return ".acc::f32 applies to f16 and bf16 types"
		case acc == "acc::f16" && !slices.Contains(mmFP8, t):
			return ".acc::f16 applies to fp8 types (e4m3, e5m2)"
		}
		return ""
	}
	r.args = func(in *Instr) []arg {
		n := vecLen(r.q(in, "vec"))
		if kind == "ld_reduce" {
			return []arg{{kind: argDst, typ: in.Type(), vec: n}, addr()}
		}
		return []arg{addr(), {kind: argSrc, typ: in.Type(), vec: n}}
	}
	r.need = func(in *Instr) []need {
		ns := []need{nd(81, 90, "multimem needs sm_90 and PTX 8.1")}
		if r.q(in, "acc") == "acc::f32" {
			ns = append(ns, nd(82, 90, ".acc::f32 needs sm_90 and PTX 8.2"))
		}
		if r.q(in, "acc") == "acc::f16" {
			ns = append(ns, ndArch(86, mmSM100a, ".acc::f16 needs sm_100a-class targets (sm_100a, sm_120a) and PTX 8.6"))
		}
		if slices.Contains(mmFP8, in.Type()) {
			ns = append(ns, ndArch(86, mmSM100a, "multimem on fp8 types needs sm_100a-class targets (sm_100a, sm_120a) and PTX 8.6"))
		}
		return ns
	}
	return r
}

func vecSuffix(v string) string {
	if v == "" {
		return ""
	}
	return "." + v
}

func init() {
	rules["multimem.ld_reduce"] = multimemRule("ld_reduce")
	rules["multimem.st"] = multimemRule("st")
	rules["multimem.red"] = multimemRule("red")
}
