package ptx

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// abiModule exercises the .param call ABI (CallSeq and registers as arguments), an .extern
// .func declaration, module-scope .global/.const/.shared variables, dynamic shared memory,
// special registers and .loc lines.
func abiModule(t Target) *Module {
	ext := &Func{Name: "ext_fn", Extern: true, Rets: []Param{{Name: "r", Type: B32}}, Params: []Param{{Name: "a", Type: B64}, {Name: "b", Type: B32}}}
	add := &Func{Name: "add1", Rets: []Param{{Name: "r", Type: B32}}, Params: []Param{{Name: "a", Type: B32}}}
	add.Body = []*Instr{
		{Op: "ld", Q: []string{"param"}, Types: []Type{B32}, Args: []Operand{r(B32, 0), Addr{Base: Sym("a")}}},
		{Op: "add", Types: []Type{S32}, Args: []Operand{r(B32, 0), r(B32, 0), IntImm(S32, 1)}},
		{Op: "st", Q: []string{"param"}, Types: []Type{B32}, Args: []Operand{Addr{Base: Sym("r")}, r(B32, 0)}},
		{Op: "ret"},
	}
	k := &Func{Name: "k", Entry: true, Visible: true, Params: []Param{{Name: "p", Type: U64}}}
	pos := Pos{File: "kernel.go", Line: 7}
	k.Body = []*Instr{
		{Op: "ld", Q: []string{"param"}, Types: []Type{U64}, Args: []Operand{r(B64, 0), Addr{Base: Sym("p")}}, Pos: pos},
		{Op: "mov", Types: []Type{U32}, Args: []Operand{r(U32, 0), Special("%dynamic_smem_size")}, Pos: Pos{File: "kernel.go", Line: 8}},
		{Op: "mov", Types: []Type{U64}, Args: []Operand{r(U64, 0), Special("%globaltimer")}},
		{Op: "mov", Types: []Type{U64}, Args: []Operand{r(U64, 1), Sym("dyn")}},
		{Op: "mov", Types: []Type{U64}, Args: []Operand{r(U64, 2), Sym("gcount")}},
		{Op: "ld", Q: []string{"const"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), Addr{Base: Sym("ctable"), Off: 4}}},
		{Op: "st", Q: []string{"shared"}, Types: []Type{F32}, Args: []Operand{Addr{Base: Sym("tile"), Off: 8}, r(F32, 0)}},
	}
	k.Body = append(k.Body, CallSeq(add, []Reg{r(B32, 1)}, []Operand{r(B32, 0)})...)
	k.Body = append(k.Body, CallSeq(ext, []Reg{r(B32, 2)}, []Operand{r(B64, 0), IntImm(B32, 3)})...)
	k.Body = append(k.Body,
		&Instr{Op: "call", Q: []string{"uni"}, Args: []Operand{Vec{r(B32, 3)}, Sym("add1"), Vec{r(B32, 2)}}},
		&Instr{Op: "st", Q: []string{"global"}, Types: []Type{B32}, Args: []Operand{Addr{Base: r(B64, 0)}, r(B32, 3)}},
		&Instr{Op: "ret"},
	)
	return &Module{Target: t,
		Vars: []*Var{
			{Space: SpaceGlobal, Name: "gcount", Type: U32, Align: 4, Init: []uint64{0}},
			{Space: SpaceConst, Name: "ctable", Type: F32, Array: 4, Align: 16, Init: []uint64{1, 2, 3, 4}},
			{Space: SpaceShared, Name: "tile", Type: F32, Array: 256, Align: 16},
			{Space: SpaceShared, Name: "dyn", Type: B8, Array: -1, Align: 16, Extern: true},
		},
		Funcs: []*Func{ext, add, k}}
}

