package ptx

// Cache control (prefetch, createpolicy, applypriority, discard), address-space tests,
// cluster-asynchronous stores and reductions, bulk reductions, register and grid control.

func init() {
	pf := &rule{slots: []slot{vals("space", "global", "local"), req("level", "L1", "L2", "L2::evict_last", "L2::evict_normal")}, args: fixed(addr()),
		excl: []excl{
			x("level=L2::evict_last|L2::evict_normal", "-space", "prefetch with an eviction priority needs .global"),
			x("level=L2::evict_last|L2::evict_normal", "space=local", "prefetch with an eviction priority needs .global"),
		}}
	pf.need = func(in *Instr) []need {
		if pf.q(in, "level") == "L2::evict_last" || pf.q(in, "level") == "L2::evict_normal" {
			return []need{nd(74, 80, "prefetch eviction priorities need sm_80 and PTX 7.4")}
		}
		return nil
	}
	rules["prefetch"] = pf
	rules["prefetchu"] = &rule{slots: []slot{req("level", "L1")}, args: fixed(addr())}

	cp := &rule{slots: []slot{req("kind", "fractional"), req("primary", "L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged"),
		vals("secondary", "L2::evict_first", "L2::evict_unchanged")}, types: [][]Type{{B64}},
		shapes: func(*Instr) [][]arg {
			return [][]arg{{dst(B64)}, {dst(B64), {kind: argImm, typ: F32}}}
		}, need: needs(nd(74, 80, "createpolicy needs sm_80 and PTX 7.4"))}
	rules["createpolicy"] = cp
	rules["applypriority"] = &rule{slots: []slot{req("space", "global"), req("level", "L2::evict_normal")}, args: fixed(addr(), imm(128)),
		need: needs(nd(74, 80, "applypriority needs sm_80 and PTX 7.4"))}
	rules["discard"] = &rule{slots: []slot{req("space", "global"), req("level", "L2")}, args: fixed(addr(), imm(128)),
		need: needs(nd(74, 80, "discard needs sm_80 and PTX 7.4"))}

	isp := &rule{slots: []slot{req("space", "const", "global", "local", "shared", "shared::cta", "shared::cluster", "param")},
		args: fixed(dst(Pred), src(U64))}
	isp.need = func(in *Instr) []need {
		switch isp.q(in, "space") {
		case "shared::cta", "shared::cluster":
			return []need{nd(78, 90, "isspacep.shared::cta/::cluster needs sm_90 and PTX 7.8")}
		case "param":
			return []need{nd(77, 70, "isspacep.param needs sm_70 and PTX 7.7")}
		}
		return nil
	}
	rules["isspacep"] = isp

	rules["slct"] = &rule{slots: []slot{one("ftz")}, types: [][]Type{join(bitTypes, intTypes, []Type{F32, F64}), {S32, F32}},
		check: func(in *Instr) string {
			if in.HasQ("ftz") && in.Types[1] != F32 {
				return ".ftz applies to slct with an .f32 selector"
			}
			return ""
		},
		args: func(in *Instr) []arg {
			t := in.Types[0]
			return []arg{dst(t), src(t), src(t), src(in.Types[1])}
		}}

	// st.async and red.async write into another CTA's shared memory in the cluster and
	// complete on that CTA's mbarrier.
	sta := &rule{slots: []slot{vals("sem", "weak"), req("space", "shared::cluster"), req("completion", "mbarrier::complete_tx::bytes"), vals("vec", "v2", "v4")},
		types: [][]Type{{B32, B64, U32, S32, U64, S64, F32, F64}},
		check: func(in *Instr) string {
			if in.HasQ("v4") && in.Type().Bits() == 64 {
				return "st.async.v4 takes 32-bit types"
			}
			return ""
		},
		need: needs(nd(81, 90, "st.async needs sm_90 and PTX 8.1"))}
	sta.args = func(in *Instr) []arg {
		return []arg{addr(), {kind: argSrc, typ: in.Type(), vec: vecLen(sta.q(in, "vec"))}, addr()}
	}
	rules["st.async"] = sta
	rda := &rule{slots: []slot{req("sem", "relaxed"), req("scope", "cluster"), req("space", "shared::cluster"), req("completion", "mbarrier::complete_tx::bytes"),
		req("op", "and", "or", "xor", "add", "inc", "dec", "min", "max")},
		types: [][]Type{{B32, U32, S32, U64}},
		args:  func(in *Instr) []arg { return []arg{addr(), src(in.Type()), addr()} },
		need:  needs(nd(81, 90, "red.async needs sm_90 and PTX 8.1"))}
	rda.check = func(in *Instr) string {
		op, t := rda.q(in, "op"), in.Type()
		ok := false
		switch op {
		case "and", "or", "xor":
			ok = t == B32
		case "inc", "dec":
			ok = t == U32
		case "min", "max":
			ok = t == U32 || t == S32
		case "add":
			ok = t == U32 || t == S32 || t == U64
		}
		if !ok {
			return "red.async." + op + " does not take ." + t.String()
		}
		return ""
	}
	rules["red.async"] = rda

	// cp.reduce.async.bulk: reduce a shared::cta buffer into shared::cluster (on an
	// mbarrier) or into global memory (bulk group).
	crb := &rule{slots: []slot{req("dst", "shared::cluster", "global"), req("src", "shared::cta"),
		req("completion", "mbarrier::complete_tx::bytes", "bulk_group"), one("L2::cache_hint"),
		req("op", "and", "or", "xor", "add", "inc", "dec", "min", "max"), one("noftz")},
		types: [][]Type{{B32, B64, U32, S32, U64, S64, F32, F64, F16, BF16}},
		excl: []excl{
			x("dst=shared::cluster", "completion=bulk_group", "the shared::cluster destination completes on an mbarrier"),
			x("dst=global", "completion=mbarrier::complete_tx::bytes", "the global destination completes with .bulk_group"),
			x("dst=shared::cluster", "L2::cache_hint", ".L2::cache_hint applies to the global destination"),
		}}
	crb.check = func(in *Instr) string {
		op, t := crb.q(in, "op"), in.Type()
		half := t == F16 || t == BF16
		if in.HasQ("noftz") != (half && op == "add") {
			return ".noftz is required with, and only with, .add of .f16 and .bf16"
		}
		global := crb.q(in, "dst") == "global"
		ok := false
		switch op {
		case "and", "or", "xor":
			ok = t == B32 || t == B64 && global
		case "inc", "dec":
			ok = t == U32
		case "min", "max":
			ok = t == U32 || t == S32 || global && (t == U64 || t == S64 || half)
		case "add":
			ok = t == U32 || t == S32 || t == U64 || global && (t == F32 || t == F64 || half)
		}
		if !ok {
			return "cp.reduce.async.bulk." + op + " into ." + crb.q(in, "dst") + " does not take ." + t.String()
		}
		return ""
	}
	crb.args = func(in *Instr) []arg {
		a := []arg{addr(), addr(), bulkSize}
		if crb.q(in, "dst") == "shared::cluster" {
			a = append(a, addr())
		}
		if in.HasQ("L2::cache_hint") {
			a = append(a, arg{kind: argReg, typ: B64})
		}
		return a
	}
	crb.need = needs(nd(80, 90, "cp.reduce.async.bulk needs sm_90 and PTX 8.0"))
	rules["cp.reduce.async.bulk"] = crb
	rules["cp.async.bulk.prefetch"] = &rule{slots: []slot{req("level", "L2"), req("space", "global"), one("L2::cache_hint")},
		shapes: func(in *Instr) [][]arg {
			if in.HasQ("L2::cache_hint") {
				return [][]arg{{addr(), bulkSize, {kind: argReg, typ: B64}}}
			}
			return [][]arg{{addr(), bulkSize}}
		}, need: needs(nd(80, 90, "cp.async.bulk.prefetch needs sm_90 and PTX 8.0"))}

	rules["griddepcontrol"] = &rule{slots: []slot{req("action", "launch_dependents", "wait")}, args: fixed(),
		need: needs(nd(78, 90, "griddepcontrol needs sm_90 and PTX 7.8"))}
	rules["setmaxnreg"] = &rule{slots: []slot{req("action", "inc", "dec"), req("sync", "sync"), req("aligned", "aligned")}, types: [][]Type{{U32}},
		args: fixed(imm(setmaxnregCounts()...)),
		need: needs(ndArch(80, []int{90, 100, 101, 103, 110, 120}, "setmaxnreg needs an architecture-specific target (sm_90a, sm_100a, ...) and PTX 8.0"))}
}

// setmaxnregCounts are setmaxnreg's legal register counts: multiples of 8 from 24 to 256.
func setmaxnregCounts() []int64 {
	var out []int64
	for n := int64(24); n <= 256; n += 8 {
		out = append(out, n)
	}
	return out
}
