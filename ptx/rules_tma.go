package ptx

// Tensor copies through the tensor memory accelerator (TMA): cp.async.bulk.tensor and
// cp.reduce.async.bulk.tensor in .tile mode.
//
// Loads: "cp.async.bulk.tensor.<dim>.shared::cluster.global{.tile}.mbarrier::complete_tx::bytes
// {.multicast::cluster}{.L2::cache_hint} [dst], [tensorMap, {c0, ...}], [mbar]{, ctaMask}{, policy}".
// Stores and reductions: "...<dim>.global.shared::cta{.<op>}{.tile}.bulk_group{.L2::cache_hint}
// [tensorMap, {c0, ...}], [src]{, policy}".

// tensorDims are the dimension qualifiers, 1 to 5.
var tensorDims = []string{"1d", "2d", "3d", "4d", "5d"}

// TensorDim returns the rank a dimension qualifier names ("3d": 3), or 0.
func TensorDim(q string) int {
	for i, d := range tensorDims {
		if q == d {
			return i + 1
		}
	}
	return 0
}

func init() {
	tensor := func(dim string) arg { return arg{kind: argTensor, typ: B32, vec: TensorDim(dim)} }
	hint := arg{kind: argReg, typ: B64}

	cp := &rule{slots: []slot{req("dim", tensorDims...), req("dst", "shared::cluster", "global"), req("src", "global", "shared::cta"),
		one("tile"), req("completion", "mbarrier::complete_tx::bytes", "bulk_group"), one("multicast::cluster"), one("L2::cache_hint")},
		excl: []excl{
			x("dst=shared::cluster", "src=shared::cta", "cp.async.bulk.tensor loads global -> shared::cluster or stores shared::cta -> global"),
			x("dst=global", "src=global", "cp.async.bulk.tensor loads global -> shared::cluster or stores shared::cta -> global"),
			x("dst=shared::cluster", "completion=bulk_group", "a cp.async.bulk.tensor load completes on an mbarrier (.mbarrier::complete_tx::bytes)"),
			x("dst=global", "completion=mbarrier::complete_tx::bytes", "a cp.async.bulk.tensor store completes with .bulk_group"),
			x("dst=global", "multicast::cluster", ".multicast::cluster applies to loads only"),
		}}
	cp.args = func(in *Instr) []arg {
		t := tensor(cp.q(in, "dim"))
		var a []arg
		if cp.q(in, "dst") == "global" {
			a = []arg{t, addr()}
		} else {
			a = []arg{addr(), t, addr()}
			if in.HasQ("multicast::cluster") {
				a = append(a, src(B16))
			}
		}
		if in.HasQ("L2::cache_hint") {
			a = append(a, hint)
		}
		return a
	}
	cp.need = func(in *Instr) []need {
		ns := []need{nd(80, 90, "cp.async.bulk.tensor needs sm_90 and PTX 8.0")}
		if in.HasQ("multicast::cluster") {
			// As for cp.async.bulk: ptxas advises against multicast on sm_90.
			ns = append(ns, ndArch(80, []int{90, 100, 101, 103, 110}, ".multicast::cluster needs sm_90a, sm_100a-class targets (ptxas advises against it elsewhere)"))
		}
		return ns
	}
	rules["cp.async.bulk.tensor"] = cp

	red := &rule{slots: []slot{req("dim", tensorDims...), req("dst", "global"), req("src", "shared::cta"),
		req("op", "add", "min", "max", "inc", "dec", "and", "or", "xor"), one("tile"), req("completion", "bulk_group"), one("L2::cache_hint")}}
	red.args = func(in *Instr) []arg {
		a := []arg{tensor(red.q(in, "dim")), addr()}
		if in.HasQ("L2::cache_hint") {
			a = append(a, hint)
		}
		return a
	}
	red.need = needs(nd(80, 90, "cp.reduce.async.bulk.tensor needs sm_90 and PTX 8.0"))
	rules["cp.reduce.async.bulk.tensor"] = red
}
