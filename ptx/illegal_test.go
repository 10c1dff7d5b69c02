package ptx

import (
	"sort"
	"strings"
	"sync"
	"testing"
)

func r(t Type, n int) Reg { return Reg{Type: t, N: n} }

func vecOf(t Type, n int) Vec {
	v := make(Vec, n)
	for i := range v {
		v[i] = r(t, i)
	}
	return v
}

var (
	ga = Addr{Base: r(B64, 9)} // a generic/global address
)

// illegalCases are forms Verify must reject, naming the rule, and ptxas must reject too.
var illegalCases = []struct {
	name   string
	target Target
	in     *Instr
	want   string // a substring of Verify's message
	noPtx  bool   // ptxas accepts it; Verify rejects by design
}{
	{"wrong register type", SM90, &Instr{Op: "add", Types: []Type{F32}, Args: []Operand{r(F32, 0), r(S32, 1), r(F32, 2)}}, "not compatible with .f32", false},
	{"missing scope", SM90, &Instr{Op: "ld", Q: []string{"relaxed", "global"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, "need a scope", false},
	{"multimem on sm_80", SM80, &Instr{Op: "multimem.ld_reduce", Q: []string{"relaxed", "sys", "global", "add"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, "multimem needs sm_90 and PTX 8.1", false},
	{".acc::f16 on sm_90a", SM90a, &Instr{Op: "multimem.ld_reduce", Q: []string{"relaxed", "sys", "global", "add", "acc::f16"}, Types: []Type{E4M3x4}, Args: []Operand{r(B32, 0), ga}}, ".acc::f16 needs sm_100a-class targets", false},
	{"fp8 multimem on sm_90a", SM90a, &Instr{Op: "multimem.st", Q: []string{"relaxed", "sys", "global"}, Types: []Type{E4M3x4}, Args: []Operand{ga, r(B32, 0)}}, "fp8 types needs sm_100a-class", false},
	{"v8 on sm_90", SM90, &Instr{Op: "ld", Q: []string{"global", "v8"}, Types: []Type{F32}, Args: []Operand{vecOf(F32, 8), ga}}, "needs sm_100 and PTX 8.8", false},
	{"bf16 add on sm_80", SM80, &Instr{Op: "add", Q: []string{"rn"}, Types: []Type{BF16}, Args: []Operand{r(B16, 0), r(B16, 1), r(B16, 2)}}, "add.bf16 needs sm_90 and PTX 7.8", false},
	{"multimem integer vector", SM90, &Instr{Op: "multimem.ld_reduce", Q: []string{"relaxed", "sys", "global", "add", "v2"}, Types: []Type{U32}, Args: []Operand{vecOf(U32, 2), ga}}, "integer multimem forms take no vector", false},
	{"multimem weak with scope", SM90, &Instr{Op: "multimem.ld_reduce", Q: []string{"weak", "sys", "global", "add"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, ".weak takes no scope", false},
	{"multimem 256-bit", SM90, &Instr{Op: "multimem.st", Q: []string{"relaxed", "sys", "global", "v8"}, Types: []Type{F32}, Args: []Operand{ga, vecOf(F32, 8)}}, "must be 32, 64 or 128 bits", false},
	{"multimem max f32", SM90, &Instr{Op: "multimem.ld_reduce", Q: []string{"relaxed", "sys", "global", "max"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, "takes no .f32", false},
	{"multimem.red max f16x2", SM90, &Instr{Op: "multimem.red", Q: []string{"relaxed", "sys", "global", "max"}, Types: []Type{F16x2}, Args: []Operand{ga, r(B32, 0)}}, ".add only", false},
	{"multimem .acc::f32 with min", SM90, &Instr{Op: "multimem.ld_reduce", Q: []string{"relaxed", "sys", "global", "min", "acc::f32"}, Types: []Type{F16x2}, Args: []Operand{r(B32, 0), ga}}, ".add only", false},
	{"multimem sem without scope", SM90, &Instr{Op: "multimem.red", Q: []string{"release", "global", "add"}, Types: []Type{U32}, Args: []Operand{ga, r(U32, 0)}}, "need a scope", false},
	{"guarded multimem", SM90, &Instr{Guard: &Reg{Pred, 0}, Op: "multimem.st", Q: []string{"relaxed", "sys", "global"}, Types: []Type{F32}, Args: []Operand{ga, r(F32, 0)}}, "must not be predicated", true},
	{"atom.inc.u64", SM90, &Instr{Op: "atom", Q: []string{"global", "inc"}, Types: []Type{U64}, Args: []Operand{r(U64, 0), ga, r(U64, 1)}}, "atom.inc does not take .u64", false},
	{"atom f16 add without noftz", SM90, &Instr{Op: "atom", Q: []string{"global", "add"}, Types: []Type{F16}, Args: []Operand{r(F16, 0), ga, r(F16, 1)}}, ".noftz is required", false},
	{"atom.cas with cache hint", SM90, &Instr{Op: "atom", Q: []string{"global", "cas", "L2::cache_hint"}, Types: []Type{B32}, Args: []Operand{r(B32, 0), ga, r(B32, 1), r(B32, 2), r(B64, 0)}}, "atom.cas takes no .L2::cache_hint", false},
	{"red.acquire", SM90, &Instr{Op: "red", Q: []string{"acquire", "gpu", "global", "add"}, Types: []Type{U32}, Args: []Operand{ga, r(U32, 0)}}, "red does not take qualifier .acquire", false},
	{"vector atom on sm_80", SM80, &Instr{Op: "atom", Q: []string{"global", "add", "v2"}, Types: []Type{F32}, Args: []Operand{vecOf(F32, 2), ga, vecOf(F32, 2)}}, "vector atom needs sm_90 and PTX 8.1", false},
	{"setp.lt.b32", SM90, &Instr{Op: "setp", Q: []string{"lt"}, Types: []Type{B32}, Args: []Operand{r(Pred, 0), r(B32, 0), r(B32, 1)}}, "bit types compare with .eq and .ne only", false},
	{"setp f16 pair", SM90, &Instr{Op: "setp", Q: []string{"lt"}, Types: []Type{F16}, Args: []Operand{Pair{r(Pred, 0), r(Pred, 1)}, r(F16, 0), r(F16, 1)}}, "operand 1", false},
	{"cvt.sat that cannot overflow", SM90, &Instr{Op: "cvt", Q: []string{"sat"}, Types: []Type{S32, S16}, Args: []Operand{r(S32, 0), r(S16, 0)}}, "needs a conversion that can overflow", false},
	{"fp8 cvt on sm_86", SM86, &Instr{Op: "cvt", Q: []string{"rn", "satfinite"}, Types: []Type{E4M3x2, F32}, Args: []Operand{r(B16, 0), r(F32, 0), r(F32, 1)}}, "cvt to or from fp8", false},
	{"lop3.b64", SM90, &Instr{Op: "lop3", Types: []Type{B64}, Args: []Operand{r(B64, 0), r(B64, 1), r(B64, 2), r(B64, 3), IntImm(B32, 0x96)}}, "type .b64 is not allowed", false},
	{"mul.wide.u64", SM90, &Instr{Op: "mul", Q: []string{"wide"}, Types: []Type{U64}, Args: []Operand{r(U64, 0), r(U64, 1), r(U64, 2)}}, "mul.wide applies to 16- and 32-bit types", false},
	{"acquire with cache operator", SM90, &Instr{Op: "ld", Q: []string{"acquire", "gpu", "global", "cg"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, "cache operators do not combine", false},
	{"st.nc", SM90, &Instr{Op: "st", Q: []string{"global", "nc"}, Types: []Type{F32}, Args: []Operand{ga, r(F32, 0)}}, "st does not take qualifier .nc", false},
	{"L2 eviction on a 32-bit load", SM100a, &Instr{Op: "ld", Q: []string{"global", "L2::evict_last"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, "256-bit accesses only", false},
	{"redux.sync on sm_80 with .b32 add", SM80, &Instr{Op: "redux.sync", Q: []string{"add"}, Types: []Type{B32}, Args: []Operand{r(B32, 0), r(B32, 1), r(B32, 2)}}, "takes .u32 or .s32", false},
	{"redux.sync.f32 on sm_120a", SM120a, &Instr{Op: "redux.sync", Q: []string{"min"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), r(F32, 1), r(B32, 2)}}, "redux.sync.f32 needs sm_100a-class", false},
	{"elect.sync on sm_80", SM80, &Instr{Op: "elect.sync", Args: []Operand{Pair{r(B32, 0), r(Pred, 0)}, IntImm(B32, -1)}}, "elect.sync needs sm_90", false},
	{"cp.async.cg of 8 bytes", SM80, &Instr{Op: "cp.async", Q: []string{"cg", "shared", "global"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, IntImm(U32, 8)}}, "immediate 8 is not one of 16", false},
	{"cp.async.bulk on sm_80", SM80, &Instr{Op: "cp.async.bulk", Q: []string{"shared::cluster", "global", "mbarrier::complete_tx::bytes"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, r(U32, 0), Addr{Base: r(B64, 7)}}}, "cp.async.bulk needs sm_90", false},
	{"mbarrier.try_wait on sm_80", SM80, &Instr{Op: "mbarrier.try_wait", Q: []string{"shared"}, Types: []Type{B64}, Args: []Operand{r(Pred, 0), ga, r(B64, 0)}}, "mbarrier.try_wait needs sm_90", false},
	{"mbarrier sem without scope", SM90, &Instr{Op: "mbarrier.arrive", Q: []string{"release", "shared"}, Types: []Type{B64}, Args: []Operand{r(B64, 0), ga}}, ".sem and .scope go together", false},
	{"fence.proxy.async on sm_80", SM80, &Instr{Op: "fence.proxy", Q: []string{"async"}}, "fence.proxy.async needs sm_90", false},
	{"barrier.cluster on sm_80", SM80, &Instr{Op: "barrier.cluster.arrive"}, "barrier.cluster.arrive needs sm_90", false},
	{"vote.ballot.pred", SM90, &Instr{Op: "vote.sync", Q: []string{"ballot"}, Types: []Type{Pred}, Args: []Operand{r(Pred, 0), r(Pred, 1), IntImm(B32, -1)}}, "vote.sync.ballot takes .b32", false},
	{"cluster register on sm_80", SM80, &Instr{Op: "mov", Types: []Type{U32}, Args: []Operand{r(U32, 0), Special("%cluster_ctarank")}}, "%cluster_ctarank needs sm_90", false},
	{"red.async.and.b64", SM90, &Instr{Op: "red.async", Q: []string{"relaxed", "cluster", "shared::cluster", "mbarrier::complete_tx::bytes", "and"}, Types: []Type{B64}, Args: []Operand{ga, r(B64, 0), Addr{Base: r(B64, 8)}}}, "type .b64 is not allowed", false},
	{"cp.reduce.async.bulk max.noftz", SM90, &Instr{Op: "cp.reduce.async.bulk", Q: []string{"global", "shared::cta", "bulk_group", "max", "noftz"}, Types: []Type{F16}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, r(U32, 0)}}, ".noftz is required with, and only with, .add", false},
	{"cp.reduce.async.bulk f32 into shared::cluster", SM90, &Instr{Op: "cp.reduce.async.bulk", Q: []string{"shared::cluster", "shared::cta", "mbarrier::complete_tx::bytes", "add"}, Types: []Type{F32}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, r(U32, 0), Addr{Base: r(B64, 7)}}}, "does not take .f32", false},
	{"setmaxnreg on sm_90", SM90, &Instr{Op: "setmaxnreg", Q: []string{"inc", "sync", "aligned"}, Types: []Type{U32}, Args: []Operand{IntImm(U32, 128)}}, "setmaxnreg needs an architecture-specific target", false},
	{"mov.b128 pack of b32", SM90, &Instr{Op: "mov", Types: []Type{B64}, Args: []Operand{r(B64, 0), Vec{r(B16, 0), r(B16, 1)}}}, "operand 2", false},
	{"bulk multicast on sm_90 (ptxas advisory)", SM90, &Instr{Op: "cp.async.bulk", Q: []string{"shared::cluster", "global", "mbarrier::complete_tx::bytes", "multicast::cluster"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, r(U32, 0), Addr{Base: r(B64, 7)}, r(B16, 0)}}, ".multicast::cluster needs sm_90a", false},
	{"barrier thread count not a multiple of 32", SM90, &Instr{Op: "bar.sync", Args: []Operand{IntImm(U32, 1), IntImm(U32, 48)}}, "immediate 48 must be a positive multiple of 32", false},
	{"bulk copy of 8 bytes", SM90, &Instr{Op: "cp.async.bulk", Q: []string{"global", "shared::cta", "bulk_group"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, IntImm(U32, 8)}}, "immediate 8 must be a positive multiple of 16", false},
	{"fence.cluster on sm_80", SM80, &Instr{Op: "fence", Q: []string{"acq_rel", "cluster"}}, "fence.cluster needs sm_90", false},
	// Tensor cores: mma.sync, ldmatrix, stmatrix, cp.async.
	{"mma bf16 into f16", SM80, mmaCase("m16n8k16", F16, BF16, BF16, F16, 2, 4, 2), "mma has no form .m16n8k16 .bf16x.bf16 -> .f16", false},
	{"mma f16 D with f32 C", SM80, mmaCase("m16n8k16", F16, F16, F16, F32, 2, 4, 2), "same type for D and C", false},
	{"mma tf32 m16n8k16", SM80, mmaCase("m16n8k16", F32, TF32, TF32, F32, 4, 8, 4), "mma has no form .m16n8k16 .tf32", false},
	{"mma s8 m16n8k8", SM80, mmaCase("m16n8k8", S32, S8, S8, S32, 4, 1, 1), "mma has no form .m16n8k8 .s8", false},
	{"mma f16 x bf16", SM80, mmaCase("m16n8k16", F32, F16, BF16, F32, 4, 4, 2), "multiplicands must be the same type", false},
	{"mma e4m3 on sm_80", SM80, mmaCase("m16n8k32", F32, E4M3, E5M2, F32, 4, 4, 2), "mma with .e4m3/.e5m2 needs sm_89", false},
	{"mma satfinite f32", SM80, mmaSat(mmaCase("m16n8k16", F32, F16, F16, F32, 4, 4, 2)), ".satfinite applies to integer mma", false},
	{"mma satfinite fp8", SM90, mmaSat(mmaCase("m16n8k32", F32, E4M3, E4M3, F32, 4, 4, 2)), ".satfinite applies to integer mma", false},
	{"mma A in f32 registers", SM80, &Instr{Op: "mma", Q: []string{"sync", "aligned", "m16n8k8", "row", "col"}, Types: []Type{F32, TF32, TF32, F32},
		Args: []Operand{vecOf(F32, 4), vecOf(F32, 4), vecOf(B32, 2), vecOf(F32, 4)}}, "want a .b32 register", false},
	{"mma A with too few registers", SM80, mmaCase("m16n8k16", F32, F16, F16, F32, 4, 2, 2), "want a vector of 4, got 2", false},
	{"mma col.col", SM80, &Instr{Op: "mma", Q: []string{"sync", "aligned", "m16n8k16", "col", "col"}, Types: []Type{F32, F16, F16, F32},
		Args: []Operand{vecOf(F32, 4), vecOf(B32, 4), vecOf(B32, 2), vecOf(F32, 4)}}, "missing .alayout", false},
	{"ldmatrix b8 on sm_90a", SM90a, ldmCase("m16n16", "x1", true, B8, 2), "need sm_100a or sm_120a", false},
	{"ldmatrix b8 on sm_80", SM80, ldmCase("m16n16", "x2", true, B8, 4), "need sm_100a or sm_120a", false},
	{"ldmatrix m8n8 b8", SM100a, ldmCase("m8n8", "x1", false, B8, 1), ".m8n8 takes .b16 only", false},
	{"ldmatrix m16n16 without trans", SM100a, ldmCase("m16n16", "x1", false, B8, 2), ".m16n16 needs .trans", false},
	{"ldmatrix m16n16 x4", SM100a, ldmCase("m16n16", "x4", true, B8, 8), ".m16n16 takes .x1 or .x2", false},
	{"ldmatrix m8n16 trans", SM100a, &Instr{Op: "ldmatrix", Q: []string{"sync", "aligned", "m8n16", "x1", "trans", "shared", "b8x16", "b6x16_p32"}, Args: []Operand{vecOf(B32, 1), ga}}, ".m8n16 takes no .trans", false},
	{"ldmatrix x4 into 2 registers", SM80, ldmCase("m8n8", "x4", false, B16, 2), "want a vector of 4, got 2", false},
	{"ldmatrix into a scalar", SM80, &Instr{Op: "ldmatrix", Q: []string{"sync", "aligned", "m8n8", "x1", "shared"}, Types: []Type{B16}, Args: []Operand{r(B32, 0), ga}}, "want a vector of 1", false},
	{"stmatrix on sm_89", SM89, &Instr{Op: "stmatrix", Q: []string{"sync", "aligned", "m8n8", "x4", "shared"}, Types: []Type{B16}, Args: []Operand{ga, vecOf(B32, 4)}}, "stmatrix needs sm_90", false},
	{"stmatrix on sm_80", SM80, &Instr{Op: "stmatrix", Q: []string{"sync", "aligned", "m8n8", "x1", "trans", "shared"}, Types: []Type{B16}, Args: []Operand{ga, vecOf(B32, 1)}}, "stmatrix needs sm_90", false},
	{"stmatrix m16n8 without trans", SM100a, &Instr{Op: "stmatrix", Q: []string{"sync", "aligned", "m16n8", "x1", "shared"}, Types: []Type{B8}, Args: []Operand{ga, vecOf(B32, 1)}}, ".m16n8 needs .trans", false},
	{"cp.async of 12 bytes", SM80, &Instr{Op: "cp.async", Q: []string{"ca", "shared", "global"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, IntImm(U32, 12)}}, "immediate 12 is not one of 4, 8, 16", false},
	{"cp.async.cg of 4 bytes", SM80, &Instr{Op: "cp.async", Q: []string{"cg", "shared", "global"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, IntImm(U32, 4)}}, "immediate 4 is not one of 16", false},
	{"cp.async src-size above cp-size", SM80, &Instr{Op: "cp.async", Q: []string{"ca", "shared", "global"}, Args: []Operand{ga, Addr{Base: r(B64, 8)}, IntImm(U32, 8), IntImm(U32, 9)}}, "immediate 9 must lie in [0, 8]", false},
	{"mma f32 C of integer immediates", SM80, &Instr{Op: "mma", Q: []string{"sync", "aligned", "m16n8k16", "row", "col"}, Types: []Type{F32, F16, F16, F32},
		Args: []Operand{vecOf(F32, 4), vecOf(B32, 4), vecOf(B32, 2), Vec{IntImm(U32, 0), IntImm(U32, 0), IntImm(U32, 0), IntImm(U32, 0)}}}, "operand 4: want a register", false},
	{"stmatrix of an immediate", SM90, &Instr{Op: "stmatrix", Q: []string{"sync", "aligned", "m8n8", "x1", "shared"}, Types: []Type{B16}, Args: []Operand{ga, Vec{IntImm(B32, 7)}}}, "operand 2: want a register", false},
	{"cp.async.wait_group with a register", SM80, &Instr{Op: "cp.async.wait_group", Args: []Operand{r(U32, 0)}}, "want an integer immediate", false},
}

// mmaCase builds an mma.sync with na, nb registers of A and B and nc of C and D.
func mmaCase(shape string, d, a, b, c Type, nc, na, nb int) *Instr {
	acc := func(t Type) Vec {
		if t == F16 {
			return vecOf(B32, nc)
		}
		return vecOf(t, nc)
	}
	return &Instr{Op: "mma", Q: []string{"sync", "aligned", shape, "row", "col"}, Types: []Type{d, a, b, c},
		Args: []Operand{acc(d), vecOf(B32, na), vecOf(B32, nb), acc(c)}}
}

// mmaSat adds .satfinite to an mma case.
func mmaSat(in *Instr) *Instr {
	in.Q = append(in.Q, "satfinite")
	return in
}

// ldmCase builds an ldmatrix from shared memory into n registers.
func ldmCase(shape, num string, trans bool, t Type, n int) *Instr {
	q := []string{"sync", "aligned", shape, num}
	if trans {
		q = append(q, "trans")
	}
	return &Instr{Op: "ldmatrix", Q: append(q, "shared"), Types: []Type{t}, Args: []Operand{vecOf(B32, n), ga}}
}

func TestIllegalForms(t *testing.T) {
	var p *ptxasRunner
	if !testing.Short() {
		p = newPtxas(t)
	}
	var wg sync.WaitGroup
	for _, c := range illegalCases {
		m := formsModule(c.target, 90, []*Instr{c.in})
		err := Verify(m)
		switch {
		case err == nil:
			t.Errorf("%s: Verify accepted %q on %s", c.name, FormatInstr(c.in), c.target)
		case !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), FormatInstr(c.in)):
			t.Errorf("%s: Verify said %q; want the instruction and %q", c.name, err, c.want)
		}
		if p == nil {
			continue
		}
		// Positive control: where a case is illegal only for its target, the first target
		// Verify accepts it on must assemble it, so the rejection is the target's doing.
		for _, tg := range Targets() {
			cm := formsModule(tg, 90, []*Instr{c.in})
			if Verify(cm) != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, ok := p.assemble(tg, cm.String()); !ok || strings.Contains(out, "warning") {
					t.Errorf("%s: control on %s: Verify accepts %q but ptxas says %s", c.name, tg, FormatInstr(c.in), out)
				}
			}()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, ok := p.assemble(c.target, m.String())
			ok = ok && !strings.Contains(out, "warning") // kgen emits nothing ptxas warns about
			switch {
			case ok && !c.noPtx:
				t.Errorf("%s: ptxas accepted %q on %s, Verify rejects it", c.name, FormatInstr(c.in), c.target)
			case !ok && c.noPtx:
				t.Errorf("%s: ptxas rejected %q: %s", c.name, FormatInstr(c.in), out)
			case !ok && err != nil: // err is nil when Verify accepted (reported above)
				t.Logf("illegal: %s on %s: Verify: %v; ptxas: %s", FormatInstr(c.in), c.target, strings.TrimPrefix(err.Error(), "ptx: fforms: "), firstLine(out))
			}
		}()
	}
	wg.Wait()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if i := strings.Index(s, "error"); i >= 0 {
		s = s[i:]
	}
	return s
}

// prevVersion returns the released PTX ISA version before v.
func prevVersion(v Version) Version {
	released := []Version{60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82, 83, 84, 85, 86, 87, 88, 90}
	for i, x := range released {
		if x == v && i > 0 {
			return released[i-1]
		}
	}
	return 0
}

// TestRequiredVersionIsLowest assembles a sample of forms, one per (target, opcode, version),
// at the PTX version just below the one RequiredVersion gives: ptxas must refuse each.
func TestRequiredVersionIsLowest(t *testing.T) {
	p := newPtxas(t)
	type key struct {
		t  Target
		op string
		v  Version
		q  string
	}
	seen := map[key]bool{}
	type sample struct {
		t  Target
		v  Version
		in *Instr
	}
	var samples []sample
	for _, f := range allForms() {
		for _, tg := range Targets() {
			v, ok := formVersion(f, tg)
			if !ok || v <= tg.MinVersion() {
				continue
			}
			// One sample per opcode, version and requirement wording.
			why := ""
			for _, n := range rules[f.Op].needs(f) {
				if n.version(tg) == v {
					why = n.why
				}
			}
			k := key{tg, f.Op, v, why}
			if seen[k] {
				continue
			}
			seen[k] = true
			samples = append(samples, sample{tg, v, f})
		}
	}
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	for _, s := range samples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := formsModule(s.t, 0, []*Instr{s.in})
			if got := RequiredVersion(m); got != s.v {
				mu.Lock()
				bad = append(bad, "RequiredVersion mismatch for "+FormatInstr(s.in))
				mu.Unlock()
				return
			}
			m.Version = prevVersion(s.v)
			if _, ok := p.assemble(s.t, m.String()); ok {
				mu.Lock()
				bad = append(bad, string(s.t)+": "+FormatInstr(s.in)+" assembles with PTX "+m.Version.String()+", RequiredVersion says "+s.v.String())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("version: %d sampled forms refused one PTX version below RequiredVersion (%d not)", len(samples)-len(bad), len(bad))
}
