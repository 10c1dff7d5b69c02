package ptx

import "slices"

// ld and st with memory-ordering semantics, scopes, cache operators, eviction hints,
// ld.global.nc and vectors; mov, including the special registers.

var (
	l1Evict      = []string{"L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate"}
	l2Evict      = []string{"L2::evict_normal", "L2::evict_first", "L2::evict_last"}
	prefetchSize = []string{"L2::64B", "L2::128B", "L2::256B"}
	nonGlobal    = "space=const|local|param|shared|shared::cta|shared::cluster"
)

// memRule builds ld (load) or st.
func memRule(load bool) *rule {
	sems := []string{"weak", "volatile", "relaxed", "release"}
	spaces := stSpaces
	cops := []string{"wb", "cg", "cs", "wt"}
	if load {
		sems = []string{"weak", "volatile", "relaxed", "acquire"}
		spaces = ldSpaces
		cops = []string{"ca", "cg", "cs", "lu", "cv"}
	}
	slots := []slot{one("mmio"), vals("sem", sems...), vals("scope", scopes...), vals("space", spaces...), vals("cop", cops...)}
	if load {
		slots = append(slots, one("nc"))
	}
	slots = append(slots, vals("l1", l1Evict...), vals("l2", l2Evict...), one("L2::cache_hint"))
	if load {
		slots = append(slots, vals("prefetch", prefetchSize...))
	}
	slots = append(slots, vals("vec", vecs...))
	ordered := "sem=relaxed|" + sems[3]
	r := &rule{slots: slots, types: [][]Type{memTypes}}
	r.excl = append(r.excl,
		x(ordered, "-scope", ".relaxed, .acquire and .release need a scope (.cta .cluster .gpu .sys)"),
		x("-sem", "scope", "a scope needs .relaxed, .acquire or .release"),
		x("sem=weak|volatile", "scope", "a scope needs .relaxed, .acquire or .release"),
		x("sem=volatile|"+ordered[4:], "space=const|local|param", "memory ordering applies to .global and .shared only"),
		x("sem=volatile|"+ordered[4:], "cop", "cache operators do not combine with .volatile, .relaxed, .acquire or .release"),
		x("mmio", "sem=weak|volatile|"+sems[3], ".mmio needs .relaxed.sys"),
		x("mmio", "-sem", ".mmio needs .relaxed.sys"),
		x("mmio", "scope=cta|cluster|gpu", ".mmio needs .relaxed.sys"),
		x("mmio", nonGlobal, ".mmio applies to .global only"),
		x("cop", "l1", "a cache operator does not combine with an eviction priority"),
		x("cop", "l2", "a cache operator does not combine with an eviction priority"),
		x("sem=volatile", "l1", ".volatile takes no cache hints"),
		x("sem=volatile", "l2", ".volatile takes no cache hints"),
		x("sem=volatile", "L2::cache_hint", ".volatile takes no cache hints"),
		x("l1", nonGlobal, "eviction priorities apply to .global only"),
		x("l2", nonGlobal, "eviction priorities apply to .global only"),
		x("L2::cache_hint", nonGlobal, ".L2::cache_hint applies to .global only"),
	)
	r.excl = append(r.excl, exclAll("mmio", ".mmio takes no cache or vector qualifiers", "cop", "l1", "l2", "L2::cache_hint", "vec")...)
	if load {
		r.excl = append(r.excl,
			x("sem", "nc", ".nc takes no memory-ordering qualifier"),
			x("nc", "-space", ".nc applies to .global only"),
			x("nc", nonGlobal, ".nc applies to .global only"),
			x("cop=lu|cv", "nc", ".nc takes .ca, .cg or .cs only"),
			x("prefetch", nonGlobal, "prefetch sizes apply to .global only"),
			x("mmio", "nc", ".mmio takes no cache or vector qualifiers"),
			x("mmio", "prefetch", ".mmio takes no cache or vector qualifiers"),
		)
	}
	r.check = func(in *Instr) string {
		t, v := in.Type(), r.q(in, "vec")
		switch {
		case v == "v8" && t.Bits() != 32:
			return ".v8 applies to 32-bit types"
		case t == B128 && v != "":
			return ".b128 takes no vector"
		case vecBits(v, t) > 256:
			return "vector too wide"
		case vecBits(v, t) == 256 && r.q(in, "space") != "global" && r.q(in, "space") != "":
			return "256-bit accesses apply to .global only"
		case r.q(in, "l2") != "" && vecBits(v, t) != 256:
			return "L2 eviction priorities apply to 256-bit accesses only"
		case r.q(in, "mmio") != "" && t.Bits() != 32 && t.Bits() != 64 && t.Bits() != 16 && t.Bits() != 8:
			return ".mmio takes 8- to 64-bit types"
		}
		return ""
	}
	r.shapes = func(in *Instr) [][]arg {
		var a []arg
		data := arg{kind: argSrc, typ: in.Type(), vec: vecLen(r.q(in, "vec")), wide: true}
		if load {
			data.kind = argDst
			a = []arg{data, addr()}
		} else {
			a = []arg{addr(), data}
		}
		if in.HasQ("L2::cache_hint") {
			a = append(a, arg{kind: argReg, typ: B64})
		}
		return [][]arg{a}
	}
	r.need = func(in *Instr) []need {
		var ns []need
		op := in.Op
		if s := r.q(in, "sem"); s == "relaxed" || s == "acquire" || s == "release" {
			ns = append(ns, nd(60, 70, op+"."+s+" needs sm_70 and PTX 6.0"))
		}
		if r.q(in, "scope") == "cluster" || r.q(in, "space") == "shared::cluster" {
			ns = append(ns, nd(78, 90, op+" with cluster scope or .shared::cluster needs sm_90 and PTX 7.8"))
		}
		if r.q(in, "space") == "shared::cta" {
			ns = append(ns, nd(78, 0, op+".shared::cta needs PTX 7.8"))
		}
		if in.HasQ("mmio") {
			ns = append(ns, nd(82, 70, op+".mmio needs sm_70 and PTX 8.2"))
		}
		if r.q(in, "l1") != "" {
			ns = append(ns, nd(74, 70, "L1 eviction priorities need sm_70 and PTX 7.4"))
		}
		if r.q(in, "l2") != "" {
			ns = append(ns, nd(88, 100, "L2 eviction priorities need sm_100 and PTX 8.8"))
		}
		if in.HasQ("L2::cache_hint") {
			ns = append(ns, nd(74, 80, ".L2::cache_hint needs sm_80 and PTX 7.4"))
		}
		if r.q(in, "prefetch") != "" {
			ns = append(ns, nd(74, 75, "prefetch sizes need sm_75 and PTX 7.4"))
		}
		if vecBits(r.q(in, "vec"), in.Type()) == 256 {
			ns = append(ns, nd(88, 100, "256-bit "+op+" (.v8 of 32-bit, .v4 of 64-bit types) needs sm_100 and PTX 8.8"))
		}
		if in.Type() == B128 {
			ns = append(ns, nd(83, 70, op+".b128 needs sm_70 and PTX 8.3"))
			if r.q(in, "scope") == "sys" {
				ns = append(ns, nd(84, 70, ".b128 with .sys needs PTX 8.4"))
			}
		}
		return ns
	}
	return r
}

