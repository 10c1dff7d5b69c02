package ptx

// mbarrier, cp.async and cp.async.bulk.

// isPredOperand reports whether o is a predicate register or its negation.
func isPredOperand(o Operand) bool {
	switch o := o.(type) {
	case Not:
		return true
	case Reg:
		return o.Type == Pred
	}
	return false
}

// bulkSize is the byte count of a bulk copy: a multiple of 16.
var bulkSize = arg{kind: argSrc, typ: U32, mult: 16}

func init() {
	shSpace := vals("space", "shared", "shared::cta")
	shCta := func(in *Instr) []need {
		if in.HasQ("shared::cta") {
			return []need{nd(78, 0, in.Op+".shared::cta needs PTX 7.8")}
		}
		return nil
	}
	mb := nd(70, 80, "mbarrier needs sm_80 and PTX 7.0")
	rules["mbarrier.init"] = &rule{slots: []slot{shSpace}, types: [][]Type{{B64}}, args: fixed(addr(), src(U32)),
		need: func(in *Instr) []need { return append(shCta(in), mb) }}
	rules["mbarrier.inval"] = &rule{slots: []slot{shSpace}, types: [][]Type{{B64}}, args: fixed(addr()),
		need: func(in *Instr) []need { return append(shCta(in), mb) }}
	rules["mbarrier.pending_count"] = &rule{types: [][]Type{{B64}}, args: fixed(dst(U32), src(B64)), need: needs(mb)}

	pairExcl := []excl{
		x("sem", "-scope", "mbarrier .sem and .scope go together"),
		x("-sem", "scope", "mbarrier .sem and .scope go together"),
	}
	semScope := func(r *rule, in *Instr, ns []need) []need {
		if s := r.q(in, "sem"); s != "" {
			ns = append(ns, nd(80, 90, in.Op+"."+s+" needs sm_90 and PTX 8.0"))
			if s == "relaxed" && in.Op != "mbarrier.expect_tx" && in.Op != "mbarrier.complete_tx" {
				ns = append(ns, nd(86, 90, in.Op+".relaxed needs sm_90 and PTX 8.6"))
			}
		}
		if r.q(in, "scope") != "" {
			ns = append(ns, nd(80, 90, in.Op+" scopes need sm_90 and PTX 8.0"))
		}
		if in.HasQ("shared::cluster") {
			ns = append(ns, nd(80, 90, in.Op+".shared::cluster needs sm_90 and PTX 8.0"))
		}
		return ns
	}
	for _, op := range []string{"mbarrier.arrive", "mbarrier.arrive_drop"} {
		arrive := &rule{
			slots: []slot{vals("mode", "expect_tx", "noComplete"), vals("sem", "release", "relaxed"), vals("scope", "cta", "cluster"),
				vals("space", "shared", "shared::cta", "shared::cluster")},
			types: [][]Type{{B64}},
			excl: []excl{
				x("mode=noComplete", "sem", ".noComplete takes no .sem or .scope"),
				x("mode=noComplete", "scope", ".noComplete takes no .sem or .scope"),
				x("mode=noComplete", "space=shared::cluster", ".noComplete takes no .shared::cluster"),
				pairExcl[0], pairExcl[1],
			},
		}
		arrive.shapes = func(in *Instr) [][]arg {
			state := dst(B64)
			if in.HasQ("shared::cluster") {
				state = arg{kind: argSink} // the remote arrive returns no state
			}
			switch arrive.q(in, "mode") {
			case "expect_tx", "noComplete":
				return [][]arg{{state, addr(), src(B32)}}
			}
			return [][]arg{{state, addr()}, {state, addr(), src(B32)}}
		}
		arrive.need = func(in *Instr) []need {
			ns := append(shCta(in), mb)
			switch arrive.q(in, "mode") {
			case "expect_tx":
				ns = append(ns, nd(80, 90, in.Op+".expect_tx needs sm_90 and PTX 8.0"))
			case "":
				if len(in.Args) == 3 {
					ns = append(ns, nd(78, 90, in.Op+" with a count needs sm_90 and PTX 7.8"))
				}
			}
			return semScope(arrive, in, ns)
		}
		rules[op] = arrive
	}
	for _, op := range []string{"mbarrier.expect_tx", "mbarrier.complete_tx"} {
		r := &rule{slots: []slot{vals("sem", "relaxed"), vals("scope", "cta", "cluster"), vals("space", "shared", "shared::cta", "shared::cluster")},
			types: [][]Type{{B64}}, args: fixed(addr(), src(B32)), excl: pairExcl}
		r.need = func(in *Instr) []need {
			return semScope(r, in, append(shCta(in), nd(80, 90, in.Op+" needs sm_90 and PTX 8.0")))
		}
		rules[op] = r
	}
	for _, op := range []string{"mbarrier.test_wait", "mbarrier.try_wait"} {
		r := &rule{slots: []slot{one("parity"), vals("sem", "acquire", "relaxed"), vals("scope", "cta", "cluster"), shSpace}, types: [][]Type{{B64}}, excl: pairExcl}
		try := op == "mbarrier.try_wait"
		r.shapes = func(in *Instr) [][]arg {
			state := src(B64)
			if in.HasQ("parity") {
				state = src(B32)
			}
			sh := [][]arg{{dst(Pred), addr(), state}}
			if try {
				sh = append(sh, []arg{dst(Pred), addr(), state, src(U32)})
			}
			return sh
		}
		r.need = func(in *Instr) []need {
			ns := append(shCta(in), mb)
			if try {
				ns = append(ns, nd(78, 90, "mbarrier.try_wait needs sm_90 and PTX 7.8"))
			}
			if in.HasQ("parity") {
				ns = append(ns, nd(71, 80, in.Op+".parity needs PTX 7.1"))
			}
			return semScope(r, in, ns)
		}
		rules[op] = r
	}

	cpa := nd(70, 80, "cp.async needs sm_80 and PTX 7.0")
	cp := &rule{slots: []slot{req("cache", "ca", "cg"), req("dst", "shared", "shared::cta"), req("src", "global"),
		one("L2::cache_hint"), vals("prefetch", prefetchSize...)}}
	cp.shapes = func(in *Instr) [][]arg {
		size := imm(4, 8, 16)
		if in.HasQ("cg") {
			size = imm(16)
		}
		// src-size (bytes read, the rest zero-filled) is at most cp-size.
		srcSize := src(U32)
		srcSize.lim = 16
		if len(in.Args) > 2 {
			if im, ok := in.Args[2].(Imm); ok && im.Bits <= 16 {
				srcSize.lim = int64(im.Bits)
			}
		}
		// ignore-src: a predicate register that, when true, makes the copy write zeros (an
		// immediate in that place is a src-size).
		sh := [][]arg{{addr(), addr(), size}, {addr(), addr(), size, srcSize}}
		if len(in.Args) < 4 || isPredOperand(in.Args[3]) {
			sh = append(sh, []arg{addr(), addr(), size, {kind: argPred}})
		}
		if in.HasQ("L2::cache_hint") {
			for i := range sh {
				sh[i] = append(sh[i], arg{kind: argReg, typ: B64})
			}
		}
		return sh
	}
	cp.need = func(in *Instr) []need {
		ns := []need{cpa} // cp.async takes .shared::cta from PTX 7.0
		if in.HasQ("L2::cache_hint") {
			ns = append(ns, nd(74, 80, "cp.async.L2::cache_hint needs PTX 7.4"))
		}
		if cp.q(in, "prefetch") != "" {
			ns = append(ns, nd(74, 80, "cp.async prefetch sizes need PTX 7.4"))
		}
		if len(in.Args) > 3 && isPredOperand(in.Args[3]) {
			ns = append(ns, nd(75, 80, "cp.async with an ignore-src predicate needs PTX 7.5"))
		}
		return ns
	}
	rules["cp.async"] = cp
	rules["cp.async.commit_group"] = &rule{args: fixed(), need: needs(cpa)}
	rules["cp.async.wait_group"] = &rule{args: fixed(arg{kind: argImm, typ: U32}), need: needs(cpa)} // any integer N
	rules["cp.async.wait_all"] = &rule{args: fixed(), need: needs(cpa)}
	rules["cp.async.mbarrier.arrive"] = &rule{slots: []slot{one("noinc"), shSpace}, types: [][]Type{{B64}}, args: fixed(addr()),
		need: func(in *Instr) []need { return append(shCta(in), cpa) }}

	bulk := &rule{
		slots: []slot{req("dst", "shared::cluster", "shared::cta", "global"), req("src", "global", "shared::cta"),
			req("completion", "mbarrier::complete_tx::bytes", "bulk_group"), one("multicast::cluster"), one("L2::cache_hint")},
	}
	bulk.check = func(in *Instr) string {
		d, s, c := bulk.q(in, "dst"), bulk.q(in, "src"), bulk.q(in, "completion")
		mc, hint := in.HasQ("multicast::cluster"), in.HasQ("L2::cache_hint")
		switch {
		case s == "global" && (d == "shared::cluster" || d == "shared::cta"):
			if c != "mbarrier::complete_tx::bytes" {
				return "cp.async.bulk into shared memory completes on an mbarrier (.mbarrier::complete_tx::bytes)"
			}
			if mc && d != "shared::cluster" {
				return ".multicast::cluster needs the .shared::cluster destination"
			}
		case s == "shared::cta" && d == "shared::cluster":
			if c != "mbarrier::complete_tx::bytes" || mc || hint {
				return "cp.async.bulk.shared::cluster.shared::cta takes .mbarrier::complete_tx::bytes only"
			}
		case s == "shared::cta" && d == "global":
			if c != "bulk_group" || mc {
				return "cp.async.bulk.global.shared::cta completes with .bulk_group"
			}
		default:
			return "cp.async.bulk copies global->shared, shared::cta->shared::cluster or shared::cta->global"
		}
		return ""
	}
	bulk.args = func(in *Instr) []arg {
		a := []arg{addr(), addr(), bulkSize}
		if bulk.q(in, "completion") != "bulk_group" {
			a = append(a, addr())
		}
		if in.HasQ("multicast::cluster") {
			a = append(a, src(B16))
		}
		if in.HasQ("L2::cache_hint") {
			a = append(a, arg{kind: argReg, typ: B64})
		}
		return a
	}
	bulk.need = func(in *Instr) []need {
		ns := []need{nd(80, 90, "cp.async.bulk needs sm_90 and PTX 8.0")}
		if in.HasQ("multicast::cluster") {
			// ptxas 13.0 warns ("Advisory ... substantially reduced performance") on sm_90 and
			// sm_120a: kgen emits the form for the targets ptxas names only.
			ns = append(ns, ndArch(80, []int{90, 100, 101, 103, 110}, ".multicast::cluster needs sm_90a, sm_100a-class targets (ptxas advises against it elsewhere)"))
		}
		if bulk.q(in, "dst") == "shared::cta" {
			ns = append(ns, nd(86, 90, "cp.async.bulk into .shared::cta needs sm_90 and PTX 8.6"))
		}
		return ns
	}
	rules["cp.async.bulk"] = bulk
	bn := nd(80, 90, "cp.async.bulk groups need sm_90 and PTX 8.0")
	rules["cp.async.bulk.commit_group"] = &rule{args: fixed(), need: needs(bn)}
	rules["cp.async.bulk.wait_group"] = &rule{slots: []slot{one("read")}, args: fixed(arg{kind: argImm, typ: U32}), need: needs(bn)} // any integer N, as cp.async.wait_group
}
