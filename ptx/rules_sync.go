package ptx

// Fences, barriers and warp-level synchronisation.

func needs(ns ...need) func(*Instr) []need { return func(*Instr) []need { return ns } }

func init() {
	fence := &rule{slots: []slot{vals("sem", "sc", "acq_rel", "acquire", "release"), req("scope", scopes...)}, args: fixed()}
	fence.need = func(in *Instr) []need {
		var ns []need
		// The ISA documents fence.acquire/.release from PTX 8.6; ptxas 13.0 takes them from
		// PTX 6.0 on sm_70 like .sc and .acq_rel (the oracle checks the lowest version).
		ns = append(ns, nd(60, 70, "fence needs sm_70 and PTX 6.0"))
		if in.HasQ("cluster") {
			ns = append(ns, nd(78, 90, "fence.cluster needs sm_90 and PTX 7.8"))
		}
		return ns
	}
	rules["fence"] = fence
	proxy := &rule{slots: []slot{req("kind", "alias", "async"), vals("space", "global", "shared::cta", "shared::cluster")}, args: fixed(),
		excl: []excl{x("kind=alias", "space", "fence.proxy.alias takes no state space")}}
	proxy.need = func(in *Instr) []need {
		if in.HasQ("alias") {
			return []need{nd(75, 70, "fence.proxy.alias needs sm_70 and PTX 7.5")}
		}
		return []need{nd(80, 90, "fence.proxy.async needs sm_90 and PTX 8.0")}
	}
	rules["fence.proxy"] = proxy
	rules["fence.mbarrier_init"] = &rule{slots: []slot{req("sem", "release"), req("scope", "cluster")}, args: fixed(),
		need: needs(nd(80, 90, "fence.mbarrier_init needs sm_90 and PTX 8.0"))}
	rules["membar"] = &rule{slots: []slot{req("level", "cta", "gl", "sys")}, args: fixed()}

	// The thread count of a named barrier is a multiple of the warp size.
	count := arg{kind: argSrc, typ: U32, mult: 32}
	// A barrier number is 0 to 15 (ptxas refuses an immediate past it; the emulator a
	// register's value when run).
	id := arg{kind: argSrc, typ: U32, lim: 15}
	barID := func(in *Instr) [][]arg {
		return [][]arg{{id}, {id, count}}
	}
	rules["bar.sync"] = &rule{shapes: barID}
	rules["bar.arrive"] = &rule{args: fixed(id, count)}
	red := func(aligned bool) *rule {
		slots := []slot{req("op", "popc", "and", "or")}
		if aligned {
			slots = append(slots, one("aligned"))
		}
		r := &rule{slots: slots, types: [][]Type{{U32, Pred}}}
		r.check = func(in *Instr) string {
			if (r.q(in, "op") == "popc") != (in.Type() == U32) {
				return "bar.red.popc takes .u32; .and and .or take .pred"
			}
			return ""
		}
		r.shapes = func(in *Instr) [][]arg {
			d := dst(in.Type())
			return [][]arg{{d, id, {kind: argPred}}, {d, id, count, {kind: argPred}}}
		}
		return r
	}
	rules["bar.red"] = red(false)
	rules["barrier.sync"] = &rule{slots: []slot{one("aligned")}, shapes: barID}
	rules["barrier.arrive"] = &rule{slots: []slot{one("aligned")}, args: fixed(id, count)}
	rules["barrier.red"] = red(true)
	rules["bar.warp.sync"] = &rule{args: fixed(src(B32)), need: needs(nd(60, 70, "bar.warp.sync needs PTX 6.0"))}
	clusterNeed := func(in *Instr) []need {
		ns := []need{nd(78, 90, in.Op+" needs sm_90 and PTX 7.8")}
		if len(in.Q) > 0 && in.Q[0] != "aligned" {
			ns = append(ns, nd(80, 90, in.Op+"."+in.Q[0]+" needs sm_90 and PTX 8.0"))
		}
		return ns
	}
	rules["barrier.cluster.arrive"] = &rule{slots: []slot{vals("sem", "release", "relaxed"), one("aligned")}, args: fixed(), need: clusterNeed}
	rules["barrier.cluster.wait"] = &rule{slots: []slot{vals("sem", "acquire"), one("aligned")}, args: fixed(), need: clusterNeed}

	warp := nd(60, 70, "warp-synchronous instructions (.sync) need PTX 6.0")
	rules["shfl.sync"] = &rule{slots: []slot{req("mode", "up", "down", "bfly", "idx")}, types: [][]Type{{B32}},
		shapes: func(*Instr) [][]arg {
			return [][]arg{
				{dst(B32), src(B32), src(B32), src(B32), src(B32)},
				{{kind: argPair, typ: B32, typ2: Pred}, src(B32), src(B32), src(B32), src(B32)},
			}
		}, need: needs(warp)}
	vote := &rule{slots: []slot{req("mode", "all", "any", "uni", "ballot")}, types: [][]Type{{Pred, B32}},
		args: func(in *Instr) []arg { return []arg{dst(in.Type()), {kind: argPred}, src(B32)} }, need: needs(warp)}
	vote.check = func(in *Instr) string {
		if (vote.q(in, "mode") == "ballot") != (in.Type() == B32) {
			return "vote.sync.ballot takes .b32; .all, .any and .uni take .pred"
		}
		return ""
	}
	rules["vote.sync"] = vote
	redux := &rule{slots: []slot{req("op", "add", "min", "max", "and", "or", "xor"), one("abs"), one("NaN")}, types: [][]Type{{U32, S32, B32, F32}},
		args: func(in *Instr) []arg { return []arg{dst(in.Type()), src(in.Type()), src(B32)} }}
	redux.check = func(in *Instr) string {
		op, t := redux.q(in, "op"), in.Type()
		switch {
		case t == F32 && op != "min" && op != "max":
			return "redux.sync.f32 takes .min or .max"
		case t != F32 && (redux.q(in, "abs") != "" || redux.q(in, "NaN") != ""):
			return ".abs and .NaN apply to redux.sync.f32 only"
		case (op == "and" || op == "or" || op == "xor") && t != B32:
			return "redux.sync ." + op + " takes .b32"
		case (op == "add" || op == "min" || op == "max") && t == B32:
			return "redux.sync ." + op + " takes .u32 or .s32 (or .f32 for .min/.max)"
		}
		return ""
	}
	redux.need = func(in *Instr) []need {
		if in.Type() == F32 {
			return []need{ndArch(86, []int{100, 101, 103, 110}, "redux.sync.f32 needs sm_100a-class targets and PTX 8.6")}
		}
		return []need{nd(70, 80, "redux.sync needs sm_80 and PTX 7.0")}
	}
	rules["redux.sync"] = redux
	rules["match"] = &rule{slots: []slot{req("mode", "any", "all"), req("sync", "sync")}, types: [][]Type{{B32, B64}},
		shapes: func(in *Instr) [][]arg {
			t := in.Type()
			sh := [][]arg{{dst(B32), src(t), src(B32)}}
			if in.HasQ("all") {
				sh = append(sh, []arg{{kind: argPair, typ: B32, typ2: Pred}, src(t), src(B32)})
			}
			return sh
		}, need: needs(nd(60, 70, "match.sync needs sm_70 and PTX 6.0"))}
	rules["activemask"] = &rule{types: [][]Type{{B32}}, args: fixed(dst(B32)), need: needs(nd(62, 30, "activemask needs PTX 6.2"))}
	rules["elect.sync"] = &rule{args: fixed(arg{kind: argPair, typ: B32, typ2: Pred}, src(B32)),
		need: needs(nd(80, 90, "elect.sync needs sm_90 and PTX 8.0"))}

	// Clusters.
	clusterSpace := vals("space", "shared::cluster")
	rules["mapa"] = &rule{slots: []slot{clusterSpace}, types: [][]Type{{U32, U64}},
		args: func(in *Instr) []arg { t := in.Type(); return []arg{dst(t), src(t), src(U32)} },
		need: needs(nd(78, 90, "mapa needs sm_90 and PTX 7.8"))}
	rules["getctarank"] = &rule{slots: []slot{clusterSpace}, types: [][]Type{{U32, U64}},
		args: func(in *Instr) []arg { return []arg{dst(U32), src(in.Type())} },
		need: needs(nd(78, 90, "getctarank needs sm_90 and PTX 7.8"))}
}