func TestCallABIAssembles(t *testing.T) {
	m := abiModule(SM90)
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	s := m.String()
	for _, want := range []string{
		"\t{\n\t\t.param .b32 param0;\n\t\tst.param.b32 [param0], %r0;\n\t\t.param .b32 retval0;\n\t\tcall.uni (retval0), add1, (param0);\n\t\tld.param.b32 %r1, [retval0];\n\t}\n",
		".extern .func (.param .b32 r) ext_fn(.param .b64 a, .param .b32 b);",
		".extern .shared .align 16 .b8 dyn[];",
		".const .align 16 .f32 ctable[4] = {0f00000001",
		"\t.loc 1 7 0\n",
		"call.uni (%r3), add1, (%r2);",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	p := newPtxas(t)
	// ext_fn is unresolved until link time: assemble with -c (relocatable).
	for _, tg := range Targets() {
		m := abiModule(tg)
		src := m.String()
		if out, ok := p.assembleArgs(tg, src, "-c"); !ok {
			t.Errorf("%s:\n%s\n%s", tg, src, out)
		}
	}
}

func TestVerifyScopes(t *testing.T) {
	m := abiModule(SM90)
	k := m.Funcs[2]
	k.Body = append(k.Body[:len(k.Body)-1], &Instr{Op: ScopeOpen}, &Instr{Op: "call", Args: []Operand{Vec{Sym("nope")}, Sym("add1"), Vec{r(B32, 0)}}}, &Instr{Op: "ret"})
	err := Verify(m)
	if err == nil || !strings.Contains(err.Error(), "call operand nope is not a declared .param variable") || !strings.Contains(err.Error(), "1 scope(s) left open") {
		t.Errorf("got %v", err)
	}
	m = abiModule(SM90)
	m.Funcs[2].Body = append([]*Instr{{Op: "call", Args: []Operand{Sym("add1")}}}, m.Funcs[2].Body...)
	if err := Verify(m); err == nil || !strings.Contains(err.Error(), "add1 returns 1 value(s), call takes 0") {
		t.Errorf("got %v", err)
	}
	m = abiModule(SM90)
	m.Vars = append(m.Vars, &Var{Space: SpaceShared, Name: "bad", Type: F32, Array: -1})
	if err := Verify(m); err == nil || !strings.Contains(err.Error(), "variable bad: only .extern .shared arrays may be unsized") {
		t.Errorf("got %v", err)
	}
}

func TestVerifyMessages(t *testing.T) {
	cases := []struct {
		in   *Instr
		want string
	}{
		{&Instr{Op: "frobnicate"}, `"frobnicate;": unknown instruction "frobnicate"`},
		{&Instr{Op: "ld", Q: []string{"global", "relaxed", "gpu"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), ga}}, `"ld.global.relaxed.gpu.f32 %f0, [%rd9];": qualifier .relaxed is out of order or repeated`},
		{&Instr{Op: "fma", Types: []Type{F32}, Args: []Operand{r(F32, 0), r(F32, 1), r(F32, 2), r(F32, 3)}}, `missing .rnd qualifier (one of .rn .rz .rm .rp)`},
		{&Instr{Op: "add", Types: []Type{F32}, Args: []Operand{r(F32, 0), r(F32, 1)}}, `"add.f32 %f0, %f1;": takes 3 operands, got 2`},
		{&Instr{Op: "bar.sync", Args: nil}, `takes 1 or 2 operands, got 0`},
		{&Instr{Op: "shfl.sync", Q: []string{"bfly"}, Types: []Type{B32}, Args: []Operand{Pair{r(B32, 0), r(B32, 1)}, r(B32, 2), IntImm(B32, 1), IntImm(B32, 31), IntImm(B32, -1)}}, `operand 1: register %r1 is .b32, not compatible with .pred`},
		{&Instr{Op: "multimem.red", Q: []string{"relaxed", "sys", "global", "add"}, Types: []Type{F16}, Args: []Operand{ga, r(F16, 0)}}, `multimem.red.relaxed.sys.global.add.f16 [%rd9], %h0;": a floating-point type times the vector must be 32, 64 or 128 bits (.f16 is 16)`},
		{&Instr{Op: "cp.async.wait_group", Args: []Operand{r(U32, 0)}}, `operand 1: want an integer immediate, got register %u0`},
		{&Instr{Op: "add", Q: []string{"rz"}, Types: []Type{F16x2}, Args: []Operand{r(F16x2, 0), r(F16x2, 1), r(F16x2, 2)}}, `half-precision arithmetic rounds with .rn only`},
	}
	for _, c := range cases {
		m := formsModule(SM90a, 0, []*Instr{c.in})
		err := Verify(m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Verify(%s) = %v; want %q", FormatInstr(c.in), err, c.want)
		}
	}
	m := formsModule(SM90, 78, []*Instr{{Op: "elect.sync", Args: []Operand{Pair{Sink{}, r(Pred, 0)}, IntImm(B32, -1)}}})
	if err := Verify(m); err == nil || !strings.Contains(err.Error(), `"elect.sync _|%p0, 4294967295;": elect.sync needs sm_90 and PTX 8.0 (module declares PTX 7.8)`) {
		t.Errorf("got %v", err)
	}
}

func TestVerifyTargetVersion(t *testing.T) {
	m := formsModule(SM90, 70, nil)
	if err := Verify(m); err == nil || !strings.Contains(err.Error(), "module declares PTX 7.0 but target sm_90 needs PTX 7.8") {
		t.Errorf("got %v", err)
	}
}

func TestPrintVersion(t *testing.T) {
	m := formsModule(SM80, 0, []*Instr{{Op: "multimem.st", Q: []string{"relaxed", "sys", "global"}, Types: []Type{F32}, Args: []Operand{ga, r(F32, 0)}}})
	m.Target = SM90
	if !strings.Contains(m.String(), ".version 8.1\n") {
		t.Error("want .version 8.1")
	}
	m.Version = 87
	if !strings.Contains(m.String(), ".version 8.7\n") {
		t.Error("want .version 8.7")
	}
}