// specialNeeds lists the special registers that need more than sm_80 and PTX 7.0.
var specialNeeds = map[string]need{}

func init() {
	rules["ld"] = memRule(true)
	rules["st"] = memRule(false)

	for _, s := range []string{"clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"} {
		for _, d := range []string{"x", "y", "z"} {
			specialNeeds["%"+s+"."+d] = nd(78, 90, "%"+s+" needs sm_90 and PTX 7.8")
		}
	}
	for _, s := range []string{"%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster"} {
		specialNeeds[s] = nd(78, 90, s+" needs sm_90 and PTX 7.8")
	}
	specialNeeds["%aggr_smem_size"] = nd(81, 90, "%aggr_smem_size needs sm_90 and PTX 8.1")
	specialTypes["%aggr_smem_size"] = U32
	specialTypes["%reserved_smem_offset_begin"] = B32
	specialTypes["%reserved_smem_offset_end"] = B32
	specialTypes["%reserved_smem_offset_cap"] = B32
	for _, s := range []string{"%reserved_smem_offset_begin", "%reserved_smem_offset_end", "%reserved_smem_offset_cap"} {
		specialNeeds[s] = nd(76, 80, s+" needs PTX 7.6")
	}
	for i := 0; i < 32; i++ {
		specialTypes["%envreg"+itoa(i)] = B32
	}

	mov := &rule{types: [][]Type{join(movTypes, []Type{B128})}}
	// mov packs and unpacks bit types: mov.b64 %rd, {%r0, %r1}; mov.b64 {%r0, %r1}, %rd.
	mov.shapes = func(in *Instr) [][]arg {
		t := in.Type()
		sh := [][]arg{sameArgs(t, 2)}
		if t.Kind() != KindBits {
			return sh
		}
		for _, h := range []Type{B8, B16, B32, B64} {
			n := t.Bits() / h.Bits()
			if n != 2 && n != 4 {
				continue
			}
			sh = append(sh,
				[]arg{dst(t), {kind: argSrc, typ: h, vec: n}},
				[]arg{{kind: argDst, typ: h, vec: n}, src(t)})
		}
		return sh
	}
	mov.need = func(in *Instr) []need {
		var ns []need
		if in.Type() == B128 {
			ns = append(ns, nd(83, 70, "mov.b128 needs sm_70 and PTX 8.3"))
		}
		for _, a := range in.Args {
			if s, ok := a.(Special); ok {
				if n, ok := specialNeeds[string(s)]; ok {
					ns = append(ns, n)
				}
			}
		}
		return ns
	}
	mov.extra = func() []*Instr {
		names := make([]string, 0, len(specialTypes))
		for s := range specialTypes {
			names = append(names, s)
		}
		slices.Sort(names)
		var out []*Instr
		for _, s := range names {
			t := specialTypes[s]
			out = append(out, &Instr{Op: "mov", Types: []Type{t}, Args: []Operand{Reg{Type: t, N: 0}, Special(s)}})
		}
		out = append(out, &Instr{Op: "mov", Types: []Type{U64}, Args: []Operand{Reg{Type: U64, N: 0}, Sym(formConst)}})
		return out
	}
	rules["mov"] = mov
}
