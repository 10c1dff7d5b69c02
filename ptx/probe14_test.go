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