// BenchmarkPrint prints a module of 10,000 instructions.
func BenchmarkPrint(b *testing.B) {
	var forms []*Instr
	for _, op := range []string{"add", "fma", "ld", "st", "setp", "selp", "cvt", "mul", "atom", "shfl.sync", "multimem.ld_reduce", "bra"} {
		fs := ruleForms(op, rules[op])
		for i := 0; i < len(fs); i += 1 + len(fs)/200 {
			forms = append(forms, fs[i])
		}
	}
	body := make([]*Instr, 0, 10000)
	for i := 0; len(body) < 10000; i += 7 {
		in := *forms[i%len(forms)]
		in.Pos = Pos{File: "bench.go", Line: 10 + len(body)/4}
		body = append(body, &in)
	}
	forms = nil
	m := formsModule(SM100a, 0, body)
	runtime.GC()
	var buf bytes.Buffer
	_ = Print(&buf, m)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := Print(&buf, m); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFormatPseudo(t *testing.T) {
	for _, c := range []struct {
		in   *Instr
		want string
	}{
		{&Instr{Label: "L1"}, "L1:"},
		{&Instr{Op: ScopeOpen}, "{"},
		{&Instr{Op: ScopeClose}, "}"},
		{&Instr{Decl: &Var{Space: SpaceParam, Name: "param0", Type: B64}}, ".param .b64 param0;"},
		{&Instr{Guard: &Reg{Pred, 1}, GuardNeg: true, Op: "bar.red", Q: []string{"and"}, Types: []Type{Pred}, Args: []Operand{r(Pred, 0), IntImm(U32, 0), Not{r(Pred, 2)}}}, "@!%p1 bar.red.and.pred %p0, 0, !%p2;"},
		{&Instr{Op: "setp", Q: []string{"lt"}, Types: []Type{F32}, Args: []Operand{Pair{r(Pred, 0), r(Pred, 1)}, r(F32, 0), FloatImm(F32, 1)}}, "setp.lt.f32 %p0|%p1, %f0, 0f3F800000;"},
		{&Instr{Op: "ld", Q: []string{"local"}, Types: []Type{B32}, Args: []Operand{r(B32, 0), Addr{Base: r(B64, 1), Off: -8}}}, "ld.local.b32 %r0, [%rd1+-8];"},
	} {
		if got := FormatInstr(c.in); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// TestOracleNamesFailingForm checks that a failing batch names its bad form, from ptxas's
// line numbers and by bisection.
func TestOracleNamesFailingForm(t *testing.T) {
	p := newPtxas(t)
	good := ruleForms("add", rules["add"])[:50]
	bad := &Instr{Op: "add", Types: []Type{F32}, Args: []Operand{r(F32, 0), r(B64, 1), r(F32, 2)}}
	forms := append(append(append([]*Instr{}, good[:20]...), bad), good[20:]...)
	for _, bisect := range []bool{false, true} {
		oracleNoLines = bisect
		fails := p.check(SM90, 80, forms)
		oracleNoLines = false
		if len(fails) != 1 || fails[0].in != bad {
			t.Errorf("bisect=%v: got %d failures %v", bisect, len(fails), fails)
		}
	}
}

// TestEnumerationDropsNothing: every qualifier and type combination a rule's check accepts
// yields operands Verify accepts (a dropped form would escape the oracle).
func TestEnumerationDropsNothing(t *testing.T) {
	n := 0
	enumDropped = func(in *Instr, msg string) {
		if n < 20 {
			t.Errorf("generated form refused: %s: %s", FormatInstr(in), msg)
		}
		n++
	}
	defer func() { enumDropped = nil }()
	buildForms()
	if n > 0 {
		t.Errorf("%d generated forms refused", n)
	}
}

// TestEveryValueReachable: each qualifier value and type suffix in a rule's table appears
// in at least one enumerated form (a value no form reaches is a table bug the oracle would
// never see).
func TestEveryValueReachable(t *testing.T) {
	seenOp := map[string]bool{}
	seenQ := map[string]map[string]bool{}
	seenT := map[string]map[Type]bool{}
	for _, f := range allForms() {
		seenOp[f.Op] = true
		if seenQ[f.Op] == nil {
			seenQ[f.Op], seenT[f.Op] = map[string]bool{}, map[Type]bool{}
		}
		for _, q := range f.Q {
			seenQ[f.Op][q] = true
		}
		for _, ty := range f.Types {
			seenT[f.Op][ty] = true
		}
	}
	for op, r := range rules {
		if !seenOp[op] {
			t.Errorf("%s: no form enumerated", op)
			continue
		}
		for _, s := range r.slots {
			for _, v := range s.values {
				if !seenQ[op][v] && !r.extraOnly {
					t.Errorf("%s: qualifier .%s (slot %s) is in no form", op, v, s.name)
				}
			}
		}
		for _, ts := range r.types {
			for _, ty := range ts {
				if !seenT[op][ty] {
					t.Errorf("%s: type .%s is in no form", op, ty)
				}
			}
		}
	}
}

func TestVerifyUndeclaredNames(t *testing.T) {
	m := abiModule(SM90)
	k := m.Funcs[2]
	k.Body = append([]*Instr{{Op: "ld", Q: []string{"global"}, Types: []Type{F32}, Args: []Operand{r(F32, 0), Addr{Base: Sym("nowhere")}}}}, k.Body...)
	if err := Verify(m); err == nil || !strings.Contains(err.Error(), "nowhere is not a declared variable or parameter") {
		t.Errorf("got %v", err)
	}
}
