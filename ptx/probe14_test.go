package ptx

import (
	"strings"
	"testing"
)

// TestProbe14VerifyBounded: Verify's report of a module of huge names and of very many bad
// instructions is bounded: a 100 KB function, variable or parameter name is quoted as an
// excerpt, a call of a 100 KB undeclared name too, and 100000 bad instructions give the first
// problems and a count of the rest. Before, each problem quoted the names whole and every
// problem was listed (megabytes); probe 14.
func TestProbe14VerifyBounded(t *testing.T) {
	long := "n" + strings.Repeat("x", 100000)
	bad := &Instr{Op: "bogus"}
	body := make([]*Instr, 100000)
	for i := range body {
		body[i] = bad
	}
	for what, m := range map[string]*Module{
		"long function name": {Target: SM90, Funcs: []*Func{{Name: long, Entry: true, Body: []*Instr{bad}}}},
		"long variable name": {Target: SM90, Vars: []*Var{{Name: long + "-", Space: SpaceGlobal, Type: U32}}},
		"long parameter name": {Target: SM90, Funcs: []*Func{{Name: "k", Entry: true,
			Params: []Param{{Name: long + "-", Type: U32}}}}},
		"call of a long undeclared name": {Target: SM90, Funcs: []*Func{{Name: "k", Entry: true,
			Body: []*Instr{{Op: "call", Q: []string{"uni"}, Args: []Operand{Sym(long)}}}}}},
		"100000 bad instructions": {Target: SM90, Funcs: []*Func{{Name: "k", Entry: true, Body: body}}},
	} {
		err := Verify(m)
		if err == nil {
			t.Errorf("%s: Verify passed", what)
			continue
		}
		if n := len(err.Error()); n > 20000 {
			t.Errorf("%s: a %d-byte error: %.300s", what, n, err)
		}
	}
	err := Verify(&Module{Target: SM90, Funcs: []*Func{{Name: "k", Entry: true, Body: body}}})
	if err == nil || !strings.Contains(err.Error(), "more problem") {
		t.Errorf("100000 bad instructions: %.300v; want the count of the problems left out", err)
	}
}

// TestProbe14NilParts: a nil module, writer, function, variable or instruction is an error
// naming it from Verify and Print (RequiredVersion: 0, FormatInstr: ""), and the nil
// *Instr and *Error methods answer; MMARegs of a type of no size is zero registers; before,
// each panicked (nil pointer, or integer divide by zero in MMARegs). ParseTarget of a 200 KB
// string quotes an excerpt (it quoted it whole); probe 14.
func TestProbe14NilParts(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	for want, m := range map[string]*Module{
		"nil *Module":             nil,
		"Module.Funcs[1] is nil":  {Target: SM90, Funcs: []*Func{{Name: "k", Entry: true}, nil}},
		"Module.Vars[0] is nil":   {Target: SM90, Vars: []*Var{nil}},
		"Funcs[0].Body[1] is nil": {Target: SM90, Funcs: []*Func{{Name: "k", Entry: true, Body: []*Instr{{Op: "ret"}, nil}}}},
		"Funcs[0].Vars[0] is nil": {Target: SM90, Funcs: []*Func{{Name: "k", Entry: true, Vars: []*Var{nil}}}},
	} {
		if err := Verify(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify: %v; want an error holding %q", err, want)
		}
		var b strings.Builder
		if err := Print(&b, m); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(want, "nil ")) {
			t.Errorf("Print: %v; want an error holding %q", err, want)
		}
		if v := RequiredVersion(m); v != 0 {
			t.Errorf("RequiredVersion of a module with %s: %v", want, v)
		}
	}
	if err := Print(nil, &Module{Target: SM90}); err == nil || !strings.Contains(err.Error(), "nil io.Writer") {
		t.Errorf("Print to a nil writer: %v", err)
	}
	var in *Instr
	if FormatInstr(nil) != "" || !in.IsPseudo() || in.HasQ("x") || in.Type() != NoType {
		t.Error("a nil *Instr's answers")
	}
	var e *Error
	if !strings.Contains(e.Error(), "nil *Error") {
		t.Errorf("nil *Error prints %q", e.Error())
	}
	if CallSeq(nil, nil, nil) != nil {
		t.Error("CallSeq of a nil function made a sequence")
	}
	if a, b, c := MMARegs(16, 8, 16, NoType, F32); a != 0 || b != 0 || c != 0 {
		t.Errorf("MMARegs of the zero Type: %d %d %d", a, b, c)
	}
	if a, b, c := MMARegs(16, 8, 16, F16, F32); a != 4 || b != 2 || c != 4 {
		t.Errorf("MMARegs(m16n8k16 f16 -> f32) = %d %d %d; want 4 2 4", a, b, c)
	}
	_, err := ParseTarget("sm_" + strings.Repeat("9", 200000))
	if err == nil || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "unknown target") {
		t.Errorf("ParseTarget of 200 KB: %d bytes: %.200v", len(err.Error()), err)
	}
}
