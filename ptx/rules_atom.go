package ptx

import "slices"

// atom and red: every operation, memory-ordering semantics, scopes and spaces, the
// half-precision adds (.noftz) and the vector forms.

// atomRule builds atom (returns the old value) or red.
func atomRule(atom bool) *rule {
	sems := []string{"relaxed", "release"}
	types := []Type{B32, B64, U32, U64, S32, S64, F32, F64, F16, F16x2, BF16, BF16x2}
	if atom {
		types = append([]Type{B16, B128}, types...)
	}
	ops := []string{"and", "or", "xor", "add", "inc", "dec", "min", "max"}
	if atom {
		sems = []string{"relaxed", "acquire", "release", "acq_rel"}
		ops = append(ops, "cas", "exch")
	}
	r := &rule{
		slots: []slot{vals("sem", sems...), vals("scope", scopes...), vals("space", "global", "shared", "shared::cta", "shared::cluster"),
			req("op", ops...), one("noftz"), one("L2::cache_hint"), vals("vec", vecs...)},
		types: [][]Type{types},
		excl: []excl{
			x("L2::cache_hint", "space=shared|shared::cta|shared::cluster", ".L2::cache_hint applies to .global only"),
			x("vec", "space=shared|shared::cta|shared::cluster", "vector atomics apply to .global only"),
			x("vec", "op=and|or|xor|inc|dec|cas|exch", "vector atomics take .add, .min or .max"),
			x("op=cas", "L2::cache_hint", "atom.cas takes no .L2::cache_hint"),
		},
	}
	r.check = func(in *Instr) string {
		op, t, v := r.q(in, "op"), in.Type(), r.q(in, "vec")
		half := isHalf(t) || isBF(t)
		if t == B128 && in.HasQ("L2::cache_hint") {
			return ".b128 atomics take no .L2::cache_hint"
		}
		if (r.q(in, "noftz") != "") != half {
			return ".noftz is required with, and only with, f16 and bf16 types"
		}
		if v != "" {
			switch {
			case t == F32 && op == "add" && v != "v8":
			case (t == F16 || t == BF16) && (op == "add" || op == "min" || op == "max"):
			case (t == F16x2 || t == BF16x2) && (op == "add" || op == "min" || op == "max") && v != "v8":
			default:
				return "vector " + in.Op + " takes .v2/.v4 .f32 (.add), .v2/.v4/.v8 .f16/.bf16 or .v2/.v4 .f16x2/.bf16x2 (.add .min .max)"
			}
			return ""
		}
		ok := false
		switch op {
		case "and", "or", "xor":
			ok = t == B32 || t == B64
		case "cas":
			ok = t == B16 || t == B32 || t == B64 || t == B128
		case "exch":
			ok = t == B32 || t == B64 || t == B128
		case "add":
			ok = slices.Contains([]Type{U32, S32, U64, F32, F64, F16, F16x2, BF16, BF16x2}, t)
		case "inc", "dec":
			ok = t == U32
		case "min", "max":
			ok = slices.Contains([]Type{U32, S32, U64, S64}, t)
		}
		if !ok {
			return in.Op + "." + op + " does not take ." + t.String()
		}
		return ""
	}
	r.shapes = func(in *Instr) [][]arg {
		t, n := in.Type(), vecLen(r.q(in, "vec"))
		val := arg{kind: argSrc, typ: t, vec: n}
		var a []arg
		if atom {
			a = []arg{{kind: argDst, typ: t, vec: n}, addr(), val}
			if r.q(in, "op") == "cas" {
				a = append(a, src(t))
			}
		} else {
			a = []arg{addr(), val}
		}
		if in.HasQ("L2::cache_hint") {
			a = append(a, arg{kind: argReg, typ: B64})
		}
		return [][]arg{a}
	}
	r.need = func(in *Instr) []need {
		var ns []need
		op, t := in.Op, in.Type()
		if s := r.q(in, "sem"); s != "" {
			ns = append(ns, nd(60, 70, op+"."+s+" needs sm_70 and PTX 6.0"))
		}
		if r.q(in, "scope") != "" {
			ns = append(ns, nd(50, 60, op+" scopes need sm_60 and PTX 5.0"))
		}
		if r.q(in, "scope") == "cluster" || r.q(in, "space") == "shared::cluster" {
			ns = append(ns, nd(78, 90, op+" with cluster scope or .shared::cluster needs sm_90 and PTX 7.8"))
		}
		if r.q(in, "space") == "shared::cta" {
			ns = append(ns, nd(78, 0, op+".shared::cta needs PTX 7.8"))
		}
		if in.HasQ("L2::cache_hint") {
			ns = append(ns, nd(74, 80, op+".L2::cache_hint needs sm_80 and PTX 7.4"))
		}
		switch {
		case r.q(in, "vec") != "":
			ns = append(ns, nd(81, 90, "vector "+op+" needs sm_90 and PTX 8.1"))
		case isBF(t):
			ns = append(ns, nd(78, 90, op+".add.noftz."+t.String()+" needs sm_90 and PTX 7.8"))
		case t == F16:
			ns = append(ns, nd(63, 70, op+".add.noftz.f16 needs sm_70 and PTX 6.3"))
		case t == F16x2:
			ns = append(ns, nd(62, 60, op+".add.noftz.f16x2 needs sm_60 and PTX 6.2"))
		case t == B16:
			ns = append(ns, nd(63, 70, op+".cas.b16 needs sm_70 and PTX 6.3"))
		case t == B128:
			ns = append(ns, nd(83, 90, op+"."+r.q(in, "op")+".b128 needs sm_90 and PTX 8.3"))
			if r.q(in, "scope") == "sys" {
				ns = append(ns, nd(84, 90, ".b128 with .sys needs PTX 8.4"))
			}
		}
		return ns
	}
	return r
}

func init() {
	rules["atom"] = atomRule(true)
	rules["red"] = atomRule(false)
}
